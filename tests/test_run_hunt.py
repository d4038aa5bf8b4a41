"""`localgen run` as shells and terminals start and end it: nohup, a closed terminal's signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.conftest import REPO_ROOT, popen_localgen

WRITE_ONLY_NULL_STDIN = """
import fcntl, os, sys
write_only = fcntl.fcntl(0, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
sys.exit(not (write_only and os.path.samestat(os.fstat(0), os.stat(os.devnull))))
"""


def _nohup_gives_write_only_null_stdin(folder: Path) -> bool:
    """Whether nohup gives a command started at a terminal /dev/null open for writing only as stdin, as GNU's does
    (BSD's and macOS's leave stdin alone: a prompt of - would then wait on the terminal)."""
    if shutil.which("nohup") is None:
        return False
    child = pexpect.spawn("nohup", [sys.executable, "-c", WRITE_ONLY_NULL_STDIN], cwd=str(folder), timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    (folder / "nohup.out").unlink(missing_ok=True)
    return child.exitstatus == 0


def test_a_run_under_nohup_from_a_terminal_answers_its_prompt(tmp_path: Path) -> None:
    """nohup gives a command started at a terminal /dev/null open for writing only as stdin: a run refused it as an
    unreadable stdin (exit 2), where it is no input at all; a prompt of - (or -f -) is told it has nothing to read
    there, where it was told `cannot read stdin: Bad file descriptor` with a hint to pipe text in or use </dev/null."""
    if not _nohup_gives_write_only_null_stdin(tmp_path):
        pytest.skip("no nohup here that gives /dev/null open for writing only as stdin")
    command = ["nohup", sys.executable, "-m", "localgen", "run", "--temperature", "0", "-n", "3"]
    nothing = "localgen: error: stdin is /dev/null open for writing only (as nohup gives it), so '{}' has nothing to " \
              "read (hint: pipe text in (cmd | nohup localgen run {}), or read a file with -f FILE)\n"
    for args, status, refusal in ((["Say hi."], 0, None), (["-"], 2, nothing.format("-", "-")),
                                  (["-f", "-", "Say hi."], 2, nothing.format("-f -", "-f - PROMPT"))):
        child = pexpect.spawn(command[0], [*command[1:], *args], cwd=str(tmp_path), env=dict(os.environ),
                              timeout=120)
        child.expect(pexpect.EOF)
        child.close()
        said = (tmp_path / "nohup.out").read_text()
        (tmp_path / "nohup.out").unlink()
        assert child.exitstatus == status, said
        if status == 0:
            assert said.strip() and "localgen:" not in said, said
        else:
            assert said == refusal, said


@pytest.mark.serial  # the burst must land within REPEAT_S of the first signal's handler (conftest: serial)
def test_a_signal_delivered_twice_at_once_ends_the_run_as_once(tmp_path: Path) -> None:
    """A closed terminal's SIGHUP comes from the kernel and again from the shell, 0.2-0.3 ms apart: the second ended
    the run at once, as a second Ctrl-C does, cutting off the answer's newline and the token counts kept with it (and
    --json's record, or printing a traceback where it landed in llama.cpp's log callback)."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "localgen", "run", "--temperature", "0", "-n", "400", "--no-cache",
               "Write a long story about a lighthouse keeper."]
    for _ in range(3):
        proc = popen_localgen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              env=env, cwd=REPO_ROOT)
        try:
            first = proc.stdout.read1(100)  # the answer streams
            for _ in range(5):  # a burst, with no pause, well within REPEAT_S: the same request
                proc.send_signal(signal.SIGHUP)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        answer = (first + out).decode()
        assert proc.returncode == 129 and err == b"", err.decode()
        assert answer.endswith("\n") and not answer.endswith("\n\n"), answer
        turn = json.loads((tmp_path / "data" / "last-run.json").read_text())["turns"][-1]
        assert turn["answer"] == answer[:-1] and turn["finish_reason"] == "interrupted"
        assert turn["completion_tokens"], turn
