"""The lock a run holds on each blob of the Hub model it loads (.locks/models--ORG--NAME/ETAG.lock.loading, beside
huggingface_hub's ETAG.lock), from the moment the model is resolved until llama.cpp has opened it: shared, so that runs
of one model never wait on one another, and taken exclusively by a `models rm` (or a pull removing the copy the Hub's
newer one replaced) before it deletes the blob, which thus waits on a load (2 s at most) and then refuses the model
(its file removed then would fail the load). Once llama.cpp has the file open (mapped), a removed file stays readable
until the run ends, on Linux and macOS; Windows has no flock, and a file open there cannot be deleted."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from localgen.file_locks import HAS_FLOCK, lock_holder, locked_descriptor, try_flock

LOADING_SUFFIX = ".loading"
REMOVAL_WAIT_S = 10.0  # a run waits this long at most on a models rm holding a blob's loading lock (rm's own wait
# is 2 s, then it deletes); past it (an rm stopped with Ctrl-Z), it goes on without the lock
POLL_S = 0.01
LOCK_FILE_MODE = 0o664  # as huggingface_hub makes its lock files: other users sharing the cache take them too


def loading_lock_path(blob_lock: Path) -> Path:
    """The loading lock beside a blob's huggingface_hub lock file (ETAG.lock -> ETAG.lock.loading)."""
    return blob_lock.with_name(blob_lock.name + LOADING_SUFFIX)


def open_lock_file(lock: Path) -> int | None:
    """A descriptor of a lock file, made (with its folder) where missing; None where it cannot be opened."""
    try:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOCK_FILE_MODE)
        except FileNotFoundError:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOCK_FILE_MODE)
    except FileExistsError:
        try:
            return os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.fchmod(fd, LOCK_FILE_MODE)  # past the umask
    return fd


def blob_loading_lock(entry: Path) -> Path | None:
    """The loading lock of the blob a Hub cache snapshot entry (models--ORG--NAME/snapshots/COMMIT/FILE) links to;
    None for any other file (a file of the user's, the bundled model) or an entry that is no link."""
    repo_dir = _repo_folder(entry)
    if repo_dir is None:
        return None
    try:
        blob = os.path.basename(os.readlink(entry))
    except OSError:
        return None
    return loading_lock_path(repo_dir.parent / ".locks" / repo_dir.name / f"{blob}.lock")


def _repo_folder(entry: Path) -> Path | None:
    """The Hub cache repo folder (models--ORG--NAME) of a snapshot entry; None for a file outside one."""
    repo_dir = next((folder.parent for folder in entry.parents if folder.name == "snapshots"), None)
    return repo_dir if repo_dir is not None and repo_dir.name.startswith("models--") else None


@contextlib.contextmanager
def held_for_loading(files: Sequence[Path]) -> Iterator[bool]:
    """Hold the loading lock of the blob of each of a model's files that is a Hub cache entry while the block runs
    (shared; a models rm holding one is waited on up to REMOVAL_WAIT_S); the block gets whether each of those files
    is still there once they are held (False: a models rm removed it after the model was resolved)."""
    entries = [entry for entry in files if _repo_folder(entry) is not None]
    with contextlib.ExitStack() as held:
        for lock in sorted({lock for entry in entries if (lock := blob_loading_lock(entry))}) if HAS_FLOCK else ():
            fd = _shared(lock)
            if fd is not None:
                held.callback(os.close, fd)
        yield all(os.path.exists(entry) for entry in entries)


def _shared(lock: Path) -> int | None:
    """A descriptor of the lock file with this process's shared lock on it, once no models rm holds it (waited on up
    to REMOVAL_WAIT_S); None where it cannot be taken."""
    fd = open_lock_file(lock)
    if fd is None:
        return None
    deadline = time.monotonic() + REMOVAL_WAIT_S
    while (taken := try_flock(fd, exclusive=False)) is False and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if taken:
        return fd
    os.close(fd)
    return None


def taken_for_removal(locks: Iterable[Path], deadline: float) -> tuple[list[int], int | None, bool]:
    """Take each of these loading locks exclusively (as a models rm, or a pull removing the copy it replaced, does
    before it deletes their blobs), waiting on runs loading them until deadline (time.monotonic's): the descriptors
    holding those taken, a run still holding one then (None where the system does not tell it), and whether any run
    did; a lock that cannot be taken or tested is gone ahead without."""
    taken: list[int] = []
    loader, loading = None, False
    try:
        for lock in sorted(set(locks)) if HAS_FLOCK else ():
            seen: list[bool] = []
            fd = locked_descriptor(lock, functools.partial(open_lock_file, lock), poll_s=POLL_S,
                                   wait_s=max(deadline - time.monotonic(), 0.0),
                                   on_held=functools.partial(seen.append, True))
            if fd is not None:
                taken.append(fd)
            elif seen:
                loading, loader = True, loader or lock_holder(lock)
    except BaseException:
        for fd in taken:
            os.close(fd)
        raise
    return taken, loader, loading
