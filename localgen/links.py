"""Links that lead to nothing: what is wrong with one, said in words (a target not there, a loop, a path through a
file); and the place on a path, its links followed, whose permissions refuse it."""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path

from localgen.shorten import short_path

FILE_LINK_HINT = "point the link at a file that is there, or remove it"  # for a file's broken_link
FOLDER_LINK_HINT = "point the link at a folder that is there, or remove it"  # for a folder's broken_link
LINK_TO_NOTHING_ERRNOS = frozenset({errno.ELOOP, errno.ENOENT, errno.ENOTDIR})  # what a link to nothing fails with


def broken_link(path: Path) -> str | None:
    """What path is where it is a link that leads to nothing ("a link to X, which is not there", X the last link's
    target where links lead to links, or which leads into a loop of links, or which runs through a file); None where
    it is no link, or one that leads somewhere."""
    try:
        target = os.readlink(path)
    except OSError:
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"a link to {short_path(target)}, which leads into a loop of links"
        if exc.errno == errno.ENOTDIR:
            return (f"a link to {short_path(target)}, which cannot be there: "
                    f"{short_path(_file_above(path.parent / target))} is a file")
        if exc.errno == errno.ENOENT:
            return f"a link to {_missing_target(path, target)}, which is not there"
        return f"a link to {short_path(target)}, which cannot be followed ({exc.strerror})"
    return None


def broken_link_behind(path: Path, exc: OSError) -> str | None:
    """broken_link(path) where exc, what path failed with, is what a link that leads to nothing fails with (a target
    not there, a loop of links, a path through a file); None otherwise: a refusal (permissions) is said as such."""
    return broken_link(path) if exc.errno in LINK_TO_NOTHING_ERRNOS else None


def _missing_target(path: Path, target: str) -> str:
    """The target that is not there of path, a link to target that leads to nothing: target, as the link holds it,
    or where that is a link too, the last one's, in full; cut in its middle where long."""
    full = os.path.realpath(path) if os.path.lexists(os.path.join(os.path.dirname(path), target)) else target
    return short_path(full)


def _file_above(path: Path) -> Path:
    """The first of the folders above path that is a file (path's parent where none is found)."""
    return next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), path.parent)


def refusing_place(path: str | os.PathLike[str]) -> Path:
    """The place whose permissions refuse path: the first folder on its way, its links followed (a cache's snapshot
    entry leads into its blobs folder), that may not be entered, else path itself, its links followed."""
    real = Path(os.path.realpath(path))
    for folder, child in itertools.pairwise([*reversed(real.parents), real]):
        try:
            os.lstat(child)
        except PermissionError:
            return folder
        except OSError:
            break
    return real
