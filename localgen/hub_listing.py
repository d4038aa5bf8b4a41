"""Asking the Hub for a repo's files: one metadata request, its GGUF files checked (safe names, sizes, checksums) into
a HubListing; within one_listing_per_repo() a repo is listed once and a request that timed out fails the ones after
it at once; within answers_within() a request waits less than its setting says."""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from localgen.config import settings
from localgen.errors import HubError, LocalgenError
from localgen.hub_cache import cached_spelling, hub_cache_dir, repo_folder
from localgen.hub_choice import quant_of, shard_of
from localgen.hub_errors import map_hub_error, offline_error, timed_out
from localgen.hub_logs import quiet_hub_logs
from localgen.hub_settings import check_endpoint, hub_endpoint
from localgen.hub_types import HubFile, HubListing
from localgen.references import check_safe_filename
from localgen.text_cut import short_repr

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_SHA1_HEX = re.compile(r"^[0-9a-f]{40}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def is_offline() -> bool:
    """True when the network is forbidden: HF_HUB_OFFLINE=1, LOCALGEN_OFFLINE=1 or --offline."""
    return settings().offline


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


def fetch_listing(repo: str) -> HubListing:
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
