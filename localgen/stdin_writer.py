"""Whether the writer of a pipe on stdin went with a Ctrl-C that cut a wait for it (`sleep 100 | localgen run x`):
the shell then ends the ^C's line, the writer having died of it; not one that ended of itself before it."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time

from localgen.signals import READER_DIED_WITHIN_S, interrupted_at

WRITER_DYING_S = 0.1  # how long after a Ctrl-C the run's end waits for stdin's writer to die of it too (sleep: ms)

_waited_on = False  # stdin, a pipe, is being read and its end has not come: its writer is there
_hung_up_at: float | None = None  # when stdin's writer was seen gone by the watch note_reading starts (monotonic)


def note_reading(fd: int) -> None:
    """Note that fd is read from, where it is stdin and a pipe: its writer is there until its end is read; or where
    it is another pipe read first (`sleep 100 | localgen run -f <(sleep 100) x`) and stdin is a pipe whose writer is
    there as that read starts, a thread then noting when it hangs up (`(echo hi) | localgen run -f <(sleep 100) x`:
    a writer that ends of itself before a Ctrl-C did not die of it)."""
    global _waited_on
    with contextlib.suppress(OSError):
        if _waited_on or not stat.S_ISFIFO(os.fstat(0).st_mode):
            return
        if fd == 0:
            _waited_on = True
        elif stat.S_ISFIFO(os.fstat(fd).st_mode) and not _hangs_up_within(0):
            _waited_on = True
            threading.Thread(target=_note_the_hang_up, name="stdin writer watch", daemon=True).start()


def note_end_read(fd: int) -> None:
    """Note that fd's end was read, where it is stdin: its writer has gone, before any Ctrl-C to come."""
    global _waited_on
    _waited_on = _waited_on and fd != 0


def writer_went_with_the_interrupt() -> bool:
    """Whether stdin's writer, waited on as the Ctrl-C came, hung up at it or hangs up within WRITER_DYING_S of it
    (`sleep 100 | localgen run x`: sleep died of it too); not where it was seen gone earlier than READER_DIED_WITHIN_S
    before the Ctrl-C met its handler, as for stdout's reader (it ended of itself)."""
    at = interrupted_at()
    if not _waited_on or at is None:
        return False
    if not _hangs_up_within(max(0.0, at + WRITER_DYING_S - time.monotonic())):
        return False
    return _hung_up_at is None or _hung_up_at >= at - READER_DIED_WITHIN_S


def _hangs_up_within(seconds: float | None) -> bool:
    """Whether every writer of stdin, a pipe, has closed it or does so within seconds (None: however long it takes);
    False where it cannot be polled."""
    hung_up = select.poll()
    hung_up.register(0, 0)  # POLLHUP: every writer has closed it
    with contextlib.suppress(OSError):
        events = hung_up.poll(None if seconds is None else seconds * 1000)
        return any(happened & select.POLLHUP for _fd, happened in events)
    return False


def _note_the_hang_up() -> None:
    """Wait for stdin's writer to hang up, and note when."""
    global _hung_up_at
    if _hangs_up_within(None):
        _hung_up_at = time.monotonic()
