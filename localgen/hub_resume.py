"""Resumable downloads: a file's bytes go to blobs/ETAG.incomplete in the Hugging Face cache, which an interrupted
download (Ctrl-C, a dropped connection, a killed process) leaves behind and the next one continues with an HTTP Range
request; complete and checked against the Hub's checksum, it is renamed to blobs/ETAG (replacing the copy a pull
--force downloads again only then) and linked into the snapshot as huggingface_hub links its own downloads, from the
commit and file name known already (hf_hub_download would ask the Hub about the file again first). huggingface_hub's
lock on the blob keeps two downloads from writing one partial file at once, and is held until the pull has checked
the model it is of, so that a `models rm` waiting on it removes the model whole, after the pull.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from localgen import console, download_progress, lock_activity
from localgen.errors import HubError, LocalgenError
from localgen.hub_cache import (
    LOCKS_HELD_HERE,
    blob_lock_path,
    blob_of,
    blobs_dir,
    hub_cache_dir,
    partial_path,
    pointer_path,
    repo_folder,
)
from localgen.hub_settings import hub_endpoint
from localgen.hub_verify import ChecksumMismatch, check_checksum
from localgen.storage import atomic_write_text, fsync_file, fsync_folder
from localgen.units import binary_size

T = TypeVar("T")

if TYPE_CHECKING:
    from localgen.download_progress import Display
    from localgen.hub_types import HubFile


DOWNLOAD_PIECE = 1024 * 1024  # the bytes a download reads, counts on its progress bar and writes at a time
FOLDER_TRIES = 5  # a folder a download writes into that a models rm beside it prunes (empty) is made again so often
_HELD_BY_THREAD: dict[Path, int] = {}  # the blob locks this process holds, each with the thread that took it
NO_COPY = (0, 0)  # the (device, inode) a pull --force that found no copy to replace gives as the one it replaces
OUT_OF_ORDER_WAIT_S = 0.5  # a lock sorting before one held is waited on this long before those held are let go


def resumable(f: HubFile) -> bool:
    """True when localgen fetches the file itself, resumably, over plain HTTP: huggingface_hub's own plain download
    refuses a file over its MAX_HTTP_DOWNLOAD_SIZE (50 GB: not served so, it says), which hf_hub_download fetches
    through Xet instead."""
    from huggingface_hub import constants

    return f.size <= constants.MAX_HTTP_DOWNLOAD_SIZE


@dataclass
class PartClaim:
    """Whether this download holds the blob's lock and writes its partial copy (not one waiting on another's)."""

    writing: bool = False


@dataclass(frozen=True)
class Fetched:
    """A blob downloaded and checked: the bytes received now, the sha256 they were checked to have (None where the
    snapshot entry is not the file checked, whose bytes must be hashed), that file's (device, inode), whether a
    download that stopped before checking them had received them all, and the seconds spent receiving them."""

    received: int
    sha256: str | None
    file_id: tuple[int, int]
    received_before: bool = False
    seconds: float = 0.0


def fetch_blob(repo: str, revision: str, f: HubFile, etag: str, *, force: bool, display: Display,
               claim: PartClaim, locks: contextlib.ExitStack, replaced: tuple[int, int] | None = None,
               waited_on: lock_activity.Holder | None = None) -> Fetched | None:
    """Download a file into blobs/etag unless it is there (force: even so), then link it into the snapshot at the
    commit, with no request to the Hub beyond the download's; the blob's lock, entered into locks, is held until they
    close (the pull has checked its model). None when the blob was there once the lock was taken (cached, or another
    download finished it while this one waited). claim.writing says, should it stop, whether the partial copy is this
    download's; the sha256 checked is given only where the entry is the blob checked. replaced: the (device, inode)
    of the copy force replaces (NO_COPY: none was there), which another download, waited on, replacing it meanwhile
    spares fetching again, as does another pull or run (waited_on: the holder of the lock as the wait began) that
    found it there, linked it and checked it meanwhile."""
    blobs, lock = blobs_dir(repo), blob_lock_path(repo, etag)
    lock.parent.mkdir(parents=True, exist_ok=True)
    locks.enter_context(blob_lock(lock))  # blobs/ is made under it, as the partial copy is opened: _open_partial
    fetched = None
    if force and replaced is not None and file_id(blobs / etag) not in (replaced, None):
        force = False  # another pull --force's download, waited on, replaced it: once is enough
    elif force and replaced is not None and _fetched_by(waited_on) and (blobs / etag).is_file():
        force = False  # another pull or run found it there, linked it and checked it as this one waited
    if force or not (blobs / etag).is_file():
        claim.writing = True
        fetched = _download(repo, revision, f, etag, fresh=force, display=display)
        lock_activity.downloaded(lock)
    else:
        lock_activity.took(lock, "checking")  # found there: linked and checked, which a process waiting on it says
    pointer = pointer_path(repo, revision, f.filename)
    link_into_snapshot(pointer, blobs / etag, new_blob=fetched is not None)
    if fetched is not None and file_id(pointer) != fetched.file_id:
        return replace(fetched, sha256=None)
    return fetched


def _fetched_by(holder: lock_activity.Holder | None) -> bool:
    """Whether the holder of a blob's lock waited on fetches the blob for its model (a pull or a run, which holds the
    lock until the model is checked, and the blob is there then only where it was checked), not removes it."""
    return holder is not None and holder.doing != "removing"


class LockOutOfOrder(Exception):
    """Another process holds the lock of a blob that sorts before one this thread holds: waiting on it could wait for
    good on a pull that waits on this one's (two models sharing blobs, their shards in opposite order)."""

    def __init__(self, lock: Path) -> None:
        super().__init__(str(lock))
        self.lock = lock


def waits_on_no_pull(lock: Path) -> bool:
    """Whether the process holding a blob's lock is a models rm removing its model, whose own wait on a lock is
    bounded: waiting on it, even holding a lock it waits on, waits on no pull."""
    holder = lock_activity.holder(lock)
    return holder is not None and holder.doing == "removing"


def must_back_off(lock: Path) -> bool:
    """Whether this thread, finding another process holding a blob's lock, lets go of the locks it holds rather than
    wait on it: it sorts before one of them, and its holder is no models rm."""
    return _sorts_before_held(lock) and not waits_on_no_pull(lock)


def _sorts_before_held(lock: Path) -> bool:
    """Whether a blob's lock sorts before one this thread holds: waiting on it for good could wait on a pull that waits
    on this one's (two models sharing blobs, their shards in opposite order)."""
    return any(held > lock for held in blob_locks_held())


def blob_locks_held() -> list[Path]:
    """The blob locks this thread holds, in the one order they are waited on in: by path."""
    return sorted(lock for lock, thread in _HELD_BY_THREAD.items() if thread == threading.get_ident())


@contextlib.contextmanager
def blob_lock(lock: Path) -> Iterator[None]:
    """huggingface_hub's lock on a blob, held while the block runs, unless this thread holds it already (two files of a
    model with the same bytes, a file fetched again as its pull ends), which flock on a second descriptor would wait
    on for good. A lock that sorts before one this thread holds is waited on OUT_OF_ORDER_WAIT_S at most, then
    LockOutOfOrder raised, and one a models rm holds (its own wait bounded) is waited on so long at a time until rm
    lets go, LockOutOfOrder raised as soon as another holds it: a thread waits for good only on a lock that sorts after
    every one it holds."""
    from filelock import Timeout
    from huggingface_hub.utils import WeakFileLock

    if _HELD_BY_THREAD.get(lock) == threading.get_ident():
        yield
        return
    later = _sorts_before_held(lock)
    with contextlib.ExitStack() as taken:
        while True:  # a models rm's lock is waited on in bounded waits, its holder looked at again after each
            try:
                taken.enter_context(WeakFileLock(lock, timeout=OUT_OF_ORDER_WAIT_S if later else None))
                break
            except Timeout as exc:
                if must_back_off(lock):  # rm let go of it and a pull took it: that pull may wait on ours
                    raise LockOutOfOrder(lock) from exc
        _HELD_BY_THREAD[lock] = threading.get_ident()
        LOCKS_HELD_HERE.add(lock)  # its own checks (a replaced copy's folder pruned) take it for no download's
        lock_activity.took(lock)
        try:
            yield
        finally:
            lock_activity.letting_go(lock)
            LOCKS_HELD_HERE.discard(lock)
            del _HELD_BY_THREAD[lock]


def file_id(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of the file a path leads to, or None where it leads to none."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _download(repo: str, revision: str, f: HubFile, etag: str, *, fresh: bool, display: Display) -> Fetched:
    """Download a file into blobs/etag, continuing the partial copy an earlier download left (fresh: from the start),
    and check it against the Hub's checksum before it replaces a copy there (a pull --force's): a copy that fails is
    deleted and the one there kept."""
    blobs = blobs_dir(repo)
    partial = partial_path(repo, etag)
    there = (blobs / etag).is_file() or pointer_path(repo, revision, f.filename).is_file()  # what force replaces
    try:
        with _opened(partial, fresh=fresh, size=f.size) as handle:
            received_before = 0 < f.size == handle.tell()  # a download stopped as it checked them: nothing to get
            started = time.monotonic()
            received = 0 if received_before else _get(repo, revision, f, handle, display)
            seconds = time.monotonic() - started  # the speed said is of the bytes fetched, never of waits or checks
            fsync_file(handle)  # the verification marker, written durably next, must not outlive these bytes
        sha256 = check_checksum(partial, f, display)
    except ChecksumMismatch as exc:  # another checksum than the listing's, or a body longer than the listing says
        raise _discarded(partial, exc, there=there) from exc.__cause__
    except BaseException:
        with contextlib.suppress(OSError):
            if partial.stat().st_size == 0 or (blobs / etag).is_file():
                partial.unlink()  # nothing received, or a copy there that the next pull takes: nothing to resume
        raise
    os.replace(partial, blobs / etag)
    fsync_folder(blobs)
    status = (blobs / etag).stat()
    return Fetched(received, sha256, (status.st_dev, status.st_ino), received_before, seconds)


def link_into_snapshot(pointer: Path, blob: Path, *, new_blob: bool) -> None:
    """Make a snapshot entry lead to its blob as huggingface_hub lays out its cache (snapshots/COMMIT/FILE ->
    ../../blobs/ETAG), by its own function and without asking the Hub anything; where the cache cannot hold symlinks,
    the entry is the blob's data (the blob moved there when new_blob, else a copy)."""
    from huggingface_hub.file_download import _create_cachedir_tag, _create_symlink

    if pointer.is_symlink() and blob_of(pointer) == blob:
        return
    in_made_folder(pointer.parent, lambda: _create_symlink(str(blob), str(pointer), new_blob=new_blob),  # replaces
                   source=blob)  # what the entry was: a link, or a copy
    _create_cachedir_tag(hub_cache_dir())  # as hf_hub_download tags the cache for backup tools to skip


def note_main_commit(repo: str, commit: str) -> None:
    """Write refs/main in the repo's folder as the commit of main the files were linked from, as hf_hub_download notes
    a branch's commit (the hash, no newline), so that huggingface_hub's offline lookup of main finds that commit and
    no refs/* file names the copy it replaces; one already saying so, or a cache that cannot be written, is left."""
    ref = hub_cache_dir() / repo_folder(repo) / "refs" / "main"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if ref.read_text(encoding="utf-8") == commit:
            return
    with contextlib.suppress(OSError, LocalgenError):  # a read-only cache: the cached files are used all the same
        atomic_write_text(ref, commit, mode=0o644)


def _discarded(partial: Path, exc: ChecksumMismatch, *, there: bool) -> ChecksumMismatch:
    """A partial copy that is not the file the Hub lists, deleted: the error, saying so (there: and that the copy
    there is kept)."""
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)
    exc.message += "; the corrupt download was deleted" + ("; the copy that was there is kept" if there else "")
    return exc


@contextlib.contextmanager
def _opened(partial: Path, *, fresh: bool, size: int) -> Iterator[BinaryIO]:
    """The partial copy, opened for writing at its end (emptied first when fresh, or when longer than the file)."""
    with _open_partial(partial) as handle:
        if fresh or handle.seek(0, os.SEEK_END) > size:
            handle.seek(0)
            handle.truncate()
        yield handle


def _open_partial(partial: Path) -> BinaryIO:
    """The partial copy opened for reading and writing, made with its folder where missing (in_made_folder: a models
    rm of another of the repo's files removes blobs/ once empty, but not while a download holds its lock)."""
    return in_made_folder(partial.parent, lambda: _made_and_opened(partial))


def _made_and_opened(partial: Path) -> BinaryIO:
    """The partial copy, made where missing, opened for reading and writing."""
    partial.touch()
    return partial.open("r+b")  # by its path: huggingface_hub may hand handle.name to another downloader


def in_made_folder(folder: Path, write: Callable[[], T], *, source: Path | None = None) -> T:
    """write()'s result, folder made before it, and made again where a models rm beside this download pruned it
    (empty) meanwhile, up to FOLDER_TRIES times; source: a file write reads, whose loss is no prune's."""
    for tries_left in reversed(range(FOLDER_TRIES)):
        folder.mkdir(parents=True, exist_ok=True)
        try:
            return write()
        except FileNotFoundError as exc:
            if source is not None and not source.exists():
                raise
            if not tries_left:
                raise HubError(f"{folder} was removed {FOLDER_TRIES} times as this download wrote into it",
                               hint="let the `localgen models rm` of its repo's other files end, then pull "
                                    "again") from exc
    raise AssertionError("unreachable")


def _get(repo: str, revision: str, f: HubFile, handle: BinaryIO, display: Display) -> int:
    """GET the rest of the file (a Range request from handle's position) and append it; huggingface_hub's http_get
    retries a dropped connection from where it stopped, and starts over where the server sends the whole file, as
    this does where it refuses the Range (HTTP 416: its file ends at or before the part's end). The bytes received."""
    from huggingface_hub import hf_hub_url

    done = handle.tell()
    what = f"{repo}/{f.filename}"
    if done:
        display.say(f"localgen: resuming {what} at {binary_size(done)} of {binary_size(f.size)}")
    restarted: list[bool] = []
    url = hf_hub_url(repo, f.filename, revision=revision, endpoint=hub_endpoint())
    try:
        with _read_in_pieces_of(DOWNLOAD_PIECE):
            try:
                _http_get(url, f, handle, done, _bar(display, done, what, restarted))
            except Exception as exc:
                if not done or getattr(getattr(exc, "response", None), "status_code", None) != 416:
                    raise
                display.say(console.one_line(f"localgen: {hub_endpoint()} refused to resume {what} at "
                                             f"{binary_size(done)} (HTTP 416); downloading it from the start"))
                restarted.append(True)
                handle.seek(0)
                handle.truncate()
                _http_get(url, f, handle, 0, _bar(display, 0, what, restarted))
    except OSError as exc:
        if "Consistency check failed" not in str(exc):  # the body ended whole, of another size than the listing's
            raise
        raise _size_error(what, f.size, handle.tell(), 0 if restarted else done) from exc
    return f.size if restarted else f.size - done


def _http_get(url: str, f: HubFile, handle: BinaryIO, done: int, bar: type) -> None:
    """huggingface_hub's http_get of the file from byte done on (a Range request where done > 0), into handle."""
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    http_get(url, handle, resume_size=done, headers=build_hf_headers(), expected_size=f.size,
             displayed_filename=f.name, tqdm_class=bar)


def _size_error(what: str, size: int, ended_at: int, resumed_at: int) -> ChecksumMismatch:
    """The error for a body that ended whole at another size than the listing's (at ended_at bytes of the part, whose
    first resumed_at bytes an earlier download received): httpx refuses a body cut short of its own Content-Length, so
    it ended where the server's file does, and the part (deleted, as a ChecksumMismatch's) is none that a pull from
    that server could complete."""
    sent = f"it sent {ended_at - resumed_at:,} bytes" + (
        f" after the {resumed_at:,} received before" if resumed_at else "")
    return ChecksumMismatch(f"{what}: {hub_endpoint()} serves a file of {ended_at:,} bytes ({sent}), and its listing "
                            f"says {size:,}", hint=f"run the command again; if it fails again, the Hub mirror or a "
                                                   f"proxy ({hub_endpoint()}) is serving bad data")


@contextlib.contextmanager
def _read_in_pieces_of(size: int) -> Iterator[None]:
    """Have huggingface_hub's http_get read, count and write a file's bytes in pieces of this size, not its own 10
    MiB, which on a slow network held the progress bar at 0 B for a minute and lost up to 10 MiB to a Ctrl-C."""
    from huggingface_hub import constants

    saved = constants.DOWNLOAD_CHUNK_SIZE
    constants.DOWNLOAD_CHUNK_SIZE = size
    try:
        yield
    finally:
        constants.DOWNLOAD_CHUNK_SIZE = saved


def _bar(display: Display, resumed: int, what: str, restarted: list[bool]) -> type:
    """download_progress's tqdm adapter, which says (and notes in restarted) when the server sent the whole file
    rather than the rest: to the first request (a bar opened at 0), or to a retry after a dropped connection (the bar
    set back by what it had counted)."""
    base: Any = download_progress.tqdm_adapter(display)

    def starting_over() -> None:
        if not restarted:
            restarted.append(True)
            display.say(console.one_line(f"localgen: {hub_endpoint()} sent the whole of {what} rather than the rest; "
                                         "downloading it from the start"))

    class Bar(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if resumed and not kwargs.get("initial"):
                starting_over()
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> None:
            """n more bytes, or fewer (n < 0) where http_get starts over."""
            if (n or 0) < 0:
                starting_over()
            super().update(n)

    return Bar
