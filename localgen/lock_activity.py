"""What a process holding blob locks does with the model they are of (downloading it, checking it, loading it into
llama.cpp, removing it), written beside each lock (ETAG.lock.doing: its process id and that word) for the commands
that find the lock held to say so: a `models rm` refusing the model, a pull waiting on it. A record is read only while
the process it names holds the lock: one a killed process left is no one's."""

from __future__ import annotations

import contextlib
import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from localgen.file_locks import holders_told, lock_holder, process_running, try_flock

Doing = Literal["downloading", "checking", "loading", "removing"]
_HELD: dict[Path, Doing] = {}  # the blob locks this process holds, each with what it does with them now
_DOWNLOADED: set[Path] = set()  # the locks of the blobs this process downloaded (not found there and linked)
LINKED = "linked"  # the word after a record's doing where the process found the blob there, another's download


@dataclass(frozen=True)
class Holder:
    """The process holding a blob's lock (None where the system does not tell it), what it does with its model, and
    whether it downloaded the blob (not found it there, another's download, and linked it)."""

    pid: int | None
    doing: Doing
    downloaded: bool = True

    @property
    def who(self) -> str:
        """The process, as messages name it."""
        return f"process {self.pid}" if self.pid else "another process"

    @property
    def done_downloading(self) -> bool:
        """Whether its download ended: it checks, loads or removes the model, writing none of it."""
        return self.doing != "downloading"

    @property
    def told(self) -> tuple[str, int | None, bool]:
        """What messages say of it: which process, where they name it (not a download's), and what it does."""
        return self.doing, self.pid if self.done_downloading else None, self.downloaded


def record_path(lock: Path) -> Path:
    """Where the holder of a blob's lock file records what it does."""
    return lock.with_name(lock.name + ".doing")


def took(lock: Path, doing: Doing = "downloading") -> None:
    """Note that this process took a blob's lock to do this (a download takes it to fetch the blob)."""
    _HELD[lock] = doing
    _write(lock, doing)


def downloaded(lock: Path) -> None:
    """Note that this process downloaded the blob whose lock it holds (rather than finding it there)."""
    _DOWNLOADED.add(lock)


def letting_go(lock: Path) -> None:
    """Delete this process's record of a blob's lock it is about to let go of (while it holds it: none other wrote
    one since)."""
    if _HELD.pop(lock, None) is not None:
        with contextlib.suppress(OSError):
            record_path(lock).unlink()


def now_doing(doing: Doing) -> None:
    """Record that this process does this now with the model whose blob locks it holds (checking it, loading it)."""
    for lock in _HELD:
        _HELD[lock] = doing
        _write(lock, doing)


def holder(lock: Path) -> Holder | None:
    """The process holding a blob's lock and what it recorded doing; None where none holds it or none recorded it
    (another program's download, an older localgen) or the record is another process's."""
    try:
        pid_text, doing, *more = record_path(lock).read_text(encoding="ascii").split()
        pid = int(pid_text)
    except (OSError, ValueError, UnicodeError):
        return None
    if pid <= 0 or doing not in get_args(Doing) or more not in ([], [LINKED]) or not _held_by(lock, pid):
        return None
    return Holder(pid=pid, doing=doing, downloaded=not more)  # type: ignore[arg-type]


def _held_by(lock: Path, pid: int) -> bool:
    """Whether process pid holds the lock: as the system tells the holder, else where one does and pid runs (False
    where the system tells holders but not this one's: none holds it, or one in another pid namespace, whose pid means
    nothing here; and on Windows, where os.kill(pid, 0) would send pid a Ctrl-C)."""
    known = lock_holder(lock)
    if known is not None:
        return known == pid
    if os.name == "nt" or holders_told() or not process_running(pid):
        return False
    try:
        with open(lock, "rb") as handle:
            return try_flock(handle.fileno()) is False  # released on close
    except OSError:
        return False


def _write(lock: Path, doing: Doing) -> None:
    """Replace the record of a lock this process holds (best effort: a cache it cannot write keeps none), deleting the
    temporary records beside it that holders killed as they wrote them left (only the lock's holder writes one)."""
    record = record_path(lock)
    temporary = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    for left in record.parent.glob(f"{glob.escape(record.name)}.*.tmp"):
        if left != temporary:
            with contextlib.suppress(OSError):
                left.unlink()
    with contextlib.suppress(OSError):
        linked = f" {LINKED}" if doing in ("checking", "loading") and lock not in _DOWNLOADED else ""
        temporary.write_text(f"{os.getpid()} {doing}{linked}\n", encoding="ascii")
        os.replace(temporary, record)
