"""A file's version, and what reading a file gave, kept for the rest of the process while the file stays that version
(a listing, a header, a header's refusal)."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

from localgen.errors import LocalgenError

Value = TypeVar("Value")
StatVersion = tuple[int, int, int, int, int]


def stat_version(status: os.stat_result) -> StatVersion:
    """What names this version of a file: its device, inode, size, modification time and change time (which every
    write and every setting of the modification time moves: `touch -r`, `cp -p` over it, `rsync --inplace -t`)."""
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def file_version(path: Path) -> tuple[str, StatVersion] | None:
    """A file's version: its path and stat_version; None where it cannot be looked at."""
    try:
        status = path.stat()
    except (OSError, ValueError):
        return None
    return str(path), stat_version(status)


class ReadOnce(Generic[Value]):
    """Each file's reading, by its version (and a tag): read once a process while the file stays that version; the
    LocalgenErrors keeps_error accepts are kept too, and raised again as copies (a caller adding to a message adds to
    its own alone)."""

    def __init__(self, keeps_error: Callable[[LocalgenError], bool] | None = None) -> None:
        self._kept: dict[Hashable, Value | LocalgenError] = {}
        self._keeps_error = keeps_error or (lambda _exc: False)

    def read(self, path: Path, read: Callable[[], Value], *, tag: Hashable = None) -> Value:
        """What read() gives for path, as kept for this version of the file; a file that cannot be looked at is read
        each time (its reading says why it fails)."""
        version = file_version(path)
        if version is None:
            return read()
        key = (tag, version)
        if key not in self._kept:
            try:
                self._kept[key] = read()
            except LocalgenError as exc:
                if self._keeps_error(exc):
                    self._kept[key] = exc.copied()
                raise
        kept = self._kept[key]
        if isinstance(kept, LocalgenError):
            raise kept.copied()
        return kept
