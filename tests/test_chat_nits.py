"""The chat's small replies, in a real pseudo-terminal on the bundled model: /system none where no system prompt
was set, and /set of a value too large for a float."""

from __future__ import annotations

from pathlib import Path

from tests.chat_terminal import end_chat
from tests.test_repl import Chat


def test_system_none_where_none_was_set_says_there_is_none(tmp_path: Path) -> None:
    """/system none in a chat with no system prompt says there is none, as /system alone does (it said the system
    prompt was cleared); once one is set, /system none says it cleared it."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        said = chat.command_words("/system none", "no system prompt")
        assert "cleared" not in said, said
        chat.command("/system Be brief.", "system prompt set")
        chat.command_words("/system none", "system prompt cleared")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_set_of_a_value_too_large_for_a_float_says_it_as_typed(tmp_path: Path) -> None:
    """/set temperature 1e400 says 1e400 is out of range, as typed (it said inf, the float it reads as)."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        said = chat.command_words("/set temperature 1e400", "temperature 1e400 is out of range")
        assert "inf" not in said, said
        chat.command("/set temperature", "temperature = 0")
        assert chat.quit() == 0
    finally:
        end_chat(chat)
