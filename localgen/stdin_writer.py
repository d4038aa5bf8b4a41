"""Whether the writer of a pipe on stdin went with a Ctrl-C that cut a wait for it (`sleep 100 | localgen run x`):
the shell then ends the ^C's line, the writer having died of it."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import time

from localgen.signals import interrupted_at

WRITER_DYING_S = 0.1  # how long after a Ctrl-C the run's end waits for stdin's writer to die of it too (sleep: ms)

_waited_on = False  # stdin, a pipe, is being read and its end has not come: its writer is there


def note_reading(fd: int) -> None:
    """Note that fd is read from, where it is stdin and a pipe: its writer is there until its end is read; or where
    it is another pipe read first (`sleep 100 | localgen run -f <(sleep 100) x`) and stdin is a pipe whose writer is
    there as that read starts (one that ends its output before a Ctrl-C, the run still reading the other, is taken
    for one that died of it)."""
    global _waited_on
    with contextlib.suppress(OSError):
        if _waited_on or not stat.S_ISFIFO(os.fstat(0).st_mode):
            return
        if fd == 0:
            _waited_on = True
        elif stat.S_ISFIFO(os.fstat(fd).st_mode):
            hung_up = select.poll()
            hung_up.register(0, 0)  # POLLHUP: every writer has closed it
            _waited_on = not hung_up.poll(0)


def note_end_read(fd: int) -> None:
    """Note that fd's end was read, where it is stdin: its writer has gone, before any Ctrl-C to come."""
    global _waited_on
    _waited_on = _waited_on and fd != 0


def writer_went_with_the_interrupt() -> bool:
    """Whether stdin's writer, waited on as the Ctrl-C came, hung up at it or hangs up within WRITER_DYING_S of it
    (`sleep 100 | localgen run x`: sleep died of it too)."""
    at = interrupted_at()
    if not _waited_on or at is None:
        return False
    hung_up = select.poll()
    hung_up.register(0, 0)  # POLLHUP: every writer has closed it
    with contextlib.suppress(OSError):
        return bool(hung_up.poll(max(0.0, at + WRITER_DYING_S - time.monotonic()) * 1000))
    return False
