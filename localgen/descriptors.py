"""What a file descriptor is open on: a given file (/dev/null, /dev/full), or a terminal another process group holds."""

from __future__ import annotations

import os


def same_file(fd: int, path: str | os.PathLike[str]) -> bool:
    """Whether fd is open on the file at path (False where fd is closed or path is missing)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def in_background(fd: int) -> bool:
    """True when the terminal belongs to another process group (the shell's, after `bg` or `kill`)."""
    try:
        return os.tcgetpgrp(fd) != os.getpgrp()
    except OSError:  # no terminal
        return False
