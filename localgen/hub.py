"""Hugging Face Hub downloads: list a repo's GGUF files, choose a model, download it into the cache and verify it.

This module, hub_listing.py, hub_range.py, hub_resume.py and hub_errors.py are the only ones that talk to the Hub;
they import huggingface_hub inside functions so that importing localgen (and `localgen --help`) stays fast. Asking
the Hub for a repo's files is hub_listing.py's; a file's bytes are fetched by hub_resume.py, which resumes a download
stopped part way; where files and localgen's records of them live, and finding a model there without the network, is
hub_cache.py's; choosing a model's files is hub_choice.py's; mapping Hub errors to HubError is hub_errors.py's; the
progress bar and the summary line a download shows are download_progress.py's (a log's lines download_log.py's);
checking a downloaded file (checksums, a registry entry's pins, the GGUF header) is hub_verify.py's; keeping
huggingface_hub's own log lines off stderr is hub_logs.py's.
"""

from __future__ import annotations

import contextlib
import contextvars
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from localgen import console, download_progress, lock_activity
from localgen.errors import HubError, LocalgenError
from localgen.hub_cache import (
    blob_lock_path,
    blobs_dir,
    cached_model,
    download_may_run,
    hub_cache_dir,
    listed_blobs,
    orphaned_partials,
    partial_size,
    pointer_path,
    save_listing,
)
from localgen.hub_choice import choose_model, lookalikes
from localgen.hub_entry_data import linked_file, linked_file_named, model_blobs, users_file_behind
from localgen.hub_errors import offline_error, stalled_message, timed_out
from localgen.hub_listing import check_not_stalled, fetch_listing, hub_request_error, is_offline
from localgen.hub_logs import HubLogNote, quiet_hub_logs
from localgen.hub_resume import (
    NO_COPY,
    Fetched,
    LockOutOfOrder,
    PartClaim,
    blob_lock,
    blob_locks_held,
    fetch_blob,
    file_id,
    must_back_off,
    note_main_commit,
    resumable,
)
from localgen.hub_settings import check_endpoint, hub_endpoint
from localgen.hub_types import HubFile, HubModel
from localgen.hub_verify import (
    ChecksumMismatch,
    Pin,
    check_pin,
    check_pinned_file,
    check_shards_agree,
    verify_download,
)
from localgen.partial_downloads import carry_stopped_part, pull_command, resuming_name
from localgen.units import binary_size

if TYPE_CHECKING:
    from localgen.download_display import Display

REMOVALS_AT_MOST = 5  # a pull fetches again the files of its model a models rm beside it removes as the pull ends,
# until they were removed this many times


_HELD_THROUGH: contextvars.ContextVar[contextlib.ExitStack | None] = contextvars.ContextVar("held_through",
                                                                                         default=None)


@contextlib.contextmanager
def locks_held_through() -> Iterator[None]:
    """Hold the blob locks of each model fetched in the block until it ends, not only until fetch_model has checked
    it: a models rm waiting on them removes the model after what the block does with it (pull's own check)."""
    with contextlib.ExitStack() as held:
        token = _HELD_THROUGH.set(held)
        try:
            yield
        finally:
            _HELD_THROUGH.reset(token)


def list_gguf_files(repo: str, *, keep: bool = False) -> list[HubFile]:
    """The repo's GGUF files with sizes, sha256 and quant tags, in one metadata request (keep: the listing kept, as
    find_model keeps it, for commands run offline later)."""
    listing = fetch_listing(repo)
    if keep:
        save_listing(listing)
    return list(listing.files)


# ----------------------------------------------------------------------------- downloading


def find_model(repo: str, *, quant: str | None, filename: str | None) -> HubModel:
    """List the repo (one request) and choose the model's files, without downloading anything."""
    listing = fetch_listing(repo)
    repo = listing.repo  # as the cache spells it
    save_listing(listing)
    files = choose_model(list(listing.files), quant=quant, filename=filename, repo=repo)
    others = lookalikes(list(listing.files), files) if filename is None else ()
    return HubModel(repo=repo, quant=files[0].quant, files=files, revision=listing.revision, lookalikes=others)


def download_model(repo: str, *, quant: str | None, filename: str | None, force: bool = False,
                   show_progress: bool | None = None, quiet: bool = False,
                   reference: str | None = None, pin: Pin | None = None) -> list[Path]:
    """List, choose, download into the HF cache and verify sha256; the paths, first shard first.

    Offline, the cached and verified copy is returned, or a HubError says what to pull. pin, when given, is the
    sha256 and size a registry entry expects of the first file.
    """
    if is_offline():
        paths = cached_model(repo, quant=quant, filename=filename)
        if paths is None:
            raise offline_error(repo, quant, filename, reference)
        check_pinned_file(paths[0], pin)
        return paths
    model = find_model(repo, quant=quant, filename=filename)
    return fetch_model(model, force=force, show_progress=show_progress, quiet=quiet, pin=pin)


def fetch_model(model: HubModel, *, force: bool = False, show_progress: bool | None = None,
                quiet: bool = False, pin: Pin | None = None,
                accept: Callable[[list[Path]], None] | None = None) -> list[Path]:
    """Download (or find in the cache) and verify every file of a chosen model; accept, where given, checks the paths
    before refs/main names their commit (raising leaves it as it was)."""
    if is_offline():
        paths = cached_model(model.repo, quant=model.quant, filename=model.files[0].filename)
        if paths is None:
            raise offline_error(model.repo, model.quant, model.files[0].filename, None)
        check_pinned_file(paths[0], pin)
        return paths
    first = model.files[0]
    if pin is not None:  # known from the listing: refuse before downloading anything
        check_pin(f"{first.repo}/{first.filename}", first.sha256, first.size, pin)
    resumable = listed_blobs(model.repo) | {blob for f in model.files if (blob := f.blob)}
    for partial in orphaned_partials(model.repo, keep=resumable):
        with contextlib.suppress(OSError):
            partial.unlink()
    _check_free_space(model, force=force)
    display = download_progress.open_display(model, show=show_progress, source=hub_endpoint())
    tally = _Tally()
    paths: list[Path] = []
    try:
        with display, contextlib.ExitStack() as locks:  # each blob's lock, held until the model is checked whole
            for f in model.files:
                paths.append(tally.add(_fetch_in_lock_order(model, f, force=force, display=display,
                                                            pin=pin if f is first else None, locks=locks), f.size))
            _fetch_removed(model, paths, tally, display, pin, locks)
            if (held := _HELD_THROUGH.get()) is not None:
                held.enter_context(locks.pop_all())
                lock_activity.now_doing("checking")  # what a models rm or a pull finding them held says
    finally:
        for note in display.notes_after:  # below the bars' last drawing, not above it
            console.say(note)
    if not quiet:
        download_progress.print_summary(model, tally.received, tally.seconds, elsewhere=tally.elsewhere,
                                        received_before=tally.received_before, checked_elsewhere=tally.checked)
    if accept is not None:
        accept(paths)
    if model.revision != "main":  # the commit of main the listing named (none named: nothing to note)
        note_main_commit(model.repo, model.revision)
    return paths


@dataclass
class _Tally:
    """What a pull's fetches of a model's files came to: the bytes received now and the seconds spent receiving them
    (not waiting on another process's lock, nor checking), the bytes of the files another download fetched and of
    those one that stopped before checking them had received whole, and whether a copy there that another process
    checked as this pull --force waited was kept."""

    received: int = 0
    seconds: float = 0.0
    elsewhere: int = 0
    received_before: int = 0
    checked: bool = False

    def add(self, got: FetchedFile, size: int) -> Path:
        """Count one fetch of a file of size bytes; the file's path."""
        self.received += got.received
        self.seconds += got.seconds
        self.elsewhere += size if got.source == "elsewhere" else 0
        self.received_before += size if got.source == "received before" else 0
        self.checked |= got.source == "checked elsewhere"
        return got.path


def _fetch_removed(model: HubModel, paths: list[Path], tally: _Tally, display: Display, pin: Pin | None,
                   locks: contextlib.ExitStack) -> None:
    """Fetch again the files of the model that a models rm beside this pull removed as it fetched the others or ended,
    until every file is there (a split model's shards checked to agree) or it was removed REMOVALS_AT_MOST times. rm
    removes a model whole under the locks of all its blobs, and the pull holds those it fetched (locks) until it has
    checked them: rm takes one the pull holds only once the pull let go (a split model's shards fetched, it went on to
    the next, so rm is refused) or gave up waiting on a lock held long with nothing written."""
    for removals in range(1, REMOVALS_AT_MOST + 1):
        gone = _gone(paths)
        checked = not gone  # all there: any gone now went as the shards were read
        if checked and _shards_agree(paths):
            return
        gone = gone or _gone(paths)
        if removals == REMOVALS_AT_MOST:
            f = model.files[gone[0] if gone else 0]
            raise HubError(f"{f.repo}/{f.filename} was removed {REMOVALS_AT_MOST} times as this pull fetched it",
                           hint="another command removes it as it is downloaded: let that end, then pull it again")
        locks.close()  # a lock this process holds would keep its own download of that blob waiting for good
        for index in gone:
            f = model.files[index]
            paths[index] = tally.add(_fetch_in_lock_order(model, f, force=False, display=display,
                                                          pin=None if index else pin, locks=locks), f.size)
            ended = removals > 1 or checked or index == len(paths) - 1  # no other shard fetched after it
            when = "as this pull ended" if ended else "while this pull fetched the model's other shards"
            display.notes_after.append(f"localgen: {f.repo}/{f.filename} was removed {when}; it was downloaded again")


def _fetch_in_lock_order(model: HubModel, f: HubFile, *, force: bool, display: Display, pin: Pin | None,
                         locks: contextlib.ExitStack) -> FetchedFile:
    """_fetch_file, waiting on no lock that sorts before one this pull holds while another process holds it. A pull
    holds the lock of each file it fetched until it has checked its model, so two pulls of models sharing blobs in
    opposite order (shards a, b and b, a) could each hold one and wait on the other's for good: where the file's lock
    is such a one, those held are let go (their files stay, fetched and checked), those sorting before it taken again,
    the file fetched (following the other's download), then those after it taken again."""
    held = blob_locks_held()
    replaced = (file_id(blobs_dir(model.repo) / f.blob) or NO_COPY) if force and f.blob else None  # what --force
    # replaces: where another process downloads it anew as this pull waits, once is enough
    try:
        return _fetch_file(model, f, force=force, display=display, pin=pin, locks=locks, replaced=replaced)
    except LockOutOfOrder as exc:
        wanted = exc.lock
    locks.close()
    for lock in (lock for lock in held if lock < wanted):
        locks.enter_context(blob_lock(lock))
    got = _fetch_file(model, f, force=force, display=display, pin=pin, locks=locks, replaced=replaced)
    for lock in (lock for lock in held if lock > wanted):  # a file of them removed meanwhile: _fetch_removed's
        locks.enter_context(blob_lock(lock))
    return got


def _gone(paths: list[Path]) -> list[int]:
    """The indexes of the files of a model that are not there."""
    return [index for index, path in enumerate(paths) if not path.exists()]


def _shards_agree(paths: list[Path]) -> bool:
    """Whether a model's files, all there, agree as a split model's shards (check_shards_agree); False where one was
    removed as they were read."""
    try:
        if len(paths) > 1:
            check_shards_agree(paths)
    except FileNotFoundError:
        return False
    return True


def _check_free_space(model: HubModel, *, force: bool) -> None:
    """Refuse a download that cannot fit on the cache's disk before any byte of it is written (a split model would
    otherwise leave the shards that fitted)."""
    cached = [f.size for f in model.files if is_cached(model, f)]
    kept = 0 if force else sum(part for f in model.files  # a resumed download's part (one longer starts over)
                               if not is_cached(model, f) and (blob := f.blob)
                               and (part := partial_size(model.repo, blob)) <= f.size)
    needed = sum(f.size for f in model.files) - sum(cached) - kept
    if force and cached:  # a file downloaded again replaces its copy once complete: one at a time
        needed += max(cached)
    folder = hub_cache_dir()
    existing = next((p for p in (folder, *folder.parents) if p.is_dir()), None)
    if not needed or existing is None:
        return
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return
    if needed > free:
        raise HubError(f"{model.repo}: the download needs {binary_size(needed)}, and {folder} has {binary_size(free)} "
                       "free", hint="free some space (see `localgen models list`), or set HF_HUB_CACHE to a folder "
                                    "on a larger disk")


def is_cached(model: HubModel, f: HubFile) -> bool:
    """Whether a file of the model is in the cache already (its snapshot pointer or its blob)."""
    etag = f.blob
    blob = blobs_dir(model.repo) / etag if etag else None
    return pointer_path(model.repo, model.revision, f.filename).is_file() or (blob is not None and blob.is_file())


Source = Literal["cached", "downloaded", "elsewhere", "received before", "checked elsewhere"]  # where a file came
# from: "elsewhere" is another download, "received before" a download that stopped before it checked the bytes it had
# received in full, "checked elsewhere" the copy a pull --force found there, which another process checked meanwhile


@dataclass(frozen=True)
class FetchedFile:
    """A file of the model in the cache: its path, where it came from, the bytes received now, the sha256 its
    bytes were checked to have as they came (None: not checked yet) and the seconds spent receiving them."""

    path: Path
    source: Source
    received: int = 0
    sha256: str | None = None
    seconds: float = 0.0


def _fetch_file(model: HubModel, f: HubFile, *, force: bool, display: Display, pin: Pin | None,
                locks: contextlib.ExitStack, replaced: tuple[int, int] | None = None) -> FetchedFile:
    """One file: download unless cached, then verify; a cached copy that fails is fetched again once (where it was a
    link to a file of the user's outside the cache, or another model's in it, the link alone is replaced, by the blob
    where that is there, as pull --force replaces it). The lock of a blob downloaded or linked goes into locks;
    replaced: the copy a pull --force replaces, kept where another download replaced it meanwhile."""
    cached = not force and is_cached(model, f)
    own = model_blobs(blobs_dir(model.repo), (g.blob for g in model.files))  # as models rm tells them
    mine = linked_file(pointer_path(model.repo, model.revision, f.filename), own)
    with contextlib.ExitStack() as lock:  # the blob's, let go before it is fetched again, else held in locks
        got = _hf_download(model, f, force=force, display=display, cached=cached, locks=lock, replaced=replaced)
        if force and mine is not None and users_file_behind(got.path) is None:
            display.notes_after.append(f"localgen: {got.path} led to {linked_file_named(mine)}; it leads to the "
                                       f"Hub's {f.repo}/{f.filename} now, and {mine.kept} is left as it was")
        try:
            _verified(got, f, display, pin, own)
        except HubError:
            if not cached:
                raise
            lock.close()
            got = _hf_download(model, f, force=False, display=display, cached=is_cached(model, f), locks=lock)
            verify_download(got.path, f, display, pin, hashed=got.sha256, own_blobs=own)
            if mine is not None:
                display.notes_after.append(f"localgen: {got.path} led to {linked_file_named(mine)}, which is not the "
                                           f"Hub's {f.repo}/{f.filename}; it leads to the Hub's file now, and "
                                           f"{mine.kept} is left as it was")
        locks.enter_context(lock.pop_all())
    return got


def _verified(got: FetchedFile, f: HubFile, display: Display, pin: Pin | None, own: list[Path]) -> None:
    """verify_download, which a file removed as it was checked (by a models rm beside this pull, which fetch_model
    notices and fetches it again for) passes: only a file there is refused."""
    try:
        verify_download(got.path, f, display, pin, hashed=got.sha256, own_blobs=own)
    except (LocalgenError, OSError) as exc:
        if isinstance(exc, ChecksumMismatch) or got.path.exists():  # a mismatch deletes the file itself
            raise


def _hf_download(model: HubModel, f: HubFile, *, force: bool, display: Display, cached: bool,
                 locks: contextlib.ExitStack, replaced: tuple[int, int] | None = None) -> FetchedFile:
    """Download one file at the model's commit and link it into the snapshot (hub_resume.py, which checks it before it
    replaces a copy and links it with no further request, its blob's lock entered into locks; hf_hub_download, a file
    over the Hub's plain HTTP limit), with progress (following another download of it while waiting on its lock);
    errors become HubError."""
    check_endpoint()
    check_not_stalled()
    from huggingface_hub import hf_hub_download

    bar = download_progress.tqdm_adapter(display)
    kwargs: dict[str, Any] = {"repo_id": model.repo, "filename": f.filename, "revision": model.revision,
                              "cache_dir": str(hub_cache_dir()), "force_download": force, "tqdm_class": bar}
    blob = f.blob
    waiting = not cached and blob is not None and download_may_run(model.repo, blob)
    own = blob if resumable(f) else None  # the blob localgen fetches (where it is not there) and links itself
    kept_whole = own is not None and 0 < f.size == partial_size(model.repo, own)  # a stopped download's: nothing to get
    lock = blob_lock_path(model.repo, blob) if waiting and blob else None  # another process holds it: which, doing what
    if lock is not None and own is not None and must_back_off(lock):
        raise LockOutOfOrder(lock)  # before a word is said: _fetch_in_lock_order lets go of those held first
    holder = lock_activity.holder(lock) if lock else None
    display.begin_file(f, cached=cached or (kept_whole and not (force or waiting)), waiting=waiting, holder=holder)
    watch = contextlib.nullcontext(download_progress.PartialCopies()) if cached else (
        download_progress.poll_incomplete(blobs_dir(model.repo), blob, display, lock=lock, holder=holder))
    pointer = pointer_path(model.repo, model.revision, f.filename)
    claim = PartClaim()
    fetched: Fetched | None = None  # None: not fetched now (cached, or another download fetched it meanwhile)
    note: HubLogNote | None = None
    took = 0.0  # the seconds hf_hub_download took
    try:
        with watch as partial, quiet_hub_logs(f"{model.repo}/{f.filename}") as note:
            if own is None:  # a wait on huggingface_hub's own lock counts in took: not told apart there
                started = time.monotonic()
                path = Path(hf_hub_download(**kwargs))
                took = time.monotonic() - started
            else:
                if not (cached and pointer.is_file()):
                    fetched = fetch_blob(model.repo, model.revision, f, own, force=force, display=display, claim=claim,
                                         locks=locks, replaced=replaced, waited_on=holder)
                path = pointer
    except LockOutOfOrder:
        display.backing_off(f)
        raise  # _fetch_in_lock_order's to handle
    except Exception as exc:
        ours = blob if claim.writing else None  # a part another pull is writing is not this one's to speak of
        error = hub_request_error(exc, repo=model.repo, filename=f.filename)
        if note is not None and note.retries and timed_out(exc):
            error.message = stalled_message(f"{model.repo}/{f.filename}")
        raise _kept_part_said(error, model, f, ours) from exc
    except BaseException as stop:  # Ctrl-C, or a signal that ends localgen
        if own is not None and claim.writing and (said := _left_after_stop(model, f, own, stop)):
            display.notes_after.append(f"localgen: the download of {model.repo}/{f.filename} stopped; {said}")
        raise
    display.end_file()
    if own is not None and fetched is not None:
        source: Source = "received before" if fetched.received_before else "downloaded"
        return FetchedFile(path, source, fetched.received, fetched.sha256, fetched.seconds)
    kept = own is not None and force and replaced not in (None, NO_COPY)
    if own is not None and kept and file_id(blobs_dir(model.repo) / own) == replaced:
        return FetchedFile(path, "checked elsewhere")  # kept as another process checked it: fetch_blob
    if own is not None:
        return FetchedFile(path, "cached" if cached else "elsewhere")
    if cached or not (bar.opened or waiting or partial.seen):
        return FetchedFile(path, "cached")  # or linked from huggingface_hub's shared store of blobs
    return FetchedFile(path, "downloaded", f.size, seconds=took) if bar.opened else FetchedFile(path, "elsewhere")


def _left_after_stop(model: HubModel, f: HubFile, blob: str, stop: BaseException) -> str:
    """What a download of a file that stop stopped left: the part received, which the next pull resumes (or checks,
    where it is whole), or the copy that was there (a pull --force's); "" for neither. The part's name is carried on
    stop for the summary of a pull of several (carry_stopped_part)."""
    if kept := partial_size(model.repo, blob):
        carry_stopped_part(stop, name := resuming_name(model))
        return _part_kept(kept, name, f)
    return "the copy that was there is kept" if is_cached(model, f) else ""


def _kept_part_said(error: LocalgenError, model: HubModel, f: HubFile, blob: str | None) -> LocalgenError:
    """A download's error, its hint saying what of the file is on disk, and the pull that resumes (or checks) it."""
    kept = partial_size(model.repo, blob) if blob else 0
    if kept:
        note = _part_kept(kept, resuming_name(model), f)
        error.hint = f"{error.hint}; {note}" if error.hint else note
    return error


def _part_kept(kept: int, name: str, f: HubFile) -> str:
    """What of file f a stopped download left on disk, and what the pull of name (the part's) does with it: resumes
    from it, or checks it with no download where the whole file was received."""
    pull = f"`{pull_command(name)}`"
    if kept == f.size:
        return f"all {binary_size(kept)} of it are on disk, which {pull} checks, with no download"
    return f"{binary_size(kept)} of {binary_size(f.size)} are on disk, which {pull} resumes"

