"""The chat prompt's keys in a real pseudo-terminal on the real bundled model: text that prompt-toolkit's parser takes
for a mouse report."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.repl_keys import is_mouse_report
from tests.test_repl import Chat


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Chat]:
    session = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "3")
    yield session
    if session.child.isalive():
        session.child.terminate(force=True)


def test_escape_sequences_unmarked_by_bracketed_paste_are_text_and_take_no_enter(chat: Chat) -> None:
    """An SGR colour (ESC [ 31m) and an X10 mouse report's shape (ESC [ M, delete-line, and three characters), which
    the chat never asks a terminal for, as a paste the terminal did not mark or a script types them: each is the text
    typed, its escape dropped with the warning for a control character, and the Enter after it sends it, where
    prompt-toolkit's mouse handler failed on them, printed a traceback and "Press ENTER to continue..." and took that
    Enter, so the next line joined the message, or took ESC [ M and three characters of a line for a click."""
    chat.child.send("hello \x1b[31mred")
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "hello [31mred"
    chat.sync()
    chat.child.send("x \x1b[M\u4f60\u597da y")
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "x [M\u4f60\u597da y"
    chat.sync()
    chat.child.send("a click \x1b[<0;5;1M\x1b[<0;5;1mends here\r")  # mouse reports a terminal sends are no text
    state = chat.wait_for(lambda s: len(s["turns"]) == 3 and s["turns"][2]["answer"] is not None)
    assert state["turns"][2]["user"] == "a click ends here"
    chat.sync()
    chat.child.send("see \x1b[Mab end\r")  # delete-line in a captured log: X10's shape, which the chat never asks for
    state = chat.wait_for(lambda s: len(s["turns"]) == 4 and s["turns"][3]["answer"] is not None)
    assert state["turns"][3]["user"] == "see [Mab end", "the text after it kept, where it went with no warning"
    chat.sync()
    screen = chat.transcript.getvalue()
    assert screen.count("warning: dropped 1 control character (^[) from the input") == 3
    assert "Traceback" not in screen and "Press ENTER" not in screen and "Exception" not in screen
    assert chat.quit() == 0


@pytest.mark.parametrize(("data", "report"), [
    ("\x1b[<0;12;3M", True),  # xterm's SGR report: a press, then its release
    ("\x1b[<0;12;3m", True),
    ("\x1b[96;14;13M", True),  # urxvt's
    ("\x1b[M !!", False),  # X10's shape, which the chat never asks for: delete-line and text
    ("\x1b[M\udce0!!", False),
    ("\x1b[31m", False),  # SGR colours
    ("\x1b[1;31m", False),
    ("\x1b[0;1;31m", False),
    ("\x1b[<1;2m", False),
    ("\x1b[M\u4f60\u597da", False),
])
def test_is_mouse_report_holds_only_for_a_report_prompt_toolkit_reads_whole(data: str, report: bool) -> None:
    assert is_mouse_report(data) is report
