"""`models rm` beside a download of the same repo: across the moment a finished download links its blob into the
snapshot, beside another quant being downloaded, and the lock files it leaves."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hub_server import HubEnv, HubServer, child_env, make_gguf_bytes, run_cli

from localgen import blob_locks, file_locks, hub, hub_cache, hub_resume
from localgen.blob_locks import holding_blob_locks
from localgen.downloads_under_way import ModelDownloadingError
from localgen.errors import HubError, ModelNotFoundError
from localgen.hub_types import HubFile, HubModel
from localgen.model_removal import remove_model
from localgen.registry import load_registry
from tests.conftest import REPO_ROOT, bundled_model_file, popen_localgen

REPO = "org/big-GGUF"
NAME = "big-Q4_K_M.gguf"


def _rm(env: dict[str, str], *references: str) -> subprocess.Popen[bytes]:
    """`localgen models rm --yes REFERENCES`, started in a process of its own."""
    return popen_localgen([sys.executable, "-m", "localgen", "models", "rm", "--yes", *references], cwd=REPO_ROOT,
                          env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_written(part: Path, size: int) -> None:
    """Wait (up to 30 s) until a download's part holds size bytes: the loopback Hub holds its body there."""
    deadline = time.monotonic() + 30
    while (not part.exists() or part.stat().st_size < size) and time.monotonic() < deadline:
        time.sleep(0.02)


class _HeldLink:
    """A pull in a thread of this process whose finished blob, renamed into place under its lock, waits to be linked
    into the snapshot until release()."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, only: str | None = None) -> None:
        """only: the file whose link waits (None: the first)."""
        self.linking, self.released, self.errors = threading.Event(), threading.Event(), list[Exception]()
        real = hub_resume.link_into_snapshot

        def held(pointer: Path, blob: Path, *, new_blob: bool) -> None:
            if only is None or pointer.name == only:
                self.linking.set()
                self.released.wait(30)
            real(pointer, blob, new_blob=new_blob)

        monkeypatch.setattr(hub_resume, "link_into_snapshot", held)

    def start(self, *, force: bool) -> threading.Thread:
        """Pull REPO:Q4_K_M (force: again, over the copy there) until it waits to link its blob."""
        def pull() -> None:
            try:
                hub.download_model(REPO, quant="Q4_K_M", filename=None, force=force, quiet=True)
            except Exception as exc:  # what the pull said, for the test to read
                self.errors.append(exc)

        thread = threading.Thread(target=pull)
        thread.start()
        assert self.linking.wait(30)
        return thread


def _rm_beside(held: _HeldLink, env: dict[str, str], *, force: bool,
               then: Callable[[], None] = lambda: None) -> tuple[int, str]:
    """`models rm --yes REPO` started while the held pull waits to link, the pull let go a second later (rm waits up
    to 2 s on the lock the pull holds), then called once rm has ended: rm's exit status and stderr, once both have
    ended."""
    pull = held.start(force=force)
    rm = _rm(env, REPO)
    time.sleep(1.0)
    held.released.set()
    _, err = rm.communicate(timeout=60)
    then()
    pull.join(60)
    return rm.returncode, err.decode()


def test_rm_as_a_pull_links_its_finished_blob_waits_for_the_link_and_removes_the_model_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pull --force renamed its checked copy over the blob and holds its lock to link it: rm took the model for not
    downloading (no part on disk), deleted the blob and the entry, and the pull then linked an entry to nothing."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    blob = hub_cache.blobs_dir(REPO) / repo.sha256(NAME)
    held = _HeldLink(monkeypatch)
    code, err = _rm_beside(held, hubenv.env, force=True)
    assert code == 0 and err.startswith(f"localgen: removed {REPO}:Q4_K_M"), err
    assert not blob.exists() and not hub_cache.partial_path(REPO, blob.name).exists()
    assert hubenv.snapshot_files(REPO) == []  # no entry left leading nowhere


def test_rm_of_a_repo_alone_while_a_pull_downloads_another_quant_of_it_says_so(loopback_hub: HubServer,
                                                                               tmp_path: Path) -> None:
    """Nothing of the repo complete, its Q8_0 being downloaded: rm ORG/REPO said it was not in the cache, as it looked
    for the quant a run takes (Q4_K_M) alone, where rm ORG/REPO:Q8_0 named the download."""
    big = "big-Q8_0.gguf"
    repo = loopback_hub.add_repo(REPO, {NAME: make_gguf_bytes("q4"), big: make_gguf_bytes("q8", 6_000_000)})
    loopback_hub.hold_body_at[(REPO, big)] = 5_500_000
    env = child_env(loopback_hub, tmp_path)
    part = tmp_path / "hf" / "hub" / "models--org--big-GGUF" / "blobs" / f"{repo.sha256(big)}.incomplete"
    pull = popen_localgen([sys.executable, "-m", "localgen", "pull", f"{REPO}:Q8_0"], cwd=REPO_ROOT, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_written(part, 5 * 2**20)
        refused = run_cli(env, "models", "rm", "--yes", REPO)
        holder = f"process {pull.pid}" if Path("/proc/locks").exists() else "another process"
        assert refused.returncode == 1 and refused.stderr == (
            f"localgen: error: {REPO}:Q8_0 is being downloaded by {holder} (5.0 MiB of 5.7 MiB so far) (hint: wait for "
            f"that download to end, or stop it with Ctrl-C where it runs, then `localgen models rm {REPO}` again)\n")
        assert part.stat().st_size == 5 * 2**20
    finally:
        loopback_hub.body_released.set()
        _, err = pull.communicate(timeout=60)
    assert pull.returncode == 0, err.decode()


def _pulled_both(hubenv: HubEnv) -> tuple[Path, Path]:
    """REPO's Q4_K_M and Q8_0, downloaded: their blobs."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q4"), "big-Q8_0.gguf": make_gguf_bytes("q8")})
    for quant in ("Q4_K_M", "Q8_0"):
        hub.download_model(REPO, quant=quant, filename=None, quiet=True)
    return tuple(hub_cache.blobs_dir(REPO) / repo.sha256(name) for name in (NAME, "big-Q8_0.gguf"))  # type: ignore


def test_rm_leaves_the_lock_files_of_the_blobs_it_deleted_and_their_folder_as_huggingface_hub_does(
        hubenv: HubEnv) -> None:
    """rm deleted the lock files of the blobs it deleted: filelock 3.x, waiting on one, opens the file it found there
    without making it again, and a download of it then failed."""
    q4, q8 = _pulled_both(hubenv)
    folder = hub_cache.lock_folder(REPO)
    locks = sorted(f"{blob.name}.lock" for blob in (q4, q8))
    assert sorted(p.name for p in folder.iterdir()) == locks
    remove_model(load_registry(), f"{REPO}:Q4_K_M")
    remove_model(load_registry(), f"{REPO}:Q8_0")
    assert sorted(p.name for p in folder.iterdir()) == sorted([*locks, *(f"{lock}.loading" for lock in locks)])
    assert not (hubenv.hf_cache / hub_cache.repo_folder(REPO)).exists()


def test_a_download_waiting_on_a_lock_rm_holds_takes_it_once_rm_lets_go(hubenv: HubEnv) -> None:
    """huggingface_hub waiting on the lock of a blob rm deletes (a pull of the model rm is removing) tries its lock
    file every 0.05 s: it takes it once rm lets go."""
    from huggingface_hub.utils import WeakFileLock

    (q4, _q8) = _pulled_both(hubenv)
    remove_model(load_registry(), f"{REPO}:Q8_0")
    lock = hub_cache.blob_lock_path(REPO, q4.name)
    waited: list[BaseException | bool] = []

    def download() -> None:
        try:
            with WeakFileLock(lock):
                waited.append(lock.exists())
        except BaseException as exc:  # what the download met, for the test to read
            waited.append(exc)

    with holding_blob_locks(REPO, [q4.name], refuse=lambda: None):  # as rm holds it while it deletes the blob
        waiting = threading.Thread(target=download)
        waiting.start()
        time.sleep(0.2)  # it waits on rm's lock
        assert waited == []
        q4.unlink()
    waiting.join(10)
    assert waited == [True]


_WAITER = """import logging, sys
from huggingface_hub.utils import WeakFileLock
logging.basicConfig(level=logging.DEBUG, format="%(message)s")  # filelock's: each try that found the lock held
try:
    with WeakFileLock(sys.argv[1]):
        print("took it", flush=True)
except BaseException as exc:
    print(type(exc).__name__, flush=True)
"""


def test_a_download_in_another_program_waiting_on_a_lock_rm_holds_takes_it_however_late_it_looks_again(
        hubenv: HubEnv) -> None:
    """huggingface_hub's own lock (hf_hub_download, `hf download`) waiting on a blob's lock rm deletes never makes the
    lock folder again: rm, deleting the emptied folder 0.2 s after it let go, failed a waiter that did not look again
    within those 0.2 s (a loaded machine, a stopped terminal) with FileNotFoundError."""
    q4, _q8 = _pulled_both(hubenv)
    remove_model(load_registry(), f"{REPO}:Q8_0")
    lock = hub_cache.blob_lock_path(REPO, q4.name)
    with holding_blob_locks(REPO, [q4.name], refuse=lambda: None):  # as rm holds it while it deletes the blob
        waiter = subprocess.Popen([sys.executable, "-c", _WAITER, str(lock)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert waiter.stderr is not None
        while "not acquired" not in (line := waiter.stderr.readline()):  # it waits on rm's lock
            assert line, "the waiter ended"
        os.kill(waiter.pid, signal.SIGSTOP)  # not looking again until rm has ended
        q4.unlink()
    time.sleep(0.5)
    os.kill(waiter.pid, signal.SIGCONT)
    out, _ = waiter.communicate(timeout=30)
    assert out == "took it\n"


SMOL = "org/smol-GGUF"


def _rm_beside_a_run(loopback_hub: HubServer, tmp_path: Path,
                     prompt: str) -> tuple[subprocess.Popen[bytes], bytes, subprocess.CompletedProcess[str]]:
    """SMOL (the bundled model) pulled, a run of prompt with it loaded, stopped as it answers, and models rm of SMOL
    then: the run, let go on to its end, what it answered, and rm's result."""
    loopback_hub.add_repo(SMOL, {"smol-Q4_1.gguf": bundled_model_file()})
    env = child_env(loopback_hub, tmp_path, LOCALGEN_AMX="0")
    assert run_cli(env, "pull", SMOL).returncode == 0
    run = popen_localgen([sys.executable, "-m", "localgen", "run", "-m", SMOL, "-n", "24", "--temperature", "0",
                          prompt], cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert run.stdout is not None
    try:
        first = run.stdout.read(1)  # answering: the model is loaded
        os.kill(run.pid, signal.SIGSTOP)
        removed = run_cli(env, "models", "rm", "--yes", SMOL)
    finally:
        os.kill(run.pid, signal.SIGCONT)
    rest, err = run.communicate(timeout=120)
    assert run.returncode == 0, err.decode()
    return run, first + rest, removed


def test_rm_of_a_model_a_run_has_loaded_says_its_space_is_freed_once_the_run_ends(loopback_hub: HubServer,
                                                                                   tmp_path: Path) -> None:
    """On Linux a run goes on with the model it mapped when rm deletes its file, whose space comes back only once the
    run ends: rm said it freed it then and there."""
    run, answer, removed = _rm_beside_a_run(loopback_hub, tmp_path, "Name three colors.")
    assert removed.returncode == 0 and removed.stderr == (
        f"localgen: removed {SMOL}:Q4_1: freed 93.8 MiB once process {run.pid} ends (it has the model loaded, and "
        "runs on until then)\n"), removed.stderr
    assert len(answer) > 20
    assert not (tmp_path / "hf" / "hub" / hub_cache.repo_folder(SMOL)).exists()


def test_a_run_whose_model_rm_deleted_saves_no_prompt_cache_entry_of_it(loopback_hub: HubServer,
                                                                        tmp_path: Path) -> None:
    """A long prompt's state, saved as the run ends, was of a file no longer there: an entry of an unknown model that
    no run could load, kept until evicted. The prompt (324 tokens) is just past the 256 new tokens a run saves."""
    _rm_beside_a_run(loopback_hub, tmp_path, "Summarize: " + " ".join(f"word{i}" for i in range(100)))
    assert list((tmp_path / "localgen" / "cache" / "prompts").glob("*.lgpc")) == []


def test_rm_waiting_on_a_lock_held_with_nothing_written_refuses_once_the_download_writes(hubenv: HubEnv) -> None:
    """A pull --force holding the lock of a cached model's blob, about to write its part: rm took it for no download
    and removed the model the pull was downloading again."""
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    (blob,) = (p for p in hubenv.blobs(REPO) if not p.name.endswith(".incomplete"))
    with open(hub_cache.blob_lock_path(REPO, blob.name), "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another open file: its lock keeps this process's own check out
        writing = threading.Timer(0.3, hub_cache.partial_path(REPO, blob.name).write_bytes, [b"\0" * 1024])
        writing.start()
        try:
            with pytest.raises(ModelDownloadingError, match=rf"^{REPO}:Q4_K_M is being downloaded by "):
                remove_model(load_registry(), REPO)
        finally:
            writing.join()
    assert blob.is_file() and hubenv.snapshot_files(REPO) != []


def test_rm_on_a_file_system_whose_file_identities_never_agree_removes_the_model_without_waiting(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock rm took that never proved the file its name leads to (some FUSE mounts) was opened and locked again and
    again, for all of the 2 s rm waits on a held lock, for each blob."""
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    monkeypatch.setattr(file_locks, "still_names", lambda fd, path: False)
    started = time.monotonic()
    remove_model(load_registry(), REPO)
    assert time.monotonic() - started < blob_locks.HELD_WAIT_S / 2 and hubenv.snapshot_files(REPO) == []


def test_rm_giving_up_on_a_held_lock_refuses_a_download_that_began_writing_as_it_gave_up(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """rm waiting out its time on a lock held with nothing written, whose download began writing its part at the last
    try, went ahead without looking again and removed the model that download was writing."""
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    (blob,) = (p for p in hubenv.blobs(REPO) if not p.name.endswith(".incomplete"))
    monkeypatch.setattr(blob_locks, "HELD_WAIT_S", 0.0)  # the first try is the last
    real = file_locks.try_flock

    def writing_as_tried(fd: int) -> bool | None:
        hub_cache.partial_path(REPO, blob.name).write_bytes(b"\0" * 1024)  # the download writes as rm tries
        return real(fd)

    monkeypatch.setattr(file_locks, "try_flock", writing_as_tried)
    with open(hub_cache.blob_lock_path(REPO, blob.name), "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another open file: its lock keeps this process's own check out
        with pytest.raises(ModelDownloadingError, match=rf"^{REPO}:Q4_K_M is being downloaded by "):
            remove_model(load_registry(), REPO)
    assert blob.is_file() and hubenv.snapshot_files(REPO) != []


def test_rm_of_a_repo_alone_removes_the_part_kept_of_its_first_quant_while_a_pull_downloads_another(
        loopback_hub: HubServer, tmp_path: Path) -> None:
    """Q4_K_M's part kept by a pull that stopped, Q8_0 being downloaded: rm ORG/REPO was refused for the Q8_0
    download, where it removed the kept part of the quant a run takes."""
    big = "big-Q8_0.gguf"
    repo = loopback_hub.add_repo(REPO, {NAME: make_gguf_bytes("q4", 3_000_000), big: make_gguf_bytes("q8", 6_000_000)})
    env = child_env(loopback_hub, tmp_path)
    blobs = tmp_path / "hf" / "hub" / hub_cache.repo_folder(REPO) / "blobs"
    blobs.mkdir(parents=True)
    kept = blobs / f"{repo.sha256(NAME)}.incomplete"
    kept.write_bytes(repo.files[NAME][:1_000_000])
    loopback_hub.hold_body_at[(REPO, big)] = 5_500_000
    part = blobs / f"{repo.sha256(big)}.incomplete"
    pull = popen_localgen([sys.executable, "-m", "localgen", "pull", f"{REPO}:Q8_0"], cwd=REPO_ROOT, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_written(part, 5 * 2**20)
        removed = run_cli(env, "models", "rm", "--yes", REPO)
        assert removed.returncode == 0 and removed.stderr == (
            f"localgen: removed {REPO}:Q4_K_M (partly downloaded): freed 976.6 KiB\n"), removed.stderr
        assert not kept.exists() and part.stat().st_size == 5 * 2**20
    finally:
        loopback_hub.body_released.set()
        _, err = pull.communicate(timeout=60)
    assert pull.returncode == 0, err.decode()


S1, S2 = "big-Q4_K_M-00001-of-00002.gguf", "big-Q4_K_M-00002-of-00002.gguf"


def _shards(first_blob_first: bool) -> dict[str, bytes]:
    """A split model's two shards, whose blob names (their sha256) sort the first shard's first or last: rm takes
    their locks in that order."""
    for i in range(1000):
        one, two = make_gguf_bytes(f"a{i}", shard=(1, 2)), make_gguf_bytes(f"b{i}", shard=(2, 2))
        if (hashlib.sha256(one).hexdigest() < hashlib.sha256(two).hexdigest()) == first_blob_first:
            return {S1: one, S2: two}
    raise AssertionError("no such pair")


@pytest.mark.parametrize("first_blob_first", [True, False])
def test_rm_of_a_split_model_waiting_for_a_pull_to_link_a_shard_is_refused_and_the_pull_completes_it(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, first_blob_first: bool) -> None:
    """rm waited for a pull --force to link its first shard, then removed the model; the pull went on to the second
    shard and failed ('...-00001-of-00002.gguf: file not found'), leaving that shard's blob and entry for good. The
    second shard's body is held until rm has ended: the pull writes it as rm waits."""
    hubenv.server.add_repo(REPO, _shards(first_blob_first))
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    hubenv.server.chunk_size, hubenv.server.hold_body_at[(REPO, S2)] = 1024, 1024
    held = _HeldLink(monkeypatch)
    try:
        code, err = _rm_beside(held, hubenv.env, force=True, then=hubenv.server.body_released.set)  # links shard 1
    finally:
        hubenv.server.body_released.set()
    holder = f"process {os.getpid()}" if Path("/proc/locks").exists() else "another process"
    assert code == 1 and err.startswith(
        f"localgen: error: {REPO}:Q4_K_M is being downloaded by {holder} ("), err
    assert held.errors == [] and [p.name for p in hubenv.snapshot_files(REPO)] == [S1, S2]
    assert len([p for p in hubenv.blobs(REPO) if not p.name.endswith(".incomplete")]) == 2


@pytest.mark.parametrize("first_blob_first", [True, False])
def test_rm_of_a_split_model_waiting_for_a_pull_to_link_its_last_shard_removes_it_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, first_blob_first: bool) -> None:
    """With nothing left for the pull to fetch, rm refused all the same, saying the model 'is being downloaded by
    process N (128.0 KiB of 128.0 KiB so far)' after that download had ended."""
    hubenv.server.add_repo(REPO, _shards(first_blob_first))
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    held = _HeldLink(monkeypatch, only=S2)
    code, err = _rm_beside(held, hubenv.env, force=True)  # waits to link the last shard
    assert held.errors == [] and code == 0, err
    assert err.startswith(f"localgen: removed {REPO}:Q4_K_M"), err


def test_rm_of_a_split_model_waiting_for_a_pull_to_link_the_last_shard_it_did_not_find_is_refused(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A last shard rm found missing, linked as it waited, is not among the files it removes: it would remove the
    first shard alone."""
    hubenv.server.add_repo(REPO, _shards(True))
    first, last = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    last.resolve().unlink()
    last.unlink()  # the last shard never downloaded
    held = _HeldLink(monkeypatch, only=S2)
    code, err = _rm_beside(held, hubenv.env, force=False)  # waits to link the last shard
    assert held.errors == [] and code == 1, err
    assert "is being downloaded by" in err and first.is_file() and last.is_file()


def test_rm_waiting_on_the_locks_of_a_model_another_rm_removes_says_it_is_no_longer_there(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second rm of the model, waiting on the locks the first held as it removed it, said 'removed ...: freed 0 B'."""
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    (blob,) = hubenv.blobs(REPO)
    waiting, outcome = threading.Event(), list[BaseException | object]()
    real = blob_locks.lock_holder

    def noted(lock: Path) -> int | None:
        waiting.set()
        return real(lock)

    monkeypatch.setattr(blob_locks, "lock_holder", noted)

    def second_rm() -> None:
        try:
            outcome.append(remove_model(load_registry(), REPO))
        except BaseException as exc:  # what it said, for the test to read
            outcome.append(exc)

    with open(hub_cache.blob_lock_path(REPO, blob.name), "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as the first rm holds it: another open file, this process's too
        thread = threading.Thread(target=second_rm)
        thread.start()
        assert waiting.wait(30)
        shutil.rmtree(hubenv.hf_cache / hub_cache.repo_folder(REPO))  # as the first rm removes the model
    thread.join(30)
    (said,) = outcome
    assert isinstance(said, ModelNotFoundError) and said.message == f"{REPO}:Q4_K_M is no longer in the cache", said


def test_a_prompt_cache_entry_of_a_model_rm_deletes_as_it_is_written_is_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run saving its state as models rm deleted the model, after the run had checked that the file was still
    there, kept an entry of a file no run could load again."""
    from localgen import promptcache

    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    identity = f"{promptcache.model_identity([model])}; sig"  # as prompt_cache_for makes it
    cache = promptcache.PromptCache(tmp_path / "prompts", identity, max_bytes=1 << 20, min_new_tokens=1,
                                    min_gain_tokens=1, model_files=[model])
    real = promptcache.write_entry

    def deleted_as_written(target: Path, parts: list[bytes]) -> None:
        model.unlink()  # as models rm deletes it
        real(target, parts)

    monkeypatch.setattr(promptcache, "write_entry", deleted_as_written)
    cache.store([1, 2, 3], b"state")
    assert list((tmp_path / "prompts").glob("*.lgpc")) == []


def test_a_pull_of_a_split_model_whose_first_shard_rm_removed_between_two_shards_downloads_it_again(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """rm between a pull's two shards, holding neither's lock (the first was there: the pull only checked it),
    removed the first; the pull fetched the second and failed ('...-00001-of-00002.gguf: file not found'), leaving
    the second shard's blob and entry for good."""
    hubenv.server.add_repo(REPO, _shards(True))
    _pulled_first_shard()
    real, removed = hub.verify_download, list[str]()

    def removed_once_verified(path: Path, *args: object, **kwargs: object) -> None:
        real(path, *args, **kwargs)  # type: ignore[arg-type]
        if path.name == S1 and not removed:  # between the shards: as a models rm then removes the model
            removed.append(remove_model(load_registry(), REPO).name)

    monkeypatch.setattr(hub, "verify_download", removed_once_verified)
    paths = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    assert removed == [f"{REPO}:Q4_K_M"] and [p.name for p in paths] == [S1, S2] and all(p.is_file() for p in paths)
    assert [p.name for p in hubenv.snapshot_files(REPO)] == [S1, S2]
    assert f"localgen: {REPO}/{S1} was removed while this pull fetched the model's other shards; it was downloaded " \
           "again\n" in capfd.readouterr().err


def _pulled_first_shard() -> None:
    """REPO's split Q4_K_M pulled, its last shard deleted since: a pull checks the first and downloads the last."""
    _first, last = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    last.resolve().unlink()
    last.unlink()


def _removed_once_fetched(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Remove REPO's model (as models rm does) once the pull has fetched and checked its file name, the first time."""
    real, removed = hub.verify_download, list[str]()

    def removed_once_verified(path: Path, *args: object, **kwargs: object) -> None:
        real(path, *args, **kwargs)  # type: ignore[arg-type]
        if path.name == name and not removed:
            removed.append(remove_model(load_registry(), REPO).name)

    monkeypatch.setattr(hub, "verify_download", removed_once_verified)


def test_a_pull_whose_download_again_of_a_removed_shard_fails_says_nothing_of_downloading_it_again(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The note that the shard was downloaded again came before its download, and was printed as the pull failed."""
    hubenv.server.add_repo(REPO, _shards(True))
    _pulled_first_shard()
    _removed_once_fetched(monkeypatch, S1)
    real, calls = hub._fetch_file, list[str]()

    def fetch(model: HubModel, f: HubFile, **kwargs: Any) -> hub.FetchedFile:
        calls.append(f.filename)
        if len(calls) == 3:  # the first shard again: the network goes away
            raise HubError("could not reach the Hub: connection reset")
        return real(model, f, **kwargs)

    monkeypatch.setattr(hub, "_fetch_file", fetch)
    with pytest.raises(HubError, match="connection reset"):
        hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    assert calls == [S1, S2, S1]
    assert "downloaded again" not in capfd.readouterr().err


def test_a_pull_whose_single_file_was_removed_as_it_ended_downloads_it_again_and_names_no_other_shards(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A model of one file removed once fetched was said removed as the pull fetched its other shards."""
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big")})
    _removed_once_fetched(monkeypatch, NAME)
    (path,) = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    assert path.is_file()
    err = capfd.readouterr().err
    assert f"localgen: {REPO}/{NAME} was removed as this pull ended; it was downloaded again\n" in err, err
