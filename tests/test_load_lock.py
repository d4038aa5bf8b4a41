"""Runs, pulls and `models rm` side by side on a model already downloaded: a run loading it holds a shared lock of each
of its blobs until llama.cpp has it open, which other runs share and a models rm is refused for."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hub_server import HubEnv, file_sha256, make_gguf_bytes, run_cli

from localgen import hub_cache, hub_settings, load_locks
from tests.conftest import REPO_ROOT, popen_localgen
from tests.mount_namespace import run_mounted
from tests.test_pull_lock_mend import SOLO, SOLO_FILE, _loaded, _run_loading_slowly


def _pulled_tiny(hubenv: HubEnv, tmp_path: Path) -> None:
    """SOLO, a model llama.cpp loads, served and pulled."""
    from gguf_builders import tiny_model

    hubenv.server.add_repo(SOLO, {SOLO_FILE: tiny_model(tmp_path / "tiny.gguf")})
    pulled = run_cli(hubenv.env, "pull", SOLO)
    assert pulled.returncode == 0, pulled.stderr


def test_rm_of_a_downloaded_model_a_run_loads_is_refused_naming_the_run_and_the_run_answers(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """A run of a model found in the cache held no lock: rm removed its file after the run had resolved it and before
    llama.cpp opened it, and the run failed saying the file may be damaged."""
    _pulled_tiny(hubenv, tmp_path)
    pid, refused = _rm_beside_a_slow_run(hubenv, tmp_path, SOLO)
    assert refused == (
        f"localgen: error: {SOLO}:Q4_K_M is being loaded by process {pid} (hint: run `localgen models rm {SOLO}` "
        "again once it has started (llama.cpp has the model open then), or stop it with Ctrl-C where it runs)\n")
    assert hubenv.snapshot_files(SOLO) and hubenv.blobs(SOLO)
    removed = run_cli(hubenv.env, "models", "rm", "--yes", SOLO)  # the run has ended: nothing holds the model now
    assert removed.returncode == 0 and hubenv.blobs(SOLO) == [], removed.stderr


def _rm_beside_a_slow_run(hubenv: HubEnv, tmp_path: Path, model: str) -> tuple[int, str]:
    """`models rm --yes SOLO` as a run of model loads (it waits 2 s on the load), refused; the run answers after it:
    the run's pid and what rm said."""
    pid, refused = _beside_a_slow_run(hubenv, tmp_path, model, "models", "rm", "--yes", SOLO)
    assert refused.returncode == 1, refused.stderr
    return pid, refused.stderr


def _beside_a_slow_run(hubenv: HubEnv, tmp_path: Path, model: str,
                       *command: str) -> tuple[int, subprocess.CompletedProcess[str]]:
    """`localgen COMMAND` as a run of model loads, which answers after it: the run's pid and the command's result."""
    run = _run_loading_slowly(hubenv, tmp_path, model)
    try:
        done = run_cli(hubenv.env, *command)
    finally:
        _loaded(tmp_path)
    answer, err = run.communicate(timeout=120)
    assert run.returncode == 0 and answer, err
    return run.pid, done


def test_a_run_of_a_model_another_run_loads_does_not_wait_on_it(hubenv: HubEnv, tmp_path: Path) -> None:
    """Both runs hold the model's loading lock, shared: the second loads and answers while the first still loads."""
    _pulled_tiny(hubenv, tmp_path)
    first = _run_loading_slowly(hubenv, tmp_path, SOLO)
    try:
        started = time.monotonic()
        second = run_cli(hubenv.env, "run", "-m", SOLO, "-n", "2", "--temp", "0", "hi")
        took = time.monotonic() - started
        assert first.poll() is None  # still loading
    finally:
        _loaded(tmp_path)
    first.communicate(timeout=120)
    assert second.returncode == 0 and second.stdout, second.stderr
    assert first.returncode == 0
    assert took < load_locks.REMOVAL_WAIT_S, f"the second run took {took:.1f} s"


_REMOVED_AS_RESOLVED = """
import subprocess, sys
from localgen import runner
real = runner.resolve_fitting
def removed_once(*args, **kwargs):
    resolved = real(*args, **kwargs)
    if runner.resolve_fitting is removed_once:
        runner.resolve_fitting = real  # once
        subprocess.run([sys.executable, "-m", "localgen", "models", "rm", "--yes", sys.argv[3]], check=True)
    return resolved
runner.resolve_fitting = removed_once
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""


def test_a_run_whose_model_rm_removed_as_it_was_resolved_downloads_it_again_and_answers(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """rm removed the model between the run's finding it in the cache and its lock: the run went on to load a file
    that was gone and failed saying it may be damaged."""
    _pulled_tiny(hubenv, tmp_path)
    done = subprocess.run([sys.executable, "-c", _REMOVED_AS_RESOLVED, "run", "-m", SOLO, "-n", "2", "--temp", "0",
                           "hi"], cwd=REPO_ROOT, env=hubenv.env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout, done.stderr
    assert done.stderr.startswith(f"localgen: removed {SOLO}:Q4_K_M"), done.stderr
    assert f"localgen: downloaded {SOLO}/{SOLO_FILE}" in done.stderr, done.stderr
    assert hubenv.snapshot_files(SOLO)


def test_a_run_of_a_file_outside_the_hub_cache_takes_no_lock(bundled_model: Path, tmp_path: Path) -> None:
    """The bundled model, a file of the user's, or a file of another Hub cache has no blob that a models rm removes."""
    other = tmp_path / "other" / "models--org--x"
    (other / "blobs").mkdir(parents=True)
    (other / "blobs" / "e1").write_bytes(b"x")
    link = other / "snapshots" / "c0ffee" / "x.gguf"
    link.parent.mkdir(parents=True)
    link.symlink_to("../../blobs/e1")
    assert load_locks.run_loading_lock(bundled_model) is None
    assert load_locks.run_loading_lock(link) is None
    with load_locks.held_for_loading([bundled_model]) as there:
        assert there


def test_a_run_of_a_model_s_file_by_its_moved_folder_s_path_is_waited_on_by_rm(hubenv: HubEnv, tmp_path: Path) -> None:
    """The repo folder moved to another disk and linked back, a run of -m DISK/snapshots/C/FILE locked
    DISK/../.locks/..., which rm never looks at: rm removed the file as the run loaded it."""
    _pulled_tiny(hubenv, tmp_path)
    folder = hubenv.hf_cache / hub_cache.repo_folder(SOLO)
    moved = tmp_path / "disk" / folder.name
    moved.parent.mkdir()
    folder.rename(moved)
    folder.symlink_to(moved)
    entry = moved / hubenv.snapshot_files(SOLO)[0].relative_to(folder)
    pid, refused = _rm_beside_a_slow_run(hubenv, tmp_path, str(entry))
    assert f"is being loaded by process {pid}" in refused, refused


def test_a_run_through_a_link_of_the_user_s_to_a_snapshot_folder_is_waited_on_by_rm(hubenv: HubEnv,
                                                                                   tmp_path: Path) -> None:
    """The entry's `../../blobs/E` was taken from the path as named (MODELS/x/FILE: MODELS/../blobs/E), not from the
    folder the link leads to: the run took no lock, and rm removed the file as the run loaded it."""
    _pulled_tiny(hubenv, tmp_path)
    entry = hubenv.snapshot_files(SOLO)[0]
    mine = tmp_path / "models" / "x"
    mine.parent.mkdir()
    mine.symlink_to(entry.parent)
    (tmp_path / "mine.gguf").symlink_to(mine / entry.name)  # a file link to that path leads to the same lock
    assert load_locks.run_loading_lock(mine / entry.name) == load_locks.run_loading_lock(tmp_path / "mine.gguf") == \
        load_locks.run_loading_lock(entry) is not None
    pid, refused = _rm_beside_a_slow_run(hubenv, tmp_path, str(mine / entry.name))
    assert f"is being loaded by process {pid}" in refused, refused


def test_a_run_of_a_cache_entry_linking_to_a_file_of_the_user_s_takes_the_lock_rm_takes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """rm took .locks/models--org--x/mine.gguf.lock.loading for such an entry, and the run took no lock."""
    entries, _locks = _locked_cache(monkeypatch, tmp_path, 1)
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"x")
    entry = entries[0].with_name("mine.gguf")
    entry.symlink_to(mine)
    assert load_locks.run_loading_lock(entry) == load_locks.loading_locks_of_links("org/x", [entry])[0] == \
        tmp_path / "hub" / ".locks" / "models--org--x" / "mine.gguf.lock.loading"


def _locked_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, count: int) -> tuple[list[Path], list[Path]]:
    """A Hub cache of count blobs linked from a snapshot, made the one localgen uses: the entries and their loading
    locks."""
    cache = tmp_path / "hub"
    monkeypatch.setattr(hub_settings, "hub_cache_dir", lambda: cache)
    monkeypatch.setattr(hub_cache, "hub_cache_dir", lambda: cache)
    entries = []
    for index in range(count):
        blob = cache / "models--org--x" / "blobs" / f"e{index}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(b"x")
        entry = cache / "models--org--x" / "snapshots" / "c0ffee" / f"x-0000{index + 1}-of-0000{count}.gguf"
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(f"../../blobs/e{index}")
        entries.append(entry)
    locks = [load_locks.run_loading_lock(entry) for entry in entries]
    assert all(lock is not None for lock in locks)
    return entries, [lock for lock in locks if lock is not None]


def test_a_run_waits_on_an_rm_holding_all_its_shards_once_and_says_so_once(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """Each shard's lock was waited on with a deadline of its own (3 shards: three times the wait), and nothing said
    what the run waited on."""
    entries, locks = _locked_cache(monkeypatch, tmp_path, 3)
    monkeypatch.setattr(load_locks, "REMOVAL_WAIT_S", 1.0)
    held = [load_locks.open_lock_file(lock) for lock in locks]  # as a models rm holds them
    said: list[str] = []
    try:
        for fd in held:
            assert fd is not None and fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB) is None
        started = time.monotonic()
        with load_locks.held_for_loading(entries, waiting=lambda _lock: said.append("waiting")) as there:
            took = time.monotonic() - started
            assert there
    finally:
        for fd in held:
            if fd is not None:
                os.close(fd)
    assert 1.0 <= took < 1.5, f"waited {took:.1f} s"
    assert said == ["waiting"]


def test_a_run_waiting_on_another_process_s_removal_says_so_on_stderr_and_answers_once_it_ends(hubenv: HubEnv,
                                                                                                tmp_path: Path) -> None:
    """The run waited up to 10 s saying nothing of why; then it said it waited for a models rm of its model, where the
    holder may be a pull removing the copy it replaced (this lock is held as such a pull holds it, recording
    nothing)."""
    _pulled_tiny(hubenv, tmp_path)
    lock = hubenv.hf_cache / ".locks" / hub_cache.repo_folder(SOLO) / f"{hubenv.blobs(SOLO)[0].name}.lock.loading"
    fd = load_locks.open_lock_file(lock)
    assert fd is not None
    said = "localgen: waiting for another localgen process (removing or replacing this model's file) to end (at most " \
           "10 s)\n"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run = popen_localgen([sys.executable, "-m", "localgen", "run", "-m", SOLO, "-n", "2", "--temp", "0", "hi"],
                             cwd=REPO_ROOT, env=hubenv.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        lines = _lines_of(run)
        _until(lambda: said in lines or run.poll() is not None, "waiting", 120)  # held until the run says it waits
    finally:
        os.close(fd)
    assert run.stdout is not None
    answer = run.stdout.read()
    assert run.wait(120) == 0 and answer, lines
    time.sleep(0.1)  # the last line read
    assert lines.count(said) == 1, lines


def test_a_run_waiting_on_a_models_rm_names_its_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """It said it waited for a models rm of its model, where the rm may remove another model sharing its file."""
    from localgen import lock_activity

    _entries, locks = _locked_cache(monkeypatch, tmp_path, 1)
    blob_lock = locks[0].with_name("e0.lock")
    held = [load_locks.open_lock_file(lock) for lock in (blob_lock, locks[0])]  # as a models rm holds them
    try:
        for fd in held:
            assert fd is not None and fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB) is None
        assert load_locks.removal_holder(locks[0]) == \
            "another localgen process (removing or replacing this model's file)"
        lock_activity.took(blob_lock, "removing")
        assert load_locks.removal_holder(locks[0]) == \
            f"process {os.getpid()} (a `localgen models rm` of a model with this file)"
    finally:
        lock_activity.letting_go(blob_lock)
        for fd in held:
            if fd is not None:
                os.close(fd)


def test_a_run_of_a_link_of_the_user_s_into_the_cache_locks_the_blob_rm_takes(monkeypatch: pytest.MonkeyPatch,
                                                                               tmp_path: Path) -> None:
    """A run locks the file behind the path it names, by the one path rm takes it by, however it reaches it."""
    entries, locks = _locked_cache(monkeypatch, tmp_path, 1)
    mine = tmp_path / "mine.gguf"
    mine.symlink_to(entries[0])
    assert load_locks.run_loading_lock(mine) == locks[0] == load_locks.blob_loading_lock("org/x", "e0")
    assert locks[0] == tmp_path / "hub" / ".locks" / "models--org--x" / "e0.lock.loading"


def test_a_run_that_waits_on_no_rm_says_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The wait is said only where it lasts."""
    entries, _locks = _locked_cache(monkeypatch, tmp_path, 2)
    said: list[str] = []
    with load_locks.held_for_loading(entries, waiting=lambda _lock: said.append("waiting")) as there:
        assert there and said == []


def test_an_existing_lock_file_is_opened_for_writing(tmp_path: Path) -> None:
    """On NFS flock is fcntl's, whose exclusive lock needs the file open for writing: one there was opened read-only."""
    lock = tmp_path / "e.lock.loading"
    lock.touch()
    fd = load_locks.open_lock_file(lock)
    assert fd is not None
    try:
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
    finally:
        os.close(fd)


_HELD_CHECK = """
import os, sys, time
from pathlib import Path
from localgen import hub
real = hub.verify_download
def held(*args, **kwargs):
    Path(os.environ["CHECKING_MARK"]).touch()
    released, deadline = Path(os.environ["CHECKED_MARK"]), time.monotonic() + 60
    while not released.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return real(*args, **kwargs)
hub.verify_download = held
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""
SAME = "org/same-bytes-GGUF"


def _lines_of(proc: subprocess.Popen[str]) -> list[str]:
    """A process's stderr lines, read as they come by a thread of their own."""
    lines: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True).start()
    return lines


def _until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wait (up to timeout seconds) until done() is true."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert done(), f"not {what} after {timeout} s"


def test_a_pull_force_waiting_on_a_pull_that_linked_the_file_keeps_the_copy_it_checked(hubenv: HubEnv,
                                                                                     tmp_path: Path) -> None:
    """The pull --force waited on a pull that found the file there (another name's download of the same bytes),
    linked it and checked it, then downloaded it again, as it does not a file the other pull downloaded."""
    data = make_gguf_bytes("same")
    hubenv.server.add_repo(SAME, {"same-Q4_K_M.gguf": data, "same-Q8_0.gguf": data})
    assert run_cli(hubenv.env, "pull", f"{SAME}:Q4_K_M").returncode == 0
    marks = {"CHECKING_MARK": str(tmp_path / "checking"), "CHECKED_MARK": str(tmp_path / "checked")}
    linking = subprocess.Popen([sys.executable, "-c", _HELD_CHECK, "pull", f"{SAME}:Q8_0"], cwd=REPO_ROOT,
                               env={**hubenv.env, **marks}, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, text=True)
    forced = None
    try:
        _until(lambda: (tmp_path / "checking").exists() or linking.poll() is not None, "checking")
        forced = popen_localgen([sys.executable, "-m", "localgen", "pull", "--force", f"{SAME}:Q8_0"], cwd=REPO_ROOT,
                                env=hubenv.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        lines = _lines_of(forced)
        _until(lambda: any(line.endswith("; waiting for it\n") for line in lines), "waiting")
    finally:
        (tmp_path / "checked").touch()
    assert linking.wait(60) == 0 and forced is not None and forced.wait(60) == 0, lines
    assert hubenv.server.count("GET", "same-Q8_0.gguf") == 0
    assert lines[0] == f"localgen: process {linking.pid} is checking {SAME}/same-Q8_0.gguf (64.0 KiB); waiting for it\n"
    time.sleep(0.1)  # the last line read
    assert lines[-1] == (f"localgen: {SAME}/same-Q8_0.gguf (64.0 KiB) already in the cache, checked by the process "
                         "this pull waited on, sha256 verified\n"), lines


SHARING = "org/sharing-GGUF"
X1, X2 = "x-Q4_K_M-00001-of-00002.gguf", "x-Q4_K_M-00002-of-00002.gguf"
Y1, Y2 = "y-Q8_0-00001-of-00002.gguf", "y-Q8_0-00002-of-00002.gguf"


def test_a_pull_s_summary_names_the_shard_another_pull_fetched_as_it_waited(hubenv: HubEnv) -> None:
    """Of a split model whose first shard the pull downloaded and whose second (the same bytes as another model's)
    another pull downloaded as it waited, the summary said 'the rest already in the cache'."""
    shared = make_gguf_bytes("shared", 6_000_000, shard=(2, 2))
    hubenv.server.add_repo(SHARING, {X1: make_gguf_bytes("x", shard=(1, 2)), X2: shared,
                                     Y1: make_gguf_bytes("y", shard=(1, 2)), Y2: shared})
    hubenv.server.hold_body_at[(SHARING, Y2)] = 5_500_000
    part = hub_cache.partial_path(SHARING, file_sha256(shared))
    env = {**hubenv.env, "HF_HUB_DOWNLOAD_TIMEOUT": "60"}
    procs: list[subprocess.Popen[str]] = []

    def pull(reference: str) -> list[str]:
        procs.append(popen_localgen([sys.executable, "-m", "localgen", "pull", reference], cwd=REPO_ROOT, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True))
        return _lines_of(procs[-1])

    try:
        pull(f"{SHARING}:Q8_0")
        _until(lambda: part.exists() and part.stat().st_size >= 5 * 2**20, "downloading the shared shard")
        lines = pull(f"{SHARING}:Q4_K_M")
        _until(lambda: any(X2 in line and "waiting for it" in line for line in lines), "waiting")
    finally:
        hubenv.server.body_released.set()
    assert [proc.wait(60) for proc in procs] == [0, 0], lines
    time.sleep(0.1)  # the last line read
    assert lines[-1].startswith(f"localgen: downloaded {SHARING}/{X1} and 1 more shard: 64.0 KiB of 5.8 MiB in "), lines
    assert lines[-1].endswith(", 5.7 MiB downloaded by another process, sha256 verified\n"), lines


def test_a_pull_replacing_a_copy_a_run_loads_keeps_that_copy_and_the_run_answers(hubenv: HubEnv,
                                                                                 tmp_path: Path) -> None:
    """The pull that downloaded the Hub's newer version of the model deleted the copy it replaced as a run of it
    loaded it: the run failed saying the file may be damaged."""
    from gguf_builders import tiny_model

    _pulled_tiny(hubenv, tmp_path)
    old = hubenv.snapshot_files(SOLO)
    hubenv.server.add_repo(SOLO, {SOLO_FILE: tiny_model(tmp_path / "newer.gguf", seed=1)})  # a new commit
    pid, pulled = _beside_a_slow_run(hubenv, tmp_path, SOLO, "pull", SOLO)  # the pull waits 2 s on the run's load
    assert pulled.returncode == 0, pulled.stderr
    assert (f"localgen: warning: the copy the new one replaces is still in the cache: process {pid} is loading "
            f"it; `localgen pull {SOLO}:Q4_K_M` removes it once that process has loaded it\n") in pulled.stderr, \
        pulled.stderr
    assert all(path.is_file() for path in old) and len(hubenv.snapshot_files(SOLO)) == 2
    again = run_cli(hubenv.env, "pull", SOLO)  # the run has ended: the copy kept goes
    assert again.returncode == 0 and "freed" in again.stderr, again.stderr
    assert not any(os.path.lexists(path) for path in old) and len(hubenv.snapshot_files(SOLO)) == 1


def _pinned_snapshot(hubenv: HubEnv, data: bytes, commit: str, ref: str | None) -> Path:
    """A snapshot of SOLO as `hf download ORG/REPO FILE --revision COMMIT` leaves it: blob, link, refs/REF."""
    repo_dir = hubenv.hf_cache / hub_cache.repo_folder(SOLO)
    sha = file_sha256(data)
    (repo_dir / "blobs" / sha).write_bytes(data)
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / SOLO_FILE).symlink_to(f"../../blobs/{sha}")
    if ref is not None:
        (repo_dir / "refs").mkdir(exist_ok=True)
        (repo_dir / "refs" / ref).write_text(commit)
    return snapshot


@pytest.mark.parametrize("ref", ["v0.9", None])
def test_a_pull_finding_its_model_up_to_date_keeps_another_snapshot_it_did_not_keep(hubenv: HubEnv,
                                                                                      ref: str | None) -> None:
    """The pull took the first other snapshot holding the model's file names (a revision pinned with `hf download
    --revision`, another tool's) for a copy an earlier pull kept, and deleted it."""
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v1")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    snapshot = _pinned_snapshot(hubenv, make_gguf_bytes("v0"), "a" * 40, ref)
    blob = Path(os.path.realpath(snapshot / SOLO_FILE))
    again = run_cli(hubenv.env, "pull", SOLO)  # the Hub has not changed
    assert again.returncode == 0 and "freed" not in again.stderr, again.stderr
    assert (snapshot / SOLO_FILE).is_file() and blob.is_file(), again.stderr


def test_a_pull_of_a_newer_commit_keeps_the_copy_it_replaces_where_a_ref_names_it(hubenv: HubEnv) -> None:
    """A revision pinned with `hf download --revision v0.9` at the commit the pull replaced was deleted with it."""
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v1")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    old = hubenv.snapshot_files(SOLO)
    refs = hubenv.hf_cache / hub_cache.repo_folder(SOLO) / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "v0.9").write_text(old[0].parent.name)
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v2")})  # a new commit
    pulled = run_cli(hubenv.env, "pull", SOLO)
    assert pulled.returncode == 0 and "freed" not in pulled.stderr, pulled.stderr
    assert all(path.is_file() for path in old) and len(hubenv.snapshot_files(SOLO)) == 2


@pytest.mark.parametrize("tag", [None, "v0.9"])
def test_a_pull_of_a_newer_commit_notes_it_as_main_where_hf_download_noted_the_one_it_replaces(
        hubenv: HubEnv, tag: str | None) -> None:
    """A pull wrote no refs/main: where `hf download` had noted the older commit there, the pull kept its copy for
    good (a refs/* file named it), and huggingface_hub's offline lookup of main still found the older file; a tag
    naming that commit keeps its copy."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v1")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    old = Path(hf_hub_download(SOLO, SOLO_FILE, cache_dir=hubenv.hf_cache))  # `hf download ORG/REPO` of it too
    refs = hubenv.hf_cache / hub_cache.repo_folder(SOLO) / "refs"
    assert (refs / "main").read_text() == old.parent.name
    if tag is not None:
        (refs / tag).write_text(old.parent.name)
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v2")})  # a new commit
    pulled = run_cli(hubenv.env, "pull", SOLO)
    assert pulled.returncode == 0 and ("freed" in pulled.stderr) is (tag is None), pulled.stderr
    new = next(path for path in hubenv.snapshot_files(SOLO) if path.parent != old.parent)
    assert (refs / "main").read_text() == new.parent.name and old.is_file() is (tag is not None)
    assert try_to_load_from_cache(SOLO, SOLO_FILE, cache_dir=hubenv.hf_cache) == str(new)
    assert tag is None or (refs / tag).read_text() == old.parent.name


@pytest.mark.parametrize("main", [None, "a" * 40])
def test_a_pull_finding_its_model_up_to_date_notes_its_commit_as_main(hubenv: HubEnv, main: str | None) -> None:
    """A pull wrote no refs/main: where there was none, or one naming an older commit (`hf download`'s of an earlier
    main), huggingface_hub's offline lookup of main did not find the file localgen had found up to date."""
    from huggingface_hub import try_to_load_from_cache

    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v1")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    [path] = hubenv.snapshot_files(SOLO)
    ref = hubenv.hf_cache / hub_cache.repo_folder(SOLO) / "refs" / "main"
    ref.parent.mkdir(exist_ok=True)
    ref.unlink(missing_ok=True) if main is None else ref.write_text(main)
    again = run_cli(hubenv.env, "pull", SOLO)
    assert again.returncode == 0 and "up to date with the Hub" in again.stderr, again.stderr
    assert ref.read_text() == path.parent.name
    assert try_to_load_from_cache(SOLO, SOLO_FILE, cache_dir=hubenv.hf_cache) == str(path)


def test_a_pull_finding_its_model_up_to_date_in_a_read_only_cache_leaves_refs_main(hubenv: HubEnv) -> None:
    """The cache cannot be written (mounted read-only): the pull leaves refs/main naming an older commit as it is and
    says the model is up to date, where its write would fail it."""
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("v1")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    ref = hubenv.hf_cache / hub_cache.repo_folder(SOLO) / "refs" / "main"
    ref.write_text("a" * 40)
    cache = hubenv.hf_cache
    again = run_mounted(f"mount -o bind,ro {cache} {cache}", ["pull", SOLO], hubenv.env)
    assert again.returncode == 0 and "up to date with the Hub" in again.stderr, again.stderr
    assert ref.read_text() == "a" * 40


def test_a_pull_of_a_new_commit_with_the_same_file_keeps_the_link_a_run_loads(hubenv: HubEnv, tmp_path: Path) -> None:
    """A commit that changed another file (the README): the pull linked the same blob into the new snapshot and
    deleted the old snapshot's link, which the run had resolved, with no wait: the run failed saying the file may be
    damaged."""
    from gguf_builders import tiny_model

    _pulled_tiny(hubenv, tmp_path)
    old = hubenv.snapshot_files(SOLO)
    hubenv.server.add_repo(SOLO, {SOLO_FILE: tiny_model(tmp_path / "tiny.gguf")})  # a new commit, the same bytes
    pid, pulled = _beside_a_slow_run(hubenv, tmp_path, SOLO, "pull", SOLO)  # the pull waits 2 s on the run's load
    assert pulled.returncode == 0 and f"process {pid} is loading it" in pulled.stderr, pulled.stderr
    assert all(path.is_file() for path in old)


_REMOVED_EACH_TIME = """
import os, sys
from localgen import runner
real = runner.resolve_fitting
def removed(*args, **kwargs):
    resolved = real(*args, **kwargs)
    os.unlink(resolved.path)  # as by another command, between the lookup and the lock
    print("removed", file=sys.stderr)
    return resolved
runner.resolve_fitting = removed
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""


def test_a_run_whose_model_rm_removes_each_time_it_is_resolved_gives_up_saying_so(hubenv: HubEnv) -> None:
    """The model removed again after the second lookup: the run went on to load a file that was gone."""
    from localgen.runner import RESOLVE_TRIES

    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("solo")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    done = subprocess.run([sys.executable, "-c", _REMOVED_EACH_TIME, "run", "-m", SOLO, "-n", "2", "hi"],
                          cwd=REPO_ROOT, env=hubenv.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and done.stderr.count("removed\n") == RESOLVE_TRIES, done.stderr
    assert done.stderr.endswith(f"localgen: error: {SOLO}:Q4_K_M was removed from the cache each time this run found "
                                "it (hint: another command removes it: run this command again once it has ended)\n"), \
        done.stderr
