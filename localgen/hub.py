"""Hugging Face Hub downloads: list a repo's GGUF files, choose a model, download it into the cache and verify it.

This module, hub_range.py, hub_resume.py and hub_errors.py are the only ones that talk to the Hub; they import
huggingface_hub inside functions so that importing localgen (and `localgen --help`) stays fast. A file's bytes are
fetched by hub_resume.py, which resumes a download stopped part way; where files and localgen's records
of them live, and finding a model there without the network, is hub_cache.py's; choosing a model's files is
hub_choice.py's; mapping Hub errors to HubError is hub_errors.py's; the progress bar and the summary line a download
shows are download_progress.py's (a log's lines download_log.py's); checking a downloaded file (checksums, a registry
entry's pins, the GGUF header) is hub_verify.py's; keeping huggingface_hub's own log lines off stderr is hub_logs.py's.
"""

from __future__ import annotations

import contextlib
import copy
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from localgen import console, download_progress
from localgen.config import settings
from localgen.errors import HubError, LocalgenError
from localgen.hub_cache import (
    blobs_dir,
    cached_model,
    cached_spelling,
    download_may_run,
    hub_cache_dir,
    listed_blobs,
    orphaned_partials,
    partial_size,
    pointer_path,
    repo_folder,
    save_listing,
)
from localgen.hub_choice import choose_model, lookalikes, quant_of, shard_of
from localgen.hub_entry_data import linked_file, linked_file_named, model_blobs, users_file_behind
from localgen.hub_errors import map_hub_error, offline_error, stalled_message, timed_out
from localgen.hub_logs import HubLogNote, quiet_hub_logs
from localgen.hub_resume import Fetched, PartClaim, fetch_blob, resumable
from localgen.hub_settings import check_endpoint, hub_endpoint
from localgen.hub_types import HubFile, HubListing, HubModel
from localgen.hub_verify import Pin, check_pin, check_pinned_file, check_shards_agree, verify_download
from localgen.references import check_safe_filename
from localgen.text_cut import short_repr
from localgen.units import binary_size

if TYPE_CHECKING:
    from localgen.download_display import Display

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_SHA1_HEX = re.compile(r"^[0-9a-f]{40}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def is_offline() -> bool:
    """True when the network is forbidden: HF_HUB_OFFLINE=1, LOCALGEN_OFFLINE=1 or --offline."""
    return settings().offline


# ----------------------------------------------------------------------------- listing


def list_gguf_files(repo: str) -> list[HubFile]:
    """The repo's GGUF files with sizes, sha256 and quant tags, in one metadata request."""
    return list(_fetch_listing(repo).files)


@dataclass(frozen=True)
class Stall:
    """A request to the Hub that timed out: its error, and the seconds it waited (None: not known here)."""

    error: HubError
    waited: float | None


_listings: dict[str, HubListing | LocalgenError] | None = None  # within one_listing_per_repo(): each repo's listing,
# or the error asking for it met, which the requests for it after fail with at once
_stalls: list[Stall] = []  # within it: a request to the Hub that timed out, which the next ones fail with at once


@contextlib.contextmanager
def one_listing_per_repo() -> Iterator[None]:
    """Within this block, a repo is listed once: choosing a quant and downloading it see the same revision, and a
    listing that failed fails again at once, not asked for again; and a Hub that did not answer in time is not waited
    for again (a stalled server fails a pull in one timeout, not in one for each header read and then the download)."""
    global _listings, _stalls
    outer = _listings, _stalls
    if _listings is None:
        _listings, _stalls = {}, []
    try:
        yield
    finally:
        _listings, _stalls = outer


_answer_within: float | None = None  # within answers_within(): the most seconds a request waits for the Hub


@contextlib.contextmanager
def answers_within(seconds: float) -> Iterator[None]:
    """Within this block, a request to the Hub waits at most seconds for its answer, whatever HF_HUB_ETAG_TIMEOUT and
    HF_HUB_DOWNLOAD_TIMEOUT say: for a lookup that is only a hint, not worth a whole timeout."""
    global _answer_within
    outer = _answer_within
    _answer_within = seconds if outer is None else min(outer, seconds)
    try:
        yield
    finally:
        _answer_within = outer


def request_timeout(configured: float) -> float:
    """The seconds a request waits for the Hub: the setting's, or less within answers_within()."""
    return configured if _answer_within is None else min(configured, _answer_within)


def hub_request_error(exc: BaseException, *, repo: str, filename: str | None = None,
                      waited: float | None = None) -> LocalgenError:
    """map_hub_error, a timeout remembered within one_listing_per_repo() for the requests after it (waited: the
    seconds the request was given, where known)."""
    error = map_hub_error(exc, repo=repo, filename=filename)
    if _listings is not None and not _stalls and isinstance(error, HubError) and timed_out(exc):
        _stalls.append(Stall(error, waited))
    return error


def stall() -> Stall | None:
    """Within one_listing_per_repo(), the request to the Hub that timed out, if one did."""
    return _stalls[0] if _stalls else None


def check_not_stalled() -> None:
    """Within one_listing_per_repo(), fail at once where a request before this one timed out."""
    if _stalls:
        raise HubError(_stalls[0].error.message, hint=_stalls[0].error.hint)


def _fetch_listing(repo: str) -> HubListing:
    """Ask the Hub for the repo's files (one request) and keep the GGUF ones."""
    if is_offline():
        raise offline_error(repo, None, None, None)
    key = repo.lower()  # one listing (and one request) whatever the case it was typed in: the Hub's ids ignore case
    kept = _listings.get(key) if _listings is not None else None
    if isinstance(kept, LocalgenError):
        raise copy.copy(kept) from kept.__cause__  # its own copy: a handler may add to its words
    if kept is not None:
        return kept
    repo = cached_spelling(repo)
    check_not_stalled()
    try:
        listing = _request_listing(repo)
    except LocalgenError as exc:
        if _listings is not None:
            _listings[key] = exc
        raise
    if _listings is not None:
        _listings[key] = listing
    return listing


def _request_listing(repo: str) -> HubListing:
    """The repo's GGUF files and revision, from one metadata request."""
    check_endpoint()
    timeout: float | None = None
    try:
        from huggingface_hub import HfApi, constants  # its HTTP stack reads HF_ENDPOINT as it is imported

        with quiet_hub_logs(repo):  # a listing is metadata: it waits as long as huggingface_hub's HEAD requests
            timeout = request_timeout(constants.HF_HUB_ETAG_TIMEOUT)
            info = HfApi().model_info(repo, files_metadata=True, timeout=timeout)
    except Exception as exc:
        raise hub_request_error(exc, repo=repo, waited=timeout) from exc
    hub_id = str(getattr(info, "id", None) or "")
    if hub_id.lower() == repo.lower() and not (hub_cache_dir() / repo_folder(repo)).is_dir():
        repo = hub_id  # a first download is kept (and named) as the Hub spells the repo, however it was typed
    revision = getattr(info, "sha", None)
    revision = "main" if revision is None else revision  # a listing without one: the branch's files
    if revision != "main" and not (isinstance(revision, str) and _COMMIT.fullmatch(revision)):
        shown = repr(revision[:60]) if isinstance(revision, str) else short_repr(revision)  # a number, a list
        raise HubError(f"the Hub returned an invalid commit id for {repo}: {shown}",
                       hint=f"check HF_ENDPOINT ({hub_endpoint()})")
    files = [_hub_file(repo, s) for s in (getattr(info, "siblings", None) or [])
             if str(getattr(s, "rfilename", "")).lower().endswith(".gguf")]
    files.sort(key=lambda f: f.filename)
    return HubListing(repo=repo, revision=revision, files=tuple(files))


def _hub_file(repo: str, sibling: Any) -> HubFile:
    """A HubFile from a repo sibling entry, rejecting unsafe names and malformed metadata."""
    filename = str(sibling.rfilename)
    try:
        check_safe_filename(filename)
    except LocalgenError as exc:
        raise HubError(f"{repo}: the Hub listed an unsafe file name {filename!r}; refusing the repo",
                       hint="file names must be relative paths without '..', absolute parts or "
                            "backslashes; check HF_ENDPOINT if you use a mirror") from exc
    lfs = getattr(sibling, "lfs", None)  # a BlobLfsInfo, for a file kept in LFS
    sha, size = getattr(lfs, "sha256", None), getattr(lfs, "size", None)
    size = size if size is not None else getattr(sibling, "size", None)
    blob_id = getattr(sibling, "blob_id", None)
    if sha is not None and not (isinstance(sha, str) and _SHA256_HEX.fullmatch(sha.lower())):
        raise HubError(f"{repo}: malformed sha256 for {filename!r} in the Hub's metadata")
    if blob_id is not None and not (isinstance(blob_id, str) and _SHA1_HEX.fullmatch(blob_id.lower())):
        blob_id = None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise HubError(f"{repo}: the Hub gave no valid size for {filename!r}",
                       hint=f"check HF_ENDPOINT ({hub_endpoint()})")
    index, count = shard_of(filename)
    return HubFile(repo=repo, filename=filename, size=size, sha256=sha.lower() if sha else None,
                   quant=quant_of(filename), shard_index=index, shard_count=count,
                   blob_id=blob_id.lower() if blob_id else None)


# ----------------------------------------------------------------------------- downloading


def find_model(repo: str, *, quant: str | None, filename: str | None) -> HubModel:
    """List the repo (one request) and choose the model's files, without downloading anything."""
    listing = _fetch_listing(repo)
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
                quiet: bool = False, pin: Pin | None = None) -> list[Path]:
    """Download (or find in the cache) and verify every file of a chosen model."""
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
    started = time.monotonic()
    downloaded = 0
    fetched_elsewhere = received_before = False
    paths: list[Path] = []
    try:
        with display:
            for f in model.files:
                got = _fetch_file(model, f, force=force, display=display, pin=pin if f is first else None)
                downloaded += got.received
                fetched_elsewhere |= got.source == "elsewhere"
                received_before |= got.source == "received before"
                paths.append(got.path)
            for index in [i for i, path in enumerate(paths) if not path.exists()]:  # gone as the next were fetched
                f = model.files[index]
                got = _fetch_file(model, f, force=False, display=display, pin=None if index else pin)
                downloaded, paths[index] = downloaded + got.received, got.path
                when = "while this pull fetched the model's other shards" if len(paths) > 1 else "as this pull ended"
                display.notes_after.append(f"localgen: {f.repo}/{f.filename} was removed {when}; it was downloaded "
                                           "again")
    finally:
        for note in display.notes_after:  # below the bars' last drawing, not above it
            console.say(note)
    if len(paths) > 1:
        check_shards_agree(paths)
    if not quiet:
        download_progress.print_summary(model, downloaded, time.monotonic() - started,
                                        fetched_elsewhere=fetched_elsewhere, received_before=received_before)
    return paths


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


Source = Literal["cached", "downloaded", "elsewhere", "received before"]  # where a file came from: "elsewhere" is
# another download, "received before" a download that stopped before it checked the bytes it had received in full


@dataclass(frozen=True)
class FetchedFile:
    """A file of the model in the cache: its path, where it came from, the bytes received now, and the sha256 its
    bytes were checked to have as they came (None: not checked yet)."""

    path: Path
    source: Source
    received: int = 0
    sha256: str | None = None


def _fetch_file(model: HubModel, f: HubFile, *, force: bool, display: Display, pin: Pin | None) -> FetchedFile:
    """One file: download unless cached, then verify; a cached copy that fails is fetched again once (where it was a
    link to a file of the user's outside the cache, or another model's in it, the link alone is replaced, by the blob
    where that is there, as pull --force replaces it)."""
    cached = not force and is_cached(model, f)
    own = model_blobs(blobs_dir(model.repo), (g.blob for g in model.files))  # as models rm tells them
    mine = linked_file(pointer_path(model.repo, model.revision, f.filename), own)
    got = _hf_download(model, f, force=force, display=display, cached=cached)
    if force and mine is not None and users_file_behind(got.path) is None:
        display.notes_after.append(f"localgen: {got.path} led to {linked_file_named(mine)}; it leads to the Hub's "
                                   f"{f.repo}/{f.filename} now, and {mine.kept} is left as it was")
    try:
        verify_download(got.path, f, display, pin, hashed=got.sha256, own_blobs=own)
    except HubError:
        if not cached:
            raise
        got = _hf_download(model, f, force=False, display=display, cached=is_cached(model, f))
        verify_download(got.path, f, display, pin, hashed=got.sha256, own_blobs=own)
        if mine is not None:
            display.notes_after.append(f"localgen: {got.path} led to {linked_file_named(mine)}, which is not the "
                                       f"Hub's {f.repo}/{f.filename}; it leads to the Hub's file now, and {mine.kept} "
                                       "is left as it was")
    return got


def _hf_download(model: HubModel, f: HubFile, *, force: bool, display: Display, cached: bool) -> FetchedFile:
    """Download one file at the model's commit and link it into the snapshot (hub_resume.py, which checks it before it
    replaces a copy and links it with no further request; hf_hub_download, a file over the Hub's plain HTTP limit),
    with progress (following another download of it while waiting on its lock); errors become HubError."""
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
    display.begin_file(f, cached=cached or (kept_whole and not (force or waiting)), waiting=waiting)
    watch = contextlib.nullcontext(download_progress.PartialCopies()) if cached else (
        download_progress.poll_incomplete(blobs_dir(model.repo), blob, display))
    pointer = pointer_path(model.repo, model.revision, f.filename)
    claim = PartClaim()
    fetched: Fetched | None = None  # None: not fetched now (cached, or another download fetched it meanwhile)
    note: HubLogNote | None = None
    try:
        with watch as partial, quiet_hub_logs(f"{model.repo}/{f.filename}") as note:
            if own is None:
                path = Path(hf_hub_download(**kwargs))
            else:
                if not (cached and pointer.is_file()):
                    fetched = fetch_blob(model.repo, model.revision, f, own, force=force, display=display, claim=claim)
                path = pointer
    except Exception as exc:
        ours = blob if claim.writing else None  # a part another pull is writing is not this one's to speak of
        error = hub_request_error(exc, repo=model.repo, filename=f.filename)
        if note is not None and note.retries and timed_out(exc):
            error.message = stalled_message(f"{model.repo}/{f.filename}")
        raise _kept_part_said(error, model.repo, ours, f.size) from exc
    except BaseException:  # Ctrl-C, or a signal that ends localgen
        if own is not None and claim.writing and (said := _left_after_stop(model, f, own)):
            display.notes_after.append(f"localgen: the download of {model.repo}/{f.filename} stopped; {said}")
        raise
    display.end_file()
    if own is not None and fetched is not None:
        source: Source = "received before" if fetched.received_before else "downloaded"
        return FetchedFile(path, source, fetched.received, fetched.sha256)
    if own is not None:
        return FetchedFile(path, "cached" if cached else "elsewhere")
    if cached or not (bar.opened or waiting or partial.seen):
        return FetchedFile(path, "cached")  # or linked from huggingface_hub's shared store of blobs
    return FetchedFile(path, "downloaded", f.size) if bar.opened else FetchedFile(path, "elsewhere")


def _left_after_stop(model: HubModel, f: HubFile, blob: str) -> str:
    """What a download of a file that stopped left: the part received, which the next pull resumes (or checks, where
    it is whole), or the copy that was there (a pull --force's); "" for neither."""
    if kept := partial_size(model.repo, blob):
        return _part_kept(kept, f.size, ", and ")
    return "the copy that was there is kept" if is_cached(model, f) else ""


def _kept_part_said(error: LocalgenError, repo: str, blob: str | None, size: int) -> LocalgenError:
    """A download's error, its hint saying that the part received is kept for the next pull to resume (or check)."""
    kept = partial_size(repo, blob) if blob else 0
    if kept:
        note = _part_kept(kept, size, ": ")
        error.hint = f"{error.hint}; {note}" if error.hint else note
    return error


def _part_kept(kept: int, size: int, joiner: str) -> str:
    """The part a stopped download kept of a file of size bytes, and (after joiner) what the next pull does with it:
    resumes from it, or checks it with no download where the whole file was received."""
    if kept == size:
        return f"all {binary_size(kept)} were received and are kept{joiner}the next pull checks them, with no download"
    return f"the {binary_size(kept)} received are kept{joiner}the next pull resumes from there"

