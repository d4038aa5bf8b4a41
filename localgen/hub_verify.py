"""Checking a downloaded file: its size and checksum against the Hub's listing, the size and sha256 a registry entry
pins, and a GGUF header llama.cpp can load (the shards of a split model agreeing with each other); a file that passes
is recorded as verified."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localgen import console
from localgen.errors import GGUFError, GGUFUnreadableError, HubError, LocalgenError
from localgen.hub_cache import record_sha256
from localgen.hub_entry_data import discard_cached_file, linked_file_named
from localgen.hub_settings import hub_endpoint
from localgen.verify import (
    forget_verified,
    git_blob_id_and_sha256,
    is_verified,
    reading,
    record_verified,
    recorded_sha256,
    sha256_file,
)

if TYPE_CHECKING:
    from localgen.download_progress import Display
    from localgen.hub_types import HubFile


@dataclass(frozen=True)
class Pin:
    """The sha256 and size a registry entry expects of its default file (either may be unset), and where that entry
    is (for messages)."""

    sha256: str | None
    origin: str  # [models.NAME] in FILE
    size: int | None = None


def check_pinned_file(path: Path, pin: Pin | None, *, label: str | None = None, changed: str = "the repository",
                      remember: bool = False) -> None:
    """A file's size and sha256 (hashed only when no marker records it) must be the ones pinned (label: the file's
    name in messages; changed: check_pin's). remember: once hashed, a match is recorded so that this version of the
    file is not hashed again (for a file of one's own: a download's record also says its header was checked)."""
    if pin is None:
        return
    label = label or str(path)
    check_pin(label, None, path.stat().st_size, pin, changed=changed)  # the size first: it needs no hashing
    if not pin.sha256:
        return
    recorded = recorded_sha256(path)
    check_pin(label, recorded or sha256_file(path), None, pin, changed=changed)
    if remember and recorded is None:
        with contextlib.suppress(LocalgenError):  # a missing record only costs a rehash next time
            record_verified(path, pin.sha256)


def check_pin(label: str, actual: str | None, size: int | None, pin: Pin, *, changed: str = "the repository") -> None:
    """Raise when a file's size or sha256 (None: not known) is not the one its registry entry pins (changed: what
    may have changed instead, for the hint)."""
    if size is not None and pin.size is not None and size != pin.size:
        raise LocalgenError(f"{label} does not match the size of {pin.origin} (the file's is {size:,} bytes, the "
                            f"entry's {pin.size:,})",
                            hint=f"{changed} changed, or that size is wrong: fix it or remove the line")
    if actual is not None and pin.sha256 and actual.lower() != pin.sha256.lower():
        raise LocalgenError(f"{label} does not match the sha256 of {pin.origin} (the file's is {actual[:12]}…, "
                            f"the entry's {pin.sha256[:12]}…)",
                            hint=f"{changed} changed, or that sha256 is wrong: fix it or remove the line")


def verify_download(path: Path, f: HubFile, display: Display, pin: Pin | None, *, hashed: str | None = None,
                    own_blobs: Sequence[Path] = ()) -> None:
    """Check the checksum, the sha256 the registry pins and the GGUF header; record the file as verified if all pass
    (hashed: the sha256 its bytes were checked to have already, as hub_resume checks a download before it replaces a
    copy; own_blobs: the model's, hub_entry_data.model_blobs, for a file that fails its checksum)."""
    if hashed is None and f.sha256 and is_verified(path, f.sha256):
        _check_usable(path, f)  # a record from before the header was checked too
        display.verified(f, hashed=False)
        return
    actual = hashed or _checksum(path, f, display, own_blobs)
    if pin is not None:
        check_pin(f"{f.repo}/{f.filename}", actual, path.stat().st_size, pin)
    _check_usable(path, f)
    try:
        record_verified(path, actual)
    except LocalgenError as exc:  # the model is fine; only an offline run, which needs the record, refuses it
        console.warn(f"{f.repo}/{f.filename} is verified, but the record of it could not be written "
                     f"({exc.message}): offline runs will refuse it until a pull can write one")
    display.verified(f, hashed=True)
    if not f.sha256:
        record_sha256(f.repo, f.filename, actual)


class ChecksumMismatch(HubError):
    """A file whose size or checksum is not the one the Hub's listing gives."""


def _checksum(path: Path, f: HubFile, display: Display, own_blobs: Sequence[Path]) -> str:
    """Check size and sha256 (or git blob id) against the listing, deleting a file that differs (where a link leads
    to a file of the user's or another model's, or through a link of the user's to a blob of the model's, own_blobs,
    only the link); its sha256."""
    try:
        return check_checksum(path, f, display)
    except ChecksumMismatch as exc:
        kept = discard_cached_file(path, own_blobs)
        if kept is None:
            exc.message += "; the corrupt download was deleted"
        else:
            left = "both are left as they were" if kept.whose == "the model's" else "that file is left as it was"
            exc.message += f"; the link to {linked_file_named(kept)} was removed, and {left}"
        raise


def check_checksum(path: Path, f: HubFile, display: Display) -> str:
    """Check size and sha256 (or git blob id) against the listing; its sha256. A file that differs raises
    ChecksumMismatch, whose message the caller ends with what became of the file."""
    with reading(path):
        actual_size = path.stat().st_size
    if actual_size != f.size:
        raise ChecksumMismatch(f"{f.repo}/{f.filename}: downloaded {actual_size:,} bytes, expected {f.size:,}",
                               hint="run the command again to download it afresh")
    display.verifying(f)
    if f.sha256:
        kind, expected = "sha256", f.sha256
        got = actual = sha256_file(path)
    elif f.blob_id:
        kind, expected = "git blob id", f.blob_id
        got, actual = git_blob_id_and_sha256(path)
    else:
        raise HubError(f"{f.repo}/{f.filename}: the Hub gave no checksum, so the file cannot be verified",
                       hint="localgen only loads verified downloads; use a local path to load it anyway")
    if got != expected:
        raise ChecksumMismatch(f"{f.repo}/{f.filename}: {kind} mismatch (got {got[:12]}…, expected {expected[:12]}…)",
                               hint="run the command again; if it fails again, the Hub mirror or a proxy "
                                    f"({hub_endpoint()}) is serving bad data")
    return actual


def _check_usable(path: Path, f: HubFile) -> None:
    """The file's GGUF header must be one llama.cpp can load; a file whose header is not (malformed, too large to read)
    stays unverified, the Hub's copy blamed; one not read for the file system (gone, refused, EIO) stays verified."""
    from localgen.gguf_cursor import HUB_COPY_HINT
    from localgen.gguf_reader import read_gguf

    try:
        read_gguf(path, require_architecture=(f.shard_index or 1) == 1)
    except GGUFError as exc:
        if isinstance(exc, GGUFUnreadableError) and isinstance(exc.__context__, OSError):
            raise  # (not read, so nothing is known of what it holds: it stays verified)
        forget_verified(path)
        raise GGUFError(exc.message, hint=f"the file matches the Hub's checksum, so {HUB_COPY_HINT}") from None


def check_shards_agree(paths: list[Path]) -> None:
    """The shards of a split model must agree with each other, as llama.cpp needs; shards that do not stay
    unverified. A shard removed as they were read (a models rm beside the pull) raises FileNotFoundError, and the
    others stay verified."""
    from localgen.gguf_cursor import HUB_COPY_HINT
    from localgen.gguf_split import validate_split

    try:
        validate_split(paths[0])
    except GGUFError as exc:
        if gone := [path for path in paths if not path.exists()]:
            raise FileNotFoundError(f"{gone[0]} was removed as the shards were read") from exc
        for path in paths:
            forget_verified(path)
        raise GGUFError(exc.message, hint=f"the shards match the Hub's checksums, so {HUB_COPY_HINT}") from None
