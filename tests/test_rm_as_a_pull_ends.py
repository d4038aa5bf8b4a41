"""A `models rm` beside a pull that is ending: rm waiting on the pull's locks removes the model once the pull has
checked it, whole; a model removed all the same as the pull ends (an rm that gave up waiting on a lock held long)
is downloaded again whole, and the pull says so, or that it could not keep it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import blob_locks, gguf_split, hub, hub_cache
from localgen.cli import app
from localgen.cli_exit import run_app
from localgen.model_removal import remove_model
from localgen.registry import load_registry
from tests.conftest import REPO_ROOT, popen_localgen

REPO = "org/ends-GGUF"
S1, S2 = "ends-Q4_K_M-00001-of-00002.gguf", "ends-Q4_K_M-00002-of-00002.gguf"
ONE = "ends-Q8_0.gguf"


def _serve(hubenv: HubEnv) -> None:
    """REPO's split Q4_K_M and its Q8_0 of one file, on the loopback Hub."""
    hubenv.server.add_repo(REPO, {S1: make_gguf_bytes("a", shard=(1, 2)), S2: make_gguf_bytes("b", shard=(2, 2)),
                                  ONE: make_gguf_bytes("one")})


def _pulled_first_shard(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """REPO's split Q4_K_M pulled, its last shard deleted since (a pull checks the first, holding no lock of it, and
    downloads the last); rm gives up at once on a lock another holds, as it does on one held past its wait."""
    _serve(hubenv)
    _first, last = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    last.resolve().unlink()
    last.unlink()
    monkeypatch.setattr(blob_locks, "HELD_WAIT_S", 0.0)


def _by_rm() -> str:
    """Remove REPO's Q4_K_M as models rm does: its name."""
    return remove_model(load_registry(), f"{REPO}:Q4_K_M").name


def _removed_as_shards_are_read(monkeypatch: pytest.MonkeyPatch, times: int,
                                remove: Callable[[], str] = _by_rm) -> list[str]:
    """Remove REPO's Q4_K_M (as models rm does, or remove says) as a pull's check that its shards agree begins, the
    first times checks: what remove said each time."""
    real, removed = gguf_split.validate_split, list[str]()

    def removed_first(first_shard: Path) -> Any:
        if len(removed) < times:
            removed.append(remove())
        return real(first_shard)

    monkeypatch.setattr(gguf_split, "validate_split", removed_first)
    return removed


def _removed_once_linked(monkeypatch: pytest.MonkeyPatch, name: str, reference: str) -> list[str]:
    """Remove the model reference names (as models rm does) once a pull has linked its file name into the snapshot
    and let go of its lock, before the pull checks it, the first time: the names removed."""
    real, removed = hub.fetch_blob, list[str]()

    def removed_once_linked(repo: str, revision: str, f: Any, *args: Any, **kwargs: Any) -> Any:
        fetched = real(repo, revision, f, *args, **kwargs)
        if f.filename == name and not removed:
            removed.append(remove_model(load_registry(), reference).name)
        return fetched

    monkeypatch.setattr(hub, "fetch_blob", removed_once_linked)
    return removed


PULL_S = 20  # a pull that fetches again what rm removed and has not ended by then waits on a lock of its own
T = TypeVar("T")


def _ended_within_bound(pull: Callable[[], T]) -> T:
    """What pull gives, run in a thread of this process, failing where it has not ended within PULL_S (it would wait
    for good on a lock this process holds, where a daemon thread keeps it from holding up the tests' end)."""
    ended: list[T | BaseException] = []

    def pulled() -> None:
        try:
            ended.append(pull())
        except BaseException as exc:  # raised in the test's thread below
            ended.append(exc)

    thread = threading.Thread(target=pulled, daemon=True)
    thread.start()
    thread.join(PULL_S)
    assert ended, f"the pull had not ended after {PULL_S} s"
    if isinstance(ended[0], BaseException):
        raise ended[0]
    return ended[0]


def _pulled_within_bound(quant: str) -> list[Path]:
    """REPO:quant pulled as hub.download_model pulls it, within PULL_S."""
    return _ended_within_bound(lambda: hub.download_model(REPO, quant=quant, filename=None, quiet=True))


def _whole(hubenv: HubEnv, paths: list[Path], names: list[str]) -> None:
    """The pull's paths are the model's files, there, and the only entries of REPO's snapshot."""
    assert [p.name for p in paths] == names and all(p.is_file() for p in paths)
    assert [p.name for p in hubenv.snapshot_files(REPO)] == names


class _HeldCheck:
    """A pull --force in a thread of this process, held as it checks the model it fetched (the last file's header,
    or a split model's shards agreeing) until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, split: bool) -> None:
        self.checking, self.released, self.errors = threading.Event(), threading.Event(), list[Exception]()
        module, name = (gguf_split, "validate_split") if split else (hub, "verify_download")
        real = getattr(module, name)

        def held(*args: Any, **kwargs: Any) -> Any:
            self.checking.set()
            self.released.wait(30)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, held)

    def start(self, quant: str) -> threading.Thread:
        """Pull REPO:quant again until its check is held."""
        def pull() -> None:
            try:
                hub.download_model(REPO, quant=quant, filename=None, force=True, quiet=True)
            except Exception as exc:  # what the pull said, for the test to read
                self.errors.append(exc)

        thread = threading.Thread(target=pull)
        thread.start()
        assert self.checking.wait(30)
        return thread


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0"], ids=["split", "single"])
def test_rm_waiting_on_the_locks_of_a_pull_checking_its_model_removes_it_whole_once_the_pull_ended(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], quant: str) -> None:
    """The pull let go of a blob's lock once it had linked it, before checking the model: rm took the locks and
    removed the model as the pull checked it, which then failed ('file not found') or downloaded it again, so that
    the model rm said it removed was back in the cache."""
    _serve(hubenv)
    hub.download_model(REPO, quant=quant, filename=None, quiet=True)
    held = _HeldCheck(monkeypatch, split=quant == "Q4_K_M")
    pull = held.start(quant)
    rm = popen_localgen([sys.executable, "-m", "localgen", "models", "rm", "--yes", f"{REPO}:{quant}"], cwd=REPO_ROOT,
                        env=hubenv.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)  # rm waits (up to 2 s) on a lock the pull holds
    held.released.set()
    _, err = rm.communicate(timeout=60)
    pull.join(60)
    assert held.errors == [] and rm.returncode == 0 and err.decode().startswith(f"localgen: removed {REPO}:{quant}")
    assert "downloaded again" not in capfd.readouterr().err
    assert hubenv.snapshot_files(REPO) == [] and hubenv.blobs(REPO) == []


def test_a_split_model_removed_as_the_pull_checks_its_shards_is_downloaded_again_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """rm removing the model after the pull found every shard there, as it read them to check they agree: the pull
    failed with 'ends-Q4_K_M-00001-of-00002.gguf: file not found' and left nothing."""
    _pulled_first_shard(hubenv, monkeypatch)
    removed = _removed_as_shards_are_read(monkeypatch, 1)
    paths = _pulled_within_bound("Q4_K_M")
    assert removed == [f"{REPO}:Q4_K_M"]
    _whole(hubenv, paths, [S1, S2])
    err = capfd.readouterr().err
    for name in (S1, S2):
        assert f"localgen: {REPO}/{name} was removed as this pull ended; it was downloaded again\n" in err, err


def test_a_split_model_removed_once_the_pull_linked_its_last_shard_is_downloaded_again_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """rm removed the model as soon as the pull had linked its last shard, before the pull checked that shard: the
    pull failed with 'ends-Q4_K_M-00002-of-00002.gguf: file not found'."""
    _pulled_first_shard(hubenv, monkeypatch)
    removed = _removed_once_linked(monkeypatch, S2, f"{REPO}:Q4_K_M")
    paths = _pulled_within_bound("Q4_K_M")
    assert removed == [f"{REPO}:Q4_K_M"]
    _whole(hubenv, paths, [S1, S2])
    err = capfd.readouterr().err
    assert f"localgen: {REPO}/{S2} was removed as this pull ended; it was downloaded again\n" in err, err
    assert f"localgen: {REPO}/{S1} was removed while this pull fetched the model's other shards; it was " \
           "downloaded again\n" in err, err


def test_a_single_file_removed_once_the_pull_linked_it_is_downloaded_again(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The pull failed with 'ends-Q8_0.gguf: file not found' where rm removed the file between its link and its
    check."""
    _serve(hubenv)
    monkeypatch.setattr(blob_locks, "HELD_WAIT_S", 0.0)
    removed = _removed_once_linked(monkeypatch, ONE, f"{REPO}:Q8_0")
    (path,) = _pulled_within_bound("Q8_0")
    assert removed == [f"{REPO}:Q8_0"] and path.is_file()
    assert f"localgen: {REPO}/{ONE} was removed as this pull ended; it was downloaded again\n" in capfd.readouterr().err


def test_a_pull_whose_model_is_removed_each_time_it_is_downloaded_again_gives_up_saying_so(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Deleted again (by a command that takes no lock) as each download again ended, the model was said to have a
    shard 'file not found'."""
    _pulled_first_shard(hubenv, monkeypatch)
    folder = hubenv.hf_cache / hub_cache.repo_folder(REPO)

    def by_hand() -> str:  # as `rm -r`, or huggingface_hub's cache deletion, which take no lock
        for path in sorted(folder.glob("*/**/*.gguf")) + sorted((folder / "blobs").iterdir()):
            path.unlink()
        return "deleted"

    removed = _removed_as_shards_are_read(monkeypatch, hub.REMOVALS_AT_MOST, by_hand)
    capfd.readouterr()
    code = _ended_within_bound(lambda: run_app(app, ["pull", f"{REPO}:Q4_K_M"]))
    err = capfd.readouterr().err
    assert len(removed) == hub.REMOVALS_AT_MOST and code == 1, err
    assert err.endswith(f"localgen: error: {REPO}/{S1} was removed {hub.REMOVALS_AT_MOST} times as this pull fetched "
                        "it (hint: another command removes it as it is downloaded: let that end, then pull it "
                        "again)\n"), err


_HELD_AFTER_FETCH = """
import os, sys, time
from pathlib import Path
from localgen import hub
real = hub.fetch_model
def fetched_then_held(*args, **kwargs):
    paths = real(*args, **kwargs)
    Path(os.environ["FETCHED_MARK"]).touch()
    waiting = Path(os.environ["RM_WAITING_MARK"])
    deadline = time.monotonic() + 60
    while not waiting.exists():  # the command goes on once rm waits on the locks it holds, before its own check
        if time.monotonic() > deadline:
            sys.exit("models rm never waited on the locks held")
        time.sleep(0.01)
    return paths
hub.fetch_model = fetched_then_held
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""

_RM_WAITING_LONG = """
import os, sys
from pathlib import Path
from localgen import blob_locks
blob_locks.HELD_WAIT_S = 60.0  # waits on the locks until they are let go, however long the check or load takes
real = blob_locks.locked_descriptor
def marked(*args, on_held=None, **kwargs):
    def held():
        Path(os.environ["RM_WAITING_MARK"]).touch()
        if on_held is not None:
            on_held()
    return real(*args, on_held=held, **kwargs)
blob_locks.locked_descriptor = marked
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""


def _held_after_fetch(hubenv: HubEnv, tmp_path: Path, command: list[str]) -> subprocess.Popen[str]:
    """localgen command in a process of its own, going on once it has fetched its model only when a models rm started
    by _rm waits on the locks it holds: once it has fetched it."""
    mark = tmp_path / "fetched"
    started = subprocess.Popen([sys.executable, "-c", _HELD_AFTER_FETCH, *command], cwd=REPO_ROOT,
                               env={**hubenv.env, "FETCHED_MARK": str(mark), "RM_WAITING_MARK": str(tmp_path / "rm")},
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists() and started.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mark.exists(), started.communicate(timeout=60)
    return started


def _rm(reference: str, hubenv: HubEnv, tmp_path: Path) -> subprocess.Popen[str]:
    """`localgen models rm --yes reference`, started, waiting 60 s on a lock held (not 2 s), and saying it waits
    (tmp_path/rm) to a command _held_after_fetch started."""
    return subprocess.Popen([sys.executable, "-c", _RM_WAITING_LONG, "models", "rm", "--yes", reference],
                            cwd=REPO_ROOT, env={**hubenv.env, "RM_WAITING_MARK": str(tmp_path / "rm")},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0"], ids=["split", "single"])
def test_rm_waiting_on_a_pull_that_checks_the_model_it_fetched_removes_it_once_the_pull_command_ended(
        hubenv: HubEnv, tmp_path: Path, quant: str) -> None:
    """The pull let go of the locks once it had fetched the model, then checked it again: rm removed it in between,
    and the pull said it was downloaded and verified, then 'error: ends-Q8_0.gguf: file not found'."""
    _serve(hubenv)
    hub.download_model(REPO, quant=quant, filename=None, quiet=True)
    pull = _held_after_fetch(hubenv, tmp_path, ["pull", "--force", f"{REPO}:{quant}"])
    rm = _rm(f"{REPO}:{quant}", hubenv, tmp_path)
    _, rm_err = rm.communicate(timeout=60)
    pulled, pull_err = pull.communicate(timeout=60)
    assert pull.returncode == 0 and "error" not in pull_err, pull_err
    assert pulled.endswith(f"{S1 if quant == 'Q4_K_M' else ONE}\n"), pulled
    assert rm.returncode == 0 and rm_err.startswith(f"localgen: removed {REPO}:{quant}"), rm_err
    assert hubenv.snapshot_files(REPO) == [] and hubenv.blobs(REPO) == []


def test_a_pull_that_replaces_a_copy_with_the_hubs_newer_one_removes_its_snapshot_folder_holding_the_locks(
        hubenv: HubEnv, capfd: pytest.CaptureFixture[str]) -> None:
    """The locks the pull holds until it has ended are not taken for another download's by its own removal of the
    copy it replaced, which would leave that copy's snapshot folder, empty."""
    hubenv.server.add_repo(REPO, {ONE: make_gguf_bytes("one")})
    assert run_app(app, ["pull", f"{REPO}:Q8_0"]) == 0
    hubenv.server.add_repo(REPO, {ONE: make_gguf_bytes("newer")})  # a new commit
    assert run_app(app, ["pull", f"{REPO}:Q8_0"]) == 0
    assert "removed the copy it replaces" in capfd.readouterr().err
    snapshots = hubenv.hf_cache / hub_cache.repo_folder(REPO) / "snapshots"
    assert [entry.parent.parent for entry in hubenv.snapshot_files(REPO)] == [snapshots]
    assert len(list(snapshots.iterdir())) == 1


def test_rm_waiting_on_a_run_that_downloaded_its_model_removes_it_once_llama_cpp_has_it_open(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """The run let go of the locks once it had fetched the model: rm removed it before the run checked its header,
    and the run said 'error: ends-Q8_0.gguf: file not found (hint: check the path)' after 'sha256 verified'."""
    from gguf_builders import tiny_model

    hubenv.server.add_repo(REPO, {ONE: tiny_model(tmp_path / "tiny.gguf")})  # a model llama.cpp loads
    run = _held_after_fetch(hubenv, tmp_path, ["run", "-m", f"{REPO}:Q8_0", "-n", "4", "--temp", "0", "hi"])
    rm = _rm(f"{REPO}:Q8_0", hubenv, tmp_path)
    _, rm_err = rm.communicate(timeout=60)
    _, run_err = run.communicate(timeout=60)
    assert run.returncode == 0 and "error" not in run_err, run_err
    assert rm.returncode == 0 and rm_err.startswith(f"localgen: removed {REPO}:Q8_0"), rm_err
    assert hubenv.snapshot_files(REPO) == [] and hubenv.blobs(REPO) == []
