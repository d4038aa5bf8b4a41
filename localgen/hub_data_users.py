"""Which snapshot entries of the Hugging Face cache lead to each blob (or file behind a link), so that models rm and a
pull's replacement of a model delete only data nothing else uses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localgen import hub_cache

SHARED_STORE_NAME = "blobs"  # huggingface_hub's SHARED_BLOBS_DIR_NAME, in the cache folder


@dataclass(frozen=True)
class DataUsers:
    """The snapshot entries that lead to each blob (and to each real file behind a link), but for those going, with
    the places of other repos that could not be read (their permissions)."""

    entries: dict[Path, set[Path]]
    repo_dir: Path
    unread: tuple[Path, ...] = ()

    def of(self, blob: Path) -> set[Path]:
        """The entries that lead to a blob of repo_dir, by its path or its real path; where that real path is in Xet's
        shared store and another repo could not be read, the places unread, which may use it (any other file is
        repo_dir's own, wherever its blobs folder really is)."""
        real = Path(os.path.realpath(blob))
        found = self.entries.get(blob, set()) | self.entries.get(real, set())
        shared = real.is_relative_to(os.path.realpath(shared_store_dir()))
        return found or (set(self.unread) if shared else set())


def shared_store_dir() -> Path:
    """huggingface_hub's cache-wide shared store of Xet blobs: the cache's own blobs folder (blobs/XX/HASH), which
    the blobs of every repo may link to."""
    return hub_cache.hub_cache_dir() / SHARED_STORE_NAME


def data_users(going: set[Path], repo_dir: Path) -> DataUsers:
    """The users of the cache's data but for the entries going. Every entry of repo_dir, the repo whose data goes, is
    read (a place of it that cannot be is raised, PermissionError, never passed over); another repo's that cannot be
    is passed over, noted: its entries lead to its own blobs, unless Xet's shared store leads them to data of
    repo_dir's, which DataUsers.of takes as theirs."""
    entries: dict[Path, set[Path]] = {}
    unread: list[Path] = []
    for entry in _snapshot_entries(repo_dir, unread):
        if entry in going:
            continue
        try:
            if entry.is_symlink():
                entries.setdefault(hub_cache.blob_of(entry), set()).add(entry)
            entries.setdefault(Path(os.path.realpath(entry)), set()).add(entry)
        except PermissionError:
            if repo_dir in entry.parents:
                raise
            unread.append(entry.parent)  # a commit folder that may be listed, not entered (mode 644)
    return DataUsers(entries, repo_dir, tuple(dict.fromkeys(unread)))


def _snapshot_entries(repo_dir: Path, unread: list[Path]) -> Iterator[Path]:
    """Every file or link under every repo's snapshots folder in the cache: repo_dir's first, whose places that cannot
    be read are raised; another repo's that cannot be are added to unread."""
    others = sorted(path for path in hub_cache.hub_cache_dir().glob("*--*") if path != repo_dir)
    for repo in (repo_dir, *others):
        own = repo == repo_dir

        def refused(exc: OSError, own: bool = own) -> None:
            if own or not isinstance(exc, PermissionError):
                raise exc
            unread.append(Path(exc.filename))

        snapshots = repo / "snapshots"
        try:
            if not snapshots.is_dir():
                continue
        except PermissionError as exc:
            refused(exc)
            continue
        for dirpath, _dirs, names in os.walk(snapshots, onerror=refused):
            yield from (Path(dirpath) / name for name in names)
