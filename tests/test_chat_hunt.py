"""The chat as a demanding user drives it, in a real pseudo-terminal on the bundled model: what its commands say about
the conversation they change."""

from __future__ import annotations

from pathlib import Path

from tests.test_repl import Chat


def _stop(chat: Chat) -> None:
    """End a chat a failed test left running."""
    if chat.child.isalive():
        chat.child.terminate(force=True)


def test_undo_of_a_message_with_a_file_attached_names_the_file_as_the_listings_do(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("The secret word is banana.\n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "4", cwd=tmp_path)
    try:
        chat.command("/file note.txt", "attached")
        chat.ask("What is the secret word?")
        since = len(chat.transcript.getvalue())
        chat.command("/undo", "dropped:")
        said = " ".join(chat.transcript.getvalue()[since:].split())
        assert "dropped: '[note.txt] What is the secret word?'" in said, said
        assert "banana" not in said, "the file's text is not quoted as the message"
        assert chat.quit() == 0
    finally:
        _stop(chat)
