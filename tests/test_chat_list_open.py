"""/list in a real pseudo-terminal on the bundled model marks a conversation another process has open (its lock
held), the one a /load of would be refused, in terminals of any width."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen.conversation_lock import hold, release
from localgen.conversation_summary import Summary
from localgen.repl_text import IN_USE_LEGEND, list_rows
from tests.chat_terminal import end_chat
from tests.test_chat_gaps import _saved
from tests.test_repl import Chat


def test_list_marks_a_conversation_open_in_another_chat_or_run(tmp_path: Path) -> None:
    """A conversation whose lock another process holds is listed marked ! and "(in use elsewhere)", as /load of it
    is refused; once let go it is listed unmarked."""
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
            assert "!elsewhere" in said and "Hi there (in use elsewhere)" in said, said
            assert "Good day (in use" not in said and "!free" not in said, said
            chat.command_words("/load elsewhere", "is in use by another localgen chat or run")
        finally:
            release(folder, "elsewhere")
        since = len(chat.transcript.getvalue())
        chat.command_words("/list", "Hi there")
        said = " ".join(chat.transcript.getvalue()[since:].split())
        assert "Hi there" in said and "in use elsewhere" not in said and "!" not in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


@pytest.mark.parametrize("columns", [80, 40])
def test_the_mark_of_a_conversation_in_use_elsewhere_stays_in_a_narrow_terminal(columns: int) -> None:
    """Where a long first message leaves its note no room, the ! stays, and a last line says what it means."""
    entries = [Summary("chat-20261207-170000", 0.0, 1, "m", "Tell me about lighthouses."),
               Summary("notes", 0.0, 3, "m", "Hi"), Summary("chat-20261207-160000", 0.0, 2, "m", "Good day to you")]
    rows = list_rows(entries, "notes", columns, {"chat-20261207-170000"})
    assert rows[0].startswith(" !chat-20261207-170000 ") and "Tell" in rows[0], rows
    assert rows[1].startswith(" *notes") and rows[2].startswith("  chat-20261207-160000"), rows
    assert rows[3:] == [IN_USE_LEGEND] and all(len(row) <= columns for row in rows), rows
    wide = list_rows(entries, "notes", 0, {"chat-20261207-170000"})
    assert wide[0].endswith("Tell me about lighthouses.  (in use elsewhere)") and len(wide) == 3, wide
