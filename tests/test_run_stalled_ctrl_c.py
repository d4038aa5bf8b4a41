"""A Ctrl-C at a run's terminal while its stdout is a pipe nobody reads: the ^C echo's line is ended as it ends."""

from __future__ import annotations

import fcntl
import os
import pty
import sys
import termios
import time

from tests.conftest import REPO_ROOT, popen_localgen
from tests.test_signals import PIPE_FILLED, _wait_until_blocked


def _take_controlling_terminal() -> None:
    """In the child: the terminal on stdin becomes its controlling terminal, so that Ctrl-C typed there reaches it."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_all(fd: int) -> bytes:
    """What the terminal's other side has to read, until it says no more (EIO once the child has closed it)."""
    said = b""
    while True:
        try:
            piece = os.read(fd, 4096)
        except OSError:
            return said
        if not piece:
            return said
        said += piece


def test_a_ctrl_c_that_gives_up_a_stalled_answer_ends_the_line_of_its_echo() -> None:
    """The run waited LOCALGEN_ENDING_WRITE_WAIT for the pipe's reader, gave the answer up and exited 130, leaving
    the terminal's line after the ^C echo unended: the shell's prompt came after it."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)
    os.write(write_end, b"." * PIPE_FILLED)  # nearly full: the answer's first words fill it
    main, secondary = pty.openpty()
    with os.fdopen(read_end, "rb") as output:
        proc = popen_localgen(
            [sys.executable, "-m", "localgen", "run", "--raw", "hello world hello world hello world hello world",
             "-n", "3000", "--temperature", "0", "--repeat-penalty", "1.0", "--no-cache"],
            stdin=secondary, stdout=write_end, stderr=secondary, cwd=REPO_ROOT, start_new_session=True,
            preexec_fn=_take_controlling_terminal, env={**os.environ, "LOCALGEN_ENDING_WRITE_WAIT": "0.5"})
        os.close(write_end)
        os.close(secondary)
        try:
            _wait_until_blocked(proc, read_end, PIPE_FILLED)
            os.set_blocking(main, False)
            with_notes = _read_all(main)  # what it said on stderr before the answer (nothing, unless warned)
            os.set_blocking(main, True)
            os.write(main, b"\x03")
            proc.wait(timeout=60)
            time.sleep(0.1)
            said = _read_all(main)
            output.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(main)
    assert proc.returncode == 130, with_notes + said
    assert said == b"^C\r\n", (with_notes, said)
