"""Pulls, runs and `models rm` beside each other on the locks of a model's blobs: two pulls of models sharing blobs
never wait on each other for good, and a process holding a model's locks past its download says what it does with
the model (checking it, loading it), which a `models rm` refusing it and a pull waiting on it say."""

from __future__ import annotations

import io
import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hub_server import HubEnv, HubServer, child_env, file_sha256, make_gguf_bytes, run_cli

from localgen import hub, hub_cache, lock_activity
from localgen.units import binary_size
from tests.conftest import REPO_ROOT, popen_localgen

CROSS = "org/cross-GGUF"
X1, X2 = "m-Q4_K_M-00001-of-00002.gguf", "m-Q4_K_M-00002-of-00002.gguf"
Y1, Y2 = "m-Q8_0-00001-of-00002.gguf", "m-Q8_0-00002-of-00002.gguf"
SIZE = 6_000_000
HELD_AT = 5_500_000  # a held body's part has 5 MiB on disk: it is written in 1 MiB pieces
ENDED_S = 30  # a pull that has not ended by then waits for good


class _Pull:
    """`localgen pull ARGUMENTS` in a process of its own, its stderr read as it comes."""

    def __init__(self, env: dict[str, str], *arguments: str) -> None:
        self.proc = popen_localgen([sys.executable, "-m", "localgen", "pull", *arguments], cwd=REPO_ROOT, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.decode())

    def ended(self, timeout: float) -> bool:
        """Whether the pull ended within timeout seconds (killed where it did not)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return False
        finally:
            self.reader.join(10)
        return True


def _until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wait (up to timeout seconds) until done() is true."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert done(), f"not {what} after {timeout} s"


def _size(path: Path) -> int:
    """The size of a file, 0 where it is not there."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _shards_in_lock_order() -> tuple[bytes, bytes]:
    """A split model's two shards whose blob names (their sha256) sort as their numbers do."""
    for tag in itertools.count():
        first = make_gguf_bytes(f"first{tag}", SIZE, shard=(1, 2))
        second = make_gguf_bytes(f"second{tag}", SIZE, shard=(2, 2))
        if file_sha256(first) < file_sha256(second):
            return first, second
    raise AssertionError("unreachable")


def test_two_pulls_of_split_models_sharing_blobs_in_opposite_order_both_end(loopback_hub: HubServer,
                                                                            tmp_path: Path) -> None:
    """Q4_K_M's shards are blobs a, b and Q8_0's b, a: each pull fetched its first shard and held its lock, then
    waited for good on the other's for its second shard. Now both take the locks in the blobs' order: the Q8_0 pull
    waits on a (following its download), and both end, the Q8_0 refused for its shard numbers."""
    first, second = _shards_in_lock_order()
    loopback_hub.add_repo(CROSS, {X1: first, X2: second, Y1: second, Y2: first})
    loopback_hub.hold_body_at[(CROSS, X1)] = loopback_hub.hold_body_at[(CROSS, Y1)] = HELD_AT
    env = child_env(loopback_hub, tmp_path, HF_HUB_DOWNLOAD_TIMEOUT="60")
    blobs = tmp_path / "hf" / "hub" / "models--org--cross-GGUF" / "blobs"
    part_a, part_b = (blobs / f"{file_sha256(data)}.incomplete" for data in (first, second))
    q4 = _Pull(env, f"{CROSS}:Q4_K_M")
    q8 = None
    try:
        _until(lambda: _size(part_a) >= 5 * 2**20, "downloading a")
        q8 = _Pull(env, f"{CROSS}:Q8_0")  # fetches b and holds it, or waits on a
        _until(lambda: _size(part_b) >= 5 * 2**20 or any("waiting for it" in line for line in q8.lines),
               "downloading b nor waiting on a")
        loopback_hub.body_released.set()
        assert q4.ended(ENDED_S) and q8.ended(ENDED_S), f"a pull was still waiting after {ENDED_S} s"
    finally:
        loopback_hub.body_released.set()
        for pull in filter(None, (q4, q8)):
            pull.ended(0)
    assert q4.proc.returncode == 0, "".join(q4.lines)
    assert q8.proc.returncode == 1 and q8.lines[-1].startswith(
        f"localgen: error: {Y1}: metadata says shard 2 of 2, the file name says 1 of 2"), "".join(q8.lines)


SOLO, SOLO_FILE = "org/solo-GGUF", "solo-Q4_K_M.gguf"
PARTS, P1, P2 = "org/parts-GGUF", "parts-Q4_K_M-00001-of-00002.gguf", "parts-Q4_K_M-00002-of-00002.gguf"


def _served(hubenv: HubEnv, split: bool) -> str:
    """A model of one file, or a split model of two, on the loopback Hub: its repo."""
    if split:
        shards = {P1: make_gguf_bytes("p1", shard=(1, 2)), P2: make_gguf_bytes("p2", shard=(2, 2))}
        hubenv.server.add_repo(PARTS, shards)
        return PARTS
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("solo")})
    return SOLO


@pytest.mark.parametrize("split", [False, True], ids=["single", "split"])
@pytest.mark.parametrize("doing", ["loading", "checking"])
def test_rm_of_a_model_its_download_checks_or_loads_past_rm_s_wait_is_refused_saying_so(
        hubenv: HubEnv, split: bool, doing: str) -> None:
    """A run holds the locks of the model it downloaded until llama.cpp has opened it: rm gave up waiting on them
    after 2 s and removed a model of one file from under the load, and refused a split model as 'being downloaded by
    process N (… of … so far)'."""
    repo = _served(hubenv, split)
    with hub.locks_held_through():  # as a run, or a pull, holds them
        paths = hub.download_model(repo, quant="Q4_K_M", filename=None, quiet=True)
        if doing == "loading":
            lock_activity.now_doing("loading")  # as load_model records it before llama.cpp opens the model
        refused = run_cli(hubenv.env, "models", "rm", "--yes", repo)
        assert all(path.is_file() for path in paths)
    rerun = f"`localgen models rm {repo}`"
    said = (f"is being loaded by process {os.getpid()} (hint: run {rerun} again once it has started (llama.cpp has the "
            "model open then), or stop it with Ctrl-C where it runs)" if doing == "loading" else
            f"is being checked by process {os.getpid()}, which downloaded it (hint: run {rerun} again once that check "
            "has ended)")
    assert refused.returncode == 1 and refused.stderr == f"localgen: error: {repo}:Q4_K_M {said}\n", refused.stderr
    assert list(hub_cache.lock_folder(repo).glob("*.doing")) == []  # each record went with its lock


_SLOW_LOAD = """
import os, sys, time
from pathlib import Path
from localgen import runner
real = runner.open_engine
def slow(*args, **kwargs):
    Path(os.environ["LOADING_MARK"]).touch()
    loaded, deadline = Path(os.environ["LOADED_MARK"]), time.monotonic() + 60
    while not loaded.exists() and time.monotonic() < deadline:  # a large model's load, until the test ends it
        time.sleep(0.01)
    return real(*args, **kwargs)
runner.open_engine = slow
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""


def _slow_run(hubenv: HubEnv, tmp_path: Path, repo: str) -> subprocess.Popen[str]:
    """`localgen run -m repo` in a process of its own, whose load by llama.cpp of the model it downloads goes on until
    _loaded (up to 60 s), started."""
    env = {**hubenv.env, "LOADING_MARK": str(tmp_path / "loading"), "LOADED_MARK": str(tmp_path / "loaded"),
           "HF_HUB_DOWNLOAD_TIMEOUT": "60"}
    return subprocess.Popen([sys.executable, "-c", _SLOW_LOAD, "run", "-m", repo, "-n", "2", "--temp", "0", "hi"],
                            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _loaded(tmp_path: Path) -> None:
    """End the load of _slow_run's run."""
    (tmp_path / "loaded").touch()


def _run_loading_slowly(hubenv: HubEnv, tmp_path: Path, repo: str) -> subprocess.Popen[str]:
    """_slow_run's run, once it has begun its load."""
    mark = tmp_path / "loading"
    run = _slow_run(hubenv, tmp_path, repo)
    _until(lambda: mark.exists() or run.poll() is not None, "loading", 60)
    assert mark.exists(), run.communicate(timeout=60)
    return run


def test_rm_of_a_model_a_run_downloaded_and_loads_is_refused_and_the_run_answers(hubenv: HubEnv,
                                                                                tmp_path: Path) -> None:
    """rm waited 2 s on the locks the run held through a longer load, then removed the model's file: the run failed
    with a hint that the file may be damaged."""
    from gguf_builders import tiny_model

    hubenv.server.add_repo(SOLO, {SOLO_FILE: tiny_model(tmp_path / "tiny.gguf")})  # a model llama.cpp loads
    run = _run_loading_slowly(hubenv, tmp_path, SOLO)
    refused = run_cli(hubenv.env, "models", "rm", "--yes", SOLO)  # waits 2 s on the locks of the load
    _loaded(tmp_path)
    answer, err = run.communicate(timeout=120)
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"localgen: error: {SOLO}:Q4_K_M is being loaded by process {run.pid} (hint: "), refused.stderr
    assert run.returncode == 0 and answer, err
    assert hubenv.snapshot_files(SOLO) and list(hub_cache.lock_folder(SOLO).glob("*.doing")) == []


def test_a_pull_force_waiting_on_a_run_loading_the_model_says_so_and_keeps_the_run_s_download(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """The pull said another download was fetching the model while the run that had downloaded it loaded it, and
    counted that wait in the time and speed of its own download of it again; a download of it made as the pull
    --force waited is one enough."""
    from gguf_builders import tiny_model

    size = binary_size(tiny_model(tmp_path / "tiny.gguf").stat().st_size)
    hubenv.server.add_repo(SOLO, {SOLO_FILE: tmp_path / "tiny.gguf"})
    run = _run_loading_slowly(hubenv, tmp_path, SOLO)
    waiting = f"localgen: process {run.pid} downloaded {SOLO}/{SOLO_FILE} ({size}) and is loading it; waiting for it\n"
    fetched = hubenv.server.count("GET", SOLO_FILE)  # by the run
    pull = _Pull(hubenv.env, "--force", SOLO)
    try:
        _until(lambda: waiting in pull.lines or pull.proc.poll() is not None, "waiting")
        time.sleep(WAITED_S)  # the rest of the load, which the pull waits through
    finally:
        _loaded(tmp_path)
    assert pull.ended(60), "".join(pull.lines)
    _, run_err = run.communicate(timeout=120)
    assert run.returncode == 0, run_err
    assert pull.proc.returncode == 0 and pull.lines[1] == waiting, pull.lines
    assert pull.lines[-1] == (f"localgen: {SOLO}/{SOLO_FILE} ({size}) already in the cache, checked by the process "
                              "this pull waited on, sha256 verified\n"), pull.lines
    assert hubenv.server.count("GET", SOLO_FILE) == fetched


WAITED_S = 3.0  # a pull waits this long on a run's load at least: its download took less


def _text(path: Path) -> str:
    """A file's text, "" where it is not there."""
    try:
        return path.read_text()
    except OSError:
        return ""


def test_a_pull_begun_as_a_run_downloads_the_model_says_when_the_run_goes_on_to_load_it(hubenv: HubEnv,
                                                                                     tmp_path: Path) -> None:
    """The pull said another download was fetching the model, then nothing more as it waited through the run's load."""
    from gguf_builders import tiny_model

    model = tiny_model(tmp_path / "tiny.gguf", n_embd=512, n_ff=1024, n_head=8, n_head_kv=4)  # 5.9 MiB
    hubenv.server.add_repo(SOLO, {SOLO_FILE: model})
    hubenv.server.hold_body_at[(SOLO, SOLO_FILE)] = HELD_AT  # past the header a run reads first
    record = lock_activity.record_path(hub_cache.blob_lock_path(SOLO, file_sha256(model)))
    run = _slow_run(hubenv, tmp_path, SOLO)
    what = f"{SOLO}/{SOLO_FILE} ({binary_size(model.stat().st_size)})"
    loading = f"localgen: process {run.pid} downloaded {what} and is loading it; waiting for it\n"
    pull = None
    try:
        _until(lambda: _text(record) == f"{run.pid} downloading\n", "downloading")
        pull = _Pull({**hubenv.env, "HF_HUB_DOWNLOAD_TIMEOUT": "60"}, SOLO)
        _until(lambda: any(line.endswith("; waiting for it\n") for line in pull.lines), "waiting")
        hubenv.server.body_released.set()
        _until(lambda: loading in pull.lines or pull.proc.poll() is not None, "saying the run loads the model", 60)
    finally:
        hubenv.server.body_released.set()
        _loaded(tmp_path)
    assert pull is not None and pull.ended(60) and pull.proc.returncode == 0, "".join(pull.lines)
    _, run_err = run.communicate(timeout=120)
    assert run.returncode == 0, run_err
    assert f"localgen: another download is fetching {what} from {hubenv.server.url}; waiting for it\n" in pull.lines
    assert loading in pull.lines, pull.lines
    assert pull.lines[-1] == f"localgen: {what} downloaded by another process, sha256 verified\n", pull.lines


def terminal_display(repo: str, name: str) -> tuple[Any, Any, io.StringIO]:
    """A pull's display on a terminal (written to the StringIO) of one 1 MiB file of repo, and that file."""
    from rich.console import Console

    from localgen.download_progress import RichDisplay
    from localgen.hub_types import HubFile, HubModel

    f = HubFile(repo, name, 2**20, "a" * 64, "Q4_K_M", None, None)
    out = io.StringIO()
    display = RichDisplay(HubModel(repo, "Q4_K_M", (f,), "c" * 40),
                          console=Console(file=out, force_terminal=True, width=200), source="http://hub")
    return display, f, out


def test_the_bar_of_a_file_waited_on_says_when_the_process_holding_it_goes_on_to_load_it() -> None:
    """On a terminal, the bar of the file went on saying another download was fetching it through the run's load."""
    display, f, out = terminal_display(SOLO, SOLO_FILE)
    with display:
        display.begin_file(f, cached=False, waiting=True)
        display.holder_now(lock_activity.Holder(123, "loading"))
    said = out.getvalue()
    assert f"localgen: process 123 downloaded {SOLO}/{SOLO_FILE} (1.0 MiB) and is loading it; waiting for it\n" in said
    assert f"{SOLO_FILE} (process 123 is loading it)" in said.rsplit("\r", 1)[-1], said


def test_rm_of_a_split_model_a_run_loads_waits_on_all_its_shards_locks_at_once(hubenv: HubEnv) -> None:
    """rm waited 2 s on each shard's lock in turn: 6 s for a model of three shards before it refused it."""
    many = "org/many-GGUF"
    hubenv.server.add_repo(many, {f"many-Q4_K_M-0000{i}-of-00003.gguf": make_gguf_bytes(f"many{i}", shard=(i, 3))
                                  for i in (1, 2, 3)})
    with hub.locks_held_through():
        hub.download_model(many, quant="Q4_K_M", filename=None, quiet=True)
        lock_activity.now_doing("loading")
        started = time.monotonic()
        refused = run_cli(hubenv.env, "models", "rm", "--yes", many)
        took = time.monotonic() - started
    assert refused.returncode == 1 and f"is being loaded by process {os.getpid()}" in refused.stderr, refused.stderr
    assert took < 5, f"rm took {took:.1f} s"  # 2 s on each of the three


def test_a_lock_sorting_before_one_held_is_waited_on_for_good_only_where_a_models_rm_holds_it(
        tmp_path: Path) -> None:
    """Taken as another process takes it after the pull found it free, a lock sorting before one the pull holds was
    waited on for good; a models rm's (its own wait bounded) is waited on until rm lets go."""
    import fcntl

    from localgen import hub_resume

    first, later = tmp_path / "a.lock", tmp_path / "b.lock"
    first.touch()
    other = os.open(first, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file's lock: as another process's
    outcome: list[object] = []

    def take_both() -> None:
        try:
            with hub_resume.blob_lock(later), hub_resume.blob_lock(first):
                outcome.append("took both")
        except hub_resume.LockOutOfOrder as exc:
            outcome.append(exc.lock)

    pull = threading.Thread(target=take_both, daemon=True)
    pull.start()
    pull.join(10)
    assert outcome == [first]
    lock_activity.record_path(first).write_text(f"{os.getpid()} removing\n")  # as a models rm records it
    pull = threading.Thread(target=take_both, daemon=True)
    pull.start()
    time.sleep(1.0)  # past the wait on a pull's lock
    assert outcome == [first]
    os.close(other)
    pull.join(10)
    assert outcome == [first, "took both"]
