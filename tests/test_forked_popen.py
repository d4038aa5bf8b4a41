"""The suite's Popen of `python -m localgen`: a child forked by tests/zygote.py acts as a fresh one would for a test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from forked_popen import ForkedPopen

from tests import conftest
from tests.conftest import FORK_CHILDREN, REPO_ROOT, popen_localgen, run_localgen, run_localgen_process

pytestmark = pytest.mark.skipif(not FORK_CHILDREN, reason="LOCALGEN_TEST_FORK=0: every child starts afresh")

READS_STDIN = [sys.executable, "-m", "localgen", "run", "-f", "-", "-n", "1", "--temperature", "0", "hi"]


def _reading_stdin(proc: subprocess.Popen) -> subprocess.Popen:
    """proc, once it waits for its stdin (the model loaded: `-f -` is read after it)."""
    deadline = time.monotonic() + 60
    while "pipe_read" not in Path(f"/proc/{proc.pid}/wchan").read_text():
        assert proc.poll() is None and time.monotonic() < deadline, "it never read stdin"
        time.sleep(0.01)
    return proc


def _parent_of(pid: int) -> int:
    """The pid of a process's parent."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1])


def test_a_forked_child_has_its_own_pid_streams_folder_and_exit_status(tmp_path: Path) -> None:
    proc = popen_localgen(READS_STDIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          cwd=tmp_path, env={**os.environ, "LOCALGEN_HOME": str(tmp_path / "home")})
    assert isinstance(proc, ForkedPopen), "forked, not started afresh"
    _reading_stdin(proc)
    assert _parent_of(proc.pid) != os.getpid() and Path(f"/proc/{proc.pid}/cwd").resolve() == tmp_path.resolve()
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)  # it waits for its stdin, which stays open
    out, err = proc.communicate(b"Say yes.", timeout=120)
    assert proc.returncode == proc.poll() == proc.wait() == 0, out.decode()
    assert out.strip() and err is None


@pytest.mark.parametrize(("signum", "returncode"), [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 143),
                                                    (signal.SIGINT, 130)])
def test_a_signal_reaches_the_forked_child_and_its_exit_is_told_as_popen_tells_a_fresh_one(
        signum: int, returncode: int) -> None:
    forked = _reading_stdin(popen_localgen(READS_STDIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE))
    fresh = _reading_stdin(subprocess.Popen(READS_STDIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, cwd=REPO_ROOT))
    assert isinstance(forked, ForkedPopen) and not isinstance(fresh, ForkedPopen)
    told = []
    for proc in (forked, fresh):
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        told.append((proc.returncode, out, err))
    assert told[0] == told[1] and told[0][0] == returncode, told
    forked.kill()  # known to have ended: nothing is sent
    assert forked.poll() == returncode


def test_the_zygote_serves_other_runs_while_a_forked_child_runs() -> None:
    with popen_localgen(READS_STDIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert not conftest._zygote_lock.locked()
        second = popen_localgen(READS_STDIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert isinstance(proc, ForkedPopen) and isinstance(second, ForkedPopen)
        version = run_localgen("--version")
        assert version.returncode == 0 and version.out.startswith("localgen "), version.err
        for child in (second, proc):
            child.kill()
            assert child.wait(timeout=60) == -signal.SIGKILL


def test_run_gives_what_subprocess_run_gives() -> None:
    done = run_localgen_process([sys.executable, "-m", "localgen", "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "") and done.stdout.startswith("localgen ")
    assert done.args == [sys.executable, "-m", "localgen", "--version"]
    with pytest.raises(subprocess.CalledProcessError) as refused:
        run_localgen_process([sys.executable, "-m", "localgen", "run", "--no-such-option"], capture_output=True,
                             check=True)
    assert refused.value.returncode == 2 and b"--no-such-option" in refused.value.stderr
    reader, writer = os.pipe()  # a stdin that never ends
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            run_localgen_process(READS_STDIN, stdin=reader, capture_output=True, timeout=0.5)
    finally:
        os.close(reader)
        os.close(writer)


@pytest.mark.parametrize("options", [{"preexec_fn": os.getpid}, {"start_new_session": True},
                                     {"env": {**os.environ, "PYTHONHASHSEED": "7"}}])
def test_what_a_fork_cannot_give_is_started_afresh(options: dict) -> None:
    proc = popen_localgen([sys.executable, "-m", "localgen", "--version"], stdout=subprocess.PIPE, **options)
    assert not isinstance(proc, ForkedPopen)
    assert proc.communicate(timeout=60)[0].startswith(b"localgen ") and proc.returncode == 0
