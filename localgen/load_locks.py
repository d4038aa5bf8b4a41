"""The lock a run holds on each blob of the Hub model it loads (.locks/models--ORG--NAME/ETAG.lock.loading, beside
huggingface_hub's ETAG.lock), from the moment the model is resolved until llama.cpp has opened it: shared, so that runs
of one model never wait on one another, and taken exclusively by a `models rm` (or a pull removing the copy the Hub's
newer one replaced) before it deletes any link to the blob, which thus waits on a load (2 s at most) and then refuses
the model (its file removed then would fail the load). Once llama.cpp has the file open (mapped), a removed file stays
readable until the run ends, on Linux and macOS; Windows has no flock, and a file open there cannot be deleted. A run
holding a lock records beside it the snapshot entry it loads the blob through (ETAG.lock.loading.PID: COMMIT/FILE), for
a models rm refused for it to say which model the run loads."""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from localgen import hub_cache, lock_activity
from localgen.file_locks import HAS_FLOCK, lock_holder, locked_descriptor, try_flock
from localgen.hub_settings import cache_place

LOADING_SUFFIX = ".loading"
REMOVAL_WAIT_S = 10.0  # a run waits this long at most, all its model's locks together, on a models rm holding them
# (rm's own wait is 2 s, then it deletes); past it (an rm stopped with Ctrl-Z), it goes on without the locks
WAIT_SAID_S = 0.5  # a run waiting on a models rm longer than this says so, once
POLL_S = 0.01
LOCK_FILE_MODE = 0o664  # as huggingface_hub makes its lock files: other users sharing the cache take them too
LINK_HOPS = 40  # links followed at most from a model file to the cache blob it leads to (the system's own limit)
_READ_ONLY_CACHE = (errno.EACCES, errno.EPERM, errno.EROFS)  # a lock file that cannot be opened for writing


def loading_lock_path(blob_lock: Path) -> Path:
    """The loading lock beside a blob's huggingface_hub lock file (ETAG.lock -> ETAG.lock.loading)."""
    return blob_lock.with_name(blob_lock.name + LOADING_SUFFIX)


def blob_loading_lock(repo: str, blob: str) -> Path:
    """The loading lock of one of a repo's blobs (the repo as the cache spells it): the one path runs, rm and pull
    all take it by."""
    return loading_lock_path(hub_cache.blob_lock_path(repo, blob))


def link_loading_lock(repo: str, link: Path) -> Path:
    """The loading lock of a repo's snapshot entry that is a link: that of the file it links to, by its name (a blob,
    or a file of the user's the cache links to): the one lock a run through the entry and an rm or pull deleting it
    both take."""
    return blob_loading_lock(repo, hub_cache.blob_of(link).name)


def loading_locks_of_links(repo: str, links: Iterable[Path]) -> list[Path]:
    """The loading locks that removing these snapshot entries of a repo takes first: that of the blob each link leads
    to, whether the blob goes with it or another entry keeps it. A run locks the blob whichever link it came through
    and loads the very link it resolved, which must not go as it loads; so a run of another model whose link leads to
    the same blob (two quants of the same bytes) is waited on and refused for too, as a lock per blob cannot tell
    them apart (the record the run keeps beside the lock says which it loads)."""
    return sorted({link_loading_lock(repo, link) for link in links if link.is_symlink()})


def open_lock_file(lock: Path) -> int | None:
    """A descriptor of a lock file, made (with its folder) where missing, open for writing where it may be (an
    exclusive lock needs it on NFS, where flock is fcntl's), else read-only (a read-only cache); None where it cannot
    be opened."""
    try:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOCK_FILE_MODE)
        except FileNotFoundError:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOCK_FILE_MODE)
    except FileExistsError:
        return _existing(lock)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.fchmod(fd, LOCK_FILE_MODE)  # past the umask
    return fd


def _existing(lock: Path) -> int | None:
    """A descriptor of a lock file there, read-write, or read-only where writing it is refused; None where neither."""
    try:
        return os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno not in _READ_ONLY_CACHE:
            return None
    try:
        return os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None


def run_loading_lock(model_file: Path) -> Path | None:
    """The loading lock a run of this model file takes: that of the first snapshot entry or blob of this Hub cache
    (the one rm removes from) it is or leads to, through a repo folder moved to another disk and linked back, or a
    link of the user's (to a file or a folder); None for any other file (the bundled model, a file of the user's,
    another cache's)."""
    found = _run_lock_and_entry(model_file)
    return None if found is None else found[0]


def _run_lock_and_entry(model_file: Path) -> tuple[Path, str | None] | None:
    """run_loading_lock's lock, with the snapshot entry (COMMIT/FILE) the run reaches the blob through (None: the
    blob itself)."""
    path = Path(os.path.abspath(model_file))
    for _ in range(LINK_HOPS):
        place = cache_place(path)
        if place is not None and place.is_entry and path.is_symlink():
            return link_loading_lock(place.repo, path), place.entry
        if place is not None and place.is_blob:
            return blob_loading_lock(place.repo, path.name), None
        try:
            path = _link_step(path)
        except OSError:  # no link: a file outside the cache's blobs
            return None
    return None


def loading_record(lock: Path, pid: int) -> Path:
    """Where the run pid holding a loading lock records the snapshot entry it loads the blob through."""
    return lock.with_name(f"{lock.name}.{pid}")


def _recorded(lock: Path, entry: str | None) -> Path | None:
    """Record, beside a loading lock this process holds, the snapshot entry it loads the blob through: the record
    written (None where there is none to write, or it cannot be)."""
    if entry is None:
        return None
    record = loading_record(lock, os.getpid())
    try:
        fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, LOCK_FILE_MODE)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.write(fd, entry.encode("utf-8", "surrogateescape"))
    os.close(fd)
    return record


def _loaded_through(lock: Path, pid: int | None) -> str | None:
    """The snapshot entry (COMMIT/FILE) the run pid recorded loading a lock's blob through; None where it recorded
    none (or pid is not known)."""
    if pid is None:
        return None
    try:
        return loading_record(lock, pid).read_bytes().decode("utf-8", "surrogateescape") or None
    except OSError:
        return None


def _forget(record: Path) -> None:
    """Delete this process's record beside a loading lock it is about to let go of."""
    with contextlib.suppress(OSError):
        record.unlink(missing_ok=True)


def _drop_records(lock: Path) -> None:
    """Delete the records beside a loading lock this process holds exclusively: runs killed as they loaded left them
    (a run deletes its own before it lets go of its lock)."""
    for record in lock.parent.glob(f"{glob.escape(lock.name)}.*"):
        if record.name.removeprefix(f"{lock.name}.").isdigit():
            with contextlib.suppress(OSError):
                record.unlink()


def _link_step(link: Path) -> Path:
    """Where a link leads, one hop: its target taken from the link's folder's real place, as the system takes it (a
    `..` climbs out of the folder a link of the user's leads to, not out of the link's own folder), spelt through the
    folder as named where that is the same file (a repo folder moved to another disk and linked back)."""
    target = os.readlink(link)
    real = Path(os.path.normpath(Path(os.path.realpath(link.parent)) / target))
    named = Path(os.path.normpath(link.parent / target))
    with contextlib.suppress(OSError):
        if named != real and os.path.lexists(named) and os.path.samefile(named, real):
            return named
    return real


def removal_holder(lock: Path) -> str:
    """Who holds a loading lock a run waits on, as the run names it: the process a `models rm` is, where the record
    beside the blob's own lock says it removes it (lock_activity.py), else another localgen process, unnamed (a pull
    removing the copy it replaced, which records nothing)."""
    found = lock_activity.holder(lock.with_name(lock.name.removesuffix(LOADING_SUFFIX)))
    if found is not None and found.doing == "removing" and lock_holder(lock) in (None, found.pid):
        return f"{found.who} (a `localgen models rm` of a model with this file)"
    return "another localgen process (removing or replacing this model's file)"


def _snapshot_entry(path: Path) -> bool:
    """Whether a path names a Hub cache snapshot entry (models--ORG--NAME/snapshots/COMMIT/FILE), there or not."""
    place = cache_place(Path(os.path.abspath(path)))
    return place is not None and place.is_entry


@contextlib.contextmanager
def held_for_loading(files: Sequence[Path], *, waiting: Callable[[Path], None] | None = None) -> Iterator[bool]:
    """Hold the loading lock of the blob of each of a model's files that is in the Hub cache while the block runs
    (shared; a models rm holding them is waited on up to REMOVAL_WAIT_S, all together, waiting called once, with the
    lock waited on, where that lasts past WAIT_SAID_S); the block gets whether each of those files, and each Hub cache
    snapshot entry, is still there once they are held (False: a models rm removed it after the model was resolved)."""
    found = {entry: lock_and_entry for entry in files if (lock_and_entry := _run_lock_and_entry(entry)) is not None}
    locks = dict(sorted(found.values(), key=lambda item: item[0]))  # each lock once, with the entry it is taken for
    started = time.monotonic()
    said = [] if waiting is not None else [True]
    with contextlib.ExitStack() as held:
        for lock, through in locks.items() if HAS_FLOCK else ():
            fd = _shared(lock, started, said, waiting)
            if fd is not None:
                held.callback(os.close, fd)
                if (record := _recorded(lock, through)) is not None:
                    held.callback(_forget, record)  # before the lock is let go
        yield all(os.path.exists(entry) for entry in files if entry in found or _snapshot_entry(entry))


def _shared(lock: Path, started: float, said: list[bool], waiting: Callable[[Path], None] | None) -> int | None:
    """A descriptor of the lock file with this process's shared lock on it, once no models rm holds it (waited on
    until REMOVAL_WAIT_S past started; waiting called where the wait lasts past WAIT_SAID_S and said is empty, which
    it then is no more); None where it cannot be taken."""
    fd = open_lock_file(lock)
    if fd is None:
        return None
    while (taken := try_flock(fd, exclusive=False)) is False and time.monotonic() < started + REMOVAL_WAIT_S:
        if not said and time.monotonic() >= started + WAIT_SAID_S and waiting is not None:
            said.append(True)
            waiting(lock)
        time.sleep(POLL_S)
    if taken:
        return fd
    os.close(fd)
    return None


@dataclass(frozen=True)
class Loader:
    """A run still loading a blob once a removal's wait on it ran out: its process (None where the system does not
    tell it), and the snapshot entry (COMMIT/FILE) it recorded loading the blob through (None where none is known)."""

    pid: int | None
    entry: str | None = None

    @property
    def who(self) -> str:
        """The process, as messages name it."""
        return f"process {self.pid}" if self.pid else "another process"

    @property
    def file(self) -> str | None:
        """The file the run loads, as its snapshot names it (the model it runs), where known."""
        return self.entry.split("/", 1)[1] if self.entry and "/" in self.entry else None


def taken_for_removal(locks: Iterable[Path], deadline: float) -> tuple[list[int], Loader | None]:
    """Take each of these loading locks exclusively (as a models rm, or a pull removing the copy it replaced, does
    before it deletes their blobs), waiting on runs loading them until deadline (time.monotonic's): the descriptors
    holding those taken, and a run still holding one then (None where none did); a lock that cannot be taken or
    tested is gone ahead without."""
    taken: list[int] = []
    loader: Loader | None = None
    try:
        for lock in sorted(set(locks)) if HAS_FLOCK else ():
            seen: list[bool] = []
            fd = locked_descriptor(lock, functools.partial(open_lock_file, lock), poll_s=POLL_S,
                                   wait_s=max(deadline - time.monotonic(), 0.0),
                                   on_held=functools.partial(seen.append, True))
            if fd is not None:
                taken.append(fd)
                _drop_records(lock)
            elif seen and (loader is None or loader.pid is None):
                pid = lock_holder(lock)
                loader = Loader(pid, _loaded_through(lock, pid))
    except BaseException:
        for fd in taken:
            os.close(fd)
        raise
    return taken, loader
