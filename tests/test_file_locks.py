"""Advisory file locks: one taken without waiting, and whether a locked file is still the one its name leads to."""

from __future__ import annotations

import os
from pathlib import Path

from localgen.file_locks import still_names, try_flock


def test_a_lock_another_open_file_holds_is_refused_without_waiting_until_it_goes(tmp_path: Path) -> None:
    """A second open file (as another process's) cannot take an exclusive lock, nor a shared one, while the first
    holds its lock; once the first is closed it can."""
    path = tmp_path / "held.lock"
    path.touch()
    second = os.open(path, os.O_RDONLY)
    try:
        first = os.open(path, os.O_RDONLY)
        try:
            assert try_flock(first) is True
            assert try_flock(second) is False and try_flock(second, exclusive=False) is False
        finally:
            os.close(first)
        assert try_flock(second, exclusive=False) is True
    finally:
        os.close(second)


def test_a_deleted_or_replaced_file_is_no_longer_named_by_its_path(tmp_path: Path) -> None:
    """A path names the file open while it is there; once deleted, or another file takes its name, it does not."""
    path = tmp_path / "named"
    path.touch()
    fd = os.open(path, os.O_RDONLY)
    try:
        assert still_names(fd, path)
        path.unlink()
        assert not still_names(fd, path)
        path.touch()
        assert not still_names(fd, path)
    finally:
        os.close(fd)
