"""Partial writes of prompt cache entries: the temp file an entry is written to before it is renamed into place.

Each is named for the machine and process writing it (`.ENTRY.lgpc.HOST-pidPID-RANDOM.tmp`) and holds that process's
flock until the rename. The kernel drops the lock however its holder ends (SIGKILL, a crash, the OOM killer), so a
partial write of this machine's whose lock is free was left by a run that ended mid-save and can go at once, while one
whose lock is held is never touched. A lock, not the pid alone: a pid is reused, and means another process in another
pid namespace (a container sharing the home). Another machine's lock may not be seen here (NFS mounted with
local_lock or nolock, CIFS with nobrl), so its partial writes are left to their age. Where no lock can be tested
(an older localgen's name, a file system without locks, or one whose file identities never agree, as some FUSE
mounts), a partial write's age decides, as before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from localgen.file_locks import still_names, try_flock
from localgen.storage import STALE_TEMP_S, fsync_folder, new_temp_file, regular_file_descriptor, write_synced

log = logging.getLogger("localgen.promptcache")

PARTIAL_PATTERN = ".*.lgpc.*.tmp"  # every partial write's name, this one's and an older localgen's
_LOCKED_NAME = re.compile(r"\..+\.lgpc\.([0-9a-f]{12})-pid(\d+)-[0-9a-f]{8}\.tmp")  # one that holds its writer's lock
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")  # Linux: new at each boot, shared by the containers on it
WRITING_TEMP_S = 300.0  # one touched this recently may be a run's write in progress: `cache clear` keeps it


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
    this_machine: bool | None = None  # whether its writer ran on this machine (None: its name does not say)

    def left_by_a_stopped_run(self, quiet_s: float = STALE_TEMP_S) -> bool:
        """Whether its writer has ended: its lock is free or, where that cannot be told, no write came for quiet_s."""
        return self.writing is False or (self.writing is None and time.time() - self.last_written > quiet_s)


@dataclass(frozen=True)
class Swept:
    """What a sweep of the partial writes deleted (those of stopped runs), kept, and could not delete (a stopped run's
    in a folder that cannot be written: each with its error)."""

    deleted: list[PartialWrite]
    kept: list[PartialWrite]
    failed: list[tuple[PartialWrite, OSError]]

    def size_now(self) -> int:
        """The bytes the partial writes left in the folder hold now: one renamed into its entry's place (or deleted)
        since the sweep counts no more, so that a listing of the entries made after it counts it once at most."""
        total = 0
        for found in [*self.kept, *(found for found, _ in self.failed)]:
            with contextlib.suppress(OSError):
                total += os.lstat(found.path).st_size
        return total


def write_entry(target: Path, parts: Iterable[bytes | bytearray | memoryview]) -> None:
    """Write parts to target through a partial write named for this machine and process, locked by it until it is
    renamed into target's place, synced first (OSError when it cannot be: the partial write is gone then)."""
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


@functools.cache
def host_key() -> str:
    """This machine's part of a locked partial write's name: a hash of its boot id (a machine booted again holds none
    of its old locks), else of its host name. Only a lock of this machine's tells whether its writer runs."""
    try:
        source = BOOT_ID_FILE.read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        source = ""
    return hashlib.sha256((source or socket.gethostname()).encode()).hexdigest()[:12]


def _new_partial_write(target: Path) -> tuple[Path, BinaryIO, bool]:
    """A new partial write for target, the file open for writing it, and whether it holds its lock (storage's temp
    file, named for this machine and process; one only its age decides on where no lock can be told)."""
    fd, name, locked = new_temp_file(target, _partial_name)
    return Path(name), os.fdopen(fd, "wb"), locked  # write_entry closes it


def _partial_name(target: Path) -> str:
    """The name of a new partial write of target: this machine's key, this process and 8 random hex digits."""
    return f".{target.name}.{host_key()}-pid{os.getpid()}-{secrets.token_hex(4)}.tmp"


def partial_writes(directory: Path) -> list[PartialWrite]:
    """Every partial write in the cache folder, most recently written first, each with whether its writer runs."""
    return sorted(_sweep(directory, quiet_s=None).kept, key=lambda p: p.last_written, reverse=True)


def sweep_partial_writes(directory: Path, quiet_s: float = STALE_TEMP_S) -> Swept:
    """Delete the partial writes of stopped runs: those whose writer's lock is free, and where that cannot be told,
    those no write touched for quiet_s; the others are kept, a live run's above all."""
    return _sweep(directory, quiet_s=quiet_s)


def _sweep(directory: Path, *, quiet_s: float | None) -> Swept:
    """The partial writes in directory, those of stopped runs deleted unless quiet_s is None (a listing)."""
    swept = Swept([], [], [])
    with contextlib.suppress(OSError):
        for path in sorted(directory.glob(PARTIAL_PATTERN)):
            with contextlib.suppress(OSError):
                if (looked := _look_at(path, quiet_s)) is not None:
                    found, outcome = looked
                    if isinstance(outcome, OSError):
                        swept.failed.append((found, outcome))
                    else:
                        (swept.deleted if outcome else swept.kept).append(found)
    return swept


def _look_at(path: Path, quiet_s: float | None) -> tuple[PartialWrite, bool | OSError] | None:
    """The partial write at path (None where it is no regular file), and whether it was deleted (the error where it
    could not be): with quiet_s, when a stopped run left it, deleted while the lock taken here is held, so that no new
    write takes it meanwhile."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return None
    named = _LOCKED_NAME.fullmatch(path.name)
    if named is None:  # an older localgen's, or one moved aside (promptcache.remove_found): only its age tells
        found = PartialWrite(path, info.st_size, info.st_mtime, None, None)
        return found, _delete_if(quiet_s is not None and found.left_by_a_stopped_run(quiet_s), path)
    fd = regular_file_descriptor(path, follow_links=False)  # a FIFO renamed over it since would block an open
    if fd is None:
        return None
    try:
        free = try_flock(fd, exclusive=False)  # taken here: its writer holds it no more
        status = os.fstat(fd)
        if free and not still_names(fd, path):
            if not os.path.lexists(path):
                return None  # renamed into its entry's place (or deleted) since it was opened: a partial write no more
            free = None  # a file system whose file identities never agree (some FUSE mounts): its age decides
        here = named.group(1) == host_key()
        if free and not here:  # its machine's lock may not reach this one (NFS with local_lock, CIFS nobrl)
            free = None
        found = PartialWrite(path, status.st_size, status.st_mtime, int(named.group(2)),
                             None if free is None else not free, here)
        return found, _delete_if(quiet_s is not None and found.left_by_a_stopped_run(quiet_s), path)
    finally:
        os.close(fd)  # the lock taken here goes with it


def _delete_if(due: bool, path: Path) -> bool | OSError:
    """Delete path where due: whether it was deleted, or the error where it could not be."""
    if not due:
        return False
    error = remove_file(path)
    return True if error is None else error


def remove_file(path: Path) -> OSError | None:
    """Delete a file (one already gone counts as deleted); the error, also logged, when it could not be."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.debug("could not delete %s: %s", path, exc)
        return exc
    return None

