"""The local Hugging Face cache, localgen's records about it, and where huggingface_hub points; no network.

Files live in the standard Hugging Face cache (HF_HOME / HF_HUB_CACHE), shared with other Hugging Face tools:
a repo's snapshots/COMMIT/FILE entries link to its blobs/ETAG files. localgen keeps two small records of its own
under its cache directory:
- a listing per repo (`hub/models--ORG--NAME.json`): the commit and the GGUF files with sizes and sha256,
  written whenever the repo is listed, so the same quant is chosen offline (a file of an older commit, verified
  against that commit's listing, keeps its verification marker, so it stays usable when the repo moves on);
- verification markers (verify.py), so a verified file is never rehashed.
A model counts as cached only when every file is present and verified against that listing (where the listing was
deleted, against the sha256 its verification marker keeps).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from localgen.config import settings
from localgen.errors import LocalgenError
from localgen.file_locks import HAS_FLOCK, try_flock
from localgen.file_versions import ReadOnce
from localgen.hub_choice import choose_model, quant_of, shard_of
from localgen.hub_settings import hub_cache_dir
from localgen.hub_types import HubFile, HubListing
from localgen.references import check_safe_filename
from localgen.storage import atomic_write_text
from localgen.verify import is_verified, recorded_sha256


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


# ----------------------------------------------------------------------------- the cache's folders


def repo_folder(repo: str) -> str:
    """The cache folder name of a model repo: models--ORG--NAME."""
    return "models--" + repo.replace("/", "--")


def repo_named(folder: str) -> str:
    """The repo whose cache folder has this name (models--ORG--NAME: ORG/NAME, spelt as the folder is)."""
    return folder.removeprefix("models--").replace("--", "/", 1)


RepoFolders = Mapping[str, Sequence[str]]  # the cache's repo folders: each name in lower case -> its spellings there


def repo_folders(lowered: str | None = None, *, refused: list[PermissionError] | None = None) -> dict[str, list[str]]:
    """The cache's repo folders (models--ORG--NAME) by their names in lower case, each one's spellings sorted, from one
    read of the cache folder (lowered: that name alone): a listing reads it once to spell all its repos, and the next
    listing reads it afresh, so a pull in between is seen. A cache that is not there, or that its permissions keep
    from being read, holds nothing (refused: where given, such a refusal is added to it, for a listing to warn of)."""
    found: dict[str, list[str]] = {}
    try:
        names = sorted(p.name for p in hub_cache_dir().iterdir() if _repo_folder_named(p.name.lower(), lowered)
                       and p.is_dir())
    except PermissionError as exc:
        if refused is not None:
            refused.append(exc)
        return found
    except OSError:
        return found
    for name in names:
        found.setdefault(name.lower(), []).append(name)
    return found


def folders_of(repo: str) -> dict[str, list[str]]:
    """The cache's folders of repo alone (in each spelling there), as repo_folders reads them: a command about one repo
    reads no other's, which its permissions may keep from being read."""
    return repo_folders(repo_folder(repo).lower())


def _repo_folder_named(lowered_name: str, lowered: str | None) -> bool:
    """Whether a folder whose name is lowered_name in lower case is the repo folder named lowered (None: any)."""
    return lowered_name == lowered if lowered is not None else lowered_name.startswith("models--")


def cached_spelling(repo: str, folders: RepoFolders | None = None) -> str:
    """The repo as the cache already spells it (Hub repo ids ignore case: Org/Model is org/model), or as given
    when the cache has no folder for it, so that no second copy is made and an offline run finds the first. Where
    another tool made a second folder in another case, the one localgen downloaded into (and listed) wins. folders:
    the cache's repo folders as a listing read them (repo_folders), else they are read now."""
    exact = repo_folder(repo)
    if os.path.isfile(_listing_file(exact)) and (hub_cache_dir() / exact).is_dir():  # localgen's download, as typed
        return repo
    wanted = exact.lower()
    spellings = (folders if folders is not None else repo_folders(wanted)).get(wanted, ())
    listed = [folder for folder in spellings if os.path.isfile(_listing_file(folder))]  # (False: not to be entered)
    choices = listed or spellings
    if not choices or exact in choices:
        return repo
    return repo_named(choices[0])


def orphaned_partials(repo: str, keep: Collection[str] = ()) -> list[Path]:
    """A repo's partial downloads that no running download holds and no pull will resume: huggingface_hub's own
    (ETAG.RANDOM.incomplete, left by a killed process: each download writes its own), and localgen's resumable
    ETAG.incomplete where the etag is not in keep (the blobs of files the repo still has: a stale etag is never
    resumed) or the blob is complete (a pull --force stopped part way). None where a running download cannot be
    told."""
    blobs = blobs_dir(repo)
    found = []
    for partial in sorted(blobs.glob("*.incomplete")):
        etag = partial.name.split(".", 1)[0]
        if partial.name.count(".") == 1 and etag in keep and not (blobs / etag).exists():
            continue
        if download_running(repo, etag) is False:
            found.append(partial)
    return found


def listed_blobs(repo: str, *, leaving: Collection[str] = ()) -> set[str]:
    """The blob names (sha256, or git blob id outside LFS) of the files localgen last listed in a repo, but for
    the files named in leaving."""
    listing = load_listing(repo)
    files = listing.files if listing else ()
    return {etag for f in files if f.filename not in leaving and (etag := f.blob)}


def blobs_dir(repo: str) -> Path:
    """The folder of a repo's blobs in the Hugging Face cache: each file's bytes, named by its etag."""
    return hub_cache_dir() / repo_folder(repo) / "blobs"


def lock_folder(repo: str) -> Path:
    """The folder of huggingface_hub's lock files for the downloads of a repo's blobs."""
    return hub_cache_dir() / ".locks" / repo_folder(repo)


def blob_lock_path(repo: str, blob: str) -> Path:
    """huggingface_hub's lock file for the download of one of a repo's blobs."""
    return lock_folder(repo) / f"{blob}.lock"


def partial_path(repo: str, blob: str) -> Path:
    """Where a download of a blob keeps the bytes received so far, for the next one to resume."""
    return blobs_dir(repo) / f"{blob}.incomplete"


def partial_size(repo: str, blob: str) -> int:
    """The bytes of a blob a download has kept so far (0: none)."""
    try:
        return partial_path(repo, blob).stat().st_size
    except OSError:
        return 0


def download_running(repo: str, blob: str) -> bool | None:
    """True where a download of this blob (its sha256 or git blob id) holds huggingface_hub's lock on it now, False
    where none does (or none ever ran here), None where that cannot be told: a system without flock, or a lock file
    that cannot be tested (unreadable, or on a file system without locks)."""
    if not HAS_FLOCK:
        return None
    return _lock_state(blob_lock_path(repo, blob))


def download_may_run(repo: str, blob: str) -> bool:
    """Whether a download of this blob may hold its lock now: it does, or its lock file cannot be tested (on a file
    system without locks, huggingface_hub's lock is that file itself); False on systems without flock."""
    return HAS_FLOCK and download_running(repo, blob) is not False


def downloads_running(repo_dir: Path) -> bool:
    """Whether a download of any blob of the repo whose cache folder is repo_dir holds huggingface_hub's lock on it
    now (False on systems without flock, where that cannot be told)."""
    if not HAS_FLOCK:
        return False
    # a lock that cannot be tested (no locks on this file system) keeps nothing: a killed pull's leftover lock file
    # would keep an emptied folder for good, and a pull whose folder goes makes it again
    return any(_lock_state(lock) for lock in (hub_cache_dir() / ".locks" / repo_dir.name).glob("*.lock"))


LOCKS_HELD_HERE: set[Path] = set()  # the blob locks this process holds as it removes their blobs (blob_locks.py)
# or until it has checked the model it fetched them for (hub_resume.py)


def _lock_state(lock: Path) -> bool | None:
    """True where another process holds the lock file lock (a download is writing its blob now), False where none does
    or there is no such file, None where that cannot be told (unreadable, or a file system without locks)."""
    if lock in LOCKS_HELD_HERE:
        return False
    try:
        with open(lock, "rb") as handle:
            taken = try_flock(handle.fileno())  # released on close
    except FileNotFoundError:
        return False  # no lock: no download of that blob ever ran here
    except OSError:
        return None
    return None if taken is None else not taken


def pointer_path(repo: str, revision: str, filename: str) -> Path:
    """The snapshot path of a file at a commit in the HF cache."""
    return hub_cache_dir() / repo_folder(repo) / "snapshots" / revision / filename


# ----------------------------------------------------------------------------- localgen's repo listings


def _listing_path(repo: str, folders: RepoFolders | None = None) -> Path:
    """Where localgen keeps its last listing of a repo (under the spelling the cache already uses: cached_spelling)."""
    return _listing_file(repo_folder(cached_spelling(repo, folders)))


def _listing_file(folder: str) -> Path:
    """Where localgen keeps its last listing of the repo whose cache folder is named folder (models--ORG--NAME)."""
    return settings().cache_dir / "hub" / f"{folder}.json"


def save_listing(listing: HubListing) -> None:
    """Remember a repo listing so the same file is chosen without the network."""
    data = {"repo": listing.repo, "revision": listing.revision, "listed_at": time.time(),
            "files": [{"filename": f.filename, "size": f.size, "sha256": f.sha256, "blob_id": f.blob_id}
                      for f in listing.files]}
    with contextlib.suppress(LocalgenError):
        atomic_write_text(_listing_path(listing.repo), json.dumps(data, indent=1), own_record=True)


_LISTINGS: ReadOnce[HubListing | None] = ReadOnce()


def load_listing(repo: str, folders: RepoFolders | None = None) -> HubListing | None:
    """The last listing of a repo that localgen saw, if any (folders: as cached_spelling takes them); read once a
    process while its file stays the same version."""
    path = _listing_path(repo, folders)
    return _LISTINGS.read(path, lambda: _read_listing(repo, path), tag=repo)


def _read_listing(repo: str, path: Path) -> HubListing | None:
    """A listing file of a repo as load_listing reads it; None where it is unreadable or malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = []
        for entry in data["files"]:
            filename = str(entry["filename"])
            check_safe_filename(filename)
            index, count = shard_of(filename)
            files.append(HubFile(repo=repo, filename=filename, size=int(entry["size"]),
                                 sha256=entry.get("sha256"), quant=quant_of(filename),
                                 shard_index=index, shard_count=count, blob_id=entry.get("blob_id")))
        return HubListing(repo=repo, revision=str(data["revision"]), files=tuple(files))
    except (OSError, ValueError, KeyError, TypeError, LocalgenError):
        return None


def cached_listing(repo: str, folders: RepoFolders | None = None) -> list[HubFile] | None:
    """The repo's GGUF files as localgen last listed them, if ever (where that listing is gone, the files it verified
    in the cache: _verified_listing; folders: as cached_spelling takes them)."""
    listing = load_listing(repo, folders) or _verified_listing(repo)
    return list(listing.files) if listing else None


def _verified_listing(repo: str) -> HubListing | None:
    """Where localgen's listing of a repo is gone (deleted by hand) but files it verified are in the cache (their
    markers keep their sha256): a listing of those files alone, each from the newest snapshot holding it verified, at
    the newest snapshot's commit, so they are found as `models list` lists them; None when there are none. It is
    never saved, nor taken for what the repo lacks."""
    snapshots = hub_cache_dir() / repo_folder(repo) / "snapshots"
    try:
        folders = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    files: dict[str, HubFile] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            filename = path.relative_to(folder).as_posix()
            if path.suffix.lower() != ".gguf" or filename in files or not path.is_file():
                continue
            sha = recorded_sha256(path)
            if sha is not None:
                index, count = shard_of(filename)
                files[filename] = HubFile(repo=repo, filename=filename, size=path.stat().st_size, sha256=sha,
                                          quant=quant_of(filename), shard_index=index, shard_count=count)
    return HubListing(repo=repo, revision=folders[0].name, files=tuple(files.values())) if files else None


def record_sha256(repo: str, filename: str, sha256: str) -> None:
    """Store a computed sha256 (for files the Hub keeps outside LFS) in the repo listing."""
    listing = load_listing(repo)
    if listing is None:
        return
    files = tuple(replace(f, sha256=sha256) if f.filename == filename else f for f in listing.files)
    save_listing(HubListing(repo=repo, revision=listing.revision, files=files))


# ----------------------------------------------------------------------------- cached files


def cached_model(repo: str, *, quant: str | None, filename: str | None,
                 folders: RepoFolders | None = None) -> list[Path] | None:
    """The model's files from the local cache if all are present and verified; where the repo's listing no longer
    names them (the repo dropped them since), the files verified before, which their markers keep, are looked in
    (folders: as cached_spelling takes them)."""
    repo = cached_spelling(repo, folders)
    listing = load_listing(repo, folders)
    found = _listed_copy(listing or _verified_listing(repo), repo, quant=quant, filename=filename)
    if found is None and listing is not None:
        found = _listed_copy(_verified_listing(repo), repo, quant=quant, filename=filename)
    return found


def _listed_copy(listing: HubListing | None, repo: str, *, quant: str | None,
                 filename: str | None) -> list[Path] | None:
    """The model's files as a listing names them, if all are in the cache and verified."""
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
    listed = snapshot.name == listing.revision
    if not all(_verified(path, f.sha256, listed=listed) for path, f in zip(paths, chosen, strict=True)):
        return None
    return paths


def _verified(path: Path, listed_sha256: str | None, *, listed: bool) -> bool:
    """Whether localgen verified this file: at the listed commit, against the listing's sha256 (none: not verified);
    at an older commit (listed before the repo moved on), against its own commit's, which its marker keeps."""
    if listed:
        return bool(listed_sha256) and is_verified(path, listed_sha256 or "")
    return recorded_sha256(path) is not None


def _snapshot_with(repo: str, filenames: list[str], preferred: str) -> Path | None:
    """The snapshot folder holding all filenames: the preferred commit first, then the newest (a snapshots folder its
    permissions keep from being read raises PermissionError: the model may be there)."""
    snapshots = hub_cache_dir() / repo_folder(repo) / "snapshots"
    try:
        others = sorted((p for p in snapshots.iterdir() if p.name != preferred),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except PermissionError:
        raise
    except OSError:
        return None
    for folder in (snapshots / preferred, *others):
        if all((folder / name).is_file() for name in filenames):
            return folder
    return None


def cached_gguf_files(*, dangling: bool = False, folders: RepoFolders | None = None,
                      refused: list[PermissionError] | None = None) -> list[CachedHubFile]:
    """Every GGUF file in the local Hugging Face cache's model snapshots (dangling: also links to data deleted by
    hand, with size 0, which only removal wants; folders: the cache's repo folders as a listing read them, else they
    are read now). A place of a repo its permissions keep from being read (its folder, its snapshots, its blobs) raises
    PermissionError, or, where refused is given, is added to it (for a listing to warn of) and passed over."""
    root = hub_cache_dir()
    folders = repo_folders() if folders is None else folders
    found: list[CachedHubFile] = []
    for name in sorted(name for names in folders.values() for name in names if name.startswith("models--")):
        parts, repo_dir = name.split("--"), root / name
        if len(parts) != 3:
            continue
        repo = f"{parts[1]}/{parts[2]}"
        listing = load_listing(repo, folders)
        expected = {f.filename: f.sha256 for f in listing.files} if listing else {}
        for snapshot in _snapshots(repo_dir, refused):
            listed = listing is not None and snapshot.name == listing.revision
            for path in _gguf_entries(snapshot, refused):
                try:
                    cached = _cached_file(repo, snapshot, path, expected.get if listed else None, dangling=dangling)
                except PermissionError as exc:
                    if refused is None:
                        raise
                    refused.append(exc)
                    continue
                if cached is not None:
                    found.append(cached)
    return found


def _gguf_entries(snapshot: Path, refused: list[PermissionError] | None) -> list[Path]:
    """The entries named *.gguf in a snapshot folder and the folders in it (not through links), sorted; a folder its
    permissions keep from being read raises PermissionError, or is added to refused where given and passed over."""
    found: list[Path] = []

    def unread(exc: OSError) -> None:
        if not isinstance(exc, PermissionError):
            return  # gone meanwhile: nothing of it to list
        if refused is None:
            raise exc
        refused.append(exc)

    for folder, subfolders, files in os.walk(snapshot, onerror=unread):
        found += [Path(folder, name) for name in (*subfolders, *files) if Path(name).suffix.lower() == ".gguf"]
    return sorted(found)


def _cached_file(repo: str, snapshot: Path, path: Path, listed_sha256: Callable[[str], str | None] | None, *,
                 dangling: bool) -> CachedHubFile | None:
    """The snapshot entry at path as a CachedHubFile (listed_sha256: the sha256 of a file by name, where the snapshot
    is the listed commit's), None where it is no file (dangling: a link to data deleted by hand is one, of size 0);
    PermissionError where its permissions (its blob's folder's) keep it from being looked at."""
    filename = path.relative_to(snapshot).as_posix()
    if not path.is_file():
        if dangling and path.is_symlink() and not path.exists():
            return CachedHubFile(repo=repo, filename=filename, revision=snapshot.name, path=path, blob=blob_of(path),
                                 size=0, sha256=None, verified=False)
        return None
    sha = listed_sha256(filename) if listed_sha256 is not None else recorded_sha256(path)
    verified = _verified(path, sha, listed=True) if listed_sha256 is not None else sha is not None
    return CachedHubFile(repo=repo, filename=filename, revision=snapshot.name, path=path, blob=blob_of(path),
                         size=path.stat().st_size, sha256=sha, verified=verified)


def _snapshots(repo_dir: Path, refused: list[PermissionError] | None) -> list[Path]:
    """The snapshot folders of the repo whose cache folder is repo_dir, sorted (none where there is no snapshots
    folder); one its permissions keep from being read raises PermissionError, or is added to refused where given."""
    try:
        return sorted((repo_dir / "snapshots").iterdir())
    except PermissionError as exc:
        if refused is None:
            raise
        refused.append(exc)
    except OSError:
        pass
    return []


def blob_of(pointer: Path) -> Path:
    """The repo blob a snapshot entry links to (one link hop), or the entry itself if it is a file."""
    if not pointer.is_symlink():
        return pointer
    return Path(os.path.normpath(pointer.parent / os.readlink(pointer)))
