"""Pulls beside a `models rm` and other pulls on the locks of a model's blobs: a pull waiting on a lock rm holds that
sorts before one it holds looks at the lock's holder again after each bounded wait, backing off once another pull
holds it, so that the two pulls never wait on each other for good."""

from __future__ import annotations

import ast
import fcntl
import importlib.metadata
import itertools
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hub_server import HubEnv, file_sha256, make_gguf_bytes, run_cli

from localgen import hub_cache, hub_resume
from localgen.registry_toml import read_toml
from tests.conftest import REPO_ROOT
from tests.test_pull_lock_mend import _until

_RM_THEN_PULL = """
import sys
from pathlib import Path
from localgen import hub_resume, lock_activity
first, later = Path(sys.argv[1]), Path(sys.argv[2])
with hub_resume.blob_lock(first):
    lock_activity.took(first, "removing")  # as a models rm records it
    print("removing", flush=True)
    sys.stdin.readline()
    lock_activity.took(first, "downloading")  # rm let go of it, and a pull took it before the one waiting did
    print("downloading", flush=True)
    with hub_resume.blob_lock(later):  # that pull's next file: after first, so waited on for good
        print("took later", flush=True)
"""


def test_a_pull_waiting_on_a_models_rm_s_lock_backs_off_once_another_pull_takes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pull holding a later lock waited on rm's for good once it had found rm holding it: where another pull took it
    as rm let go, and went on to wait on the later one, the two waited on each other for good."""
    first, later = tmp_path / "a.lock", tmp_path / "b.lock"
    other = subprocess.Popen([sys.executable, "-c", _RM_THEN_PULL, str(first), str(later)], cwd=REPO_ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    outcome: list[object] = []
    found_rm = threading.Event()
    real = hub_resume.waits_on_no_pull

    def looked_at(lock: Path) -> bool:
        rm = real(lock)
        if rm:
            found_rm.set()
        return rm

    monkeypatch.setattr(hub_resume, "waits_on_no_pull", looked_at)

    def take_both() -> None:
        try:
            with hub_resume.blob_lock(later), hub_resume.blob_lock(first):
                outcome.append("took both")
        except hub_resume.LockOutOfOrder as exc:
            outcome.append(exc.lock)

    pull = threading.Thread(target=take_both, daemon=True)
    try:
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline() == "removing\n"
        pull.start()
        assert found_rm.wait(30), "the pull never waited on rm's lock"
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.stdout.readline() == "downloading\n"
        pull.join(30)
        assert outcome == [first], "the pull waited on the other pull's lock holding the lock that one waits on"
        assert other.stdout.readline() == "took later\n"
        assert other.wait(30) == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def _imported_packages() -> set[str]:
    """The top-level packages localgen's modules import, other than the standard library's and its own."""
    names: set[str] = set()
    for module in (REPO_ROOT / "localgen").rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and name != "localgen"}


def _normalized(name: str) -> str:
    """A distribution's name as packaging compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_package_localgen_imports_is_a_declared_dependency() -> None:
    """filelock (whose Timeout a pull waiting on a blob's lock catches), markdown-it-py and MarkupSafe were imported
    without being declared, installed only as huggingface_hub's, rich's and Jinja2's dependencies."""
    pyproject = REPO_ROOT / "pyproject.toml"
    project = read_toml(pyproject.read_text(encoding="utf-8"), pyproject)["project"]
    declared = {_normalized(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
                for requirement in project["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    undeclared = {package for package in _imported_packages()
                  if not {_normalized(d) for d in distributions.get(package, [package])} & declared}
    assert undeclared == set()


BACKS = "org/backs-GGUF"
B1, B2 = "backs-Q4_K_M-00001-of-00002.gguf", "backs-Q4_K_M-00002-of-00002.gguf"

_PULL = """
import os, sys, time
from pathlib import Path
from localgen import hub, hub_resume
hub_resume.OUT_OF_ORDER_WAIT_S = float(os.environ.get("OUT_OF_ORDER_WAIT_S", hub_resume.OUT_OF_ORDER_WAIT_S))
late, reached, taken = os.environ.get("TAKEN_LATE"), Path(os.environ["REACHED_MARK"]), Path(os.environ["TAKEN_MARK"])
real = hub.fetch_blob
def taken_meanwhile(repo, revision, f, etag, **kwargs):
    if etag == late and not taken.exists():  # another process takes its lock as this pull goes to take it
        reached.touch()
        deadline = time.monotonic() + 60
        while not taken.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return real(repo, revision, f, etag, **kwargs)
hub.fetch_blob = taken_meanwhile
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""

_HOLD = """
import sys
from pathlib import Path
from localgen import hub_resume
with hub_resume.blob_lock(Path(sys.argv[1])):  # as another pull fetching it records it
    print("held", flush=True)
    sys.stdin.readline()
"""


class _Lines:
    """A process's stderr, read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, list[str]()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        self.lines.extend(self.proc.stderr)


def _free(lock: Path) -> bool:
    """Whether no process holds a lock file's flock."""
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _shards_in_reverse_lock_order(hubenv: HubEnv) -> tuple[Path, Path]:
    """BACKS's two shards, served, whose blob names sort the other way round from their numbers: their locks."""
    for tag in itertools.count():
        first, second = make_gguf_bytes(f"one{tag}", shard=(1, 2)), make_gguf_bytes(f"two{tag}", shard=(2, 2))
        if file_sha256(first) > file_sha256(second):
            hubenv.server.add_repo(BACKS, {B1: first, B2: second})
            return (hub_cache.blob_lock_path(BACKS, file_sha256(first)),
                    hub_cache.blob_lock_path(BACKS, file_sha256(second)))
    raise AssertionError("unreachable")


def _started_pull(hubenv: HubEnv, tmp_path: Path, *options: str, **env: str) -> _Lines:
    """`localgen pull [OPTIONS] BACKS`, started, as _PULL runs it."""
    marks = {"REACHED_MARK": str(tmp_path / "reached"), "TAKEN_MARK": str(tmp_path / "taken")}
    return _Lines(subprocess.Popen([sys.executable, "-c", _PULL, "pull", *options, BACKS], cwd=REPO_ROOT,
                                   env={**hubenv.env, **marks, **env}, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))


def _holding(lock: Path) -> subprocess.Popen[str]:
    """A process holding a blob's lock as a pull fetching it does, until a line comes on its stdin: once it holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    other = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], cwd=REPO_ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None and other.stdout.readline() == "held\n"
    return other


def _let_go(other: subprocess.Popen[str]) -> None:
    """End _holding's process."""
    if other.poll() is None:
        assert other.stdin is not None
        other.stdin.write("\n")
        other.stdin.close()
    other.wait(30)


def _starts_of(lines: list[str], filename: str) -> list[str]:
    """The lines said as a file's fetch starts (or waits on another's)."""
    starts = ("localgen: downloading ", "localgen: another download ", "localgen: process ")
    return [line for line in lines if line.startswith(starts) and f"/{filename} (" in line]


def test_a_pull_finding_a_lock_held_that_sorts_before_one_it_holds_lets_go_of_it_before_saying_anything(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """The pull said it waited on the other download, then waited on the lock holding its first shard's before
    letting go of it and saying so again; now it lets go at once (here, with that wait made a minute long)."""
    later, first = _shards_in_reverse_lock_order(hubenv)
    other = _holding(first)
    pull = _started_pull(hubenv, tmp_path, OUT_OF_ORDER_WAIT_S="60")
    try:
        _until(lambda: bool(_starts_of(pull.lines, B2)), "waiting", 60)
        _until(lambda: _free(later), "letting go of the first shard's lock", 10)
    finally:
        _let_go(other)
    assert pull.proc.wait(60) == 0, pull.lines
    pull.reader.join(10)
    said = _starts_of(pull.lines, B2)
    assert len(said) == 1 and said[0].startswith(f"localgen: another download is fetching {BACKS}/{B2} (") and \
        said[0].endswith("; waiting for it\n"), pull.lines


def test_a_pull_backing_off_after_saying_a_file_starts_says_it_once(hubenv: HubEnv, tmp_path: Path) -> None:
    """Another process took the lock of the second shard as the pull, holding the first shard's (sorting after it),
    went to take it: the pull said the second shard's start a second time as it fetched it again."""
    later, first = _shards_in_reverse_lock_order(hubenv)
    pull = _started_pull(hubenv, tmp_path, TAKEN_LATE=first.stem)
    other = None
    try:
        _until(lambda: (tmp_path / "reached").exists(), "going to fetch the second shard", 60)
        other = _holding(first)
        (tmp_path / "taken").touch()
        _until(lambda: _free(later), "letting go of the first shard's lock", 30)
    finally:
        (tmp_path / "taken").touch()
        if other is not None:
            _let_go(other)
    assert pull.proc.wait(60) == 0, pull.lines
    pull.reader.join(10)
    assert len(_starts_of(pull.lines, B2)) == 1, pull.lines
    assert _starts_of(pull.lines, B2)[0].startswith(f"localgen: downloading {BACKS}/{B2} ("), pull.lines


def test_the_bar_of_a_file_begun_again_after_backing_off_is_the_one_drawn_before() -> None:
    """On a terminal, a pull backing off said the file's start again and drew a second bar, the first unended."""
    from tests.test_pull_lock_mend import terminal_display

    display, f, out = terminal_display(BACKS, B2)
    with display:
        display.begin_file(f, cached=False)
        display.backing_off(f)
        display.begin_file(f, cached=False, waiting=True)
        display.end_file()
    assert out.getvalue().count(f"localgen: downloading {BACKS}/{B2}") == 1
    assert [task.description for task in display.progress.tasks] == [B2]
    assert display.progress.tasks[0].finished


_HOLDER_IN_A_PID_NAMESPACE = """
import sys
from pathlib import Path
from localgen import lock_activity
print(lock_activity.holder(Path(sys.argv[1])))
"""


def test_the_holder_of_a_lock_held_in_another_pid_namespace_is_not_named_by_the_pid_it_recorded(
        tmp_path: Path) -> None:
    """A process of another pid namespace held the lock (its holder unseen in /proc/locks), having recorded its own pid,
    which here was another process's, running: that process was said to be loading the model."""
    from localgen import lock_activity

    lock = tmp_path / "a.lock"
    lock.touch()
    held = os.open(lock, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # by this process, which a new pid namespace's /proc/locks leaves out
    lock_activity.record_path(lock).write_text("1 loading\n")  # pid 1 there: the process that reads it
    try:
        looked = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                                 _HOLDER_IN_A_PID_NAMESPACE, str(lock)], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=60)
    except OSError:
        pytest.skip("no unshare here")
    finally:
        os.close(held)
    if looked.returncode and "unshare" in looked.stderr:
        pytest.skip(f"unshare cannot make a pid namespace here: {looked.stderr.strip()}")
    assert looked.returncode == 0 and looked.stdout == "None\n", looked


def test_a_temporary_record_a_holder_killed_as_it_wrote_it_left_goes_when_the_next_holder_writes(
        tmp_path: Path) -> None:
    """A killed holder's ETAG.lock.doing.PID.tmp stayed beside the lock for good."""
    from localgen import lock_activity

    lock = tmp_path / "a.lock"
    left = lock_activity.record_path(lock).with_name("a.lock.doing.99999999.tmp")
    left.write_text("99999999 loading\n")
    lock_activity.took(lock)
    try:
        assert sorted(path.name for path in tmp_path.iterdir()) == ["a.lock.doing"]
    finally:
        lock_activity.letting_go(lock)


def test_a_pull_waiting_on_a_lock_passed_from_one_download_to_another_says_nothing_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The lock passed from one pull fetching the file to another: the pull waiting said again that another download
    was fetching it."""
    from localgen import download_progress, lock_activity
    from localgen.download_log import LineDisplay
    from localgen.hub_types import HubFile, HubModel

    lock = tmp_path / "locks" / "a.lock"
    f = HubFile(BACKS, B2, 2**20, "a" * 64, "Q4_K_M", None, None)
    display = LineDisplay(HubModel(BACKS, "Q4_K_M", (f,), "c" * 40), source="http://hub")
    first = _holding(lock)
    looked_at_second: list[lock_activity.Holder] = []
    second_pid = [0]
    real = lock_activity.holder

    def looked(path: Path) -> lock_activity.Holder | None:
        now = real(path)
        if now is not None and now.pid == second_pid[0]:
            looked_at_second.append(now)
        return now

    monkeypatch.setattr(lock_activity, "holder", looked)
    second = None
    try:
        held = real(lock)
        display.begin_file(f, cached=False, waiting=True, holder=held)
        with download_progress.poll_incomplete(tmp_path, None, display, lock=lock, holder=held):
            _let_go(first)
            second = _holding(lock)
            second_pid[0] = second.pid
            _until(lambda: len(looked_at_second) >= 2, "looking at the second download")
    finally:
        for other in filter(None, (first, second)):
            _let_go(other)
    said = capfd.readouterr().err
    assert said == f"localgen: another download is fetching {BACKS}/{B2} (1.0 MiB) from http://hub; waiting for it\n"


def test_a_process_that_linked_a_file_another_downloaded_is_said_to_check_it_not_to_have_downloaded_it(
        tmp_path: Path) -> None:
    """A pull that found the file there (another's download), linked it and checked its model was said to have
    downloaded it: 'process N downloaded X and is checking it'."""
    from localgen import download_display, lock_activity
    from localgen.hub_types import HubFile, HubModel

    f = HubFile(BACKS, B2, 2**20, "a" * 64, "Q4_K_M", None, None)
    model = HubModel(BACKS, "Q4_K_M", (f,), "c" * 40)
    linked, fetched = tmp_path / "a.lock", tmp_path / "b.lock"
    with hub_resume.blob_lock(linked), hub_resume.blob_lock(fetched):
        lock_activity.downloaded(fetched)
        lock_activity.now_doing("checking")
        said = [download_display.start_line(model, f, "", waiting=True, holder=lock_activity.holder(lock))
                for lock in (linked, fetched)]
    assert said == [f"localgen: process {os.getpid()} is checking {BACKS}/{B2} (1.0 MiB); waiting for it",
                    f"localgen: process {os.getpid()} downloaded {BACKS}/{B2} (1.0 MiB) and is checking it; "
                    "waiting for it"]


def test_a_pull_force_backing_off_from_a_file_another_pull_force_downloads_does_not_download_it_again(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """The pull --force let go of its locks, waited for the other process's download of the file, then downloaded it
    again."""
    later, first = _shards_in_reverse_lock_order(hubenv)
    assert run_cli(hubenv.env, "pull", BACKS).returncode == 0
    blob = hubenv.hf_cache / hub_cache.repo_folder(BACKS) / "blobs" / first.stem
    other = _holding(first)  # as another pull --force downloading it
    fetched_before = hubenv.server.count("GET", B2), hubenv.server.count("GET", B1)
    pull = _started_pull(hubenv, tmp_path, "--force")
    try:
        _until(lambda: bool(_starts_of(pull.lines, B2)), "waiting on the other download", 60)
        _until(lambda: _free(later), "letting go of the first shard's lock", 10)
        fresh = blob.with_name("fresh")
        fresh.write_bytes(blob.read_bytes())
        os.replace(fresh, blob)  # the other download's copy, checked, replacing the one there
    finally:
        _let_go(other)
    assert pull.proc.wait(60) == 0, pull.lines
    pull.reader.join(10)
    assert (hubenv.server.count("GET", B2), hubenv.server.count("GET", B1)) == (fetched_before[0],
                                                                               fetched_before[1] + 1), pull.lines
