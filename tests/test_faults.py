"""Faults: a full disk, damaged files localgen wrote earlier, and how everything is written (atomic, private).

The full-disk tests use a real 4 MiB tmpfs where this process may mount one (root in a container); elsewhere they
skip, and the simulated-ENOSPC tests (fsync failing with ENOSPC, as on filesystems with delayed allocation) still
run everywhere.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pexpect
import pytest

from localgen import config, storage
from localgen.conversation import Conversation, Turn
from localgen.conversation_store import load_conversation, save_conversation
from localgen.errors import ConfigError, LocalgenError
from localgen.history_bound import history_damage
from localgen.promptcache import PromptCache
from localgen.promptcache_unsaved import unsaid_warnings
from localgen.registry import load_registry
from localgen.repl_input import SafeFileHistory, open_history
from localgen.signals import SignalExit
from localgen.storage import atomic_write_bytes
from localgen.verify import is_verified, verify_file
from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen, spawn_localgen
from tests.test_repl import Chat

DOC = " ".join(f"Item {i}: the {['red', 'green', 'blue'][i % 3]} box holds {i * 7 % 13} marbles." for i in range(21))
# (a prompt of 304 tokens with its question: over the 256 new tokens that make a prefill worth caching)


# --- helpers -----------------------------------------------------------------------------------------------

def _use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> config.Settings:
    """Point this process's localgen settings at home."""
    value = config.Settings(config_dir=home / "config", data_dir=home / "data", cache_dir=home / "cache",
                            debug=False, offline=True)
    monkeypatch.setattr(config, "_settings", value)
    return value


def _strays(folder: Path) -> list[str]:
    """Temp files an interrupted atomic write would leave behind."""
    return sorted(p.name for p in folder.rglob(".*.tmp")) if folder.exists() else []


def _fill(disk: Path, leave: int = 16 * 1024) -> None:
    """Fill a filesystem, then free `leave` bytes (so the next big write fails part-way, not at once)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * 65536
    try:
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB tmpfs, mounted for this test (skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}); "
                    "the simulated-ENOSPC tests cover this")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def _raise_enospc(*_: object) -> None:
    """What a full disk noticed at fsync (delayed allocation) looks like."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def enospc_on_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a full disk noticed at fsync for every atomic write."""
    monkeypatch.setattr(storage.os, "fsync", _raise_enospc)


def _conversation(words: int = 10) -> Conversation:
    conversation = Conversation.new(system="Be brief.", model="smollm2-135m")
    conversation.turns.append(Turn(user="hello " * words, answer="hi"))
    return conversation


# --- a full disk -------------------------------------------------------------------------------------------

def test_conversation_save_on_a_full_disk_keeps_the_previous_file(tiny_disk: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _use_home(monkeypatch, tiny_disk / "home")
    conversation = _conversation()
    path = save_conversation(conversation)
    good = path.read_bytes()
    _fill(tiny_disk)
    conversation.turns.append(Turn(user="x" * 300_000, answer="y" * 300_000))
    with pytest.raises(LocalgenError) as info:
        save_conversation(conversation)
    assert f"could not write {path}: No space left on device" in info.value.message
    assert "previous file is unchanged" in (info.value.hint or "")
    assert path.read_bytes() == good
    assert _strays(tiny_disk) == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_conversation_save_with_enospc_at_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_home(monkeypatch, tmp_path)
    conversation = _conversation()
    path = save_conversation(conversation)
    good = path.read_bytes()
    monkeypatch.setattr(storage.os, "fsync", _raise_enospc)
    conversation.turns.append(Turn(user="more", answer="text"))
    with pytest.raises(LocalgenError, match="No space left on device"):
        save_conversation(conversation)
    assert path.read_bytes() == good
    assert _strays(tmp_path) == []


def test_prompt_cache_store_on_a_full_disk_fails_cleanly(tiny_disk: Path) -> None:
    folder = tiny_disk / "prompts"
    cache = PromptCache(folder, "model-a", max_bytes=1 << 30, min_new_tokens=1, min_gain_tokens=1)
    cache.store([1, 2, 3], b"previous good state")
    (previous,) = folder.glob("*.lgpc")
    good = previous.read_bytes()
    _fill(tiny_disk)
    with pytest.raises(LocalgenError, match="No space left on device"):
        cache.store([7, 8, 9, 10], os.urandom(200_000))
    assert sorted(p.name for p in folder.iterdir()) == [previous.name], "no truncated entry, no temp file"
    assert previous.read_bytes() == good
    found = cache.find([1, 2, 3, 4])
    assert found is not None and bytes(found.state) == b"previous good state"


def test_a_failed_store_keeps_the_entry_it_would_have_replaced(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cache = PromptCache(tmp_path, "model-a", max_bytes=1 << 30, min_new_tokens=1, min_gain_tokens=1)
    cache.store([1, 2, 3], b"shorter prefix")
    monkeypatch.setattr(storage.os, "fsync", _raise_enospc)
    with pytest.raises(LocalgenError, match="No space left on device"):
        cache.store([1, 2, 3, 4, 5], b"its extension")  # would make the shorter entry redundant
    monkeypatch.undo()
    found = cache.find([1, 2, 3, 4, 5, 6])
    assert found is not None and bytes(found.state) == b"shorter prefix"


def _remount_read_only(mount: Path) -> None:
    """Make a mounted tmpfs read-only: every write or delete fails with EROFS, even for root."""
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, capture_output=True)


def test_prompt_cache_on_a_read_only_disk_fails_as_errors_not_crashes(tiny_disk: Path) -> None:
    home = tiny_disk / "home"
    folder = home / "cache" / "prompts"
    cache = PromptCache(folder, "model-a", max_bytes=1 << 30, min_new_tokens=1, min_gain_tokens=1)
    cache.store([1, 2, 3], b"first")
    cache.store([4, 5, 6], b"second")
    _remount_read_only(tiny_disk)
    with pytest.raises(LocalgenError, match="Read-only file system"):  # dropping [1, 2, 3] fails first, quietly
        cache.store([1, 2, 3, 4], b"extended")
    (held,) = unsaid_warnings()  # said once the answer is out (taken here: a later test's command would say it)
    assert held.startswith(f"the prompt cache is not saved: {folder} cannot be written to (Read-only file system)")
    result = run_localgen("cache", "clear", env={"LOCALGEN_HOME": str(home)})
    assert result.returncode == 1 and "Traceback" not in result.err
    assert "could not delete 2 of 2 prompt cache entries" in result.err and "Read-only file system" in result.err
    assert len(result.err.splitlines()) == 1
    assert len(list(folder.glob("*.lgpc"))) == 2


def test_a_download_that_finishes_while_its_progress_is_polled(tmp_path: Path) -> None:
    from localgen.download_progress import _sizes

    growing = tmp_path / "blob.incomplete"
    growing.write_bytes(b"x" * 10)
    assert _sizes([growing, tmp_path / "renamed-meanwhile.incomplete"]) == [10]


def test_run_still_succeeds_when_the_prompt_cache_cannot_be_written(tiny_disk: Path, tmp_path: Path) -> None:
    home = tiny_disk / "home"
    folder = home / "cache" / "prompts"
    PromptCache(folder, "another-model", max_bytes=1 << 30, min_new_tokens=1).store([1, 2, 3], b"keep me")
    (previous,) = folder.glob("*.lgpc")
    good = previous.read_bytes()
    _fill(tiny_disk, leave=64 * 1024)  # room for small markers, not for a KV state of ~700 tokens
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    result = run_localgen("run", "-m", str(bundled_model_file()), "-f", str(doc), "How many red boxes?",
                          "-n", "2", "-c", "512", "--temperature", "0",
                          env={"LOCALGEN_HOME": str(home), "LOCALGEN_DEBUG": "1"})
    assert result.returncode == 0, result.err[-2000:]
    assert result.out.strip()
    assert re.search(r"prompt cache store failed: could not write .*No space left on device", result.err)
    assert "Traceback" not in result.err
    assert sorted(p.name for p in folder.iterdir()) == [previous.name]
    assert previous.read_bytes() == good
    assert _strays(home) == []


def test_a_first_run_on_a_full_disk_answers_though_the_amx_probe_s_verdict_cannot_be_kept(tiny_disk: Path) -> None:
    """A new home on a full disk: on a CPU with AMX, the probe runs and its verdict cannot be written (it ended the
    run, an error); the run answers all the same, as where the prompt cache or a marker cannot be written."""
    from localgen.engine.amx import AMX_BUFFER_TYPE
    from localgen.engine.devices import cpu_extra_buffer_types

    if AMX_BUFFER_TYPE not in cpu_extra_buffer_types():
        pytest.skip("no AMX here: the probe does not run (test_amx checks a verdict not kept, with a stand-in)")
    _fill(tiny_disk, leave=0)
    result = run_localgen("run", "-n", "3", "--temperature", "0", "hi",
                          env={"LOCALGEN_HOME": str(tiny_disk / "home"), "LOCALGEN_AMX": "", "LOCALGEN_DEBUG": "1"})
    assert result.returncode == 0, result.err[-2000:]
    assert result.out.strip() and "Traceback" not in result.err


def test_a_run_whose_conversation_cannot_be_saved_still_gives_its_answer(tiny_disk: Path) -> None:
    env = {"LOCALGEN_HOME": str(tiny_disk / "home")}
    args = ("-n", "8", "--temperature", "0", "--no-cache")
    assert run_localgen("run", "--conversation", "c1", "Say hi.", *args, env=env).returncode == 0
    _fill(tiny_disk, leave=0)
    as_json = run_localgen("run", "--json", "--conversation", "c1", "Say hi again.", *args, env=env)
    assert as_json.returncode == 1 and "could not write" in as_json.err and "No space left" in as_json.err
    assert "not saved in conversation" not in as_json.err, "the whole answer's failed save is said once, as an error"
    record = json.loads(as_json.out)
    assert record["text"], "the answer is printed before the error"
    assert "conversation" not in record, "the exchange went into no saved conversation"
    assert "previous file is unchanged" in as_json.err
    streamed = run_localgen("run", "--conversation", "brandnew", "Say hi.", *args, env=env)
    assert streamed.returncode == 1 and streamed.out.endswith("\n") and streamed.out.strip()
    assert "previous file" not in streamed.err, "a new conversation had no previous file"
    assert _strays(tiny_disk / "home") == []


def test_verification_marker_on_a_full_disk_is_skipped_quietly(tiny_disk: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _use_home(monkeypatch, tiny_disk / "home")
    first, second = tmp_path / "first.bin", tmp_path / "second.bin"
    first.write_bytes(b"first file")
    second.write_bytes(b"second file")
    verify_file(first, sha256=hashlib.sha256(b"first file").hexdigest())
    (marker,) = settings.verified_dir.iterdir()
    good = marker.read_bytes()
    _fill(tiny_disk, leave=0)
    sha = hashlib.sha256(b"second file").hexdigest()
    verify_file(second, sha256=sha)  # the hash matched; a marker that cannot be saved only costs a rehash
    assert not is_verified(second, sha)
    assert list(settings.verified_dir.iterdir()) == [marker]
    assert marker.read_bytes() == good
    assert _strays(tiny_disk) == []


def test_verification_marker_with_enospc_at_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  enospc_on_fsync: None) -> None:
    settings = _use_home(monkeypatch, tmp_path / "home")
    model = tmp_path / "model.bin"
    model.write_bytes(b"weights")
    sha = hashlib.sha256(b"weights").hexdigest()
    verify_file(model, sha256=sha)
    assert not is_verified(model, sha)
    assert _strays(settings.cache_dir) == []
    with pytest.raises(LocalgenError, match="sha256 mismatch"):
        verify_file(model, sha256="0" * 64)


def test_history_write_on_a_full_disk_does_not_end_the_session(tiny_disk: Path) -> None:
    path = tiny_disk / "history"
    history = SafeFileHistory(path)
    history.store_string("first line")
    _fill(tiny_disk, leave=0)
    history.store_string("x" * 100_000)  # must not raise
    history.store_string("again")
    assert history.problem is not None and "No space left on device" in history.problem
    assert str(path) in history.problem
    assert "+first line" in path.read_text(errors="replace")


def test_history_keeps_a_line_as_the_message_got_it(tmp_path: Path) -> None:
    history = SafeFileHistory(tmp_path / "history")
    history.append_string("say \x1b[31mhi\x07\tthere")
    assert history.get_strings() == ["say [31mhi\tthere"], "recalled without the control characters"
    assert "+say [31mhi\tthere\n" in (tmp_path / "history").read_text()


def test_history_that_cannot_be_written_or_read_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    folder.mkdir()
    history = SafeFileHistory(folder)  # a directory: every open fails
    history.store_string("hello")
    assert history.load_history_strings() == []
    assert history.problem is not None and str(folder) in history.problem


# --- damaged files -----------------------------------------------------------------------------------------

def _valid_conversation_json() -> dict:
    return json.loads(_conversation().to_json())


CONVERSATION_DAMAGE: dict[str, bytes | dict] = {
    "empty": b"",
    "not-json": b"hello, I am not JSON",
    "truncated": _conversation(200).to_json().encode()[:150],
    "binary": bytes(range(256)) * 8,
    "invalid-utf8": b'{"format": 1, "name": "caf\xe9"}',
    "null": b"null",
    "list": b"[1, 2, 3]",
    "deep-nesting": b"[" * 100_000 + b"]" * 100_000,
    "format-a-string": {"format": "1"},  # format 2 is another version's, kept: test_cli_conversations
    "no-turns": {"turns": None},
    "turns-a-string": {"turns": "abc"},
    "turn-not-object": {"turns": [["hello", "hi"]]},
    "user-an-object": {"turns": [{"user": {"nested": True}, "answer": "hi"}]},
    "answer-a-number": {"turns": [{"user": "hello", "answer": 42}]},
    "interrupted-a-string": {"turns": [{"user": "hello", "answer": "hi", "interrupted": "yes"}]},
    "question-without-answer": {"turns": [{"user": "dangling", "answer": None}, {"user": "hello", "answer": "hi"}]},
    "system-a-list": {"system": ["a"]},
    "model-a-number": {"model": 5},
    "settings-a-list": {"settings": [1]},
    "temperature-500": {"settings": {"temperature": 500}},
    "top-k-text": {"settings": {"top_k": "40"}},
    "max-tokens-negative": {"settings": {"max_tokens": -5}},
    "seed-a-float": {"settings": {"seed": 1.5}},
    "name-traversal": {"name": "../../etc/passwd"},
}


@pytest.mark.parametrize("damage", list(CONVERSATION_DAMAGE))
def test_damaged_conversation_is_refused_naming_the_file(damage: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _use_home(monkeypatch, tmp_path)
    folder = tmp_path / "data" / "conversations"
    folder.mkdir(parents=True)
    change = CONVERSATION_DAMAGE[damage]
    data = change if isinstance(change, bytes) else json.dumps(_valid_conversation_json() | change).encode()
    path = folder / "broken.json"
    path.write_bytes(data)
    with pytest.raises(LocalgenError) as info:
        load_conversation("broken")
    assert str(path) in info.value.message and "not a valid saved conversation" in info.value.message
    assert "\n" not in info.value.message
    assert path.read_bytes() == data, "the damaged file is left as it was"


def test_loaded_conversation_saves_back_to_its_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_home(monkeypatch, tmp_path)
    victim = save_conversation(_conversation(), "victim")
    victim_bytes = victim.read_bytes()
    record = _valid_conversation_json() | {"name": "victim"}
    (victim.parent / "mine.json").write_text(json.dumps(record))
    save_conversation(load_conversation("mine"))
    assert victim.read_bytes() == victim_bytes, "a file claiming another name must not overwrite it"


def test_damaged_prompt_cache_entry_is_not_restored(tmp_path: Path) -> None:
    from gguf_builders import tiny_model

    tiny = tiny_model(tmp_path / "tiny.gguf", n_ctx=2048)  # its prefill of the 789-token prompt: milliseconds
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    args = ("run", "-m", str(tiny), "-f", str(doc), "How many red boxes?", "-n", "3", "-c", "2048",
            "--temperature", "0", "--json")
    first = run_localgen(*args, env=env)
    assert first.returncode == 0, first.err
    (entry,) = (tmp_path / "home" / "cache" / "prompts").glob("*.lgpc")
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit deep in the KV state
    entry.write_bytes(bytes(data))
    second = run_localgen(*args, env={**env, "LOCALGEN_DEBUG": "1"})
    assert second.returncode == 0, second.err[-2000:]
    record = json.loads(second.out)
    assert record["usage"]["prompt_cache_tokens"] == 0, "a damaged state must never be loaded"
    assert record["text"] == json.loads(first.out)["text"]
    assert f"prompt cache entry {entry.name} is corrupt" in second.err, "the debug log names the entry"
    assert "Traceback" not in second.err


@pytest.mark.parametrize(("content", "damage"), [
    (b"\n# 2024-01-01\n+hello\x00world\n", "NUL"),
    (b"\n# 2024-01-01\n+caf\xe9\n", "invalid UTF-8"),
    (b"\n# 2024-01-01\n+hello\nrm -rf /\n", "line 4 is not a history entry"),
    (random.Random(4096).randbytes(4096).replace(b"\0", b"\1") + b"\xff", "UTF-8"),  # the same noise every run
], ids=["nul", "latin-1", "not-an-entry", "noise"])
def test_damaged_history_is_set_aside_with_a_warning(content: bytes, damage: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _use_home(monkeypatch, tmp_path)
    path = settings.data_dir / "history"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert damage in (history_damage(content) or "")
    history, warning = open_history()
    assert isinstance(history, SafeFileHistory)
    assert warning is not None and str(path) in warning and "damaged" in warning
    assert (path.parent / "history.damaged").read_bytes() == content, "the old file is kept, not destroyed"
    assert path.read_bytes() == b"" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list(history.load_history_strings()) == []


def test_good_history_is_loaded_and_made_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _use_home(monkeypatch, tmp_path)
    path = settings.data_dir / "history"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n# 2024-01-01 10:00:00\n+first\n\n# 2024-01-01 10:00:01\n+second\n+line two\n")
    path.chmod(0o644)
    history, warning = open_history()
    assert warning is None
    assert list(history.load_history_strings()) == ["second\nline two", "first"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_new_history_is_created_private_and_a_directory_is_not_used(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _use_home(monkeypatch, tmp_path)
    old = os.umask(0)  # the most permissive umask must not matter
    try:
        open_history()
        assert stat.S_IMODE((settings.data_dir / "history").stat().st_mode) == 0o600
    finally:
        os.umask(old)
    (settings.data_dir / "history").unlink()
    (settings.data_dir / "history").mkdir()
    history, warning = open_history()
    assert not isinstance(history, SafeFileHistory)
    assert warning is not None and "is a directory" in warning


REGISTRY_DAMAGE = {
    "syntax": (b"[models.x\nrepo = 1", "not valid TOML"),
    "table-twice": (b"[models.x]\nrepo='a/b'\n\n[models.x]\nquant='Q4_0'\n",
                    "[models.x] appears twice (again at line 4)"),
    "dotted-table-twice": (b"[models.\"q2.5\"]\n[models.\"q2.5\"]\n",
                           '[models."q2.5"] appears twice (again at line 2)'),
    "key-twice": (b"[models.x]\nrepo='a/b'\nrepo = 'c/d'\n",
                  "line 3 sets 'repo' again, in a table that already has it"),
    "key-twice-after-line-separators": (  # in a string, TOML's lines are not split at U+2028, U+2029 or U+0085
        "[models.x]\ndescription = 'a\u2028b\u2029c\u0085d'\nrepo='a/b'\nquant='Q4_0'\nrepo = 'c/d'\n".encode(),
        "line 5 sets 'repo' again, in a table that already has it"),
    "table-over-key": (b"[models.x]\nrepo='a/b'\n[models.x.repo]\nquant='Q4_0'\n",
                       "line 3 makes [models.x.repo] a table, but 'repo' already has a value in [models.x]"),
    "dotted-key-over-value": (b"[models.x]\nrepo='a/b'\nrepo.quant = 'Q4_0'\n",
                              "line 3 sets repo.quant as if 'repo' were a table, but 'repo' already has a value in "
                              "[models.x]"),
    "dotted-key-over-top-level-value": (b"models = 1\nmodels.x.repo = 'a/b'\n",
                                        "line 2 sets models.x.repo as if 'models' were a table, but 'models' already "
                                        "has a value"),
    "table-over-dotted-keys": (b"[models]\nx.repo = 'a/b'\n[models.x]\nquant = 'Q4_0'\n",
                               "line 3 opens [models.x], but lines above already give it keys"),
    "dotted-key-into-a-table": (b"[models.x]\nrepo = 'a/b'\n[models]\nx.quant = 'Q4_0'\n",
                                "line 4 adds a key to [models.x] with a dotted key, but [models.x] has a table of its "
                                "own above"),
    "key-added-to-an-inline-table": (b"[models]\nx = {repo = 'a/b'}\nx.quant = 'Q4_0'\n",
                                     "line 3 adds a key to models.x, an inline table {...} above, which takes none"),
    "table-into-an-array": (b"[models.x]\nrepo='a/b'\nstop=['x']\n[models.x.stop]\n",
                            "line 4 makes [models.x.stop] a table, but 'stop' is an array in [models.x]"),
    "binary": (bytes(range(256)) * 4, "not UTF-8"),
    "latin-1": ("[models.caf\xe9]\nrepo='a/b'\nquant='Q4_0'\n".encode("latin-1"), "not UTF-8"),
    "deep-nesting": (b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "not valid TOML"),
    "models-not-a-table": (b"models = 5\n", "'models' must be a table"),
    "entry-not-a-table": (b"[models]\nx = 5\n", "must be a table"),
    "missing-repo": (b"[models.x]\nquant = 'Q4_0'\n", "needs 'repo'"),
    "unknown-key": (b"[models.x]\nrepo='a/b'\nquant='Q4_0'\ncolor='red'\n", "unknown key 'color'"),
    "wrong-type": (b"[models.x]\nrepo='a/b'\nquant='Q4_0'\ncontext='big'\n", "context must be an integer"),
    "bool-for-int": (b"[models.x]\nrepo='a/b'\nquant='Q4_0'\nsize=true\n", "size must be an integer"),
    "negative-context": (b"[models.x]\nrepo='a/b'\nquant='Q4_0'\ncontext=-5\n", "context size -5 is out of range"),
    "default-not-text": (b"[defaults]\nmodel = 5\n", "[defaults] model"),
    "defaults-not-a-table": (b"defaults = 3\n", "[defaults] model"),
    "file-traversal": (b"[models.x]\nrepo='a/b'\nquant='Q4_0'\nfile='../../../etc/passwd.gguf'\n", "unsafe file"),
    "package-file-traversal": (b"[models.x]\nrepo='a/b'\nquant='Q4_0'\npackage='os'\npackage_file='../../x'\n",
                               "unsafe file"),
    "repo-traversal": (b"[models.x]\nrepo='../..'\nquant='Q4_0'\n", "not a Hugging Face repo id"),
    "repo-with-nul": (b"[models.x]\nrepo='a/b\\u0000'\nquant='Q4_0'\n", "not a Hugging Face repo id"),
    "name-with-slash": (b"[models.\"a/../b\"]\nrepo='a/b'\nquant='Q4_0'\n", "a model name starts with an ASCII"),
    "name-not-ascii": ("[models.\"café\"]\nrepo='a/b'\n".encode(), "[models.'café']: a model name starts with an ASCII "
                       "letter or digit, then uses ASCII letters, digits, '.', '_' and '-'"),  # é: a letter, not ASCII
    "name-with-a-space": (b"[models.\"my model\"]\nrepo='a/b'\n", "[models.'my model']: a model name starts with"),
    "name-starting-with-a-dot": (b"[models.\".hidden\"]\nrepo='a/b'\n", "a model name starts with an ASCII letter"),
}


@pytest.mark.parametrize("damage", list(REGISTRY_DAMAGE))
def test_damaged_user_registry_is_an_error_naming_the_file(damage: str, tmp_path: Path) -> None:
    content, needle = REGISTRY_DAMAGE[damage]
    path = tmp_path / "models.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_registry(path)
    assert info.value.message.startswith(f"{path}: "), info.value.message
    assert needle in info.value.message
    assert "\n" not in info.value.message and len(info.value.message) < 300


def test_an_entry_pasted_in_twice_is_named_with_the_line_and_what_to_keep(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    toml = tmp_path / "config" / "models.toml"
    toml.write_bytes(b"[models.mine]\nrepo = 'org/m-GGUF'\nquant = 'Q4_0'\n\n[models.mine]\ncontext = 2048\n")
    result = run_localgen("models", "list", env={"LOCALGEN_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert result.err == (f"localgen: error: {toml}: [models.mine] appears twice (again at line 5) (hint: keep one "
                          "[models.mine] table, with every key it needs)\n")


@pytest.mark.parametrize(("content", "said"), [
    (b"[models.x]\nrepo='a/b'\nstop=['x']\nstop.y = 1\n",
     "line 4 sets stop.y as if 'stop' were a table, but 'stop' is an array in [models.x] (hint: keep one of the two: "
     "the 'stop' array or the stop.y key)"),
    (b"[models.x]\nrepo='a/b'\n[models.x.repo.y]\n",
     "line 3 makes [models.x.repo.y] a table, but 'repo' already has a value in [models.x] (hint: keep one of the "
     "two: the 'repo' value or the [models.x.repo.y] table)"),
], ids=["key-into-an-array", "table-under-a-key"])
def test_a_key_or_table_under_a_value_names_the_key_that_holds_it(content: bytes, said: str, tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    toml = tmp_path / "config" / "models.toml"
    toml.write_bytes(content)
    result = run_localgen("models", "list", env={"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1
    assert result.err == f"localgen: error: {toml}: {said}\n"


def test_a_name_with_dots_left_unquoted_gets_the_whole_name_quoted_in_the_hint(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.toml").write_bytes(b"[models.qwen2.5-0.5b]\ncontext = 1024\n")
    result = run_localgen("models", "list", env={"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1
    assert "(hint: quote names that contain dots: [models.\"qwen2.5-0.5b\"])" in result.err, result.err


def test_an_unknown_default_model_fails_only_where_the_default_is_used(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    path = tmp_path / "config" / "models.toml"
    path.write_bytes(b"[defaults]\nmodel = 'nope'\n")
    env = {"LOCALGEN_HOME": str(tmp_path)}
    listed = run_localgen("models", "list", env=env)
    named = run_localgen("run", "-m", "smollm2-135m", "-n", "2", "hi", env=env)
    default = run_localgen("run", "-n", "2", "hi", env=env)
    assert listed.returncode == 0 and "smollm2-135m" in listed.out, listed.err
    assert named.returncode == 0, named.err
    assert default.returncode == 1 and f"{path}: [defaults] model 'nope' is not in the registry" in default.err


@pytest.mark.parametrize("damage", ["syntax", "binary", "default-not-text", "file-traversal"])
def test_damaged_user_registry_through_the_cli(damage: str, tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    path = tmp_path / "config" / "models.toml"
    path.write_bytes(REGISTRY_DAMAGE[damage][0])
    env = {"LOCALGEN_HOME": str(tmp_path)}
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda args: run_localgen(*args, env=env), [("run", "hi"), ("models", "list")]))
    for result in results:
        assert result.returncode == 1, result.err
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"localgen: error: {path}: "), result.err
        assert result.stdout == b""


def test_damaged_conversation_through_chat_resume(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "conversations"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_bytes(b'{"format": 1, "turns": [')
    child = _chat(tmp_path, "--resume", "broken")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert f"{folder / 'broken.json'} is not a valid saved conversation" in " ".join(child.before.split())


def test_damaged_history_through_chat(tmp_path: Path) -> None:
    history = tmp_path / "data" / "history"
    history.parent.mkdir(parents=True)
    history.write_bytes(b"\n# 2024\n+ok\n\x00\x01\x02garbage")
    chat = Chat(tmp_path, "-m", str(bundled_model_file()), "--no-markdown", "-c", "512")
    assert f"the input history {history} is damaged" in " ".join(chat.transcript.getvalue().split())
    chat.command("/thinking off", "reasoning is hidden")
    assert chat.quit() == 0  # each key sent once the prompt is drawn whole, none sent again
    assert (history.parent / "history.damaged").exists()
    assert "/thinking off" in history.read_text() and stat.S_IMODE(history.stat().st_mode) == 0o600


def _chat(home: Path, *args: str) -> pexpect.spawn:
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "COLUMNS": "200", "LINES": "30"}
    return spawn_localgen("chat", *args, env=env, encoding="utf-8", timeout=90, dimensions=(30, 200))


# --- how things are written --------------------------------------------------------------------------------

def test_atomic_write_is_temp_fsync_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: Path) -> None:
        assert Path(src).parent == tmp_path and Path(src).name.startswith(".target.")
        assert Path(src).read_bytes() == b"new", "the temp file is complete before the rename"
        calls.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(storage.os, "fsync", fsync)
    monkeypatch.setattr(storage.os, "replace", replace)
    target = tmp_path / "target"
    target.write_bytes(b"old")
    target.chmod(0o640)
    atomic_write_bytes(target, b"new")
    assert calls == ["fsync-file", "rename", "fsync-dir"]
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o640, "the file's mode is kept"
    monkeypatch.undo()
    atomic_write_bytes(tmp_path / "fresh", b"new")
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o600, "a new file is the user's alone"


@pytest.mark.parametrize("failure", [OSError(errno.EIO, "Input/output error"), KeyboardInterrupt()])
def test_a_write_failing_before_the_rename_leaves_the_old_file(failure: BaseException, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object) -> None:
        raise failure

    monkeypatch.setattr(storage.os, "replace", fail)
    target = tmp_path / "target"
    target.write_bytes(b"old")
    with pytest.raises((LocalgenError, KeyboardInterrupt)):
        atomic_write_bytes(target, b"new" * 1000)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


@pytest.mark.parametrize("links", ["supported", "unsupported"])
def test_a_write_that_must_not_replace_claims_the_name_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            links: str) -> None:
    if links == "unsupported":  # FAT, exFAT, some network and FUSE mounts
        monkeypatch.setattr(storage.os, "link", lambda *_: (_ for _ in ()).throw(OSError(errno.EPERM, "no links")))
    target = tmp_path / "conversation.json"
    atomic_write_bytes(target, b"first", replace=False)
    with pytest.raises(FileExistsError):
        atomic_write_bytes(target, b"second", replace=False)
    assert target.read_bytes() == b"first" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conversation.json"], "no temp file is left"


@pytest.mark.parametrize("failure", [OSError(errno.EIO, "Input/output error"), KeyboardInterrupt(),
                                     SignalExit(signal.SIGTERM)], ids=["oserror", "ctrl-c", "sigterm"])
def test_a_failed_claim_without_links_leaves_no_placeholder(failure: BaseException, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "conversation.json"
    with monkeypatch.context() as patched:  # FAT, exFAT: the empty placeholder, then the rename that fails
        patched.setattr(storage.os, "link", lambda *_: (_ for _ in ()).throw(OSError(errno.EPERM, "no links")))
        patched.setattr(storage.os, "replace", lambda *_: (_ for _ in ()).throw(failure))
        with pytest.raises((LocalgenError, KeyboardInterrupt, SignalExit)):
            atomic_write_bytes(target, b"first", replace=False)
    assert list(tmp_path.iterdir()) == [], "neither the placeholder nor the temp file is left"
    atomic_write_bytes(target, b"second", replace=False)  # the name is free: no FileExistsError
    assert target.read_bytes() == b"second"


def test_an_interrupt_after_the_claim_keeps_the_written_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def replace_then_interrupt(src: str, dst: str) -> None:
        real_replace(src, dst)
        raise KeyboardInterrupt

    target = tmp_path / "conversation.json"
    with monkeypatch.context() as patched:
        patched.setattr(storage.os, "link", lambda *_: (_ for _ in ()).throw(OSError(errno.EPERM, "no links")))
        patched.setattr(storage.os, "replace", replace_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            atomic_write_bytes(target, b"first", replace=False)
    assert target.read_bytes() == b"first", "only our own empty placeholder is removed"
    assert [p.name for p in tmp_path.iterdir()] == ["conversation.json"]


def test_unwritable_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(LocalgenError, match=r"could not write .*not-a-folder/x"):
        atomic_write_bytes(blocker / "x", b"data")


def test_saved_conversations_are_private_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_home(monkeypatch, tmp_path)
    old = os.umask(0)
    try:
        path = save_conversation(_conversation())
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


WRITE_CALL = re.compile(r"\.write_text\(|\.write_bytes\(|\bopen\([^)]*['\"][wax]b?\+?['\"]|os\.open\(|\.touch\(|"
                        r"shutil\.(copy|move)")
ALLOWED_WRITES = {  # (file, text on the line; "" = any line): why it is not a write of a file localgen keeps
    ("storage.py", ""): "the atomic writer itself",
    ("cli_exit.py", "os.open(os.devnull"): "silences stdout after a broken pipe",
    ("repl_input.py", "os.open(path, os.O_CREAT"): "creates the empty history file with mode 0600 (prompt-toolkit "
                                                   "appends)",
    ("cli.py", 'sys.stderr = open(os.devnull, "w")'): "with stderr closed (2>&-), messages go to /dev/null",
    ("conversation_lock.py", "os.open(path, os.O_RDWR | os.O_CREAT"): "a lock file: its only content is the "
                                                                       "holder's process id, for the busy message",
    ("conversation_lock.py", "os.open(path, os.O_RDONLY"): "opens a leftover lock file read-only to test its lock "
                                                            "before it is removed",
    ("inputs.py", "os.open(path, os.O_RDONLY"): "opens an attached file read-only to see if it is a pipe or terminal",
    ("promptcache_partial.py", "os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL"): "a prompt cache entry's "
        "partial write, fsynced and renamed into place as the atomic writer's are, locked by its writer until then",
    ("blob_locks.py", "os.open(lock, os.O_RDWR | os.O_CREAT"): "a blob's lock file, empty, as huggingface_hub makes "
                                                               "it, which models rm holds while it deletes the blob",
    ("blob_locks.py", "os.open(lock, os.O_RDONLY"): "opens a blob's lock file read-only to take its lock",
    ("load_locks.py", "os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL"): "a blob's loading lock file, empty, "
        "which runs hold shared while llama.cpp opens the model and models rm or a pull takes alone",
    ("load_locks.py", "os.open(lock, os.O_RDWR | os.O_NOFOLLOW"): "opens a loading lock file there to take its lock",
    ("load_locks.py", "os.open(lock, os.O_RDONLY | os.O_NOFOLLOW"): "opens a loading lock file read-only to take its "
                                                                  "lock (a read-only cache)",
    ("load_locks.py", "os.open(record, os.O_WRONLY | os.O_CREAT"): "a run's record, beside the loading lock it "
        "holds, of the snapshot entry it loads the blob as (COMMIT/FILE), deleted before it lets go of the lock; a "
        "lost one is read as no record",
    ("hub_resume.py", "partial.touch()"): "a download's partial file, which later pulls append to; renamed into "
                                          "place once complete",
    ("cli_output.py", "open(os.devnull"): "run -q sends stderr to /dev/null while it runs",
    ("repl_editor.py", "path.write_bytes("): "the message Ctrl-X Ctrl-E hands the editor, in a private temporary "
                                            "folder removed once it is read back",
    ("lock_activity.py", "temporary.write_text("): "a blob lock's record of what its holder does, one line, renamed "
                                                   "into place beside the lock; a lost one is read as no record",
    ("file_locks.py", "os.open(probe, os.O_RDONLY | os.O_CREAT"): "the locks folder's probe file, empty, made once "
        "where missing: a lock taken on it tells whether /proc/locks names this file system's files",
    ("file_locks.py", "os.open(probe, os.O_RDONLY | flags)"): "opens the locks folder's probe file read-only to "
        "take its lock",
    ("replaceable.py", "os.open(path, os.O_WRONLY | os.O_NONBLOCK"): "opens a file about to be replaced for "
        "writing, truncating nothing, to meet the error a write would (an immutable file)",
}


def test_every_file_localgen_writes_goes_through_the_atomic_writer() -> None:
    offenders = []
    for path in sorted((REPO_ROOT / "localgen").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            allowed = any(name == path.name and text in line for name, text in ALLOWED_WRITES)
            if WRITE_CALL.search(line) and not allowed:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == [], "write through localgen.storage.atomic_write_*: " + "; ".join(offenders)


def test_debug_mode_shows_the_traceback_then_the_error_line(tmp_path: Path) -> None:
    result = run_localgen("run", "-m", str(tmp_path / "nope.gguf"), "hi",
                          env={"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_DEBUG": "1"})
    lines = result.err.splitlines()
    assert result.returncode == 1
    assert lines[0] == "localgen: debug: the traceback of the error below" and lines[1].startswith("Traceback")
    assert lines[-1].startswith("localgen: error: no such model file:")


@pytest.mark.parametrize(("filename", "message"), [
    ("/data/notes.json", "localgen: error: cannot write /data/notes.json: No space left on device (hint: free some "
                         "disk space)"),
    (None, "localgen: error: cannot write to stdout: No space left on device"),
])
def test_a_full_disk_names_the_file_it_could_not_write(filename: str | None, message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from localgen.cli_exit import run_app

    app = typer.Typer()

    @app.command()
    def work() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", filename)

    assert run_app(app, []) == 1
    assert capsys.readouterr().err.startswith(message)


def test_an_abort_inside_llama_cpp_is_one_line_on_stderr_and_nothing_on_stdout() -> None:
    """ggml_abort, as llama.cpp calls it on a bug it cannot recover from, attached gdb for a backtrace printed on
    stdout among the answer; localgen's process says it in one line on stderr instead."""
    script = ("import ctypes\nfrom localgen.engine.native import lc\nprint('answer', flush=True)\n"
              "abort = lc._lib.ggml_abort\nabort.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]\n"
              "abort(b'llama-grammar.cpp', 1455, b'fatal error')\n")
    env = {k: v for k, v in os.environ.items() if k != "GGML_NO_BACKTRACE"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env,
                            cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == -signal.SIGABRT
    assert result.stdout == "answer\n"
    assert result.stderr == ("localgen: internal error: llama.cpp stopped the process (llama-grammar.cpp:1455: fatal "
                             "error) (hint: run again with LOCALGEN_DEBUG=1 for llama.cpp's log, and report it)\n")


_GGML_INIT_BEYOND_LIMIT = """
import ctypes, resource, sys
from localgen.engine.native import lc, out_of_memory_said_as
from localgen.memory_limits import data_in_use
class Params(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]
init = lc._lib.ggml_init
init.argtypes, init.restype = [Params], ctypes.c_void_p
resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + 64 * 1024 * 1024, resource.RLIM_INFINITY))
print("answer", flush=True)
if sys.argv[1:]:
    with out_of_memory_said_as(sys.argv[1], "the hint"):
        init(Params(1 << 30, None, False))
init(Params(1 << 30, None, False))
"""


@pytest.mark.parametrize(("doing", "said"), [
    ("llama.cpp ran out of memory loading /m.gguf", "localgen: error: llama.cpp ran out of memory loading /m.gguf "
                                                   "(hint: the hint)\n"),
    (None, "localgen: error: llama.cpp ran out of memory (hint: `ulimit -d` of "),
])
def test_an_allocation_failing_inside_llama_cpp_says_it_ran_out_of_memory_in_one_line(doing: str | None,
                                                                                    said: str) -> None:
    """ggml_init's GGML_ASSERT where its malloc fails (a model's load under a `ulimit -d` just short of it) aborted
    the process, said as an internal error to report; it is an error of memory, status 1, saying what llama.cpp was
    doing where localgen knows (the load it was asked for), and naming the limit."""
    result = subprocess.run([sys.executable, "-c", _GGML_INIT_BEYOND_LIMIT, *([doing] if doing else [])],
                            capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert (result.returncode, result.stdout) == (1, "answer\n"), result.stderr
    assert result.stderr.startswith(said) and result.stderr.count("\n") == 1, result.stderr
