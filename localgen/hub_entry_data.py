"""The data behind a snapshot entry of the Hugging Face cache, and what of it localgen may delete.

A snapshot entry (snapshots/COMMIT/FILE) links to its repo's blob (blobs/ETAG), which may link on to Xet's
cache-wide shared store; all of that is the cache's, wherever the repo folder really is (one moved to another disk and
linked back is still the cache's). A user may link an entry to a file of their own elsewhere (a fine-tune, a copy on
another disk), or to another model's file in the cache (another repo's blob): that file is theirs, or that model's,
and removing or replacing the entry removes the link alone. An entry may also lead to the model's own blob through a
link of the user's: the blob is the model's, the link the user's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from localgen.errors import LocalgenError, os_reason
from localgen.hub_cache import blob_of, hub_cache_dir


def in_cache(path: Path) -> bool:
    """Whether a file lies inside the Hugging Face cache folder, by where it is (its folder's real path), not where a
    link leads."""
    return (Path(os.path.realpath(path.parent)) / path.name).is_relative_to(hub_cache_dir())


def links_to_repo_blob(entry: Path) -> bool:
    """Whether a snapshot entry is a link into its own repo's blobs folder, judged by where both really are (a repo
    folder linked in from another disk included), not by where the link leads beyond that blob."""
    cache = hub_cache_dir()
    repo_folder = next((folder for folder in entry.parents if folder.parent == cache), None)
    if repo_folder is None or not entry.is_symlink():
        return False
    target_folder = Path(os.path.realpath(entry.parent / os.path.dirname(os.readlink(entry))))
    return target_folder.is_relative_to(os.path.realpath(repo_folder / "blobs"))


def data_behind(entry: Path) -> list[Path]:
    """The cache's own data a snapshot entry links to: its repo blob and, where that blob is a link itself (Xet's
    shared store), the file behind it; never a file of the user's (none for an entry that is no link)."""
    return blob_data(blob_of(entry)) if links_to_repo_blob(entry) else []


def blob_data(blob: Path) -> list[Path]:
    """A repo blob and, where it is a link itself (Xet's shared store), the file of the cache's behind it."""
    real = Path(os.path.realpath(blob))
    return [blob, real] if blob.is_symlink() and real != blob and in_cache(real) else [blob]


def users_file_behind(entry: Path) -> Path | None:
    """The file a snapshot entry links to in place of a blob of its repo, which only the link to goes (the user's own,
    or another model's: another_models_file tells), or None."""
    if not entry.is_symlink() or links_to_repo_blob(entry):
        return None
    real = Path(os.path.realpath(entry))
    return real if real.exists() else None


def another_models_file(file: Path) -> bool:
    """Whether a file a snapshot entry links to in place of a blob of its repo (users_file_behind) is another
    model's: by its real path, one in the cache folder (Xet's shared store included) or in one of its repo folders
    (models--*) wherever that folder really is (one moved to another disk and linked back included); any other file
    is the user's own."""
    real = Path(os.path.realpath(file))
    cache = hub_cache_dir()
    return any(real.is_relative_to(os.path.realpath(place)) for place in [cache, *cache.glob("models--*")])


@dataclass(frozen=True)
class LinkedFile:
    """A file a snapshot entry links to in place of a blob of its repo (users_file_behind): where it really is, whose
    it is (the model's own blob, reached through a link of the user's; another model's file in the cache; or the
    user's own), and what the entry links to (that link of the user's, for the model's own blob)."""

    path: Path
    whose: Literal["the model's", "another model's", "the user's"]
    link: Path

    @property
    def kept(self) -> Path:
        """What replacing the entry leaves as it was: the user's link to the model's own blob, else the file."""
        return self.link if self.whose == "the model's" else self.path


def model_blobs(blobs: Path, etags: Iterable[str | None]) -> list[Path]:
    """The blobs of a model's files in its repo's blobs folder (blobs), by their etags (the sha256 or git blob id of
    every file of the model, each shard's), where they are there: what pull and models rm tell the model's own by."""
    wanted = {etag for etag in etags if etag}
    try:  # by the names the folder holds: an etag is never taken for a path
        return sorted(blob for blob in blobs.iterdir() if blob.name in wanted)
    except OSError:
        return []


def linked_file(entry: Path, own_blobs: Iterable[Path] = ()) -> LinkedFile | None:
    """What a snapshot entry links to in place of a blob of its repo, and whose it is: the model's own where it is
    one of own_blobs (the blobs of the model's files, model_blobs, by their real paths), else another model's
    (another_models_file) or the user's; None for an entry that is no link, or links to its repo's blob itself."""
    real = users_file_behind(entry)
    if real is None:
        return None
    if real in {Path(os.path.realpath(blob)) for blob in own_blobs}:
        return LinkedFile(real, "the model's", blob_of(entry))
    return LinkedFile(real, "another model's" if another_models_file(real) else "the user's", blob_of(entry))


def linked_file_named(linked: LinkedFile) -> str:
    """A file a snapshot entry links to in place of a blob of its repo, as a note names it: its path, and whose it is
    where it is a model's."""
    if linked.whose == "the model's":
        return f"{linked.path} through {linked.link} (a link of yours to the model's file)"
    if linked.whose == "another model's":
        return f"{linked.path} (another model's file in the cache)"
    return str(linked.path)


def discard_cached_file(pointer: Path, own_blobs: Sequence[Path] = ()) -> LinkedFile | None:
    """Delete a cached file completely: its snapshot entry, its repo blob, and a shared blob behind it; where the
    entry leads elsewhere (to a file of the user's, another model's, or through a link of the user's to one of
    own_blobs, the model's: linked_file), only the link goes, and what it led to, kept, is returned."""
    linked = linked_file(pointer, own_blobs)
    for target in [pointer, *data_behind(pointer)]:
        try:
            target.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:  # a read-only cache: the bad file cannot go, and must not be used
            raise LocalgenError(f"cannot delete the bad download {target}: {os_reason(exc)}",
                                hint="delete it by hand, or check the permissions of the Hugging Face cache") from exc
    return linked
