"""The chat's slash commands at their edges: an empty /file, and /help on a narrow terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen.repl_input import help_lines
from tests.test_repl import Chat


def test_an_empty_file_is_not_attached_and_the_next_message_is_sent_alone(tmp_path: Path) -> None:
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("")
    blank.write_text("\n  \n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "2", cwd=tmp_path)
    try:
        chat.command_words("/file empty.txt", "localgen: warning: empty.txt is empty, so it is not attached")
        chat.command_words("/file blank.txt", "blank.txt holds only whitespace, so it is not attached")
        assert "no files are attached" in chat.command("/file none", "attached")
        state = chat.ask("Say hi.")
        assert state["turns"][-1]["user"] == "Say hi.", "nothing was attached to it"
        assert "attached empty.txt" not in chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize("columns", [24, 25, 30, 40, 80])
def test_help_on_a_narrow_terminal_breaks_lines_only_between_words(columns: int) -> None:
    lines = help_lines(columns)
    assert all(len(line) < columns for line in lines), [line for line in lines if len(line) >= columns]
    words = " ".join(lines).split()
    assert "frequency_penalty," in words and "top-p," in words and "Alt-Enter" in words, "no word is broken"
    assert not any(line.strip()[:1] in ",;)" for line in lines), "no line starts with a comma"
