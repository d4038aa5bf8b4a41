"""The data behind a snapshot entry of the Hugging Face cache, and what of it localgen may delete.

A snapshot entry (snapshots/COMMIT/FILE) links to its repo's blob (blobs/ETAG), which may link on to Xet's
cache-wide shared store; all of that is the cache's. A user may link an entry to a file of their own elsewhere (a
fine-tune, a copy on another disk): that file is theirs, and removing or replacing the entry removes the link alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from localgen.errors import LocalgenError
from localgen.hub_cache import blob_of, hub_cache_dir


def in_cache(path: Path) -> bool:
    """Whether a file lies inside the Hugging Face cache folder, by where it is (its folder's real path), not where a
    link leads."""
    return (Path(os.path.realpath(path.parent)) / path.name).is_relative_to(hub_cache_dir())


def data_behind(entry: Path) -> list[Path]:
    """The cache's own data a snapshot entry links to: its repo blob and, where that blob is a link itself (Xet's
    shared store), the file behind it; never a file outside the cache (none for an entry that is no link)."""
    if not entry.is_symlink() or not in_cache(blob := blob_of(entry)):
        return []
    real = Path(os.path.realpath(blob))
    return [blob, real] if blob.is_symlink() and real != blob and in_cache(real) else [blob]


def outside_cache(entry: Path) -> Path | None:
    """The file outside the Hugging Face cache that a snapshot entry leads to (a user's own, linked in), or None."""
    if not entry.is_symlink():
        return None
    real = Path(os.path.realpath(entry))
    return real if real.exists() and not in_cache(real) else None


def discard_cached_file(pointer: Path) -> Path | None:
    """Delete a cached file completely: its snapshot entry, its repo blob, and a shared blob behind it; where the
    entry leads to a file outside the cache, only the link goes, and that file, kept, is returned."""
    outside = outside_cache(pointer)
    for target in [pointer, *data_behind(pointer)]:
        try:
            target.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:  # a read-only cache: the bad file cannot go, and must not be used
            raise LocalgenError(f"cannot delete the bad download {target}: {exc.strerror or exc}",
                                hint="delete it by hand, or check the permissions of the Hugging Face cache") from exc
    return outside
