"""The on-disk prompt cache: entry format, damage, LRU bound, and the real engine and CLI reusing a prefill."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from localgen import config
from localgen.engine import Engine, lc
from localgen.errors import ConfigError
from localgen.events import Finished
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.promptcache import (
    Cleared,
    PromptCache,
    clear,
    entry_parts,
    evict,
    list_entries,
    model_identity,
    prompt_cache_for,
    remove_found,
)
from localgen.promptcache_format import HEADER
from localgen.tokens import common_prefix
from localgen.units import binary_size
from localgen.verify import file_identity_key
from tests.conftest import REPO_ROOT, CliResult, bundled_model_file, chat_prompt, popen_localgen, run_localgen

# The real engine in this process runs on one thread: llama.cpp's threads spin while they wait for one another,
# so two of them beside another worker's test would stall (conftest: serial); one keeps pace beside it.

GREEDY = SamplingParams(temperature=0.0)
DOC = " ".join(f"Item {i}: the {['red', 'green', 'blue'][i % 3]} box holds {i * 7 % 13} marbles." for i in range(24))
# 307 tokens: over the prompt cache's 256 new tokens worth an entry, and over two of the engine fixture's batches


def _cache(tmp_path: Path, *, identity: str = "model-a", max_bytes: int = 1 << 20) -> PromptCache:
    return PromptCache(tmp_path, identity, max_bytes=max_bytes, min_new_tokens=1, min_gain_tokens=1)


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2, 3], [1, 2, 3, 4]) == 3
    assert common_prefix([], [1]) == 0
    assert common_prefix(list(range(1000)), [*range(777), 0]) == 777


def test_store_then_find_longest_prefix(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.store([1, 2, 3, 4], b"short")
    cache.store([1, 2, 9, 9, 9, 9], b"other")
    found = cache.find([1, 2, 3, 4, 5, 6])
    assert found is not None and found.tokens == (1, 2, 3, 4) and bytes(found.state) == b"short"
    assert cache.find([7, 7, 7]) is None
    assert cache.find([1, 2, 3, 4, 5], better_than=4) is None, "no gain over what the KV cache holds"


def test_entry_for_a_prefix_is_replaced_by_its_extension(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.store([1, 2, 3], b"a")
    cache.store([1, 2, 3, 4, 5], b"b")
    assert [e.tokens for e in list_entries(tmp_path)] == [5]


def test_other_models_entries_are_invisible(tmp_path: Path) -> None:
    _cache(tmp_path, identity="model-a").store([1, 2, 3], b"a")
    assert _cache(tmp_path, identity="model-b").find([1, 2, 3, 4]) is None


@pytest.mark.parametrize("damage", ["payload", "tokens", "truncate", "magic", "version", "garbage"])
def test_damaged_entries_are_ignored_and_deleted(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache(tmp_path)
    cache.store([1, 2, 3, 4], b"state-bytes")
    (path,) = tmp_path.glob("*.lgpc")
    data = bytearray(path.read_bytes())
    if damage == "payload":
        data[-1] ^= 0xFF
    elif damage == "tokens":
        data[HEADER.size + len(b"model-a") + 4 * 3] ^= 0x01  # the last token
    elif damage == "truncate":
        data = data[:-3]
    elif damage == "magic":
        data[:4] = b"XXXX"
    elif damage == "version":
        data[4] = 99
    else:
        data = bytearray(os.urandom(200))
    path.write_bytes(bytes(data))
    logger = logging.getLogger("localgen.promptcache")
    logger.addHandler(caplog.handler)  # the CLI may have stopped "localgen" logs from propagating
    caplog.set_level("DEBUG", logger="localgen.promptcache")
    try:
        assert cache.find([1, 2, 3, 4, 5]) is None
    finally:
        logger.removeHandler(caplog.handler)
    assert caplog.records, "a skipped entry is logged at debug level"
    assert path.exists() == (damage == "version"), "a broken entry is deleted; another version's is left alone"


def test_an_entry_replaced_by_another_run_as_it_is_read_is_kept(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run saves the same prompt's entry again between the read of its header and of its state: the new
    file was read at the old header's offset, failed the old checksum and was deleted as corrupt."""
    cache = _cache(tmp_path)
    cache.store([1, 2, 3, 4], b"the first run's state")
    (path,) = tmp_path.glob("*.lgpc")
    headers = cache._headers

    def replaced_as_read() -> Iterator[tuple[Path, object]]:
        for found in headers():
            _cache(tmp_path).store([1, 2, 3, 4], b"another run's state, longer")
            yield found

    monkeypatch.setattr(cache, "_headers", replaced_as_read)
    found = cache.find([1, 2, 3, 4, 5])
    assert found is not None and bytes(found.state) == b"another run's state, longer", "read whole, from one file"
    assert path.exists()


def test_only_the_file_found_damaged_is_deleted(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.store([1, 2, 3, 4], b"damaged")
    (path,) = tmp_path.glob("*.lgpc")
    damaged = os.stat(path)
    cache.store([1, 2, 3, 4], b"whole, from another run")  # in its place since it was found damaged
    remove_found(path, damaged)
    found = cache.find([1, 2, 3, 4, 5])
    assert found is not None and bytes(found.state) == b"whole, from another run"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], "nothing is left aside"
    remove_found(path, os.stat(path))
    assert list(tmp_path.iterdir()) == []


def test_size_bound_evicts_least_recently_used(tmp_path: Path) -> None:
    one = sum(len(part) for part in entry_parts("model-a", [0] * 4, b"x" * 1000))
    cache = _cache(tmp_path, max_bytes=2 * one + 10)
    cache.store([1, 1, 1, 1], b"x" * 1000)
    cache.store([2, 2, 2, 2], b"x" * 1000)
    os.utime(cache._entry_path([1, 1, 1, 1]), (1, 1))  # the first entry was used long ago
    cache.store([3, 3, 3, 3], b"x" * 1000)
    assert len(list_entries(tmp_path)) == 2
    assert cache.find([1, 1, 1, 1, 5]) is None
    assert cache.find([2, 2, 2, 2, 5]) is not None and cache.find([3, 3, 3, 3, 5]) is not None
    assert evict(tmp_path, 0) == 2 and list_entries(tmp_path) == []


def test_a_killed_write_s_temp_file_is_swept_once_stale(tmp_path: Path) -> None:
    stale, live = tmp_path / ".abc.lgpc.x1.tmp", tmp_path / ".def.lgpc.x2.tmp"
    for path in (stale, live):
        path.write_bytes(b"partial state")
    os.utime(stale, (0, 0))  # untouched for decades: its run was killed
    evict(tmp_path, 1 << 30)
    assert not stale.exists() and live.exists(), "a write in progress is left alone"


def test_a_lowered_bound_evicts_before_reading(tmp_path: Path) -> None:
    one = sum(len(part) for part in entry_parts("model-a", [0] * 4, b"x" * 1000))
    cache = _cache(tmp_path, max_bytes=2 * one + 10)
    cache.store([1, 1, 1, 1], b"x" * 1000)
    cache.store([2, 2, 2, 2], b"x" * 1000)
    os.utime(cache._entry_path([1, 1, 1, 1]), (1, 1))
    smaller = _cache(tmp_path, max_bytes=one + 10)
    assert smaller.find([1, 1, 1, 1, 5]) is None, "the least recently used entry is beyond the new bound"
    assert [e.tokens for e in list_entries(tmp_path)] == [4]
    assert smaller.find([2, 2, 2, 2, 5]) is not None


def test_cache_listing_says_when_it_is_off_or_over_its_bound(tmp_path: Path) -> None:
    _cache(tmp_path, max_bytes=2 << 20).store([1, 2, 3, 4], b"x" * (2**20 + 2**17))
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    (tmp_path / "home" / "cache").mkdir(parents=True)
    (tmp_path / "home" / "cache" / config.PROMPT_CACHE_DIRNAME).symlink_to(tmp_path)
    off = run_localgen("cache", env={**env, "LOCALGEN_PROMPT_CACHE_BYTES": "0"})
    assert off.err == (f"localgen: prompt cache: {tmp_path / 'home' / 'cache' / config.PROMPT_CACHE_DIRNAME}\n"
                       "localgen: 1 entry, 1.1 MiB; off (LOCALGEN_PROMPT_CACHE_BYTES=0): runs neither read nor add "
                       "entries\n"), off.err
    over = run_localgen("cache", env={**env, "LOCALGEN_PROMPT_CACHE_BYTES": "1MiB"})
    assert "of 1.0 MiB; over the bound, so the next run drops the least recently used" in over.err, over.err
    header, row = over.out.splitlines()  # a pipe gets the entries as tab-separated columns
    assert header == "TOKENS\tSIZE\tLAST USED\tMODEL\tFILE" and row.split("\t")[:2] == ["4", "1.1 MiB"]
    assert row.split("\t")[3] == "unknown", "no model file localgen loaded has the identity model-a"


def test_cache_listing_says_which_entries_cannot_be_read_and_why(tmp_path: Path) -> None:
    _cache(tmp_path).store([1, 2, 3, 4], b"x" * 100)
    (whole,) = tmp_path.glob("*.lgpc")
    (tmp_path / "cut.lgpc").write_bytes(whole.read_bytes()[:-10])  # a half-written copy
    (tmp_path / "empty.lgpc").write_bytes(b"")
    header = bytearray(whole.read_bytes())
    header[4:8] = (2).to_bytes(4, "little")
    (tmp_path / "newer.lgpc").write_bytes(header)
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    (tmp_path / "home" / "cache").mkdir(parents=True)
    (tmp_path / "home" / "cache" / config.PROMPT_CACHE_DIRNAME).symlink_to(tmp_path)
    listed = run_localgen("cache", env=env)
    rows = {row.split("\t")[4]: row.split("\t") for row in listed.out.splitlines()[1:]}
    assert (rows["cut.lgpc"][0], rows["cut.lgpc"][3]) == ("-", "(damaged: size 169 does not match the header (179))")
    assert rows["empty.lgpc"][3] == "(damaged: truncated header)"
    assert rows["newer.lgpc"][3] == "(format version 2, from another localgen version)"
    assert (rows[whole.name][0], rows[whole.name][3]) == ("4", "unknown"), "a whole entry of a model not here"
    entries = {Path(e["path"]).name: e for e in json.loads(run_localgen("cache", "--json", env=env).out)["entries"]}
    assert entries["cut.lgpc"]["tokens"] is None and entries["cut.lgpc"]["problem"].startswith("damaged: size 169")
    assert entries[whole.name]["tokens"] == 4 and entries[whole.name]["problem"] is None


def test_find_marks_an_entry_recently_used(tmp_path: Path) -> None:
    one = sum(len(part) for part in entry_parts("model-a", [0] * 4, b"x" * 1000))
    cache = _cache(tmp_path, max_bytes=2 * one + 10)
    cache.store([1, 1, 1, 1], b"x" * 1000)
    cache.store([2, 2, 2, 2], b"x" * 1000)
    for entry in list_entries(tmp_path):
        os.utime(entry.path, (1, 1))
    assert cache.find([1, 1, 1, 1, 9]) is not None  # touches [1, 1, 1, 1]
    cache.store([3, 3, 3, 3], b"x" * 1000)
    assert cache.find([1, 1, 1, 1, 9]) is not None
    assert cache.find([2, 2, 2, 2, 9]) is None


def test_oversized_entry_is_not_written(tmp_path: Path) -> None:
    _cache(tmp_path, max_bytes=100).store([1, 2, 3], b"x" * 1000)
    assert list_entries(tmp_path) == []


def test_clear_removes_everything(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.store([1, 2, 3], b"abc")
    cache.store([4, 5, 6], b"def")
    assert clear(tmp_path).entries == 2 and list_entries(tmp_path) == []


def test_clear_leaves_a_write_in_progress_and_counts_a_stopped_run_s(tmp_path: Path) -> None:
    """A temp file by an older localgen's name (no lock tells whether its writer runs) touched in the last 5 minutes
    (another run's write in progress) is kept, and said; an older one (a stopped run's) goes, counted apart from the
    entries, where every one went uncounted and another run's save failed."""
    _cache(tmp_path).store([1, 2, 3], b"abc")
    stopped, writing = tmp_path / ".abc.lgpc.x1.tmp", tmp_path / ".def.lgpc.x2.tmp"
    stopped.write_bytes(b"x" * 3000)
    writing.write_bytes(b"partial state")
    os.utime(stopped, (time.time() - 600, time.time() - 600))  # untouched for 10 minutes: its run has stopped
    size = sum(e.size for e in list_entries(tmp_path))
    assert clear(tmp_path) == Cleared(entries=1, size=size, partial=1, partial_size=3000, recent=1)
    assert not stopped.exists() and writing.read_bytes() == b"partial state"
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / config.PROMPT_CACHE_DIRNAME).symlink_to(tmp_path)
    os.utime(writing, (time.time() - 600, time.time() - 600))
    (tmp_path / ".ghi.lgpc.x3.tmp").write_bytes(b"partial state")
    cleared = run_localgen("cache", "clear", env={"LOCALGEN_HOME": str(home)})
    assert cleared.returncode == 0 and cleared.err == (
        "localgen: removed 0 prompt cache entries (0 B) and 1 partial write (13 B) left by a stopped run; kept 1 "
        "partial write touched in the last 5 minutes, which may be a run's still writing\n"), cleared.err


@pytest.mark.parametrize("yes", ["-y", "--yes"])
def test_cache_clear_takes_yes_as_the_other_removals_do(tmp_path: Path, yes: str) -> None:
    """models rm and conversations rm take -y: a script passing it to all three got exit 2 from cache clear."""
    result = run_localgen("cache", "clear", yes, env={"LOCALGEN_HOME": str(tmp_path)})
    assert result.returncode == 0 and result.err.startswith("localgen: removed "), result.err


def test_a_huge_bound_is_shown_in_the_largest_binary_unit() -> None:
    assert binary_size(5 * 2**40) == "5.0 TiB" and binary_size(2**63) == "8.0 EiB"


@pytest.mark.parametrize(("value", "expected"), [("", config.DEFAULT_PROMPT_CACHE_BYTES), ("1048576", 2**20),
                                                 ("500M", 500 * 2**20), ("4GiB", 4 * 2**30), ("0", 0),
                                                 ("1024TiB", 2**50)])
def test_size_bound_from_the_environment(monkeypatch: pytest.MonkeyPatch, value: str, expected: int) -> None:
    monkeypatch.setenv(config.PROMPT_CACHE_BYTES_ENV, value)
    monkeypatch.setattr(config, "_settings", None)  # the environment is read once per process
    assert config.prompt_cache_bytes() == expected


@pytest.mark.parametrize("value", ["lots", "-5", "inf", "1e999", "nan", "1e9"])
def test_bad_size_bound_is_a_config_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(config.PROMPT_CACHE_BYTES_ENV, value)
    monkeypatch.setattr(config, "_settings", None)
    with pytest.raises(ConfigError, match="is not a size"):
        config.prompt_cache_bytes()


@pytest.mark.parametrize(("value", "error"), [
    ("1", "'1' is 1 byte, too little to hold a prompt's state (hint: a plain number counts bytes: give the unit, as in "
          "LOCALGEN_PROMPT_CACHE_BYTES=4GiB; 0 turns the prompt cache off)"),
    ("512k", "'512k' is 512.0 KiB, too little to hold a prompt's state (hint: give 1 MiB or more, as in "
             "LOCALGEN_PROMPT_CACHE_BYTES=4GiB; 0 turns the prompt cache off)"),
    ("99999999999999999999999999", "'99999999999999999999999999' is over 1.0 PiB, more than a disk holds (hint: give "
                                   "a size such as LOCALGEN_PROMPT_CACHE_BYTES=64GiB; 0 turns the prompt cache off)"),
    ("1025T", "'1025T' is over 1.0 PiB, more than a disk holds")])
def test_a_size_bound_that_holds_nothing_or_more_than_a_disk_is_refused(monkeypatch: pytest.MonkeyPatch, value: str,
                                                                         error: str) -> None:
    monkeypatch.setenv(config.PROMPT_CACHE_BYTES_ENV, value)
    monkeypatch.setattr(config, "_settings", None)
    with pytest.raises(ConfigError) as info:
        config.prompt_cache_bytes()
    assert f"{info.value.message} (hint: {info.value.hint})".startswith(f"{config.PROMPT_CACHE_BYTES_ENV}={error}")


@pytest.mark.parametrize("args", [("cache",), ("cache", "--json")])
def test_a_long_listing_to_a_reader_that_leaves_exits_141(tmp_path: Path, args: tuple[str, ...]) -> None:
    folder = tmp_path / "home" / "cache" / config.PROMPT_CACHE_DIRNAME
    folder.mkdir(parents=True)
    for n in range(1500):  # unreadable entries are listed too: 1,500 rows, 300 KB of JSON
        (folder / f"{n:032x}.lgpc").write_bytes(b"x")
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    proc = popen_localgen([sys.executable, "-m", "localgen", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()  # `| head -c 10`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err and "error" not in err, err


def test_every_shard_of_a_split_model_is_part_of_the_identity(tmp_path: Path) -> None:
    first, second = tmp_path / "m-00001-of-00002.gguf", tmp_path / "m-00002-of-00002.gguf"
    first.write_bytes(b"one")
    second.write_bytes(b"two")
    before = prompt_cache_for(first, "sig").identity
    replacement = tmp_path / "new"
    replacement.write_bytes(b"owt")  # same size; a new file where shard 2 was
    os.utime(replacement, ns=(second.stat().st_atime_ns, second.stat().st_mtime_ns))
    replacement.replace(second)
    assert prompt_cache_for(first, "sig").identity != before
    single = tmp_path / "single.gguf"
    single.write_bytes(b"x")
    assert prompt_cache_for(single, "sig").identity == f"{model_identity([single])}; sig"
    assert model_identity([single]).startswith(f"{file_identity_key(single)}; changed "), "listed by the file's key"


# --- the real engine --------------------------------------------------------------------------


@pytest.mark.parametrize("repack", [False, True])
def test_weights_repacked_for_the_cpu_and_as_stored_keep_their_entries_apart(bundled_model: Path, repack: bool,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights repacked into the CPU backend's extra buffers (AMX's, CPU_REPACK's) take other kernels, whose sums
    round otherwise: a state one way saved is no cold prefill's the other way (LOCALGEN_AMX changed, the library
    rebuilt with AMX working under the same version), so the two ways' entries are apart."""
    from localgen.engine import loading

    monkeypatch.setattr(loading, "use_cpu_extra_buffers", lambda: repack)
    with Engine(bundled_model, LoadOptions(n_ctx=64, n_threads=1, n_threads_batch=1)) as eng:  # loads, computes none
        signature = eng.state_signature
    assert signature.endswith("; weights repacked" if repack else "; weights as stored")


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    options = LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1, n_batch=128, n_ubatch=128)
    with Engine(bundled_model, options) as eng:
        yield eng


def _prompt(engine: Engine, question: str) -> list[int]:
    """A question about DOC, DOC first."""
    return chat_prompt(engine, f"{DOC}\n\n{question}")


def _answer(engine: Engine, prompt: list[int], cache: PromptCache | None) -> Finished:
    engine.reset()
    events = engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=24), prefix_cache=cache)
    return [e for e in events if isinstance(e, Finished)][-1]


FIRST, SECOND = "How many red boxes are there?", "Which box holds most?"


@pytest.fixture(scope="module")
def cold_second(engine: Engine) -> Finished:
    """The greedy answer to SECOND about DOC, prefilled cold: the answer a restored prefix must give (computed once,
    as each prefill of DOC takes seconds on one thread)."""
    return _answer(engine, _prompt(engine, SECOND), None)


@dataclass(frozen=True)
class Stored:
    """A prompt cache folder holding what one answer stored, that answer, and the tokens the KV cache held after it."""

    folder: Path
    answer: Finished
    kv_after: list[int]

    def copy_to(self, folder: Path) -> Path:
        """A copy of the folder, for a test to change as it likes; folder."""
        shutil.copytree(self.folder, folder, dirs_exist_ok=True)
        return folder


@pytest.fixture(scope="module")
def first_stored(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """FIRST about DOC answered into a prompt cache of the default thresholds (stored once; tests get copies)."""
    folder = tmp_path_factory.mktemp("first-stored")
    answer = _answer(engine, _prompt(engine, FIRST), PromptCache(folder, "smollm2", max_bytes=1 << 30))
    return Stored(folder, answer, engine.kv_token_list)


@pytest.fixture(scope="module")
def doc_300_stored(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """DOC's first 300 tokens, no template, answered into a prompt cache that keeps any entry (stored once; tests get
    copies)."""
    folder = tmp_path_factory.mktemp("doc-300-stored")
    cache = PromptCache(folder, "smollm2", max_bytes=1 << 30, min_new_tokens=1, min_gain_tokens=1)
    answer = _answer(engine, engine.tokenize(DOC, add_special=False)[:300], cache)
    return Stored(folder, answer, engine.kv_token_list)


def test_restored_prefill_gives_the_same_greedy_answer(engine: Engine, tmp_path: Path, cold_second: Finished,
                                                        first_stored: Stored) -> None:
    cache = PromptCache(first_stored.copy_to(tmp_path), "smollm2", max_bytes=1 << 30)
    first, second = _prompt(engine, FIRST), _prompt(engine, SECOND)
    assert len(first) > engine.n_ubatch, "the document must span more than one physical batch"
    cold, stored = cold_second, first_stored.answer
    assert stored.restored_tokens == 0 and len(list_entries(tmp_path)) == 1
    assert stored.usage.completion_tokens > 0 and first_stored.kv_after == first, "the answer is not stored"
    warm = _answer(engine, second, cache)
    assert warm.restored_tokens > len(first) - 100 and warm.usage.cached_tokens == warm.restored_tokens
    assert warm.text == cold.text
    again = _answer(engine, second, cache)  # a short new suffix is not worth another entry
    assert again.text == cold.text and len(list_entries(tmp_path)) == 1


def test_an_entry_llama_cpp_refuses_to_load_is_deleted(engine: Engine, tmp_path: Path, cold_second: Finished) -> None:
    """An entry whose checksum holds but whose state llama.cpp refuses was kept, and read by every later run."""
    cache = PromptCache(tmp_path, "smollm2", max_bytes=1 << 30)
    first, second, cold = _prompt(engine, FIRST), _prompt(engine, SECOND), cold_second
    cache.store(first, bytearray(b"not a llama.cpp state" * 100))
    (refused,) = tmp_path.glob("*.lgpc")
    engine.reset()
    done = _answer(engine, second, cache)
    assert done.restored_tokens == 0 and done.text == cold.text
    assert not refused.exists() and len(list_entries(tmp_path)) == 1, "only the answer's own entry is left"


def test_an_answer_stopped_before_its_first_token_still_counts_what_was_restored(engine: Engine, tmp_path: Path,
                                                                                first_stored: Stored) -> None:
    cache = PromptCache(first_stored.copy_to(tmp_path), "smollm2", max_bytes=1 << 30)  # FIRST answered into it
    first, second = _prompt(engine, FIRST), _prompt(engine, SECOND)
    engine.reset()
    engine.request_stop()  # Ctrl-C while the prompt was prepared
    events = engine.generate(second, GREEDY, GenerationLimits(max_tokens=24), prefix_cache=cache)
    stopped = [e for e in events if isinstance(e, Finished)][-1]
    assert stopped.finish_reason == "interrupted" and stopped.usage.completion_tokens == 0
    assert stopped.restored_tokens > len(first) - 100 and stopped.to_dict()["usage"]["prompt_cache_tokens"] > 0


def test_an_entry_longer_than_a_context_started_small_is_restored(engine: Engine, bundled_model: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   doc_300_stored: Stored) -> None:
    """A short prompt starts its KV cache small (engine.growth); a saved prompt it begins is longer than that: the
    cache grows to take it, where the entry failed to load and the whole prompt was prefilled cold."""
    from localgen.engine import growth

    cache = PromptCache(doc_300_stored.copy_to(tmp_path), "smollm2", max_bytes=1 << 30, min_new_tokens=1,
                        min_gain_tokens=1)
    long = engine.tokenize(DOC, add_special=False)[:300]  # answered into the cache
    monkeypatch.setattr(growth, "FIRST_TOKENS", 64)
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1, n_batch=128, n_ubatch=128,
                                           expected_tokens=0)) as small:
        assert lc.llama_n_ctx(small._ctx) < len(long)
        short = [*long[:200], *small.tokenize(" and a new ending", add_special=False)]
        done = _answer(small, short, cache)
    assert done.restored_tokens >= 128 and done.usage.cached_tokens == done.restored_tokens


def test_an_entry_longer_than_the_context_gives_way_to_a_shorter_one_that_fits(engine: Engine, bundled_model: Path,
                                                                               tmp_path: Path,
                                                                               doc_300_stored: Stored) -> None:
    """A run with a larger context saved a prompt longer than this context holds, which cannot be loaded here: the
    entry that shares the most among those that fit is restored, where the longer one was chosen, failed to load, and
    the whole prompt was prefilled cold."""
    cache = PromptCache(doc_300_stored.copy_to(tmp_path), "smollm2", max_bytes=1 << 30, min_new_tokens=1,
                        min_gain_tokens=1)  # words[:300] answered into it
    words = engine.tokenize(DOC, add_special=False)
    with Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1, n_batch=128,
                                           n_ubatch=128)) as small:
        _answer(small, words[:150], cache)  # the shorter entry, which this context holds
        assert len(list_entries(tmp_path)) == 2
        done = _answer(small, [*words[:200], *small.tokenize(" and a new ending", add_special=False)], cache)
    assert done.restored_tokens >= 128 and done.usage.cached_tokens == done.restored_tokens


FLASH_BATCH = 80  # over FA_TILE_Q (64), so that a batch's last rows can take the tiled kernel or the per-row one


@pytest.fixture(scope="module")
def flash_engine(bundled_model: Path) -> Iterator[Engine]:
    """The bundled model with flash attention on, in batches of FLASH_BATCH."""
    options = LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1, n_batch=FLASH_BATCH, n_ubatch=FLASH_BATCH,
                          flash_attn="on")
    with Engine(bundled_model, options) as eng:
        yield eng


@pytest.fixture(scope="module")
def cold_logits() -> dict[int, bytes]:
    """The last logits of each prompt length prefilled cold on flash_engine (each computed once, when first asked)."""
    return {}


def _last_logits(eng: Engine, tokens: list[int], cache: PromptCache | None) -> tuple[Finished, bytes]:
    """The answer of one token to tokens, and the logits it was sampled from, as bytes."""
    eng.reset()
    done = [e for e in eng.generate(tokens, GREEDY, GenerationLimits(max_tokens=1), prefix_cache=cache)
            if isinstance(e, Finished)][-1]
    row = lc.llama_get_logits_ith(eng._ctx, -1)
    return done, ctypes.string_at(ctypes.addressof(row.contents), 4 * eng.n_vocab)


@pytest.mark.parametrize(("length", "saved"), [
    (FLASH_BATCH + 70, FLASH_BATCH + 10), (FLASH_BATCH + 70, FLASH_BATCH + 66),  # the saved tail under / over FA_TILE_Q
    (2 * FLASH_BATCH + 14, 2 * FLASH_BATCH + 14),  # the same prompt again: its last token alone would take the
])  # one-query kernel
def test_a_restored_prefix_gives_the_cold_logits_bit_for_bit(flash_engine: Engine, cold_logits: dict[int, bytes],
                                                             tmp_path: Path, length: int, saved: int) -> None:
    """Rows a saved prompt computed in a small last batch are recomputed when a cold prefill batches them larger,
    and the rows recomputed after a restore take the kernel they took cold."""
    eng = flash_engine
    words = eng.tokenize(" ".join(f"item {i} is {i * 7 % 13} and" for i in range(40)), add_special=False)
    prompt = words[:length]
    cache = PromptCache(tmp_path, "smollm2", max_bytes=1 << 30, min_new_tokens=1, min_gain_tokens=1)
    if length not in cold_logits:
        cold_logits[length] = _last_logits(eng, prompt, None)[1]
    _last_logits(eng, prompt[:saved], cache)
    warm, restored = _last_logits(eng, prompt, cache)
    assert warm.restored_tokens > 0 and restored == cold_logits[length]


def test_memory_that_cannot_drop_a_tail_neither_stores_nor_restores(engine: Engine, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Recurrent and hybrid models refuse to drop a KV tail: no entry may hold an answer, no restore may drift."""
    first, second = chat_prompt(engine, "How many red boxes are there?"), chat_prompt(engine, "Which box is red?")
    cold = _answer(engine, second, None)
    _answer(engine, first, _cache(tmp_path / "normal", identity="smollm2"))
    monkeypatch.setattr(lc, "llama_memory_seq_rm", lambda *args: False)
    _answer(engine, first, _cache(tmp_path / "refused", identity="smollm2"))
    assert list_entries(tmp_path / "refused") == [], "the answer could not be dropped, so nothing is stored"
    warm = _answer(engine, second, _cache(tmp_path / "normal", identity="smollm2"))
    assert warm.restored_tokens == 0 and warm.text == cold.text
    monkeypatch.undo()
    assert int(lc.llama_memory_seq_pos_max(engine._kv.memory, 0)) + 1 == len(engine.kv_token_list)
    restored = _answer(engine, second, _cache(tmp_path / "normal", identity="smollm2"))
    assert restored.restored_tokens > 0 and restored.text == cold.text, "a memory that drops a tail restores"


def test_mismatched_state_is_rejected_cleanly(engine: Engine) -> None:
    engine.reset()
    assert not engine.load_state([1, 2, 3], bytearray(b"not a llama.cpp state"))
    assert engine.kv_tokens == 0
    done = _answer(engine, chat_prompt(engine, "Count to three."), None)
    assert done.text


def test_state_round_trip_in_memory(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Which colour is the sky?")
    cold = _answer(engine, prompt, None)
    tokens, state = engine.kv_token_list, engine.save_state()
    engine.reset()
    assert engine.load_state(tokens, state) and engine.kv_tokens == len(tokens)
    events = engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=24))
    warm = [e for e in events if isinstance(e, Finished)][-1]
    assert warm.text == cold.text and warm.usage.cached_tokens == len(prompt) - 2


# --- the CLI ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FirstRun:
    """A localgen home whose prompt cache `run -f DOC` of FIRST left its entry in, the document, and that run."""

    home: Path
    doc: Path
    result: CliResult

    def home_copy(self, folder: Path) -> dict[str, str]:
        """The environment of a localgen whose home is a copy of this one under folder, for a test to change."""
        shutil.copytree(self.home, folder / "home")
        return {"LOCALGEN_HOME": str(folder / "home")}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """`run -f DOC` of FIRST in a new home (run once, as its prefill takes seconds; tests get copies of the home)."""
    folder = tmp_path_factory.mktemp("first-run")
    doc = folder / "doc.txt"
    doc.write_text(DOC)
    result = run_localgen("run", "--json", "-n", "4", "--temperature", "0", "-f", str(doc), FIRST,
                          env={"LOCALGEN_HOME": str(folder / "home")})
    return FirstRun(folder / "home", doc, result)


def test_second_run_over_the_same_file_restores_the_prefill(tmp_path: Path, first_run: FirstRun) -> None:
    env = first_run.home_copy(tmp_path)
    args = ("--json", "-n", "12", "--temperature", "0", "-f", str(first_run.doc))
    first = first_run.result  # the run of FIRST that left the entry, with -n 4
    assert first.returncode == 0, first.err
    listing = run_localgen("cache", env=env)
    assert "localgen: 1 entry" in listing.err, listing.err
    model = bundled_model_file()
    assert listing.out.splitlines()[1].split("\t")[3] == "smollm2-135m", "its model, as models names it"
    (entry,) = json.loads(run_localgen("cache", "--json", env=env).out)["entries"]
    assert entry["model_path"] == str(model)
    assert run_localgen("cache", "list", "--json", env=env).out == run_localgen("cache", "--json", env=env).out
    assert datetime.fromisoformat(entry["last_used"]).utcoffset() == timedelta(0), "ISO 8601, as conversations'"
    assert entry["tokens"] == json.loads(first.out)["usage"]["prompt_tokens"], "the prompt's KV, not the answer's"
    second = run_localgen("run", *args, SECOND, env=env)
    uncached = run_localgen("run", *args, "--no-cache", SECOND, env=env)
    record, reference = json.loads(second.out), json.loads(uncached.out)
    assert record["usage"]["prompt_cache_tokens"] > 250
    assert reference["usage"]["prompt_cache_tokens"] == 0, "the same keys every time"
    assert record["text"] == reference["text"]
    cleared = run_localgen("cache", "clear", env=env)
    assert cleared.returncode == 0 and "removed 1" in cleared.err
    emptied = run_localgen("cache", env=env)
    assert "0 entries" in emptied.err and emptied.out == ""


def test_a_library_built_again_under_the_same_version_restores_no_entry_of_the_other_build(tmp_path: Path) -> None:
    """llama.cpp built again (other flags, AMX's fix) keeps llama-cpp-python's version and computes other sums: its
    runs were given the states the first build saved. The runs are of a copy of the model no other test touches: a
    hard link made to the bundled file, or removed, moves its change time, and the entries of the file before go."""
    import llama_cpp.llama_cpp as bindings

    rebuilt = tmp_path / "lib"
    shutil.copytree(Path(bindings._lib._name).parent, rebuilt, copy_function=shutil.copy)  # new files, times
    model = tmp_path / "model.gguf"
    shutil.copyfile(bundled_model_file(), model)
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    args = ("--json", "-n", "4", "--temperature", "0", "-m", str(model), "-f", str(doc))
    first = run_localgen("run", *args, FIRST, env=env)
    assert first.returncode == 0, first.err  # the first build saved FIRST's prompt
    other = run_localgen("run", *args, SECOND, env={**env, "LLAMA_CPP_LIB_PATH": str(rebuilt)})
    assert other.returncode == 0, other.err
    assert json.loads(other.out)["usage"]["prompt_cache_tokens"] == 0
    same = run_localgen("run", *args, SECOND, env=env)
    assert json.loads(same.out)["usage"]["prompt_cache_tokens"] > 250, "each build restores its own"
