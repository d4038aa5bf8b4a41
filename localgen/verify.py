"""Hashing model files, and remembering which version of a file was verified so it is not rehashed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localgen.config import settings
from localgen.errors import LocalgenError, os_reason, read_failure
from localgen.links import refusing_place
from localgen.storage import atomic_write_text

HASH_CHUNK_BYTES = 8 * 1024 * 1024


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn an OSError met while reading a model file into a one-line error that names the file."""
    try:
        yield
    except OSError as exc:
        raise read_failure(path, exc, hint="check that the file exists and is readable (permissions, disk)") from exc


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's contents."""
    digest = hashlib.sha256()
    with reading(path), path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def git_blob_id_and_sha256(path: Path) -> tuple[str, str]:
    """The git blob id (sha1 of 'blob SIZE\\0' + content) and the sha256 of a file, in one read."""
    sha = hashlib.sha256()
    with reading(path), path.open("rb") as handle:
        git = hashlib.sha1(f"blob {os.fstat(handle.fileno()).st_size}\0".encode(), usedforsecurity=False)
        while chunk := handle.read(HASH_CHUNK_BYTES):
            git.update(chunk)
            sha.update(chunk)
    return git.hexdigest(), sha.hexdigest()


def path_key(path: Path) -> str:
    """A file-name-safe key for a file's resolved path (for markers kept about it); any bytes may name the file, and
    a loop of links has a key too (Path.resolve would raise)."""
    return hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:32]


def _marker_path(path: Path) -> Path:
    """Where the verification marker of a file lives."""
    return settings().verified_dir / f"{path_key(path)}.json"


def _identity(path: Path) -> dict[str, int]:
    """What names this version of the file at a path: its size, mtime and inode.

    A rewrite in place changes the mtime; a file renamed into place (an atomic save, `rsync -a`) may carry an
    old mtime but has another inode. Markers and file_identity_key both use this, so they go stale together. Looser
    than file_versions.stat_version, a process's and gguf_cache's version (no change time, which a chmod or a new
    hard link moves too): a file hashed again costs minutes.
    """
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def _marker_says(path: Path, key: str, sha256: str) -> bool:
    """True when this exact file's marker holds sha256 under key ("sha256": verified, "failed_sha256": failed)."""
    try:
        marker = json.loads(_marker_path(path).read_text())
        return marker.get(key) == sha256.lower() and marker.get("identity") == _identity(path)
    except (OSError, ValueError, AttributeError):
        return False


def is_verified(path: Path, sha256: str) -> bool:
    """True when a marker says this exact file was verified against sha256."""
    return _marker_says(path, "sha256", sha256)


@dataclass(frozen=True)
class UnreadableRecord:
    """A verification marker that permissions keep from being read: the marker, there (another user's: a pull under
    sudo), or the folder that may not be entered, where whether one is there cannot be told."""

    place: Path
    reason: str
    there: bool


def unreadable_record(path: Path) -> UnreadableRecord | None:
    """Where a file's verification marker, or whether there is one, cannot be read for permissions, which place
    refuses and why; None where it can be read or is not there."""
    marker = _marker_path(path)
    try:
        os.lstat(marker)
    except PermissionError as exc:
        return UnreadableRecord(refusing_place(marker), os_reason(exc), there=False)
    except OSError:
        return None
    try:
        marker.open("rb").close()
    except PermissionError as exc:
        return UnreadableRecord(marker, os_reason(exc), there=True)
    except OSError:
        return None
    return None


def record_verified(path: Path, sha256: str) -> None:
    """Remember that path hashed to sha256, for as long as its identity stays the same (a LocalgenError when the
    record cannot be written)."""
    marker = {"path": str(path.resolve()), "sha256": sha256.lower(), "identity": _identity(path)}
    atomic_write_text(_marker_path(path), json.dumps(marker, indent=1), own_record=True)


def record_failed(path: Path, sha256: str) -> None:
    """Remember that this version of a file failed its check against sha256 (damaged), for listings to say so without
    hashing it; a marker that verified it against another sha256 is kept, and a record not written costs nothing."""
    if recorded_sha256(path) is not None:
        return
    with contextlib.suppress(LocalgenError, OSError):
        marker = {"path": str(path.resolve()), "failed_sha256": sha256.lower(), "identity": _identity(path)}
        atomic_write_text(_marker_path(path), json.dumps(marker, indent=1), own_record=True)


def failed_check(path: Path, sha256: str) -> bool:
    """True when a marker says this exact file failed its check against sha256."""
    return _marker_says(path, "failed_sha256", sha256)


def forget_verified(path: Path) -> None:
    """Drop the marker that says a file was verified, so that it is checked again before it is used."""
    with contextlib.suppress(OSError):
        _marker_path(path).unlink()


def verify_file(path: Path, *, sha256: str, size: int | None = None, label: str | None = None) -> None:
    """Check a file's size and sha256 (using the marker when present); raise on mismatch."""
    name = label or str(path)
    with reading(path):
        actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        record_failed(path, sha256)
        raise LocalgenError(
            f"{name}: size is {actual_size:,} bytes, expected {size:,}",
            hint="the file is damaged or incomplete; download it again",
        )
    if is_verified(path, sha256):
        return
    actual = sha256_file(path)
    if actual != sha256.lower():
        record_failed(path, sha256)
        raise LocalgenError(
            f"{name}: sha256 mismatch (got {actual[:12]}…, expected {sha256.lower()[:12]}…)",
            hint="the file is damaged; download it again",
        )
    with contextlib.suppress(LocalgenError):  # a missing record only costs a rehash next time
        record_verified(path, sha256)


IDENTITY_KEY_LENGTH = 24


def file_identity_key(path: Path) -> str:
    """A short key naming this exact file version (its resolved path and identity), for caches."""
    raw = json.dumps({"path": str(path.resolve()), **_identity(path)}, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:IDENTITY_KEY_LENGTH]


def is_file_identity_key(text: str) -> bool:
    """Whether text has the form of a file_identity_key."""
    return len(text) == IDENTITY_KEY_LENGTH and all(c in "0123456789abcdef" for c in text)


def recorded_sha256(path: Path) -> str | None:
    """The sha256 a still-valid marker recorded for this file, without hashing it."""
    try:
        marker = json.loads(_marker_path(path).read_text())
        if marker.get("identity") == _identity(path):
            return str(marker["sha256"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    return None
