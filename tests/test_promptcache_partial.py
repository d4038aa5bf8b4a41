"""Partial writes of prompt cache entries: one whose writer was killed mid-save goes at the next run and at `cache
clear`, one a live process writes stays, both count toward the bound, and `localgen cache` shows them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localgen import config, promptcache, promptcache_partial, storage
from localgen.promptcache import PromptCache, entry_parts, evict, list_entries
from localgen.promptcache_partial import host_key, sweep_partial_writes, write_entry
from tests.conftest import REPO_ROOT, run_localgen
from tests.mount_namespace import run_mounted

MIB = 1 << 20
STATE = b"x" * 100_000  # an entry's, written past the buffer of the file it goes to

# Writes an entry with the write every save takes (PromptCache.store's), stopping after its first size bytes until a
# line comes on stdin: its partial write then lies in the cache folder, locked by this process, for a test to kill it.
WRITER = textwrap.dedent('''
    import sys
    from pathlib import Path
    from localgen.promptcache_partial import write_entry

    def parts():
        yield bytes(int(sys.argv[2]))
        print("writing", flush=True)
        sys.stdin.readline()
        yield b"the rest"

    write_entry(Path(sys.argv[1]), parts())
''')

Writer = Callable[[Path, int], subprocess.Popen]


@pytest.fixture
def writer() -> Iterator[Writer]:
    """Start a process writing an entry to a path, stopped once it wrote a number of bytes (killed at the end)."""
    started: list[subprocess.Popen] = []

    def start(target: Path, size: int) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(size)], cwd=REPO_ROOT,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "writing\n"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def killed(process: subprocess.Popen) -> subprocess.Popen:
    """The process, ended by SIGKILL (as the OOM killer or `kill -9` ends a run mid-save)."""
    process.send_signal(signal.SIGKILL)
    process.wait()
    return process


def partial_write(folder: Path, process: subprocess.Popen) -> Path:
    """The partial write in folder of the process that wrote it."""
    (path,) = folder.glob(f".*.lgpc.*-pid{process.pid}-*.tmp")
    return path


def prompts_folder(home: Path) -> Path:
    """The prompt cache folder of a localgen home."""
    return home / "cache" / config.PROMPT_CACHE_DIRNAME


def test_a_run_deletes_a_killed_writer_s_partial_write_at_once_and_keeps_a_live_one(tmp_path: Path,
                                                                                    writer: Writer) -> None:
    """The next run's eviction deletes the partial write of a run killed mid-save, where it stayed for an hour
    outside the bound; one a live process is writing is left as it is."""
    folder = prompts_folder(tmp_path)
    stopped = killed(writer(folder / f"{'a' * 32}.lgpc", MIB))
    live = writer(folder / f"{'b' * 32}.lgpc", 2 * MIB)
    left, writing = partial_write(folder, stopped), partial_write(folder, live)
    result = run_localgen("run", "-n", "1", "--temperature", "0", "hi", env={"LOCALGEN_HOME": str(tmp_path)})
    assert result.returncode == 0, result.err
    assert not left.exists(), "the killed run's partial write is gone"
    assert writing.stat().st_size == 2 * MIB and live.poll() is None, "the live one is untouched"
    assert sorted(p.name for p in folder.iterdir()) == [writing.name]


def test_cache_lists_partial_writes_with_whose_they_are(tmp_path: Path, writer: Writer) -> None:
    """`localgen cache` counts partial writes in its total and lists each (its writer's process, and whether it
    still runs), where it listed none and its total left them out."""
    folder = prompts_folder(tmp_path)
    stopped = killed(writer(folder / f"{'a' * 32}.lgpc", MIB))
    live = writer(folder / f"{'b' * 32}.lgpc", 2 * MIB)
    env = {"LOCALGEN_HOME": str(tmp_path)}
    listing = run_localgen("cache", env=env)
    assert listing.returncode == 0 and listing.err == (f"localgen: prompt cache: {folder}\n"
                                                       "localgen: 0 entries and 2 partial writes, 3.0 MiB of 2.0 GiB\n")
    rows = {row.split("\t")[4]: row.split("\t") for row in listing.out.splitlines()[1:]}
    left, writing = rows[partial_write(folder, stopped).name], rows[partial_write(folder, live).name]
    assert (left[0], left[1], left[3]) == (
        "-", "1.0 MiB", f"(partial write left by a stopped run (process {stopped.pid}); the next run deletes it)")
    assert (writing[1], writing[3]) == ("2.0 MiB", f"(partial write of a run still writing it (process {live.pid}))")
    over = run_localgen("cache", env={**env, "LOCALGEN_PROMPT_CACHE_BYTES": "2MiB"})
    assert over.err.endswith("localgen: 0 entries and 2 partial writes, 3.0 MiB of 2.0 MiB; over the bound, so the "
                             "next run deletes the partial writes of stopped runs\n"), over.err
    listed = json.loads(run_localgen("cache", "--json", env=env).out)
    assert listed["total_bytes"] == 3 * MIB and listed["entries"] == []
    partial = {p["pid"]: p for p in listed["partial_writes"]}
    assert (partial[stopped.pid]["size"], partial[stopped.pid]["writing"]) == (MIB, False)
    assert (partial[live.pid]["size"], partial[live.pid]["writing"]) == (2 * MIB, True)
    assert partial[live.pid]["path"] == str(partial_write(folder, live))


def test_cache_clear_deletes_a_killed_writer_s_partial_write_at_once_and_keeps_a_live_one(tmp_path: Path,
                                                                                        writer: Writer) -> None:
    """`cache clear` deletes a partial write whose writer was killed a moment ago, where it kept any touched in the
    last 5 minutes; one a live process is writing stays, said with its process, until that process ends."""
    folder = prompts_folder(tmp_path)
    stopped = killed(writer(folder / f"{'a' * 32}.lgpc", MIB))
    live = writer(folder / f"{'b' * 32}.lgpc", 2 * MIB)
    env = {"LOCALGEN_HOME": str(tmp_path)}
    cleared = run_localgen("cache", "clear", env=env)
    assert cleared.returncode == 0 and cleared.err == (
        "localgen: removed 0 prompt cache entries (0 B) and 1 partial write (1.0 MiB) left by a stopped run; kept 1 "
        f"partial write (2.0 MiB) of a run still writing it (process {live.pid})\n"), cleared.err
    assert sorted(p.name for p in folder.iterdir()) == [partial_write(folder, live).name]
    killed(live)
    cleared = run_localgen("cache", "clear", env=env)
    assert cleared.err == ("localgen: removed 0 prompt cache entries (0 B) and 1 partial write (2.0 MiB) left by a "
                           "stopped run\n"), cleared.err
    assert list(folder.iterdir()) == [], stopped.pid


def test_a_live_partial_write_counts_toward_the_bound(tmp_path: Path, writer: Writer) -> None:
    """A partial write a live process is writing takes its room in the bound: the least recently used entries make
    way for it, where they stayed and the folder held the bound and the partial write too."""
    one = sum(len(part) for part in entry_parts("model-a", [0] * 4, STATE))
    cache = PromptCache(tmp_path, "model-a", max_bytes=2 * one + 10, min_new_tokens=1, min_gain_tokens=1)
    cache.store([1, 1, 1, 1], STATE)
    cache.store([2, 2, 2, 2], STATE)
    os.utime(cache._entry_path([1, 1, 1, 1]), (1, 1))  # the first entry was used long ago
    live = writer(tmp_path / f"{'b' * 32}.lgpc", one)
    assert evict(tmp_path, 2 * one + 10) == 1
    assert [e.tokens for e in list_entries(tmp_path)] == [4] and cache.find([2, 2, 2, 2, 5]) is not None
    assert partial_write(tmp_path, live).stat().st_size == one
    killed(live)
    assert evict(tmp_path, 2 * one + 10) == 0 and not list(tmp_path.glob(".*.tmp")), "gone with its writer"


@pytest.mark.parametrize("meanwhile", ["a sweep deletes it", "a listing holds its lock"])
def test_a_partial_write_taken_as_it_is_made_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           meanwhile: str) -> None:
    """A sweep may find a new partial write before its writer has locked it, and delete it as a stopped run's; or a
    listing may hold its lock as the writer takes it. The writer makes another, where the entry went to a deleted
    file and was lost, or the listed one was left behind."""
    real_lock = storage.try_flock
    taken: list[Path] = []

    def lock_after_another(fd: int, *, exclusive: bool = True) -> bool | None:
        if not exclusive or taken:
            return real_lock(fd, exclusive=exclusive)
        (new,) = tmp_path.glob(".*.tmp")
        taken.append(new)
        if meanwhile == "a sweep deletes it":
            assert [p.path for p in sweep_partial_writes(tmp_path).deleted] == [new]
            return real_lock(fd, exclusive=exclusive)
        with open(new, "rb") as listing:
            assert real_lock(listing.fileno(), exclusive=False) is True
            return real_lock(fd, exclusive=exclusive)

    monkeypatch.setattr(storage, "try_flock", lock_after_another)  # the writer's lock, taken where it is made
    target = tmp_path / f"{'c' * 32}.lgpc"
    write_entry(target, (b"the ", b"state"))
    assert target.read_bytes() == b"the state"
    assert len(taken) == 1 and list(tmp_path.iterdir()) == [target], "no partial write is left behind"


def test_where_file_identities_never_agree_an_entry_is_still_saved_and_nothing_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a file system whose stat and fstat never agree on a file (some FUSE mounts), a save writes its entry through
    a partial write only its age decides on, and leaves nothing else, where every save failed, blaming a sweep, and
    left 5 empty partial writes that counted toward the bound and that no sweep could delete."""
    monkeypatch.setattr(os.path, "samestat", lambda first, second: False)
    target = tmp_path / f"{'c' * 32}.lgpc"
    write_entry(target, (b"the ", b"state"))
    assert target.read_bytes() == b"the state"
    assert list(tmp_path.iterdir()) == [target], "no partial write is left behind"


def test_where_file_identities_never_agree_a_killed_writer_s_partial_write_goes_by_its_age(
        tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A locked partial write whose lock is free, on a file system whose stat and fstat never agree, goes once
    untouched for an hour, where no sweep ever deleted it; a fresh one stays."""
    old, fresh = (partial_write(tmp_path, killed(writer(tmp_path / f"{c * 32}.lgpc", 10))) for c in "ab")
    os.utime(old, (1, 1))
    monkeypatch.setattr(os.path, "samestat", lambda first, second: False)
    swept = sweep_partial_writes(tmp_path)
    assert [p.path for p in swept.deleted] == [old] and [(p.path, p.writing) for p in swept.kept] == [(fresh, None)]


def test_another_machine_s_partial_write_is_left_to_its_age(tmp_path: Path, writer: Writer) -> None:
    """A partial write named for another machine, whose lock is free here, goes once untouched for an hour, and is
    listed as that machine's: its lock may not reach this machine (NFS with local_lock, CIFS with nobrl), where it was
    deleted at once under its live writer. This machine's, its writer killed, goes at once."""
    folder = prompts_folder(tmp_path)
    ours = partial_write(folder, killed(writer(folder / f"{'a' * 32}.lgpc", MIB)))
    assert f".{host_key()}-pid" in ours.name
    other = "0" * 12 if host_key() != "0" * 12 else "1" * 12
    theirs, stale = (folder / f".{c * 32}.lgpc.{other}-pid4242-0badcafe.tmp" for c in "bc")
    theirs.write_bytes(b"x" * 1000)
    stale.write_bytes(b"x" * 1000)
    os.utime(stale, (1, 1))
    env = {"LOCALGEN_HOME": str(tmp_path)}
    rows = {row.split("\t")[4]: row.split("\t")[3] for row in run_localgen("cache", env=env).out.splitlines()[1:]}
    assert rows[theirs.name] == ("(partial write (process 4242 on another machine), perhaps of a run still writing "
                                 "it; deleted once untouched for an hour)")
    listed = {p["path"]: p for p in json.loads(run_localgen("cache", "--json", env=env).out)["partial_writes"]}
    assert (listed[str(theirs)]["this_machine"], listed[str(theirs)]["writing"]) == (False, None)
    assert (listed[str(ours)]["this_machine"], listed[str(ours)]["writing"]) == (True, False)
    swept = sweep_partial_writes(folder)
    assert sorted(p.path for p in swept.deleted) == sorted([ours, stale])
    assert [p.path for p in swept.kept] == [theirs] and theirs.exists()


def test_the_machine_s_key_comes_from_its_boot_id_else_its_host_name(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each boot of a machine has its own key (a machine booted again holds none of its old locks); with no boot id,
    the host name gives one."""
    keys = []
    for boot_id in ("6a3f0c1e-0000-4000-8000-000000000001\n", "6a3f0c1e-0000-4000-8000-000000000002\n", None):
        path = tmp_path / f"boot_id{len(keys)}"
        if boot_id is not None:
            path.write_text(boot_id)
        monkeypatch.setattr(promptcache_partial, "BOOT_ID_FILE", path)
        promptcache_partial.host_key.cache_clear()
        keys.append(host_key())
    promptcache_partial.host_key.cache_clear()
    assert len(set(keys)) == 3 and all(len(key) == 12 and int(key, 16) >= 0 for key in keys)


def test_a_stopped_run_s_partial_write_in_a_read_only_folder_is_said_to_stay(tmp_path: Path, writer: Writer) -> None:
    """In a read-only prompt cache folder, `cache clear` fails, naming the partial write of a stopped run it could not
    delete, and `localgen cache` says it stays, where cache clear said it removed 0 entries and exited 0, and the
    listing said the next run deletes it (and, over the bound, that the next run deletes the partial writes)."""
    folder = prompts_folder(tmp_path)
    left = partial_write(folder, killed(writer(folder / f"{'a' * 32}.lgpc", 2 * MIB)))
    env = {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_PROMPT_CACHE_BYTES": "1MiB"}
    mount = f"mount -o bind,ro {folder} {folder}"
    cleared = run_mounted(mount, ["cache", "clear"], env)
    assert cleared.returncode == 1 and (f"could not delete 1 partial write (2.0 MiB) left by a stopped run in "
                                        f"{folder}: Read-only file system") in cleared.stderr, cleared.stderr
    assert "remount it read-write" in cleared.stderr and left.exists()
    listing = run_mounted(mount, ["cache"], env)
    assert listing.returncode == 0 and listing.stderr.endswith("2.0 MiB of 1.0 MiB\n"), listing.stderr
    assert "partial write left by a stopped run (process " in listing.stdout
    assert "; it stays while its folder cannot be written)" in listing.stdout, listing.stdout


def test_a_partial_write_renamed_into_place_as_the_bound_is_summed_counts_once(
        tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partial write that takes its entry's place between the sweep and the entries' listing is counted once, and
    the entries within the bound all stay, where it was counted twice and the least recently used entry went."""
    one = sum(len(part) for part in entry_parts("model-a", [0] * 4, STATE))
    cache = PromptCache(tmp_path, "model-a", max_bytes=10 * one, min_new_tokens=1, min_gain_tokens=1)
    cache.store([1, 1, 1, 1], STATE)
    live = writer(tmp_path / f"{'b' * 32}.lgpc", one)
    real_sweep = promptcache.sweep_partial_writes

    def sweep_then_finish(directory: Path) -> promptcache_partial.Swept:
        swept = real_sweep(directory)
        assert [p.writing for p in swept.kept] == [True]
        assert live.stdin is not None
        live.stdin.write("\n")
        live.stdin.close()
        assert live.wait() == 0  # its entry (one and 8 bytes) has taken its place
        return swept

    monkeypatch.setattr(promptcache, "sweep_partial_writes", sweep_then_finish)
    assert evict(tmp_path, 2 * one + 8) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([cache._entry_path([1, 1, 1, 1]).name,
                                                                  f"{'b' * 32}.lgpc"])
