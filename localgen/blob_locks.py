"""huggingface_hub's locks on a repo's blobs (.locks/models--ORG--NAME/ETAG.lock) as `models rm` takes them: held while
it deletes a model, so that no download writes or links one of its files meanwhile (a pull holds the lock of each
blob it downloaded or linked until it has checked the model they are of). The lock files and their folder stay, as
huggingface_hub's own cache deletion (`hf cache rm`) leaves them: filelock 3.x, waiting on a lock, opens a lock file
it found there without making it again, and fails where it was deleted meanwhile. The loading lock beside each
(load_locks.py), which a run holds shared until llama.cpp has the model open, is taken too for each link that goes
(load_locks.loading_locks_of_links), within the same wait."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from localgen import hub_cache, lock_activity
from localgen.file_locks import HAS_FLOCK, lock_holder, locked_descriptor
from localgen.load_locks import Loader, open_lock_file, taken_for_removal

HELD_WAIT_S = 2.0  # the locks held with no part written (a pull checking the model it fetched, or one about to write)
# are waited for this long, all together; one still held then is gone ahead without (a process that holds it longer and
# writes nothing is no download), but where its holder records checking or loading the model: downloads_under_way.py
LOCK_POLL_S = 0.01


@dataclass
class Waited:
    """The blobs whose locks another process held as a repo's blob locks were taken (waited for), those of them still
    held once the wait ran out and when looked at again once the others were taken (gone ahead without), and the
    process that held the first where known; and the run still loading the model once the wait ran out, where one did
    (load_locks.py)."""

    blobs: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    holder: int | None = None
    loader: Loader | None = None

    @property
    def waited(self) -> bool:
        """Whether any lock was waited for, or a run loads the model still."""
        return bool(self.blobs) or self.loader is not None


@contextlib.contextmanager
def holding_blob_locks(repo: str, blobs: Collection[str], *, refuse: Callable[[], None],
                       loading: Collection[Path] = ()) -> Iterator[Waited]:
    """Hold the lock of each of a repo's blobs (as the cache spells the repo), and these loading locks (runs loading the
    model are waited on within the same wait), while the block runs; the lock files stay. A lock another process holds
    is waited for (refuse, called after each try, raises where a download writes a part now); one that cannot be taken
    or tested (no flock, an unwritable cache) is gone ahead without. The block gets whether any was waited for."""
    held: dict[Path, int] = {}
    loads: list[int] = []  # the loading locks' descriptors
    waited = Waited()
    deadline = time.monotonic() + HELD_WAIT_S  # one wait for them all: a split model's shards held by a run loading
    try:  # it are not waited on one after the other
        for blob in sorted(blobs) if HAS_FLOCK else ():
            lock = hub_cache.blob_lock_path(repo, blob)
            fd = _taken(lock, refuse, waited, max(deadline - time.monotonic(), 0.0))
            if fd is None and blob in waited.blobs:
                waited.given_up.append(blob)
            if fd is not None:
                held[lock] = fd
                hub_cache.LOCKS_HELD_HERE.add(lock)  # this process's own checks take it for no download's
                lock_activity.took(lock, "removing")
        for blob in list(waited.given_up):  # let go since rm gave up on it (a pull that ended): taken after all
            lock = hub_cache.blob_lock_path(repo, blob)
            fd = locked_descriptor(lock, functools.partial(_opened, lock), wait_s=0.0, poll_s=LOCK_POLL_S)
            if fd is not None:
                waited.given_up.remove(blob)
                held[lock] = fd
                hub_cache.LOCKS_HELD_HERE.add(lock)
                lock_activity.took(lock, "removing")
        loads += _loading_locks_taken(loading, waited, deadline) if HAS_FLOCK else []
        yield waited
    finally:
        for lock, fd in held.items():
            lock_activity.letting_go(lock)
            hub_cache.LOCKS_HELD_HERE.discard(lock)
            os.close(fd)
        for fd in loads:
            os.close(fd)


def _loading_locks_taken(locks: Collection[Path], waited: Waited, deadline: float) -> list[int]:
    """Take these loading locks (load_locks.py) within the wait that ends at deadline: the descriptors holding them;
    a run still loading one then is noted in waited."""
    taken, waited.loader = taken_for_removal(locks, deadline)
    return taken


def _taken(lock: Path, refuse: Callable[[], None], waited: Waited, wait_s: float) -> int | None:
    """The lock file lock, opened (made where missing) and locked by this process: waited for while another process
    holds it (noted in waited), refuse called after each try, the last too; None where it cannot be taken or tested,
    or is still held after wait_s seconds."""

    def held() -> None:
        """Note the process holding lock, then refuse (after the last try too: a download that began writing as rm
        gave up is refused all the same)."""
        if not waited.waited:
            waited.holder = lock_holder(lock)
        if lock.stem not in waited.blobs:
            waited.blobs.append(lock.stem)
        refuse()

    return locked_descriptor(lock, lambda: _opened(lock), wait_s=wait_s, poll_s=LOCK_POLL_S, on_held=held)


def _opened(lock: Path) -> int | None:
    """A descriptor of the lock file, made (with its folder) where missing; None where it cannot be opened."""
    return open_lock_file(lock)
