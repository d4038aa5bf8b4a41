"""Changes another program (an editor) makes to the file of a conversation this process holds: what the file held
when this process last read or wrote it, and how it differs now."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

_as_left: dict[Path, str] = {}  # a conversation file this process holds -> the sha256 of what it last read or wrote


def remember(path: Path, data: bytes) -> None:
    """Note what a conversation file holds as this process has just read or written it."""
    _as_left[path] = _digest(data)


def forget(path: Path) -> None:
    """Stop following a conversation file this process lets go."""
    _as_left.pop(path, None)


def _digest(data: bytes) -> str:
    """What tells one version of a file from another."""
    return hashlib.sha256(data).hexdigest()


def change_by_hand(path: Path) -> str | None:
    """How another program changed the file of a conversation this process holds since this process last read or
    wrote it: "changed" (edited, replaced, unreadable, a link or a pipe), "deleted", or None (as left, not known, or
    a folder, which no write replaces)."""
    known = _as_left.get(path)
    if known is None:
        return None
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # a pipe is never read (it would wait); a folder fails the write, as before
            return None if stat.S_ISDIR(mode) else "changed"
        data = path.read_bytes()
    except FileNotFoundError:
        return "changed" if os.path.lexists(path) else "deleted"  # a dangling link is someone's too
    except OSError:
        return "changed"
    return None if _digest(data) == known else "changed"
