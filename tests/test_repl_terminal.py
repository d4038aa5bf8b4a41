"""The chat as a job of a shell: a signal that ends it while it is stopped (Ctrl-Z) ends it where it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.conftest import REPO_ROOT
from tests.test_repl import Chat


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
            time.sleep(0.1)
            chat.child.sendline("jobs")  # bash says how a job ended once, before a prompt or in the list of jobs
            chat.child.expect_exact("$ ")
        shell = chat.transcript.getvalue()[mark:]
        assert f"Exit {code}" in shell and "Stopped (tty output)" not in shell, shell  # (Stopped alone: as it was)
        chat.child.sendline("exit")
        chat.child.expect(pexpect.EOF)
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.serial  # a wait for a stop that does not come (conftest: serial)
def test_a_chat_continued_in_the_background_waits_for_fg(tmp_path: Path) -> None:
    """`bg` after Ctrl-Z: the chat runs on without touching the terminal (it stopped again on its first change of
    the terminal's modes, Stopped (tty output)), until `fg` gives it back its prompt."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "4", in_shell=True)
    try:
        chat.child.sendcontrol("z")
        chat.child.expect("Stopped", timeout=20)
        chat.child.expect_exact("$ ")
        chat.child.sendline("bg")
        chat.child.expect_exact("$ ")
        time.sleep(1)  # (a chat that stops again does so at once)
        mark = len(chat.transcript.getvalue())
        chat.child.sendline("jobs")
        chat.child.expect_exact("$ ")
        assert "Running" in chat.transcript.getvalue()[mark:], chat.transcript.getvalue()[mark:]
        chat.child.sendline("fg")
        chat.sync()
        chat.child.sendcontrol("d")
        chat.child.expect_exact("$ ")
        chat.child.sendline("echo status=$?")
        chat.child.expect(r"status=(\d+)")
        assert chat.child.match[1] == "0"
        chat.child.sendline("exit")
        chat.child.expect(pexpect.EOF)
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


TAKEN_LATE_BY_ANOTHER_THREAD = """
import signal, sys, threading, time
from localgen.repl_terminal import stopped_until_continued

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # the helper thread, started with it blocked, takes it


def take_it_late() -> None:
    sys.stdin.buffer.read(1)  # the test sent SIGTERM, then SIGCONT
    time.sleep(0.1)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


threading.Thread(target=take_it_late, daemon=True).start()
print(stopped_until_continued(backgrounded=lambda: True), flush=True)
"""


@pytest.mark.serial  # a signal taken 0.1 s after the continue (conftest: serial)
def test_a_signal_another_thread_takes_after_the_continue_still_ends_a_stopped_chat() -> None:
    """bash's `kill %1` sends a stopped job SIGTERM, then SIGCONT: the thread that takes SIGTERM may run its handler
    after the chat's thread goes on, and the chat, continued in the background, waits for it (it went on without and
    stopped again, putting its terminal modes back)."""  # (backgrounded for good: only the signal ends the wait)
    child = subprocess.Popen([sys.executable, "-c", TAKEN_LATE_BY_ANOTHER_THREAD], cwd=REPO_ROOT, preexec_fn=os.setpgrp,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # (an orphaned group would not stop)
    try:
        deadline = time.monotonic() + 30
        while (status := os.waitpid(child.pid, os.WNOHANG | os.WUNTRACED))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.WIFSTOPPED(status[1]), status
        os.kill(child.pid, signal.SIGTERM)
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdin is not None
        child.stdin.write(b"x")
        child.stdin.flush()
        out, _ = child.communicate(timeout=30)
        assert out.decode().strip() == str(int(signal.SIGTERM))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_signal_held_while_stopped_at_the_prompt_bounds_the_writes_as_the_prompt_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal that came while the chat was stopped at its prompt ends the prompt from within prompt_toolkit's task;
    the prompt's closing redraw and what the chat writes as it ends must wait bounded on a terminal that stopped
    reading, as they do where the signal's own handler ends the prompt."""  # (unit: a stand-in for the running app)
    import prompt_toolkit.application

    from localgen import output_writes, repl_terminal
    from localgen.signals import SignalExit

    class RunningPrompt:
        is_running, is_done = True, False
        ended_with: BaseException | None = None

        def exit(self, *, exception: BaseException) -> None:
            self.ended_with = exception

    prompt = RunningPrompt()
    monkeypatch.setattr(prompt_toolkit.application, "get_app_or_none", lambda: prompt)
    monkeypatch.setattr(output_writes, "_ending", None)
    repl_terminal.end_after_suspend(signal.SIGHUP)
    assert isinstance(prompt.ended_with, SignalExit) and prompt.ended_with.signum == signal.SIGHUP
    assert output_writes._ending == signal.SIGHUP, "the prompt ended with its writes unbounded"
