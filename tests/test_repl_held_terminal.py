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

from localgen import config, output_writes
from tests.conftest import run_localgen
from tests.test_repl import LONG_QUESTION, Chat

HELD_WAIT_S = "0.2"  # LOCALGEN_ENDING_WRITE_WAIT for a chat whose held terminal is the expected path: 2 s by default


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def short_ending_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chats started from here on give up a write to their held terminal 0.2 s after a signal, not 2 s."""
    monkeypatch.setenv(config.ENDING_WRITE_WAIT_ENV, HELD_WAIT_S)


def test_a_write_once_a_signal_ends_the_program_waits_as_long_as_the_setting_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LOCALGEN_ENDING_WRITE_WAIT is the bound a write to a reader that stopped reading waits once a signal ends the
    program (2 s unset), read as the signal comes."""
    monkeypatch.setattr(output_writes, "_ending", None)
    monkeypatch.setattr(output_writes, "_wait_left", output_writes._wait_left)
    for value, seconds in (("", 2.0), ("0.25", 0.25), ("0", 0.0)):
        monkeypatch.setenv(config.ENDING_WRITE_WAIT_ENV, value)
        monkeypatch.setattr(config, "_settings", None)
        output_writes._ending = None
        output_writes.end_writes_on(signal.SIGTERM)
        assert (output_writes._ending, output_writes._wait_left) == (signal.SIGTERM, seconds)


@pytest.mark.parametrize("value", ["soon", "-1", "3601", "nan"])
def test_an_ending_wait_that_is_no_number_of_seconds_is_refused_as_a_command_starts(value: str) -> None:
    refused = run_localgen("run", "-n", "1", "hi", env={"LOCALGEN_ENDING_WRITE_WAIT": value})
    assert (refused.returncode, refused.out) == (1, ""), refused.err
    assert refused.err == (f"localgen: error: LOCALGEN_ENDING_WRITE_WAIT={value} is no number of seconds from 0 to "
                           "3600 (hint: set LOCALGEN_ENDING_WRITE_WAIT=2 (the default), for example, or unset it)\n")


def ended_while_held(chat: Chat, end: Callable[[], None]) -> bool:
    """Hold the chat's terminal (it reads no more output), call end, and say whether the chat ended within 30 s,
    its bound being 2 s or LOCALGEN_ENDING_WRITE_WAIT's (a chat still running long after waits for ever); the
    terminal is let go either way."""
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


@pytest.mark.parametrize(("signum", "code", "shown"), [
    (signal.SIGTERM, 143, ("--no-markdown",)), (signal.SIGHUP, 129, ()), (signal.SIGQUIT, 131, ("--no-markdown",))],
    ids=["SIGTERM-plain", "SIGHUP-markdown", "SIGQUIT-plain"])
@pytest.mark.usefixtures("short_ending_wait")
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
