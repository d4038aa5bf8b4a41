"""A run's second signal: the first delivered again at once is the same request; another signal, or the first again
later (a quick double Ctrl-C), ends the run at once, even where it waits on a reader that stopped reading."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from localgen.signals import REPEAT_S, SignalExit, StopOnSignal
from tests.conftest import REPO_ROOT, popen_localgen
from tests.test_signals import PIPE_FILLED, _wait_until_blocked

pytestmark = pytest.mark.serial  # signals timed against a run's progress (conftest: serial)

ENDING_WRITE_WAIT_S = 30  # what a stalled run would wait for its reader before it ends, where it does not end at once


@pytest.mark.parametrize(("first", "second", "gap"), [
    (signal.SIGINT, signal.SIGINT, 0.15),  # a quick double Ctrl-C
    (signal.SIGTERM, signal.SIGTERM, 0.5),
    (signal.SIGHUP, signal.SIGINT, 0.03),  # another signal, soon after
])
def test_a_second_signal_ends_a_run_stalled_on_its_reader_at_once(first: int, second: int, gap: float) -> None:
    """The first signal waits LOCALGEN_ENDING_WRITE_WAIT for the reader of a full pipe; a second Ctrl-C 0.15 s
    later (or another signal 0.03 s after it) was taken for the first delivered again, and waited all of it too."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)
    os.write(write_end, b"." * PIPE_FILLED)  # nearly full: the answer's first words fill it
    env = {**os.environ, "LOCALGEN_ENDING_WRITE_WAIT": str(ENDING_WRITE_WAIT_S)}
    with os.fdopen(read_end, "rb") as output:
        proc = popen_localgen(
            [sys.executable, "-m", "localgen", "run", "--raw", "hello world hello world hello world hello world",
             "-n", "3000", "--temperature", "0", "--repeat-penalty", "1.0", "--no-cache"],
            stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=env)
        os.close(write_end)
        try:
            _wait_until_blocked(proc, read_end, PIPE_FILLED)
            proc.send_signal(first)
            time.sleep(gap)
            proc.send_signal(second)
            sent = time.monotonic()
            proc.wait(timeout=ENDING_WRITE_WAIT_S + 30)
            took = time.monotonic() - sent
            output.read()
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 128 + second, err.decode()
    assert took < ENDING_WRITE_WAIT_S / 3, f"ended {took:.1f} s after the second signal"
    assert b"Traceback" not in err, err.decode()


def test_the_first_signal_again_at_once_asks_again_where_another_signal_or_a_later_one_ends_the_program() -> None:
    stops: list[str] = []
    for second, wait in ((signal.SIGUSR2, 0.0), (signal.SIGUSR1, REPEAT_S)):
        with pytest.raises(SignalExit) as info, StopOnSignal(lambda: stops.append("stop"),
                                                             signals=(signal.SIGUSR1, signal.SIGUSR2)):
            for _ in range(5):  # a burst, with no pause: the same request delivered again
                os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(wait)
            os.kill(os.getpid(), second)
        assert info.value.code == 128 + second
    assert stops == ["stop"] * 10
