"""A file's version, and what reading a file gave, kept for the rest of the process while the file stays that version
(a listing, a header, a header's refusal), once it has settled: the one rule of what is kept by a file's version, here
and in the headers kept on disk (gguf_cache)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from localgen.errors import LocalgenError

Value = TypeVar("Value")
StatVersion = tuple[int, int, int, int, int]


SETTLED_S = 2.0  # a file changed less than this long ago is not kept: a change within its clock tick would go unseen


def settled(status: os.stat_result) -> bool:
    """Whether a file (as status names it) has been left unchanged SETTLED_S, so that what reading it gave may be kept
    by its version: a write within the clock tick of the last one leaves the version as it was. A modification time in
    the future (`touch -d tomorrow`, rsync from a machine whose clock is ahead) says nothing of when it last changed:
    its change time, which setting that time moves to now, decides (none left to decide: not settled)."""
    now = time.time_ns()
    changed = [when for when in (status.st_mtime_ns, status.st_ctime_ns) if when <= now]
    return bool(changed) and now - max(changed) >= SETTLED_S * 1e9


def stat_version(status: os.stat_result) -> StatVersion:
    """What names this version of a file: its device, inode, size, modification time and change time (which every
    write and every setting of the modification time moves: `touch -r`, `cp -p` over it, `rsync --inplace -t`)."""
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


class ReadOnce(Generic[Value]):
    """Each file's reading, by its version (and a tag): read once a process while the file stays that version, once
    it has settled (settled: unchanged SETTLED_S; read each time until then); the LocalgenErrors keeps_error accepts
    are kept too, and raised again as copies (a caller adding to a message adds to its own alone)."""

    def __init__(self, keeps_error: Callable[[LocalgenError], bool] | None = None) -> None:
        self._kept: dict[Hashable, Value | LocalgenError] = {}
        self._keeps_error = keeps_error or (lambda _exc: False)

    def read(self, path: Path, read: Callable[[], Value], *, tag: Hashable = None, also: Sequence[Path] = ()) -> Value:
        """What read() gives for path (and the files also, a split model's later shards, that it reads too), as kept
        for these versions of them; where one cannot be looked at, or has not settled, it is read each time (its
        reading says why it fails)."""
        try:
            statuses = [(str(file), file.stat()) for file in (path, *also)]
        except (OSError, ValueError):
            return read()
        key = (tag, *((name, stat_version(status)) for name, status in statuses))
        if key not in self._kept:
            keep = all(settled(status) for _, status in statuses)
            try:
                value = read()
            except LocalgenError as exc:
                if keep and self._keeps_error(exc):
                    self._kept[key] = exc.copied()
                raise
            if not keep:
                return value
            self._kept[key] = value
        kept = self._kept[key]
        if isinstance(kept, LocalgenError):
            raise kept.copied()
        return kept
