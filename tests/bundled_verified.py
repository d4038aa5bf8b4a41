"""The bundled model's verification marker, made once a test run by localgen's own check, put into each fresh localgen
home before a test's localgen first uses it: there, a first use would hash the 94 MiB file again (0.2 s, and fresh
homes are made hundreds of times a run). A test of that first-use check itself, or of what a fresh home holds, is
marked `first_use` and gets its homes as localgen finds them on a machine: the bundled file not checked yet.

A home is fresh where LOCALGEN_HOME names a folder without a cache folder, of this user's and with a mode that lets the
user write to it (or, where it is not made yet, the nearest folder above it is so): what a test put there stays as the
test made it, and a home a test gave another user or took the user's own rights to is left alone."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

FIRST_USE_MARK = "first_use"
_seeding = True  # False while a test marked first_use runs


@pytest.fixture(autouse=True)
def bundled_verified_unless_first_use(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fresh homes get the bundled model's marker during this test, unless it is marked first_use."""
    global _seeding
    _seeding = request.node.get_closest_marker(FIRST_USE_MARK) is None
    yield
    _seeding = True


def bundled_marker() -> tuple[Path, bytes] | None:
    """Where, under a localgen cache folder, the bundled model's verification marker lives, and its bytes, as
    localgen's own check (verify_file, against the built-in entry's sha256 and size) writes them, made once (a
    test's threads may ask at once); None without the bundled model's package."""
    with _making:
        return _bundled_marker()


_making = threading.Lock()


@functools.cache
def _bundled_marker() -> tuple[Path, bytes] | None:
    """bundled_marker's answer, made."""
    from localgen import config
    from localgen.catalog import builtin_bundled_file
    from localgen.errors import LocalgenError
    from localgen.registry import load_registry
    from localgen.verify import _marker_path, verify_file

    registry = load_registry()
    spec = registry.get(registry.default_model)
    try:
        path = builtin_bundled_file()
    except LocalgenError:  # not installed: no run finds the file to check
        return None
    kept = config._settings
    with tempfile.TemporaryDirectory() as cache:
        config._settings = dataclasses.replace(config.settings(), cache_dir=Path(cache))
        try:
            verify_file(path, sha256=spec.sha256 or "", size=spec.size)
            marker = _marker_path(path)
            return marker.relative_to(cache), marker.read_bytes()
        finally:
            config._settings = kept


def seed_bundled_verified(env: Mapping[str, str]) -> None:
    """Put the bundled model's marker into the fresh localgen home env names (LOCALGEN_HOME), as the folders and the
    file localgen itself would make there; anything else is left as it is."""
    home = env.get("LOCALGEN_HOME", "")
    if not _seeding or not os.path.isabs(home):
        return
    cache = Path(home) / "cache"
    with contextlib.suppress(OSError):  # whatever is in the way, localgen meets it as the test made it
        nearest = next(folder for folder in (Path(home), *Path(home).parents) if os.path.lexists(folder))
        if os.path.lexists(cache) or not _own_folder(nearest):
            return
        made = bundled_marker()
        if made is None:
            return
        where, text = made
        marker = cache / where
        marker.parent.mkdir(parents=True)
        descriptor = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(descriptor, "wb") as file:
            file.write(text)


def _own_folder(path: Path) -> bool:
    """True where path is a folder (not a link) of this user's that its mode lets the user read, enter and write."""
    info = path.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o700 == 0o700
