"""The copies of a model that a pull replacing them kept as a run loaded them, recorded under localgen's data folder
(kept/MODELS--ORG--NAME@COMMIT.json: the repo, the commit, and the blob each file of it leads to), so that a later pull
removes that copy and no other snapshot of the repo (another tool's, a revision pinned by `hf download --revision`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path

from localgen import hub_cache
from localgen.config import settings
from localgen.storage import atomic_write_text

KEPT_DIRNAME = "kept"


@dataclass(frozen=True)
class KeptCopy:
    """A copy a pull kept: its snapshot folder and the entries of it that pull was to remove."""

    snapshot: Path
    entries: tuple[Path, ...]


def _record_path(repo_dir: Path, commit: str) -> Path:
    """Where the record of a repo's kept copy at this commit lies."""
    return settings().data_dir / KEPT_DIRNAME / f"{repo_dir.name}@{commit}.json"


def record(snapshot: Path, entries: list[Path]) -> None:
    """Record the copy of a model a pull kept (these entries of snapshot, each with the blob it leads to); a record
    that cannot be written is left unwritten (the copy then stays until models rm removes the model)."""
    files = {entry.relative_to(snapshot).as_posix(): hub_cache.blob_of(entry).name
             for entry in entries if entry.is_symlink()}
    if not files:
        return
    repo_dir = snapshot.parent.parent
    body = {"repo": repo_dir.name, "commit": snapshot.name, "files": files}
    with contextlib.suppress(OSError):
        atomic_write_text(_record_path(repo_dir, snapshot.name), json.dumps(body, indent=1) + "\n", own_record=True)


def drop(snapshot: Path) -> None:
    """Forget the record of a kept copy, once it is removed or gone."""
    with contextlib.suppress(OSError):
        _record_path(snapshot.parent.parent, snapshot.name).unlink(missing_ok=True)


def recorded(new: Path) -> KeptCopy | None:
    """A copy of the model in snapshot new that a pull recorded as kept and that may go now: its snapshot not new,
    named by no refs/* file, and each of its recorded entries gone or still leading to its recorded blob (a record
    whose snapshot or entries are all gone is dropped); None where there is none."""
    repo_dir = new.parent.parent
    named = _ref_commits(repo_dir)
    pattern = glob.escape(str(settings().data_dir / KEPT_DIRNAME / f"{repo_dir.name}@")) + "*.json"
    for path in sorted(glob.glob(pattern)):
        files = _read(Path(path), repo_dir.name)
        if files is None:
            continue
        commit = Path(path).name.removeprefix(f"{repo_dir.name}@").removesuffix(".json")
        snapshot = repo_dir / "snapshots" / commit
        if snapshot == new or commit in named:
            continue
        there = {snapshot / name: blob for name, blob in files.items() if os.path.lexists(snapshot / name)}
        if not there:
            drop(snapshot)
        elif all(entry.is_symlink() and hub_cache.blob_of(entry).name == blob for entry, blob in there.items()):
            return KeptCopy(snapshot, tuple(sorted(there)))
    return None


def named_by_ref(snapshot: Path) -> bool:
    """Whether a refs/* file of the snapshot's repo names its commit (a tag, a branch, a revision pinned with `hf
    download --revision`): no copy for a pull to remove."""
    return snapshot.name in _ref_commits(snapshot.parent.parent)


def _read(path: Path, repo_folder: str) -> dict[str, str] | None:
    """The files (name -> blob) a record holds, where it is one of this repo folder's; None where it cannot be read."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = body.get("files") if isinstance(body, dict) and body.get("repo") == repo_folder else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    if any(name.startswith("/") or ".." in Path(name).parts for name in files):
        return None
    return files


def _ref_commits(repo_dir: Path) -> set[str]:
    """The commits the repo's refs/* files name (main, a tag, a PR branch)."""
    commits: set[str] = set()
    for dirpath, _dirs, names in os.walk(repo_dir / "refs"):
        for name in names:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                commits.add((Path(dirpath) / name).read_text(encoding="utf-8").strip())
    return commits
