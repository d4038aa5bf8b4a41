"""The checked facts of GGUF headers kept in the cache folder by the file's identity, so that a start does not read
and check a header it checked before (the bundled model's 49,152 tokens and 48,900 merges: 27 ms of CPU); and those of
Hub files, read by range requests, by the file's sha256, so that choosing a quant again reads none from the Hub (nor
one the Hub sent twice the same and that was refused: its refusal is kept)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from localgen.config import settings
from localgen.file_versions import settled, stat_version
from localgen.gguf_info import ArraySummary, GGUFInfo, TensorInfo

CACHE_FORMAT = 2
HEADERS_DIR = "headers"  # in the cache folder
HUB_HEADERS_DIR = "hub-headers"  # in the cache folder: headers of Hub files, named by their sha256
HEADER_NAMES = r"[0-9a-f]{32}\.json"  # the entries in HEADERS_DIR (verify.path_key's), as a pattern
HUB_HEADER_NAMES = r"[0-9a-f]{64}\.json"  # the entries in HUB_HEADERS_DIR, as a pattern
HUB_HEADERS_KEPT = 256  # the most recently used are kept (some 20 quants a repo)
CHECKING_MODULES = ("gguf_cache", "gguf_checks", "gguf_cursor", "gguf_foreign", "gguf_format", "gguf_info",
                    "gguf_reader")  # a change to any of them makes every kept header stale

log = logging.getLogger("localgen.gguf")
T = TypeVar("T")


def _entry_path(path: Path) -> Path:
    """Where the header of the file at path is kept."""
    from localgen.verify import path_key

    return settings().cache_dir / HEADERS_DIR / f"{path_key(path)}.json"


def _identity(st: os.stat_result) -> list[int]:
    """The file's version (file_versions.stat_version) as an entry keeps it. Stricter than verify's marker identity:
    a header checked again costs milliseconds, a file hashed again minutes."""
    return list(stat_version(st))


@lru_cache(maxsize=1)
def _checks_fingerprint() -> str:
    """A digest of the code that reads and checks headers, so that a header checked by other code is read again."""
    digest = hashlib.sha256()
    for name in CHECKING_MODULES:
        module = sys.modules.get(f"localgen.{name}")
        source = getattr(module, "__file__", None)
        digest.update(Path(source).read_bytes() if source else name.encode())
    return digest.hexdigest()[:24]


def kept_header(path: Path, st: os.stat_result) -> GGUFInfo | None:
    """The header kept for the file at path as st names it, or None (none kept, another version of the file or of
    the checks, or an entry that cannot be read: it is ignored)."""
    try:
        entry = json.loads(_entry_path(path).read_bytes())
        if (entry["format"], entry["checks"], entry["identity"]) != (CACHE_FORMAT, _checks_fingerprint(),
                                                                      _identity(st)):
            return None
        return _info(path, entry["info"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.debug("header entry of %s ignored: %s", path, exc)
        return None


def keep_header(path: Path, st: os.stat_result, info: GGUFInfo) -> None:
    """Keep the header just checked for the file at path as st names it, where the file has settled; a failure to
    write it only costs a check next time."""
    if not settled(st):
        return
    from localgen.errors import LocalgenError
    from localgen.storage import atomic_write_text

    with contextlib.suppress(LocalgenError, OSError, ValueError):
        entry = {"format": CACHE_FORMAT, "checks": _checks_fingerprint(), "identity": _identity(st),
                 "path": os.path.realpath(path), "info": _facts(info)}
        atomic_write_text(_entry_path(path), json.dumps(entry, separators=(",", ":")), own_record=True)
        _forget_gone_files()


def kept_hub_header(sha256: str, filename: str) -> GGUFInfo | None:
    """The header kept for the Hub file whose content has this sha256 (named filename), marked as used, or None (none
    kept, kept by other checks, a refusal kept, or an entry that cannot be read: it is ignored)."""
    return _kept_hub_entry(sha256, filename, lambda entry: _info(Path(filename), entry["info"]))


def kept_hub_refusal(sha256: str, filename: str) -> tuple[str, str | None] | None:
    """The problem and hint kept for the Hub file whose content has this sha256 (named filename) where the Hub sent
    the same header twice and it was refused, marked as used, or None (none kept, or as kept_hub_header)."""

    def refusal(entry: dict) -> tuple[str, str | None]:
        problem, hint = entry["refused"]["problem"], entry["refused"]["hint"]
        if not isinstance(problem, str) or not isinstance(hint, str | None):
            raise TypeError("a refusal of other values")
        return problem, hint

    return _kept_hub_entry(sha256, filename, refusal)


def _kept_hub_entry(sha256: str, filename: str, fact: Callable[[dict], T]) -> T | None:
    """What fact makes of the entry kept for the Hub file with this sha256, the entry marked as used; None where none
    is kept, it was kept by other checks, or it cannot be read or made that of (it is ignored)."""
    entry_path = _hub_entry_path(sha256)
    if entry_path is None:
        return None
    try:
        entry = json.loads(entry_path.read_bytes())
        if (entry["format"], entry["checks"]) != (CACHE_FORMAT, _checks_fingerprint()):
            return None
        made = fact(entry)
        with contextlib.suppress(OSError):
            os.utime(entry_path)  # the most recently used are kept
        return made
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.debug("header entry of %s ignored: %s", filename, exc)
        return None


def keep_hub_header(sha256: str, info: GGUFInfo) -> None:
    """Keep the header just read from the Hub file whose content has this sha256, the entries used least recently
    past HUB_HEADERS_KEPT dropped; a failure to write it only costs a read next time."""
    _keep_hub_entry(sha256, lambda: {"info": _facts(info)})


def keep_hub_refusal(sha256: str, problem: str, hint: str | None) -> None:
    """Keep the refusal of the header the Hub sent twice the same of the file whose content has this sha256 (its
    problem, without the file's name, and its hint), as keep_hub_header keeps a header."""
    _keep_hub_entry(sha256, lambda: {"refused": {"problem": problem, "hint": hint}})


def _keep_hub_entry(sha256: str, facts: Callable[[], dict[str, object]]) -> None:
    """Write the entry of the Hub file with this sha256 (facts, with the format and checks), the entries used least
    recently past HUB_HEADERS_KEPT dropped; a failure to write it only costs a read next time."""
    from localgen.errors import LocalgenError
    from localgen.storage import atomic_write_text

    entry_path = _hub_entry_path(sha256)
    if entry_path is None:
        return
    with contextlib.suppress(LocalgenError, OSError, ValueError):
        entry = {"format": CACHE_FORMAT, "checks": _checks_fingerprint(), **facts()}
        atomic_write_text(entry_path, json.dumps(entry, separators=(",", ":")), own_record=True)
        _trim_hub_headers(entry_path.parent)


def _trim_hub_headers(folder: Path) -> None:
    """Drop the Hub headers used least recently past HUB_HEADERS_KEPT, and the temp files of writes a killed process
    left; an entry another run drops meanwhile is passed over."""
    used: list[tuple[int, Path]] = []
    for entry_path in folder.glob("*.json"):
        with contextlib.suppress(OSError):
            used.append((entry_path.stat().st_mtime_ns, entry_path))
    for _, old in sorted(used, reverse=True)[HUB_HEADERS_KEPT:]:
        with contextlib.suppress(OSError):
            old.unlink()
    _drop_leftover_temp_files(folder, HUB_HEADER_NAMES)


def _hub_entry_path(sha256: str) -> Path | None:
    """Where the header of the Hub file with this sha256 is kept; None for a value that is no sha256."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        return None
    return settings().cache_dir / HUB_HEADERS_DIR / f"{sha256}.json"


def forget_header(path: Path) -> None:
    """Drop the header kept for the file at path (a model file deleted)."""
    with contextlib.suppress(OSError):
        _entry_path(path).unlink()


@lru_cache(maxsize=1)
def _forget_gone_files() -> None:
    """Drop the headers kept for files no longer there (a model deleted by hand, a file since moved), and the temp
    files of writes a killed process left, so the folder holds one entry a model file at most; once a process
    (`models list` may keep many headers)."""
    folder = settings().cache_dir / HEADERS_DIR
    _drop_leftover_temp_files(folder, HEADER_NAMES)
    for entry_path in folder.glob("*.json"):
        try:
            gone = not os.path.exists(json.loads(entry_path.read_bytes())["path"])
        except (OSError, ValueError, KeyError, TypeError):
            gone = True  # unreadable, or written by a format without its path: only costs a check
        if gone:
            with contextlib.suppress(OSError):
                entry_path.unlink()


def _drop_leftover_temp_files(folder: Path, entries: str) -> None:
    """Delete the temp files in folder of writes of its entries (whose names match the pattern entries) a killed
    process left (storage's rule: those no write holds)."""
    from localgen.storage import remove_leftover_temp_files

    remove_leftover_temp_files(folder, entries)


def _facts(info: GGUFInfo) -> dict[str, object]:
    """A header as JSON values (an ArraySummary as a one-entry object: no metadata value is one)."""
    metadata = {key: {"array": [value.item_type, value.length]} if isinstance(value, ArraySummary) else value
                for key, value in info.metadata.items()}
    return {"file_size": info.file_size, "version": info.version, "alignment": info.alignment,
            "data_offset": info.data_offset, "metadata": metadata,
            "tensors": [[t.name, t.shape, t.ggml_type, t.offset, t.nbytes] for t in info.tensors],
            "control_tokens": sorted(info.control_tokens), "user_defined_tokens": info.user_defined_tokens,
            "longest_token": info.longest_token}


def _info(path: Path, facts: dict) -> GGUFInfo:
    """The header _facts made JSON of, for the file at path."""
    metadata = {key: ArraySummary(*value["array"]) if isinstance(value, dict) else
                tuple(value) if isinstance(value, list) else value for key, value in facts["metadata"].items()}
    return GGUFInfo(path=path, file_size=facts["file_size"], version=facts["version"], alignment=facts["alignment"],
                    data_offset=facts["data_offset"], metadata=MappingProxyType(metadata),
                    tensors=tuple(TensorInfo(name, tuple(shape), ggml_type, offset, nbytes)
                                  for name, shape, ggml_type, offset, nbytes in facts["tensors"]),
                    control_tokens=frozenset(facts["control_tokens"]),
                    user_defined_tokens=tuple((index, text) for index, text in facts["user_defined_tokens"]),
                    longest_token=facts["longest_token"])
