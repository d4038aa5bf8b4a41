"""How run takes to a shell user's habits: job control (Ctrl-Z, bg, fg) on a terminal."""

from __future__ import annotations

import io
import os
import shlex
import sys
import termios
import time
from pathlib import Path

import pexpect

from tests.conftest import REPO_ROOT


def _shell(home: Path) -> pexpect.spawn:
    """An interactive bash in a pty (job control), telling of a job's change as it comes (set -b)."""
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PS1": "$ ", "HISTFILE": "/dev/null", "TERM": "xterm"}
    shell = pexpect.spawn("bash", ["--norc", "--noprofile", "-i"], cwd=str(REPO_ROOT), env=env, encoding="utf-8",
                          codec_errors="replace", timeout=60, dimensions=(24, 80))
    shell.expect_exact("$ ")
    shell.sendline("set -b")
    shell.expect_exact("$ ")
    return shell


def _stopped_mid_answer(shell: pexpect.spawn, max_tokens: int) -> None:
    """Start a run of a long story as the shell's job, and stop it with Ctrl-Z as its answer streams."""
    run = [sys.executable, "-m", "localgen", "run", "-n", str(max_tokens), "--temperature", "0",
           "Write a very long story about a castle."]
    shell.sendline(shlex.join(run) + " 2>/dev/null")
    shell.expect_exact("/dev/null\r\n")  # the command line, echoed
    shell.expect(r"\w+ \w+ \w+")
    shell.sendcontrol("z")
    shell.expect(r"Stopped\s")
    shell.expect_exact("$ ")


def _echoes_keys(shell: pexpect.spawn) -> bool:
    """Whether the terminal writes ^C for Ctrl-C now."""
    return bool(termios.tcgetattr(shell.child_fd)[3] & termios.ECHOCTL)


def test_a_run_stopped_with_ctrl_z_and_continued_with_bg_finishes(tmp_path: Path) -> None:
    """Ctrl-Z then `bg`: the run, putting back the terminal's echo of Ctrl-C from the background at its end, was
    stopped again (Stopped (tty output)) until `fg`. It finishes, the terminal echoing keys again."""
    shell = _shell(tmp_path)
    _stopped_mid_answer(shell, 60)  # stopped at its third word: the rest goes on after bg, with room to spare
    shell.sendline("bg")
    found = shell.expect([r"Done\s", r"Stopped"])
    assert found == 0, shell.before
    assert _echoes_keys(shell)
    shell.sendline("exit")
    shell.expect(pexpect.EOF)


def test_a_run_stopped_with_ctrl_z_and_brought_back_with_fg_holds_the_echo_of_ctrl_c_again(tmp_path: Path) -> None:
    """Ctrl-Z gave the terminal its shell's modes, which echo ^C as the key is pressed: after `fg`, Ctrl-C's ^C
    came before the word the line wrapper held back. The echo is held again until the run ends, then given back."""
    shell = _shell(tmp_path)
    _stopped_mid_answer(shell, 3000)  # ended by Ctrl-C
    assert _echoes_keys(shell), "the shell's own modes, while the run is stopped"
    shell.sendline("fg")
    deadline = time.monotonic() + 20
    while _echoes_keys(shell) and time.monotonic() < deadline:
        time.sleep(0.05)
    held = not _echoes_keys(shell)
    shell.logfile_read = transcript = io.StringIO()
    shell.sendcontrol("c")
    shell.expect_exact("$ ")
    assert held, "no echo of Ctrl-C while the answer goes on"
    assert transcript.getvalue().count("^C") == 1 and "^C\r\n" in transcript.getvalue(), transcript.getvalue()
    assert _echoes_keys(shell)
    shell.sendline("exit")
    shell.expect(pexpect.EOF)
