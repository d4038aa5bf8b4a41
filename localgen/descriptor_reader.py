"""Reading a pipe or a terminal from its descriptor, as a buffered reader would, but waiting where it was left
non-blocking, and telling when a pipe keeps quiet."""

from __future__ import annotations

import os
import select
from collections.abc import Callable
from typing import BinaryIO

from localgen.stdin_writer import note_end_read, note_reading


class DescriptorReader:
    """A pipe or a terminal read from its descriptor to a number of bytes or to its end, as a buffered reader reads
    it, but waited on where it was left non-blocking (a buffered reader's read gives None, or a short part taken
    for the end); waiting, if any, is called once when it keeps quiet for quiet_s seconds, at its start or later
    (`tail -f log |` looks hung otherwise)."""

    def __init__(self, fd: int, waiting: Callable[[], None] | None, quiet_s: float) -> None:
        self._fd = fd
        self._waiting = waiting
        self._quiet_s = quiet_s

    @classmethod
    def of(cls, stream: BinaryIO, waiting: Callable[[], None] | None, quiet_s: float) -> BinaryIO | DescriptorReader:
        """The reader of stream's descriptor, or stream itself when it has none."""
        try:
            return cls(stream.fileno(), waiting, quiet_s)
        except (OSError, ValueError, AttributeError):
            return stream

    def isatty(self) -> bool:
        """Whether the descriptor is a terminal's."""
        return os.isatty(self._fd)

    def read(self, size: int) -> bytes:
        """Up to size bytes: fewer only at the end of its input (a pipe's end, a file's, a terminal's Ctrl-D)."""
        parts: list[bytes] = []
        got = 0
        note_reading(self._fd)
        while got < size:
            if self._waiting is not None and not _ready(self._fd, self._quiet_s):
                self._waiting()
                self._waiting = None
            try:
                chunk = os.read(self._fd, min(size - got, 1 << 20))
            except BlockingIOError:  # a descriptor left non-blocking: wait until it has something
                select.select([self._fd], [], [])
                continue
            if not chunk:
                note_end_read(self._fd)
                break
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)


def _ready(fd: int, timeout: float) -> bool:
    """True when the descriptor has data (or its end) to read within timeout seconds; True when that cannot be
    told."""
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError, TypeError):  # no file descriptor, or one select cannot watch
        return True
