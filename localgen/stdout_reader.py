"""Notice that the reader of a pipe on stdout has gone while nothing is written to it (a long prompt read, a --json
answer generated), so the work stops then, not at the next write."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
from collections.abc import Callable, Iterator
from typing import TextIO

_READER_GONE = select.POLLERR | select.POLLHUP  # a pipe with no reader left / a socket whose peer closed


class ReaderWatch:
    """Whether stdout's reader has gone while the watch lasted."""

    def __init__(self) -> None:
        self.gone = False

    def wait(self, fd: int, wake: int, stop: Callable[[], None]) -> None:
        """Wait until fd's reader goes (then note it and call stop) or wake can be read (the watch is over)."""
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR and POLLHUP are always reported; nothing else is asked for
        poller.register(wake, select.POLLIN)
        while True:
            events = dict(poller.poll())
            if wake in events or events.get(fd, 0) & select.POLLNVAL:
                return
            if events.get(fd, 0) & _READER_GONE:
                self.gone = True
                stop()
                return


def _pipe_fd(stream: TextIO) -> int | None:
    """stream's descriptor where it is a pipe or a socket, whose reader can go; None for a file or a terminal."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


@contextlib.contextmanager
def watching_the_reader(stream: TextIO, stop: Callable[[], None]) -> Iterator[ReaderWatch]:
    """While active, a thread calls stop() as soon as the reader of stream (a pipe or a socket) goes, which a
    write would only find out at the next write; the watch's gone says whether it did."""
    watch = ReaderWatch()
    fd = _pipe_fd(stream)
    if fd is None:
        yield watch
        return
    wake_read, wake_write = os.pipe()
    try:
        thread = threading.Thread(target=watch.wait, args=(fd, wake_read, stop), name="stdout reader watch",
                                  daemon=True)
        thread.start()
        try:
            yield watch
        finally:
            os.write(wake_write, b"x")
            thread.join()
    finally:
        os.close(wake_read)
        os.close(wake_write)
