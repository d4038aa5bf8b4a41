"""The chat's saved conversations in a real pseudo-terminal, on the real bundled model: names typed as their
files', and what a chat says about its conversation."""

from __future__ import annotations

from pathlib import Path

from tests.test_repl import Chat


def _stop(chat: Chat) -> None:
    """End a chat a failed test left running."""
    if chat.child.isalive():
        chat.child.terminate(force=True)


def test_save_load_and_resume_take_a_file_name_as_the_conversation_s(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "1")
    try:
        chat.ask("Name a color.")
        chat.command_words("/save notes.json", f"saved to {folder / 'notes.json'}")
        chat.command("/reset", "new conversation")
        chat.command_words("/load notes.json", "loaded notes: 1 exchange")
        assert not (folder / "notes.json.json").exists()
        assert chat.quit() == 0
    finally:
        _stop(chat)
    resumed = Chat(home, "--resume", "notes.json", "-n", "1")
    try:
        assert "resumed notes: 1 exchange" in resumed.transcript.getvalue()
        assert resumed.quit() == 0
    finally:
        _stop(resumed)
