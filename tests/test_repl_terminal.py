"""The chat as a job of a shell: a signal that ends it while it is stopped (Ctrl-Z) ends it where it is."""

from __future__ import annotations

import time
from pathlib import Path

import pexpect
import pytest

from tests.test_repl import Chat

pytestmark = pytest.mark.serial  # Ctrl-Z and signals timed against a shell's job control (conftest: serial)


@pytest.mark.parametrize(("signal_name", "code"), [("TERM", 143), ("HUP", 129)])
def test_a_chat_stopped_at_its_prompt_ends_on_a_signal_without_fg(tmp_path: Path, signal_name: str,
                                                                  code: int) -> None:
    """bash continues a stopped job it sends SIGTERM or SIGHUP, in the background: the chat ends there, rather than
    stopping again as it puts the terminal's modes back (Stopped (tty output)) and waiting on `fg`."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "4", in_shell=True)
    try:
        chat.child.sendcontrol("z")
        chat.child.expect("Stopped", timeout=20)
        chat.child.expect_exact("$ ")
        mark = len(chat.transcript.getvalue())
        chat.child.sendline(f"kill -{signal_name} %1")
        chat.child.expect_exact("$ ")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and f"Exit {code}" not in chat.transcript.getvalue()[mark:]:
            time.sleep(0.5)
            chat.child.sendline("jobs")  # bash says how a job ended once, before a prompt or in the list of jobs
            chat.child.expect_exact("$ ")
        shell = chat.transcript.getvalue()[mark:]
        assert f"Exit {code}" in shell and "Stopped (tty output)" not in shell, shell  # (Stopped alone: as it was)
        chat.child.sendline("exit")
        chat.child.expect(pexpect.EOF)
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
