"""Partial writes of prompt cache entries: the temp file an entry is written to before it is renamed into place.

Each is named for the process writing it (`.ENTRY.lgpc.pidPID-RANDOM.tmp`) and holds that process's flock until the
rename. The kernel drops the lock however its holder ends (SIGKILL, a crash, the OOM killer), so a partial write whose
lock is free was left by a run that ended mid-save and can go at once, while one whose lock is held is never touched.
A lock, not the pid alone: a pid is reused, and means another process in another pid namespace (a container sharing
the home) or on another machine (a shared home on NFS, whose locks reach every client). Where no lock can be tested
(an older localgen's name, a file system without locks), a partial write's age decides, as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from localgen.file_locks import still_names, try_flock
from localgen.storage import fsync_folder, write_synced

log = logging.getLogger("localgen.promptcache")

PARTIAL_PATTERN = ".*.lgpc.*.tmp"  # every partial write's name, this one's and an older localgen's
_LOCKED_NAME = re.compile(r"\..+\.lgpc\.pid(\d+)-[0-9a-f]{8}\.tmp")  # one that holds its writer's lock
STALE_TEMP_S = 3600.0  # a partial write whose writer cannot be told, untouched this long, is a killed run's
WRITING_TEMP_S = 300.0  # one touched this recently may be a run's write in progress: `cache clear` keeps it
NAME_TRIES = 5  # a new partial write that a sweep deleted as it was made is made again this many times at most


@dataclass(frozen=True)
class PartialWrite:
    """A partial write found in the cache folder: pid is the writer its name records (None in an older localgen's
    name); writing is True while that writer holds its lock, False once it has ended, None where that cannot be told
    (then its age, from last_written, decides)."""

    path: Path
    size: int
    last_written: float
    pid: int | None
    writing: bool | None

    def left_by_a_stopped_run(self, quiet_s: float = STALE_TEMP_S) -> bool:
        """Whether its writer has ended: its lock is free or, where that cannot be told, no write came for quiet_s."""
        return self.writing is False or (self.writing is None and time.time() - self.last_written > quiet_s)


@dataclass(frozen=True)
class Swept:
    """What a sweep of the partial writes deleted (those of stopped runs) and kept."""

    deleted: list[PartialWrite]
    kept: list[PartialWrite]


def write_entry(target: Path, parts: Iterable[bytes | bytearray | memoryview]) -> None:
    """Write parts to target through a partial write named for this process and locked by it until it is renamed
    into target's place, synced first (OSError when it cannot be: the partial write is gone then)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    path, handle, locked = _new_partial_write(target)
    try:
        with handle:
            write_synced(handle, parts)
            if locked:
                os.replace(path, target)  # before the lock goes: no sweep finds it free under its partial name
        if not locked:
            os.replace(path, target)  # closed first, where an open file cannot be renamed (Windows)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    fsync_folder(target.parent)


def _new_partial_write(target: Path) -> tuple[Path, BinaryIO, bool]:
    """A new partial write for target, the file open for writing it, and whether it holds its lock (not where the
    file system has no locks)."""
    for _ in range(NAME_TRIES):
        path = target.with_name(f".{target.name}.pid{os.getpid()}-{secrets.token_hex(4)}.tmp")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        locked = try_flock(fd)
        if locked is None or (locked and still_names(fd, path)):
            return path, os.fdopen(fd, "wb"), bool(locked)  # write_entry closes it
        if still_names(fd, path):  # a listing or a sweep held its lock as it was made: not this write's to use
            _unlinked(path)
        os.close(fd)
    raise OSError(f"a sweep of stopped runs' partial writes deleted {NAME_TRIES} new ones in {target.parent}")


def partial_writes(directory: Path) -> list[PartialWrite]:
    """Every partial write in the cache folder, most recently written first, each with whether its writer runs."""
    return sorted(_sweep(directory, quiet_s=None).kept, key=lambda p: p.last_written, reverse=True)


def sweep_partial_writes(directory: Path, quiet_s: float = STALE_TEMP_S) -> Swept:
    """Delete the partial writes of stopped runs: those whose writer's lock is free, and where that cannot be told,
    those no write touched for quiet_s; the others are kept, a live run's above all."""
    return _sweep(directory, quiet_s=quiet_s)


def _sweep(directory: Path, *, quiet_s: float | None) -> Swept:
    """The partial writes in directory, those of stopped runs deleted unless quiet_s is None (a listing)."""
    swept = Swept([], [])
    with contextlib.suppress(OSError):
        for path in sorted(directory.glob(PARTIAL_PATTERN)):
            with contextlib.suppress(OSError):
                if (looked := _look_at(path, quiet_s)) is not None:
                    found, gone = looked
                    (swept.deleted if gone else swept.kept).append(found)
    return swept


def _look_at(path: Path, quiet_s: float | None) -> tuple[PartialWrite, bool] | None:
    """The partial write at path (None where it is no regular file), and whether it was deleted: with quiet_s, when a
    stopped run left it, deleted while the lock taken here is held, so that no new write takes it meanwhile."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return None
    named = _LOCKED_NAME.fullmatch(path.name)
    if named is None:  # an older localgen's, or one moved aside (promptcache.remove_found): only its age tells
        found = PartialWrite(path, info.st_size, info.st_mtime, None, None)
        return found, quiet_s is not None and found.left_by_a_stopped_run(quiet_s) and _unlinked(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        held = try_flock(fd, exclusive=False)
        status = os.fstat(fd)
        found = PartialWrite(path, status.st_size, status.st_mtime, int(named.group(1)),
                             None if held is None else not held)
        return found, (quiet_s is not None and found.left_by_a_stopped_run(quiet_s) and still_names(fd, path)
                       and _unlinked(path))
    finally:
        os.close(fd)  # the lock taken here goes with it


def _unlinked(path: Path) -> bool:
    """Delete path; whether it is gone now (already gone counts)."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.debug("could not delete %s: %s", path, exc)
        return False
    return True
