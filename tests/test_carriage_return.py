"""A carriage return in model text on a terminal: shown as ^M, as other control characters are shown, but the one of
a Windows line end, which ends the line."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TextIO

import pexpect
import pytest

from localgen.answer_view import AnswerView
from localgen.console import TextOutput
from tests.conftest import spawn_localgen


def _shown(write: Callable[[TextIO], None]) -> str:
    """What a terminal (a pty, its newlines made CRLF) gets from write(the terminal's stream)."""
    main, secondary = os.openpty()
    try:
        with open(secondary, "w", encoding="utf-8", closefd=False) as terminal:
            write(terminal)
            terminal.flush()
        os.set_blocking(main, False)
        got = b""
        while chunk := _read_some(main):
            got += chunk
        return got.decode()
    finally:
        os.close(main)
        os.close(secondary)


def _read_some(fd: int) -> bytes:
    """What the terminal has for its reader now (b"" once it has nothing more)."""
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


@pytest.mark.parametrize(("grammar", "shown"), [('"a\\r b"', "a^M b\r\n"),
                                                ('"a\\r\\nb\\r"', "a\r\nb^M\r\n")])
def test_a_carriage_return_in_an_answer_on_a_terminal_is_shown_but_a_windows_line_end_s(grammar: str,
                                                                                        shown: str) -> None:
    """ESC and BEL showed as ^[ and ^G, while a lone CR vanished."""
    child = spawn_localgen("run", "--grammar", f"root ::= {grammar}", "x", env=dict(os.environ), timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and child.before.decode() == shown, child.before


def test_run_holds_a_carriage_return_that_ends_a_piece_until_the_next_says_what_it_is() -> None:
    def write(terminal: TextIO) -> None:
        output = TextOutput(terminal, wrap=False)
        for piece in ("a\r", "\nb\r", "c\r", "\r", "\n", "d\r"):
            output.write(piece)
        output.finish()

    assert _shown(write) == "a\r\nb^Mc^M\r\nd^M\r\n"


def test_the_chat_s_answer_holds_a_carriage_return_that_ends_a_piece_too() -> None:
    def write(terminal: TextIO) -> None:
        view = AnswerView(markdown=False, show_thinking=False, wrap=False, stream=terminal)
        for piece in ("a\r", "\nb\r", "c\r"):
            view.answer(piece)
        view.close()

    assert _shown(write) == "a\r\nb^Mc^M\r\n"


@pytest.mark.parametrize(("answer", "shown"), [("", "a\r\nb^Mc^M\r\n"), ("Yes.", "a\r\nb^Mc^M\r\nYes.\r\n")])
def test_the_chat_s_reasoning_holds_a_carriage_return_that_ends_a_piece_too(answer: str, shown: str) -> None:
    """Reasoning made each piece safe alone: a Windows line end in two pieces showed as ^M and a new line."""
    def write(terminal: TextIO) -> None:
        view = AnswerView(markdown=False, show_thinking=True, wrap=False, stream=terminal)
        for piece in ("a\r", "\nb\r", "c\r"):
            view.thinking(piece)
        view.answer(answer)
        view.close()

    assert re.sub(r"\x1b\[[0-9;]*m", "", _shown(write)) == shown
