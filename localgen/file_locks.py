"""Advisory file locks (flock) for files that several localgen processes share: taking one without waiting, and
telling whether a locked file is still the one its name leads to."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from localgen.descriptors import same_file

try:
    import fcntl
except ImportError:  # Windows: no flock
    fcntl = None  # type: ignore[assignment]

HAS_FLOCK = fcntl is not None
OPEN_FILES_SPARE = 64  # descriptors left free beside the locks one command holds at once where those open are unknown
# descriptors left free beside those open now and the locks: the one a command opens at a time while it holds them (a
# folder listed, a killed save's temp file tested), a module imported meanwhile, and one to spare
OPEN_FILES_MARGIN = 3
LOST_FILE_TRIES = 5  # a file locked as another took its name is opened again this many times at most

PROBE_NAME = ".probe"  # the empty file in a folder of locks holders_told_in locks a moment, to see /proc/locks tell it

log = logging.getLogger("localgen.locks")

_told_in: dict[Path, bool] = {}  # folder -> whether /proc/locks tells its files' holders (holders_told_in)


def try_flock(fd: int, *, exclusive: bool = True) -> bool | None:
    """Take flock on fd without waiting: True when taken, False when another process holds it, None where this file
    system (or platform) has no locks. The lock goes when fd is closed, or its process ends however it ends."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:  # ENOLCK, EOPNOTSUPP: a file system without locks
        log.debug("no lock on descriptor %d: %s", fd, exc)
        return None
    return True


def still_names(fd: int, path: Path) -> bool:
    """Whether path still names the file open as fd: False where it was deleted or renamed since it was opened, and
    on file systems whose file identities never agree (some FUSE mounts), where a lock on fd guards nothing known."""
    return same_file(fd, path)


def locked_descriptor(path: Path, open_file: Callable[[], int | None], *, wait_s: float, poll_s: float,
                      on_held: Callable[[], None] | None = None) -> int | None:
    """A descriptor open_file opens on path, locked by this process once no other holds it and still the file path
    names, on_held called each time another process is found holding it (the last time too); None where open_file
    gives none, locks cannot be had, another process holds it past wait_s, or the lock was taken LOST_FILE_TRIES
    times on a file path no longer named (deleted and made again meanwhile; on some FUSE mounts, every time)."""
    deadline, lost_files = time.monotonic() + wait_s, 0
    while True:
        fd = open_file()
        if fd is None:
            return None
        taken = try_flock(fd)
        if taken and still_names(fd, path):
            return fd
        os.close(fd)
        lost_files += bool(taken)
        if taken is False and on_held is not None:
            on_held()
        if taken is None or lost_files == LOST_FILE_TRIES or time.monotonic() >= deadline:
            return None
        if taken is False:
            time.sleep(poll_s)


def lock_holder(path: Path) -> int | None:
    """The process that holds flock on the file at path, as Linux's /proc/locks tells it (None where none does, or
    where that cannot be told: another system, or a holder in another pid namespace, which /proc/locks leaves out)."""
    return lock_holders([path]).get(path)


def lock_holders(paths: Iterable[Path]) -> dict[Path, int]:
    """The process holding flock on each of the files at paths that one holds, /proc/locks read once for all (which
    leaves out a holder in another pid namespace); empty where that cannot be told (another system)."""
    ids: dict[str, Path] = {}
    for path in paths:
        with contextlib.suppress(OSError):  # no file: none holds it
            info = os.stat(path)
            ids[f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"] = path
    lines = proc_locks_lines() if ids else None
    if lines is None:
        return {}
    holders: dict[Path, int] = {}
    for fields in (line.split() for line in lines):
        if fields[1:2] == ["FLOCK"] and len(fields) > 5 and fields[5] in ids and fields[4].isdigit():
            holders.setdefault(ids[fields[5]], int(fields[4]))
    return holders


def proc_locks_lines() -> list[str] | None:
    """The lines of Linux's /proc/locks, the locks every process holds; None where it cannot be read."""
    try:
        with open("/proc/locks", encoding="ascii") as table:
            return table.read().splitlines()
    except (OSError, ValueError):
        return None


def process_running(pid: int) -> bool:
    """Whether process pid runs (another user's too); True on Windows, where os.kill(pid, 0) would send it a Ctrl-C."""
    if os.name == "nt":
        return True
    if pid <= 0:  # no process: 0 and below name process groups
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process, running
        return True
    except (OSError, OverflowError):
        return False
    return True


def holders_told() -> bool:
    """Whether this system tells which process holds a file's flock (Linux's /proc/locks, as lock_holder reads it)."""
    return os.path.exists("/proc/locks")


def holders_told_in(folder: Path) -> bool:
    """Whether /proc/locks tells the holders of the files in folder: a shared lock this process takes a moment on its
    probe file (PROBE_NAME, made empty where missing, kept for later checks) shows under the file's own id, which on
    btrfs (a subvolume's device), NFS (its flock seen as a POSIX lock) and some overlayfs mounts it does not; checked
    once per process and folder, a probe that cannot be opened (another user's, a read-only folder) telling not (not
    cached while folder is missing)."""
    if folder not in _told_in:
        if not holders_told():
            return False
        probe = folder / PROBE_NAME
        try:
            fd = _open_probe(probe)
        except OSError:
            if os.path.isdir(folder):
                _told_in[folder] = False
            return False
        try:  # shared: probes of other processes at once take it too, and any holder seen tells the ids match
            _told_in[folder] = bool(try_flock(fd, exclusive=False)) and probe in lock_holders([probe])
        finally:
            os.close(fd)
    return _told_in[folder]


def _open_probe(probe: Path) -> int:
    """A descriptor of the probe file at probe, opened read-only (flock needs no more), made where it is missing."""
    flags = os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(probe, os.O_RDONLY | flags)
    except FileNotFoundError:
        return os.open(probe, os.O_RDONLY | os.O_CREAT | flags, 0o600)


def open_files_spare() -> int:
    """The descriptors to leave free beside the locks one command takes: those this process has open now (as
    /proc/self/fd or /dev/fd lists them, less the one its listing opens) and OPEN_FILES_MARGIN more, or
    OPEN_FILES_SPARE where neither lists them."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(listing)) - 1 + OPEN_FILES_MARGIN
        except OSError:
            continue
    return OPEN_FILES_SPARE


def room_for_locks(count: int) -> tuple[int, str, int] | None:
    """Make room for count locks held at once, raising this process's soft limit of open files (ulimit -n) toward its
    hard one (ulimit -Hn, which only root raises) where it is too low; None where they fit, else the limit they do not
    fit in, the shell command that prints it and how many locks do fit in it (0 or more)."""
    try:
        import resource
    except ImportError:  # Windows: no flock, no lock files held
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    spare = open_files_spare()
    needed = count + spare
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return None
    raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    except (ValueError, OSError):
        return soft, "ulimit -n", max(soft - spare, 0)
    return None if needed <= raised else (raised, "ulimit -Hn", max(raised - spare, 0))
