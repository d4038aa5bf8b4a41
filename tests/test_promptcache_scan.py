"""The prompt cache's scan of its entries' headers: a run's lookup and its save read each header once, a chat's next
turn reads the new entries alone, what other runs add, replace, delete or damage meanwhile is seen, entries of the model
file before its change time moved are deleted, and an entry that cannot be read is skipped."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localgen import promptcache
from localgen.promptcache import PromptCache, entry_files, list_entries, model_identity


def _cache(folder: Path) -> PromptCache:
    return PromptCache(folder, "model-a", max_bytes=1 << 20, min_new_tokens=1, min_gain_tokens=1)


@pytest.fixture
def headers_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the entries whose headers are read, as they are read (by the real reader)."""
    names: list[str] = []
    read = PromptCache._header_of

    def counted(cache: PromptCache, path: Path) -> object:
        names.append(path.name)
        return read(cache, path)

    monkeypatch.setattr(PromptCache, "_header_of", counted)
    return names


def test_a_lookup_then_a_save_read_each_header_once(tmp_path: Path, headers_read: list[str]) -> None:
    for first in range(5):
        _cache(tmp_path).store([first, 1, 2, 3], b"state")
    headers_read.clear()
    run = _cache(tmp_path)
    assert run.find([9, 9, 9]) is None and len(headers_read) == 5
    headers_read.clear()
    run.store([2, 1, 2, 3, 4], b"longer")  # makes the entry of its prefix [2, 1, 2, 3] redundant
    assert headers_read == [run._entry_path([2, 1, 2, 3, 4]).name], "the new entry's alone"
    assert sorted(entry.tokens for entry in list_entries(tmp_path)) == [4, 4, 4, 4, 5]
    headers_read.clear()
    found = run.find([2, 1, 2, 3, 4, 5])
    assert found is not None and bytes(found.state) == b"longer" and headers_read == []


def test_what_another_run_adds_deletes_or_replaces_meanwhile_is_seen(tmp_path: Path, headers_read: list[str]) -> None:
    chat = _cache(tmp_path)
    chat.store([1, 2, 3], b"first")
    other = _cache(tmp_path)
    other.store([1, 2, 3, 4, 5], b"another run's")  # and deletes the entry of its prefix
    headers_read.clear()
    found = chat.find([1, 2, 3, 4, 5, 6])
    assert found is not None and bytes(found.state) == b"another run's" and len(headers_read) == 1
    other.store([1, 2, 3, 4, 5], b"saved again, longer")  # the same name, another file
    found = chat.find([1, 2, 3, 4, 5, 6])
    assert found is not None and bytes(found.state) == b"saved again, longer"
    os.remove(chat._entry_path([1, 2, 3, 4, 5]))
    assert chat.find([1, 2, 3, 4, 5, 6]) is None


@pytest.mark.parametrize("damage", ["tokens", "state", "magic"])
def test_an_entry_damaged_in_place_after_a_scan_is_not_restored_and_is_deleted(tmp_path: Path, damage: str) -> None:
    chat = _cache(tmp_path)
    chat.store([1, 2, 3, 4], b"state-bytes")
    path = chat._entry_path([1, 2, 3, 4])
    assert chat.find([1, 2, 3, 4, 5]) is not None
    data = bytearray(path.read_bytes())
    at = {"tokens": -len(b"state-bytes") - 1, "state": -1, "magic": 0}[damage]
    data[at] ^= 0x01
    with open(path, "r+b") as handle:  # the same file: its name and inode are as the scan left them
        handle.write(data)
    assert chat.find([1, 2, 3, 4, 5]) is None
    assert not path.exists()


def test_a_file_copied_over_an_entry_in_place_is_read_again(tmp_path: Path, headers_read: list[str]) -> None:
    """`cp` over an entry keeps its inode: its size and time tell it from the file read before, so the entry's own
    header is read again, where the header kept for that inode was trusted (and a save deleted the file as the
    redundant prefix of a longer entry it never was)."""
    import shutil

    cache = _cache(tmp_path)
    cache.store([1, 2, 3], b"first")
    elsewhere = _cache(tmp_path / "other")
    elsewhere.store([7, 8, 9, 10], b"another entry")
    (copied,) = (tmp_path / "other").glob("*.lgpc")
    entry = cache._entry_path([1, 2, 3])
    inode = entry.stat().st_ino
    headers_read.clear()
    shutil.copyfile(copied, entry)  # in place: the same inode, another file's bytes
    assert entry.stat().st_ino == inode
    assert cache.find([7, 8, 9, 10, 11]) is not None and headers_read == [entry.name]


def _model_cache(folder: Path, model: Path) -> PromptCache:
    """The cache of a run that loads model now: its identity holds the file's change time as it is now."""
    return PromptCache(folder, f"{model_identity([model])}; kv", max_bytes=1 << 20, min_new_tokens=1,
                       min_gain_tokens=1, model_files=[model])


def _move_change_time(model: Path) -> None:
    """chmod model to its own mode until its change time moves (a file system's clock may tick coarsely)."""
    before = model.stat().st_ctime_ns
    for _ in range(1000):
        model.chmod(model.stat().st_mode)
        if model.stat().st_ctime_ns != before:
            return
        time.sleep(0.001)
    raise AssertionError("the change time did not move")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model file (its bytes are never read: the cache keys entries by its identity)."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(64))
    return path


def test_a_run_deletes_the_entries_of_its_model_file_before_its_change_time_moved(tmp_path: Path,
                                                                                  model: Path) -> None:
    """Entries of the file before a chmod (or a copy over it) are never restored again: they stayed, listed under the
    model's name, until the bound evicted them."""
    folder = tmp_path / "prompts"
    _model_cache(folder, model).store([1, 2, 3, 4], b"before")
    _move_change_time(model)
    later = _model_cache(folder, model)
    assert later.find([1, 2, 3, 4, 5]) is None and entry_files(folder) == []
    later.store([1, 2, 3, 4], b"after")
    found = _model_cache(folder, model).find([1, 2, 3, 4, 5])
    assert found is not None and bytes(found.state) == b"after"


def test_a_run_that_loaded_the_model_before_its_change_time_moved_deletes_no_newer_entry(tmp_path: Path,
                                                                                        model: Path) -> None:
    """A run loaded before a chmod took the entries later runs saved for those of the file before, and deleted them."""
    folder = tmp_path / "prompts"
    loaded_before = _model_cache(folder, model)
    _move_change_time(model)
    _model_cache(folder, model).store([1, 2, 3, 4], b"saved after")
    assert loaded_before.find([1, 2, 3, 4, 5]) is None, "not its model file's state"
    found = _model_cache(folder, model).find([1, 2, 3, 4, 5])
    assert found is not None and bytes(found.state) == b"saved after"


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The prompt cache's debug log, captured."""
    logger = logging.getLogger("localgen.promptcache")
    logger.addHandler(caplog.handler)  # the CLI may have stopped "localgen" logs from propagating
    caplog.set_level("DEBUG", logger="localgen.promptcache")
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)


def test_an_entry_that_cannot_be_read_is_skipped_with_a_debug_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  debug_log: pytest.LogCaptureFixture) -> None:
    _cache(tmp_path).store([1, 2, 3, 4], b"state")
    (entry,) = entry_files(tmp_path)

    def denied(path: Path) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(promptcache, "open_entry", denied)
    assert _cache(tmp_path).find([1, 2, 3, 4, 5]) is None
    assert f"skipping prompt cache entry {entry.name}: Permission denied" in debug_log.messages


def _within(seconds: float, look: Callable[[], object], fifo: Path) -> object:
    """What look returns, failing where it has not returned within seconds (a writer opening fifo then lets it go)."""
    result: list[object] = []
    looking = threading.Thread(target=lambda: result.append(look()), daemon=True)
    looking.start()
    looking.join(seconds)
    if looking.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        looking.join(seconds)
        pytest.fail(f"blocked on the FIFO in the entry's place for {seconds} s")
    return result[0]


@pytest.mark.parametrize(("look", "scans"), [("find", 2), ("list", 1)])  # a lookup's eviction scans first
def test_an_entry_swapped_for_a_fifo_after_the_scan_blocks_no_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    look: str, scans: int) -> None:
    """An open() of a FIFO waits for a writer: a lookup, or `localgen cache`, hung where one took an entry's place
    between the folder's scan and the entry's open."""
    _cache(tmp_path).store([1, 2, 3, 4], b"state")
    (entry,) = entry_files(tmp_path)
    scan, scanned = promptcache._entry_dir_entries, []

    def swapped_after(directory: Path) -> list[os.DirEntry[str]]:
        found = scan(directory)
        scanned.append(directory)
        if len(scanned) == scans:
            entry.unlink()
            os.mkfifo(entry)
        return found

    monkeypatch.setattr(promptcache, "_entry_dir_entries", swapped_after)
    if look == "find":
        assert _within(5, lambda: _cache(tmp_path).find([1, 2, 3, 4, 5]), entry) is None
    else:
        (listed,) = _within(5, lambda: list_entries(tmp_path), entry)
        assert listed.tokens is None and listed.problem == "not a regular file"


def test_a_partial_write_swapped_for_a_fifo_after_its_lstat_blocks_no_sweep(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`localgen cache`, `cache clear` and a run's sweep look at each partial write (lstat, then open to test its
    lock): a FIFO renamed into its place between the two hung the open for a writer that never came."""
    from localgen import promptcache_partial

    partial = tmp_path / f".abc.lgpc.{promptcache_partial.host_key()}-pid999999-0123abcd.tmp"
    partial.write_bytes(b"x")
    lstat = os.lstat

    def swapped_after(path: object, *args: object, **options: object) -> os.stat_result:
        status = lstat(path, *args, **options)  # type: ignore[arg-type]
        if str(path) == str(partial):
            os.mkfifo(tmp_path / "fifo")
            os.replace(tmp_path / "fifo", partial)
        return status

    monkeypatch.setattr(promptcache_partial.os, "lstat", swapped_after)
    assert _within(5, lambda: promptcache_partial.partial_writes(tmp_path), partial) == []
