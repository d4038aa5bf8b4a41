"""The prompt cache's entries by the model file they hold states of: `localgen cache` naming each entry's model, and
the entries `models rm` deletes with a model's file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterable
from pathlib import Path

from localgen.errors import LocalgenError
from localgen.promptcache import CacheEntry, cache_dir, list_entries, listed_cache_dir
from localgen.promptcache_partial import PartialWrite, partial_writes
from localgen.units import binary_size, counted, iso_time, local_minute


def entries_of(model_keys: Collection[str]) -> list[CacheEntry]:
    """The entries holding states of the model files with these identity keys (verify.file_identity_key of a file,
    or of any shard of a split one)."""
    if not model_keys:
        return []
    return [entry for entry in list_entries(cache_dir()) if any(key in model_keys for key in entry.file_keys)]


def identity_keys(paths: Iterable[Path]) -> dict[str, Path]:
    """Each file there by its identity key (verify.file_identity_key), which the entries of its states are found by."""
    from localgen.verify import file_identity_key

    keys: dict[str, Path] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            keys[file_identity_key(path)] = path
    return keys


def their_states(count: int, size: int) -> str:
    """' and its 3 prompt cache entries (12.0 MiB)': the entries deleted with a model's data ('' for none)."""
    if not count:
        return ""
    return f" and its {counted(count, 'prompt cache entry', 'prompt cache entries')} ({binary_size(size)})"


def entry_models() -> dict[str, Path]:
    """The model files the entries may hold states of, by identity key: every file localgen has loaded that is
    still as it was (an entry whose file changed or went is never restored, and matches none)."""
    from localgen.catalog import loaded_model_files

    return identity_keys(loaded_model_files())


def cache_listing() -> dict[str, object]:
    """The `localgen cache --json` listing: folder, bound, total size (partial writes too), entries (newest first)
    and partial writes."""
    from localgen.config import prompt_cache_bytes

    directory = listed_cache_dir()
    entries, partial = list_entries(directory), partial_writes(directory)
    models, names = entry_models(), model_names({e.model_key for e in entries})

    def model_path(entry: CacheEntry) -> str | None:
        path = models.get(entry.model_key)
        return str(path) if path else None

    return {"directory": str(directory), "max_bytes": prompt_cache_bytes(),
            "total_bytes": sum(e.size for e in entries) + sum(p.size for p in partial),
            "entries": [{"path": str(e.path), "tokens": e.tokens, "size": e.size, "last_used": iso_time(e.last_used),
                         "model_path": model_path(e), "model_names": names.get(e.model_key, []),
                         "problem": e.problem or None, "older_localgen": e.older}
                        for e in entries],
            "partial_writes": [{"path": str(p.path), "size": p.size, "last_written": iso_time(p.last_written),
                                "pid": p.pid, "this_machine": p.this_machine, "writing": p.writing}
                               for p in partial]}


def describe_cache() -> tuple[list[str], list[list[str]]]:
    """The `localgen cache` listing: its summary lines (folder; entries and partial writes, total size and bound) and
    a row per entry, newest first (tokens, size, last used, its model's names as `localgen models` lists them, else
    its file's name, file), then one per partial write (what became of its writer in the model's place)."""
    from localgen.config import PROMPT_CACHE_BYTES_ENV, prompt_cache_bytes

    directory = listed_cache_dir()
    entries, partial = list_entries(directory), partial_writes(directory)
    deletable = os.access(directory, os.W_OK | os.X_OK)  # not in a read-only folder, nor on a read-only file system
    total = sum(e.size for e in entries) + sum(p.size for p in partial)
    count = counted(len(entries), "entry", "entries") + (f" and {counted(len(partial), 'partial write')}"
                                                         if partial else "")
    bound = prompt_cache_bytes()
    if bound == 0:
        state = f"{count}, {binary_size(total)}; off ({PROMPT_CACHE_BYTES_ENV}=0): runs neither read nor add entries"
    else:
        over = _over_the_bound(entries, partial, bound, deletable)
        state = f"{count}, {binary_size(total)} of {binary_size(bound)}{over}"
    models, names = entry_models(), model_names({e.model_key for e in entries})
    rows = [[f"{e.tokens:,}" if e.tokens is not None else "-", binary_size(e.size), local_minute(e.last_used),
             _whose(e, names, models), e.path.name] for e in entries]
    rows += [["-", binary_size(p.size), local_minute(p.last_written), f"({partial_state(p, deletable)})", p.path.name]
             for p in partial]
    return [f"prompt cache: {directory}", state], rows


def _whose(entry: CacheEntry, names: dict[str, list[str]], models: dict[str, Path]) -> str:
    """What `localgen cache` says an entry is of: its model's names, else its file's name, else 'unknown' (or why it
    cannot be read), and '(older localgen)' after an older localgen's."""
    if entry.problem:
        return f"({entry.problem})"
    key = entry.model_key
    whose = ", ".join(names[key]) if key in names else models[key].name if key in models else "unknown"
    return f"{whose} (older localgen)" if entry.older else whose


def _over_the_bound(entries: list[CacheEntry], partial: list[PartialWrite], bound: int, deletable: bool) -> str:
    """'; over the bound, so the next run ...': what the next run's eviction does where the folder holds more than the
    bound ('' where it does not, or where a live run's partial write alone is over it; deletable: whether files in the
    folder can be deleted)."""
    total = sum(e.size for e in entries) + sum(p.size for p in partial)
    kept = total - sum(p.size for p in partial if deletable and p.left_by_a_stopped_run())
    steps = [step for step, due in (("deletes the partial writes of stopped runs", kept < total),
                                    ("drops the least recently used entries", entries and kept > bound)) if due]
    return f"; over the bound, so the next run {' and '.join(steps)}" if total > bound and steps else ""


def partial_state(partial: PartialWrite, deletable: bool = True) -> str:
    """What `localgen cache` says of a partial write: whose it is, and when it goes (deletable: whether files in its
    folder can be deleted)."""
    process = "" if partial.pid is None else (
        f" (process {partial.pid}{'' if partial.this_machine else ' on another machine'})")
    if partial.writing:
        return f"partial write of a run still writing it{process}"
    if partial.left_by_a_stopped_run():
        goes = "the next run deletes it" if deletable else "it stays while its folder cannot be written"
        return f"partial write left by a stopped run{process}; {goes}"
    goes = "deleted once untouched for an hour" if deletable else "it stays while its folder cannot be written"
    return f"partial write{process}, perhaps of a run still writing it; {goes}"


def model_names(keys: Collection[str]) -> dict[str, list[str]]:
    """The names `localgen models` lists the model files here with these identity keys under, by identity key: those
    -m takes for each (none where a models.toml cannot be read: the entries are still listed, by their files' names);
    the Hugging Face cache's other models, which may be hundreds, are not named."""
    from localgen.catalog import listed_names
    from localgen.config import settings
    from localgen.registry import load_registry

    try:
        return listed_names(load_registry(settings().user_registry), keys) if keys else {}
    except LocalgenError:
        return {}


