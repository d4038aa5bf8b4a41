"""/list in a real pseudo-terminal on the bundled model marks a conversation another process has open (its lock
held), the one a /load of would be refused."""

from __future__ import annotations

from pathlib import Path

from localgen.conversation_lock import hold, release
from tests.chat_terminal import end_chat
from tests.test_chat_gaps import _saved
from tests.test_repl import Chat


def test_list_marks_a_conversation_open_in_another_chat_or_run(tmp_path: Path) -> None:
    """A conversation whose lock another process holds is listed "(open in another chat or run)", as /load of it is
    refused; once let go it is listed unmarked."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    _saved(home, "elsewhere", [{"user": "Hi there", "answer": "Hello."}])
    _saved(home, "free", [{"user": "Good day", "answer": "Hello."}])
    chat = Chat(home, "--no-markdown")
    try:
        assert hold(folder, "elsewhere", "close that chat first")  # this test's process: another than the chat's
        try:
            since = len(chat.transcript.getvalue())
            chat.command_words("/list", "Hi there")  # the older one: the last row
            said = " ".join(chat.transcript.getvalue()[since:].split())
            assert "elsewhere" in said and "Hi there (open in another chat or run)" in said, said
            assert "Good day (open" not in said, said
            chat.command_words("/load elsewhere", "is in use by another localgen chat or run")
        finally:
            release(folder, "elsewhere")
        since = len(chat.transcript.getvalue())
        chat.command_words("/list", "Hi there")
        said = " ".join(chat.transcript.getvalue()[since:].split())
        assert "Hi there" in said and "open in another" not in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)
