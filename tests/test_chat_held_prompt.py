"""A chat sitting at its prompt whose terminal takes no more output (a terminal, or an ssh link, that stopped
reading) as SIGTERM, SIGHUP, SIGQUIT or Ctrl-\\ ends it."""

from __future__ import annotations

import platform
import signal
import time
from pathlib import Path

import pexpect
import pytest

from tests.test_repl import Chat
from tests.test_repl_held_terminal import ended_while_held, short_ending_wait  # noqa: F401  (a fixture)

WRITE_SYSCALLS = {"x86_64": 1, "aarch64": 64}  # write(2)'s number, as /proc/PID/syscall gives it


def _wait_until_writing(pid: int) -> None:
    """Wait until the process's main thread is blocked in write(2)."""
    number = WRITE_SYSCALLS.get(platform.machine())
    if number is None:
        pytest.skip(f"write(2)'s number on {platform.machine()} is not known here")
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/syscall").read_text().split()[0] != str(number):
        assert time.monotonic() < deadline, "the chat never wrote to its held terminal"
        time.sleep(0.05)


@pytest.mark.parametrize(("ending", "code", "typed_while_held"),
                         [(signal.SIGTERM, 143, ""), (signal.SIGHUP, 129, ""), (signal.SIGQUIT, 131, ""),
                          (signal.SIGTERM, 143, "more"), ("\x1c", 131, "")],
                         ids=["SIGTERM", "SIGHUP", "SIGQUIT", "SIGTERM-mid-redraw", "Ctrl-backslash"])
@pytest.mark.usefixtures("short_ending_wait")
def test_a_signal_or_ctrl_backslash_ends_a_chat_held_at_its_prompt_with_the_conversation_kept(
        tmp_path: Path, ending: int | str, code: int, typed_while_held: str) -> None:
    """One SIGTERM, SIGHUP or SIGQUIT (kill -QUIT), or Ctrl-\\ typed, ends a chat at its prompt whose terminal has
    stopped reading, its conversation kept, where the prompt's closing redraw waited on the terminal for ever; and
    so does a signal where a key typed meanwhile has a redraw of the prompt waiting on the terminal as it comes."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    chat.ask("Say hi.")
    chat.child.send("half typed")
    chat.wait_for_screen(lambda screen: screen.endswith("half typed") or "half typed\x1b" in screen)

    def end() -> None:
        """With the terminal held (the prompt's next write waits), type keys first where asked, then end the chat."""
        if typed_while_held:
            chat.child.send(typed_while_held)
            _wait_until_writing(chat.child.pid)  # the keys read, their redraw waits on the terminal
        if isinstance(ending, str):
            chat.child.send(ending)  # a key the prompt reads, its terminal held or not
        else:
            chat.child.kill(ending)

    ended = ended_while_held(chat, end)
    chat.child.expect(pexpect.EOF, timeout=30)
    chat.child.close()
    assert ended, "the chat waited on its held terminal"
    assert chat.child.exitstatus == code
    turns = chat.conversation()["turns"]
    assert [t["user"] for t in turns] == ["Say hi."] and turns[0]["answer"] is not None
    assert "Traceback" not in chat.transcript.getvalue()
