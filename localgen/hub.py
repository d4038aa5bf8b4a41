"""Hugging Face Hub: list a repo's GGUF files, choose a quant, download, verify, work offline.

This module and hub_errors.py are the only ones that import huggingface_hub, and they do so inside
functions so that importing localgen (and `localgen --help`) stays fast. Files go to the standard Hugging Face
cache (HF_HOME / HF_HUB_CACHE), so they are shared with other Hugging Face tools.

localgen keeps two small records of its own under its cache directory:
- a listing per repo (`hub/models--ORG--NAME.json`): the commit and the GGUF files with sizes and
  sha256, written whenever the repo is listed, so the same quant is chosen offline;
- verification markers (verify.py), so a verified file is never rehashed.
A model counts as cached only when every file is present and verified against that listing.
Choosing a model's files is hub_choice.py's; mapping Hub errors to HubError is hub_errors.py's.
The progress bar and the summary line a download shows are download_progress.py's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgen import download_progress
from localgen.config import settings
from localgen.errors import HubError, LocalgenError
from localgen.hub_choice import choose_model, quant_of, shard_of
from localgen.hub_errors import map_hub_error, offline_error
from localgen.registry import check_safe_filename
from localgen.storage import atomic_write_text
from localgen.verify import HASH_CHUNK_BYTES, is_verified, record_verified, sha256_file

if TYPE_CHECKING:
    from localgen.download_progress import Display

METADATA_TIMEOUT_S = 20.0
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_SHA1_HEX = re.compile(r"^[0-9a-f]{40}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HubFile:
    """One GGUF file in a Hub repo, with its size and the sha256 from its LFS metadata."""

    repo: str
    filename: str
    size: int
    sha256: str | None
    quant: str | None
    shard_index: int | None
    shard_count: int | None
    blob_id: str | None = None

    @property
    def name(self) -> str:
        """The file name without its folder."""
        return self.filename.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class HubModel:
    """One model on the Hub: a single GGUF file, or all shards of a split GGUF, at one commit."""

    repo: str
    quant: str | None
    files: tuple[HubFile, ...]
    revision: str

    @property
    def size(self) -> int:
        """Total bytes of all files."""
        return sum(f.size for f in self.files)

    @property
    def label(self) -> str:
        """A short human name: ORG/REPO:QUANT, or ORG/REPO/FILE when the file has no quant tag."""
        return f"{self.repo}:{self.quant}" if self.quant else f"{self.repo}/{self.files[0].filename}"


@dataclass(frozen=True)
class CachedHubFile:
    """A GGUF file found in the local Hugging Face cache (a snapshot entry)."""

    repo: str
    filename: str
    revision: str
    path: Path
    blob: Path
    size: int
    sha256: str | None
    verified: bool


@dataclass(frozen=True)
class _Listing:
    """A repo's GGUF files at one commit, as listed by the Hub."""

    repo: str
    revision: str
    files: tuple[HubFile, ...]


# ----------------------------------------------------------------------------- settings and paths


def is_offline() -> bool:
    """True when the network is forbidden: HF_HUB_OFFLINE=1, LOCALGEN_OFFLINE=1 or --offline."""
    return settings().offline


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache directory (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...)."""
    from huggingface_hub import constants  # cheap: no HTTP stack

    return Path(constants.HF_HUB_CACHE).expanduser().resolve()


def hub_endpoint() -> str:
    """The Hub URL in use (HF_ENDPOINT or https://huggingface.co)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def repo_folder(repo: str) -> str:
    """The cache folder name of a model repo: models--ORG--NAME."""
    return "models--" + repo.replace("/", "--")


def _listing_path(repo: str) -> Path:
    """Where localgen keeps its last listing of a repo."""
    return settings().cache_dir / "hub" / f"{repo_folder(repo)}.json"


def _pointer_path(repo: str, revision: str, filename: str) -> Path:
    """The snapshot path of a file at a commit in the HF cache."""
    return hub_cache_dir() / repo_folder(repo) / "snapshots" / revision / filename


# ----------------------------------------------------------------------------- listing


def list_gguf_files(repo: str) -> list[HubFile]:
    """The repo's GGUF files with sizes, sha256 and quant tags, in one metadata request."""
    return list(_fetch_listing(repo).files)


def _fetch_listing(repo: str) -> _Listing:
    """Ask the Hub for the repo's files (one request) and keep the GGUF ones."""
    if is_offline():
        raise offline_error(repo, None, None, None)
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(repo, files_metadata=True, timeout=METADATA_TIMEOUT_S)
    except Exception as exc:
        raise map_hub_error(exc, repo=repo) from exc
    revision = getattr(info, "sha", None) or "main"
    if revision != "main" and not _COMMIT.match(revision):
        raise HubError(f"the Hub returned an invalid commit id for {repo}: {revision[:60]!r}",
                       hint=f"check HF_ENDPOINT ({hub_endpoint()})")
    files = [_hub_file(repo, s) for s in (getattr(info, "siblings", None) or [])
             if str(getattr(s, "rfilename", "")).lower().endswith(".gguf")]
    files.sort(key=lambda f: f.filename)
    return _Listing(repo=repo, revision=revision, files=tuple(files))


def _hub_file(repo: str, sibling: Any) -> HubFile:
    """A HubFile from a repo sibling entry, rejecting unsafe names and malformed metadata."""
    filename = str(sibling.rfilename)
    try:
        check_safe_filename(filename)
    except LocalgenError as exc:
        raise HubError(f"{repo}: the Hub listed an unsafe file name {filename!r}; refusing the repo",
                       hint="file names must be relative paths without '..', absolute parts or "
                            "backslashes; check HF_ENDPOINT if you use a mirror") from exc
    lfs = getattr(sibling, "lfs", None)
    sha = size = None
    if lfs is not None:
        sha = getattr(lfs, "sha256", None) or (lfs.get("sha256") if isinstance(lfs, dict) else None)
        size = getattr(lfs, "size", None) or (lfs.get("size") if isinstance(lfs, dict) else None)
    size = size if size is not None else getattr(sibling, "size", None)
    blob_id = getattr(sibling, "blob_id", None)
    if sha is not None and not (isinstance(sha, str) and _SHA256_HEX.match(sha.lower())):
        raise HubError(f"{repo}: malformed sha256 for {filename!r} in the Hub's metadata")
    if blob_id is not None and not (isinstance(blob_id, str) and _SHA1_HEX.match(blob_id.lower())):
        blob_id = None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise HubError(f"{repo}: the Hub gave no valid size for {filename!r}",
                       hint=f"check HF_ENDPOINT ({hub_endpoint()})")
    index, count = shard_of(filename)
    return HubFile(repo=repo, filename=filename, size=size, sha256=sha.lower() if sha else None,
                   quant=quant_of(filename), shard_index=index, shard_count=count,
                   blob_id=blob_id.lower() if blob_id else None)


def _save_listing(listing: _Listing) -> None:
    """Remember a repo listing so the same file is chosen without the network."""
    data = {"repo": listing.repo, "revision": listing.revision, "listed_at": time.time(),
            "files": [{"filename": f.filename, "size": f.size, "sha256": f.sha256, "blob_id": f.blob_id}
                      for f in listing.files]}
    with contextlib.suppress(LocalgenError):
        atomic_write_text(_listing_path(listing.repo), json.dumps(data, indent=1))


def _load_listing(repo: str) -> _Listing | None:
    """The last listing of a repo that localgen saw, if any (no network)."""
    try:
        data = json.loads(_listing_path(repo).read_text(encoding="utf-8"))
        files = []
        for entry in data["files"]:
            filename = str(entry["filename"])
            check_safe_filename(filename)
            index, count = shard_of(filename)
            files.append(HubFile(repo=repo, filename=filename, size=int(entry["size"]),
                                 sha256=entry.get("sha256"), quant=quant_of(filename),
                                 shard_index=index, shard_count=count, blob_id=entry.get("blob_id")))
        return _Listing(repo=repo, revision=str(data["revision"]), files=tuple(files))
    except (OSError, ValueError, KeyError, TypeError, LocalgenError):
        return None


def cached_listing(repo: str) -> list[HubFile] | None:
    """The repo's GGUF files as localgen last listed them (no network), if ever."""
    listing = _load_listing(repo)
    return list(listing.files) if listing else None


def _record_sha256(repo: str, filename: str, sha256: str) -> None:
    """Store a computed sha256 (for files the Hub keeps outside LFS) in the repo listing."""
    listing = _load_listing(repo)
    if listing is None:
        return
    files = tuple(replace(f, sha256=sha256) if f.filename == filename else f for f in listing.files)
    _save_listing(_Listing(repo=repo, revision=listing.revision, files=files))


# ----------------------------------------------------------------------------- cache lookups (no network)


def cached_model(repo: str, *, quant: str | None, filename: str | None) -> list[Path] | None:
    """The model's files from the local cache if all are present and verified; no network at all."""
    listing = _load_listing(repo)
    if listing is None:
        return None
    try:
        chosen = choose_model(list(listing.files), quant=quant, filename=filename, repo=repo)
    except LocalgenError:
        return None
    snapshot = _snapshot_with(repo, [f.filename for f in chosen], listing.revision)
    if snapshot is None:
        return None
    paths = [snapshot / f.filename for f in chosen]
    for path, f in zip(paths, chosen, strict=True):
        if not f.sha256 or not is_verified(path, f.sha256):
            return None
    return paths


def _snapshot_with(repo: str, filenames: list[str], preferred: str) -> Path | None:
    """The snapshot folder holding all filenames: the preferred commit first, then the newest."""
    snapshots = hub_cache_dir() / repo_folder(repo) / "snapshots"
    try:
        others = sorted((p for p in snapshots.iterdir() if p.name != preferred),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    for folder in (snapshots / preferred, *others):
        if all((folder / name).is_file() for name in filenames):
            return folder
    return None


def cached_gguf_files() -> list[CachedHubFile]:
    """Every GGUF file in the local Hugging Face cache's model snapshots (no network)."""
    root = hub_cache_dir()
    found: list[CachedHubFile] = []
    try:
        repo_dirs = sorted(p for p in root.iterdir() if p.name.startswith("models--") and p.is_dir())
    except OSError:
        return []
    for repo_dir in repo_dirs:
        parts = repo_dir.name.split("--")
        if len(parts) != 3:
            continue
        repo = f"{parts[1]}/{parts[2]}"
        listing = _load_listing(repo)
        expected = {f.filename: f.sha256 for f in listing.files} if listing else {}
        for snapshot in sorted((repo_dir / "snapshots").glob("*")):
            for path in sorted(snapshot.rglob("*")):
                if path.suffix.lower() != ".gguf" or not path.is_file():
                    continue
                filename = path.relative_to(snapshot).as_posix()
                sha = expected.get(filename)
                found.append(CachedHubFile(
                    repo=repo, filename=filename, revision=snapshot.name, path=path,
                    blob=blob_of(path), size=path.stat().st_size, sha256=sha,
                    verified=bool(sha) and is_verified(path, sha)))
    return found


def blob_of(pointer: Path) -> Path:
    """The repo blob a snapshot entry links to (one link hop), or the entry itself if it is a file."""
    if not pointer.is_symlink():
        return pointer
    return Path(os.path.normpath(pointer.parent / os.readlink(pointer)))


# ----------------------------------------------------------------------------- downloading


def find_model(repo: str, *, quant: str | None, filename: str | None) -> HubModel:
    """List the repo (one request) and choose the model's files, without downloading anything."""
    listing = _fetch_listing(repo)
    _save_listing(listing)
    files = choose_model(list(listing.files), quant=quant, filename=filename, repo=repo)
    return HubModel(repo=repo, quant=files[0].quant, files=files, revision=listing.revision)


def download_model(repo: str, *, quant: str | None, filename: str | None, force: bool = False,
                   show_progress: bool | None = None, quiet: bool = False,
                   reference: str | None = None) -> list[Path]:
    """List, choose, download into the HF cache and verify sha256; the paths, first shard first.

    Offline, the cached and verified copy is returned, or a HubError says what to pull.
    """
    if is_offline():
        paths = cached_model(repo, quant=quant, filename=filename)
        if paths is None:
            raise offline_error(repo, quant, filename, reference)
        return paths
    model = find_model(repo, quant=quant, filename=filename)
    return fetch_model(model, force=force, show_progress=show_progress, quiet=quiet)


def fetch_model(model: HubModel, *, force: bool = False, show_progress: bool | None = None,
                quiet: bool = False) -> list[Path]:
    """Download (or find in the cache) and verify every file of a chosen model."""
    if is_offline():
        paths = cached_model(model.repo, quant=model.quant, filename=model.files[0].filename)
        if paths is None:
            raise offline_error(model.repo, model.quant, model.files[0].filename, None)
        return paths
    show = sys.stderr.isatty() if show_progress is None else show_progress
    display = download_progress.open_display(model, show=show)
    started = time.monotonic()
    downloaded = 0
    paths: list[Path] = []
    with display:
        for f in model.files:
            path, fresh = _fetch_file(model, f, force=force, display=display)
            downloaded += f.size if fresh else 0
            paths.append(path)
    if not quiet:
        download_progress.print_summary(model, downloaded, time.monotonic() - started)
    return paths


def _fetch_file(model: HubModel, f: HubFile, *, force: bool, display: Display) -> tuple[Path, bool]:
    """One file: download unless cached, then verify; a cached copy that fails is fetched again once."""
    etag = f.sha256 or f.blob_id
    blob = hub_cache_dir() / repo_folder(model.repo) / "blobs" / etag if etag else None
    cached = not force and (_pointer_path(model.repo, model.revision, f.filename).is_file()
                            or (blob is not None and blob.is_file()))
    path = _hf_download(model, f, force=force, display=display, cached=cached)
    try:
        _verify(path, f, display)
    except HubError:
        if not cached:
            raise
        path = _hf_download(model, f, force=False, display=display, cached=False)
        _verify(path, f, display)
        return path, True
    return path, not cached


def _hf_download(model: HubModel, f: HubFile, *, force: bool, display: Display, cached: bool) -> Path:
    """hf_hub_download one file at the model's commit, with progress; errors become HubError."""
    from huggingface_hub import hf_hub_download

    kwargs: dict[str, Any] = {"repo_id": model.repo, "filename": f.filename, "revision": model.revision,
                              "cache_dir": str(hub_cache_dir()), "force_download": force}
    display.begin_file(f, cached=cached)
    use_tqdm = _supports_tqdm_class()
    if use_tqdm:
        kwargs["tqdm_class"] = download_progress.tqdm_adapter(display)
    else:
        _quiet_hf_bars()
    watch = contextlib.nullcontext() if use_tqdm or cached else download_progress.poll_incomplete(
        hub_cache_dir() / repo_folder(model.repo) / "blobs", f.sha256 or f.blob_id, display)
    try:
        with watch:
            path = Path(hf_hub_download(**kwargs))
    except Exception as exc:
        raise map_hub_error(exc, repo=model.repo, filename=f.filename) from exc
    display.end_file()
    return path


def _verify(path: Path, f: HubFile, display: Display) -> None:
    """Check size and sha256 (or the git blob id for non-LFS files); discard a bad file."""
    if f.sha256 and is_verified(path, f.sha256):
        display.verified(f, hashed=False)
        return
    actual_size = path.stat().st_size
    if actual_size != f.size:
        discard_cached_file(path)
        raise HubError(f"{f.repo}/{f.filename}: downloaded {actual_size:,} bytes, expected {f.size:,}; "
                       "the file was deleted", hint="run the command again to download it afresh")
    display.verifying(f)
    if f.sha256:
        kind, expected = "sha256", f.sha256
        got = actual = sha256_file(path)
    elif f.blob_id:
        kind, expected = "git blob id", f.blob_id
        got, actual = _git_blob_and_sha256(path)
    else:
        raise HubError(f"{f.repo}/{f.filename}: the Hub gave no checksum, so the file cannot be verified",
                       hint="localgen only loads verified downloads; use a local path to load it anyway")
    if got != expected:
        discard_cached_file(path)
        raise HubError(f"{f.repo}/{f.filename}: {kind} mismatch (got {got[:12]}…, expected {expected[:12]}…); "
                       "the corrupt download was deleted",
                       hint="run the command again; if it fails again, the Hub mirror or a proxy "
                            f"({hub_endpoint()}) is serving bad data")
    record_verified(path, actual)
    display.verified(f, hashed=True)
    if not f.sha256:
        _record_sha256(f.repo, f.filename, actual)


def _git_blob_and_sha256(path: Path) -> tuple[str, str]:
    """The git blob id (sha1 of 'blob SIZE\\0' + content) and the sha256, in one read."""
    git = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            git.update(chunk)
            sha.update(chunk)
    return git.hexdigest(), sha.hexdigest()


def discard_cached_file(pointer: Path) -> None:
    """Delete a cached file completely: its snapshot entry, its repo blob, and a shared blob behind it."""
    targets = [pointer]
    if pointer.is_symlink():
        blob = blob_of(pointer)
        targets.append(blob)
        if blob.is_symlink():
            targets.append(Path(os.path.realpath(blob)))
    for target in targets:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()


def _supports_tqdm_class() -> bool:
    """True when hf_hub_download takes a tqdm_class (newer huggingface_hub versions)."""
    import inspect

    from huggingface_hub import hf_hub_download

    try:
        return "tqdm_class" in inspect.signature(hf_hub_download).parameters
    except (TypeError, ValueError):
        return False


def _quiet_hf_bars() -> None:
    """Turn off huggingface_hub's own tqdm bars: localgen draws its own."""
    with contextlib.suppress(ImportError, AttributeError):
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()


# ------------------------------------------------------------------ header range reads (for localgen.quant_choice)

HEADER_READ_TIMEOUT_S = 30.0


def read_header_bytes(repo: str, filename: str, n_bytes: int, *, revision: str | None = None) -> bytes:
    """The first n_bytes of a file on the Hub by an HTTP Range request: nothing is downloaded or cached."""
    if is_offline():
        raise offline_error(repo, None, filename, None)
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    url = hf_hub_url(repo, filename, revision=revision or "main", endpoint=hub_endpoint())
    headers = {**build_hf_headers(), "Range": f"bytes=0-{max(n_bytes, 1) - 1}"}
    try:
        return _read_prefix(get_session(), url, headers, n_bytes)
    except Exception as exc:
        raise map_hub_error(exc, repo=repo, filename=filename) from exc


def _read_prefix(session: Any, url: str, headers: dict[str, str], n_bytes: int) -> bytes:
    """Stream a GET and stop after n_bytes (a server that ignores Range is not read to the end)."""
    from huggingface_hub.utils import hf_raise_for_status

    data = bytearray()
    if hasattr(session, "stream"):  # httpx (huggingface_hub >= 1.0)
        with session.stream("GET", url, headers=headers, follow_redirects=True,
                            timeout=HEADER_READ_TIMEOUT_S) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) >= n_bytes:
                    break
    else:  # requests (huggingface_hub < 1.0)
        with session.get(url, headers=headers, stream=True, allow_redirects=True,
                         timeout=HEADER_READ_TIMEOUT_S) as response:
            hf_raise_for_status(response)
            for chunk in response.iter_content(chunk_size=HASH_CHUNK_BYTES):
                data += chunk
                if len(data) >= n_bytes:
                    break
    return bytes(data[:n_bytes])
