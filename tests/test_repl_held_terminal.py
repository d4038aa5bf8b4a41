"""A chat whose terminal takes no more output (held with Ctrl-S, a paused terminal) as SIGTERM, SIGHUP or Ctrl-\\
(SIGQUIT) ends it."""

from __future__ import annotations

import os
import signal
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from tests.test_repl import LONG_QUESTION, Chat


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def ended_while_held(chat: Chat, end: Callable[[], None]) -> bool:
    """Hold the chat's terminal (it reads no more output), call end, and say whether the chat ended within 30 s,
    its bound being 2 s (a chat still running long after waits for ever); the terminal is let go either way."""
    terminal = os.open(f"/proc/{chat.child.pid}/fd/1", os.O_WRONLY | os.O_NOCTTY)
    try:
        termios.tcflow(terminal, termios.TCOOFF)
        end()
        deadline = time.monotonic() + 30
        while chat.child.isalive() and time.monotonic() < deadline:
            time.sleep(0.1)
        return not chat.child.isalive()
    finally:
        termios.tcflow(terminal, termios.TCOON)
        os.close(terminal)


@pytest.mark.serial  # timed against an answer, a prompt or a signal (conftest: serial)
@pytest.mark.parametrize(("signum", "code", "shown"), [
    (signal.SIGTERM, 143, ("--no-markdown",)), (signal.SIGHUP, 129, ()), (signal.SIGQUIT, 131, ("--no-markdown",))],
    ids=["SIGTERM-plain", "SIGHUP-markdown", "SIGQUIT-plain"])
def test_a_signal_ends_a_chat_whose_terminal_is_held_mid_answer_with_the_answer_saved(
        home: Path, signum: int, code: int, shown: tuple[str, ...]) -> None:
    """One SIGTERM, SIGHUP or Ctrl-\\ ends a chat whose answer's write waits on a held terminal, as run's does (that
    write given up once it has waited its bounded time, and Ctrl-\\'s ending of the line of its ^\\ echo too), the
    answer so far saved, where the chat waited for the terminal for ever."""
    chat = Chat(home, "--temperature", "0", *shown, "-n", "400")
    chat.start_long_answer()
    ended = ended_while_held(chat, lambda: chat.child.kill(signum))  # held as Ctrl-S holds it: the next write waits
    chat.child.expect(pexpect.EOF, timeout=30)
    chat.child.close()
    assert ended, "the chat waited on its held terminal"
    assert chat.child.exitstatus == code
    turns = chat.conversation()["turns"]
    assert [t["user"] for t in turns] == [LONG_QUESTION] and turns[0]["interrupted"] is True
    assert turns[0]["answer"].strip()
    assert "Traceback" not in chat.transcript.getvalue()
