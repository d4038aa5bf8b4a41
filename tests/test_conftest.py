"""The suite's own set-up (conftest): what it keeps between runs."""

from __future__ import annotations

import json
import marshal
import os
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import tests.rewritten_modules as rewritten_modules
from localgen.registry_toml import tomllib
from tests.conftest import REPO_ROOT
from tests.rewritten_modules import rewrite_share


def test_collection_keeps_the_test_modules_bytecode_where_pythondontwritebytecode_is_set(tmp_path: Path) -> None:
    collected = REPO_ROOT / "tests" / "test_conftest.py"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path)}
    unrelated = ["-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:anyio"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *unrelated,
                           str(collected)], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = tmp_path / collected.parent.relative_to("/") / f"test_conftest.{sys.implementation.cache_tag}-pytest-" \
        f"{pytest.__version__}.pyc"
    assert kept.is_file(), sorted(str(path) for path in tmp_path.rglob("*.pyc") if "tests" in path.parts)


def test_a_worker_keeps_its_share_of_the_modules_rewritten_before_collecting(tmp_path: Path,
                                                                            pytestconfig: pytest.Config,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker 1 of 2 rewrites the second and fourth modules, as pytest's import would, and keeps them."""
    modules = [tmp_path / f"test_{name}.py" for name in "abcd"]
    for module in modules:
        module.write_text("def test_sum():\n    two = 2\n    assert two + 1 == 4\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "cache"))
    rewrite_share(pytestconfig, modules, 1, 2)
    kept = sorted((tmp_path / "cache").rglob("*.pyc"))
    assert [path.name for path in kept] == [f"test_{name}.{sys.implementation.cache_tag}-pytest-{pytest.__version__}"
                                            f".pyc" for name in "bd"]
    rewritten: dict[str, object] = {}
    exec(marshal.loads(kept[0].read_bytes()[16:]), rewritten)
    with pytest.raises(AssertionError, match=r"assert \(2 \+ 1\) == 4"):
        rewritten["test_sum"]()  # type: ignore[operator]


def kept_pycs(cache: Path) -> list[str]:
    """The names of the rewritten modules' bytecode kept under a pycache prefix."""
    return sorted(path.name.split(".")[0] for path in cache.rglob("*.pyc"))


def test_a_module_whose_rewrite_warns_is_left_to_its_import_where_warnings_are_errors(
        tmp_path: Path, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """`assert (a, "message")` warns as it is rewritten: under -W error the rewrite ahead raised it, and pytest-xdist
    ended the whole run; its import rewrites and reports it, as without the rewrite ahead."""
    warns, plain = tmp_path / "test_warns.py", tmp_path / "test_plain.py"
    warns.write_text('def test_tuple():\n    assert (1, "always true")\n')
    plain.write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rewrite_share(pytestconfig, [warns, plain], 0, 1)
    assert kept_pycs(tmp_path / "cache") == ["test_plain"]


def test_a_module_whose_rewrite_fails_in_any_way_is_left_to_its_import(
        tmp_path: Path, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sum of 100,000 terms is too deep for Python's parser (RecursionError): its import reports it."""
    deep, plain = tmp_path / "test_deep.py", tmp_path / "test_plain.py"
    deep.write_text("total = " + " + ".join(["1"] * 100_000) + "\n")
    plain.write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "cache"))
    rewrite_share(pytestconfig, [deep, plain], 0, 1)
    assert kept_pycs(tmp_path / "cache") == ["test_plain"]


def test_a_worker_rewrites_no_more_after_the_first_module_it_cannot_keep(
        tmp_path: Path, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only __pycache__: the rest of the share would be rewritten for nothing."""
    from _pytest.assertion import rewrite

    modules = [tmp_path / f"test_{name}.py" for name in "abc"]
    for module in modules:
        module.write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    rewritten: list[str] = []
    rewrite_test = rewrite._rewrite_test
    monkeypatch.setattr(rewrite, "_rewrite_test",
                        lambda module, config: rewritten.append(module.name) or rewrite_test(module, config))
    monkeypatch.setattr(rewrite, "_write_pyc", lambda state, code, source_hash, pyc: False)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "cache"))
    rewrite_share(pytestconfig, modules, 0, 1)
    assert rewritten == ["test_a.py"]


def test_only_a_pytest_xdist_worker_rewrites_a_share_ahead_not_a_pytest_its_tests_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytest that a worker's test starts inherits the worker's PYTEST_XDIST_WORKER and _COUNT, and is no worker."""
    shares: list[tuple[int, int]] = []
    monkeypatch.setattr(rewritten_modules, "collected_modules", lambda config: [])
    monkeypatch.setattr(rewritten_modules, "rewrite_share",
                        lambda config, modules, worker, workers: shares.append((worker, workers)))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    started = SimpleNamespace(getoption=lambda name: "rewrite")
    worker = SimpleNamespace(getoption=lambda name: "rewrite", workerinput={"workerid": "gw2", "workercount": 4})
    for config in (started, worker):
        collection = rewritten_modules.pytest_collection(SimpleNamespace(config=config))
        next(collection)
        collection.close()
    assert shares == [(2, 4)]


RECORDING_CONFTEST = """
import json
from rewritten_modules import collected_modules

collect_ignore = ["tests/test_root_ignored.py"]
ahead = []

def pytest_collection(session):
    ahead.extend(str(path) for path in collected_modules(session.config))

def pytest_collection_finish(session):
    collected = list(dict.fromkeys(str(item.path) for item in session.items))
    with open("modules.json", "w") as out:
        json.dump({"ahead": ahead, "collected": collected}, out)
"""


def recorded_collection(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    """Collect a project with pytest as RECORDING_CONFTEST records: the run, and the modules it rewrites ahead and
    collects."""
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(RECORDING_CONFTEST)
    unrelated = ["-p", "no:xdist", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:benchmark", "-p",
                 "no:hypothesispytest", "-p", "no:anyio"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *unrelated, *args], cwd=project,
                          capture_output=True, text=True, timeout=120, env={
                              **os.environ, "PYTHONPATH": str(REPO_ROOT / "tests"),
                              "PYTHONPYCACHEPREFIX": str(project / "cache")})
    assert (project / "modules.json").is_file(), done.stdout + done.stderr
    return done, json.loads((project / "modules.json").read_text())


def test_the_modules_a_worker_rewrites_ahead_are_those_pytest_collects(tmp_path: Path) -> None:
    """What norecursedirs, a virtualenv, --ignore and collect_ignore (a nested conftest's too) leave out is not
    rewritten ahead: node_modules' test modules were, with their warnings, and with a .venv a checkout's
    site-packages' would have been."""
    (tmp_path / "tests" / "deep").mkdir(parents=True)
    (tmp_path / "tests" / "deep" / "conftest.py").write_text('collect_ignore = ["test_deep_ignored.py"]\n')
    (tmp_path / "tests" / "node_modules").mkdir()
    (tmp_path / "venv" / "lib").mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for module in ["tests/test_a.py", "tests/test_by_option.py", "tests/test_root_ignored.py", "tests/helpers.py",
                   "tests/deep/test_deep.py", "tests/deep/test_deep_ignored.py", "tests/node_modules/test_nm.py",
                   "venv/lib/test_site.py"]:
        (tmp_path / module).write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    done, modules = recorded_collection(tmp_path, "--ignore=tests/test_by_option.py", ".")
    assert done.returncode == 0, done.stdout + done.stderr
    assert modules["ahead"] == modules["collected"] == [str(tmp_path / "tests" / "deep" / "test_deep.py"),
                                                         str(tmp_path / "tests" / "test_a.py")]


def test_a_folder_whose_conftest_fails_to_import_is_left_to_its_collection(tmp_path: Path) -> None:
    """Its collection reports the conftest's error, and the other folders' modules are collected."""
    (tmp_path / "tests" / "broken").mkdir(parents=True)
    (tmp_path / "tests" / "broken" / "conftest.py").write_text("raise RuntimeError('a broken conftest')\n")
    for module in ["tests/broken/test_broken.py", "tests/test_a.py"]:
        (tmp_path / module).write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    done, modules = recorded_collection(tmp_path, "--continue-on-collection-errors", "tests")
    assert "RuntimeError: a broken conftest" in done.stdout, done.stdout + done.stderr
    assert modules["ahead"] == modules["collected"] == [str(tmp_path / "tests" / "test_a.py")]

FORKED_RUN = """
import importlib, json, os, runpy, sys
sys.path[0:0] = [sys.argv.pop(1), sys.argv.pop(1)]
report = sys.argv.pop(1)
import zygote
for name in zygote.AHEAD:
    importlib.import_module(name)
zygote.build_commands_ahead()
ahead, leave = set(sys.modules), os._exit

def leave_saying_what_it_imported(code):
    with open(report, "w") as out:
        json.dump(sorted(set(sys.modules) - ahead), out)
    leave(code)

os._exit = leave_saying_what_it_imported
sys.argv[0] = "-m"
runpy._run_module_as_main("localgen", alter_argv=True)
"""


def test_a_run_forked_by_the_zygote_imports_none_of_localgen_s_modules_itself(tmp_path: Path) -> None:
    """The zygote imports ahead every localgen module a plain run imports (each child imported some 20 ms of them
    afresh): what a run still imports is what reads its environment as it loads (huggingface_hub), or no localgen's."""
    report = tmp_path / "imported.json"
    done = subprocess.run([sys.executable, "-c", FORKED_RUN, str(REPO_ROOT), str(REPO_ROOT / "tests"), str(report),
                           "run", "-n", "1", "--temperature", "0", "hi"], capture_output=True, text=True, timeout=120,
                          cwd=REPO_ROOT, env={**os.environ, "LOCALGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    imported = json.loads(report.read_text())
    assert "huggingface_hub" in imported and [name for name in imported if name.startswith("localgen")] == []


def test_a_chat_forked_by_the_zygote_imports_none_of_the_modules_its_answer_shows_with(tmp_path: Path) -> None:
    """A chat's first answer imported rich's Markdown and markdown-it, some 0.1 s of every chat's: the zygote has."""
    import pexpect

    report = tmp_path / "imported.json"
    child = pexpect.spawn(sys.executable, ["-c", FORKED_RUN, str(REPO_ROOT), str(REPO_ROOT / "tests"), str(report),
                                           "chat", "-n", "2", "--temperature", "0"], cwd=str(REPO_ROOT), timeout=90,
                          env={**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "PROMPT_TOOLKIT_NO_CPR": "1",
                               "TERM": "xterm"}, encoding="utf-8", codec_errors="replace")
    child.expect_exact(">>>")
    child.sendline("Hi.")
    child.expect_exact("stopped at the limit of 2 tokens")
    child.expect_exact(">>>")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    imported = json.loads(report.read_text())
    assert child.exitstatus == 0 and [name for name in imported if name.startswith(("localgen", "rich.markdown",
                                                                                     "markdown_it"))] == [], imported


def _bundled_verified(home: Path) -> list[bool | None]:
    """What `models --json` says of the bundled file's check in the localgen home home."""
    from tests.conftest import run_localgen

    listed = run_localgen("models", "--json", env={"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1"})
    assert listed.returncode == 0, listed.err
    return [row["verified"] for row in json.loads(listed.out)]


def test_a_fresh_home_holds_the_bundled_model_checked_as_localgen_records_it(tmp_path: Path) -> None:
    from bundled_verified import bundled_marker  # conftest's (tests/ is on the path), made once a run

    assert _bundled_verified(tmp_path / "home") == [True]
    made = bundled_marker()
    assert made is not None
    where, text = made
    assert (tmp_path / "home" / "cache" / where).read_bytes() == text
    assert ((tmp_path / "home" / "cache" / where).stat().st_mode & 0o777) == 0o600
    made = tmp_path / "made"
    (made / "cache").mkdir(parents=True)
    assert _bundled_verified(made) == [None], "a cache folder the test made is left as it is"


@pytest.mark.first_use
def test_a_fresh_home_of_a_first_use_test_holds_no_record_of_the_bundled_model(tmp_path: Path) -> None:
    assert _bundled_verified(tmp_path / "home") == [None]
    assert not (tmp_path / "home" / "cache" / "verified").exists()


SCHEDULED_CONFTEST = """
import json, os, time
import pytest
from worker_schedule import pytest_collection_modifyitems, pytest_runtest_protocol, pytest_xdist_auto_num_workers

def pytest_configure(config):
    config.addinivalue_line("markers", "serial: runs alone")

@pytest.fixture(autouse=True)
def timed(request):
    start = time.monotonic()
    yield
    with open("times.jsonl", "a") as out:
        serial = request.node.get_closest_marker("serial") is not None
        out.write(json.dumps([request.node.name, serial, start, time.monotonic()]) + "\\n")
"""
SHARED_MODULE = """
import os, time
import pytest

@pytest.fixture(scope="module")
def made():
    with open("made.txt", "a") as out:
        out.write(f"{os.getpid()}\\n")

@pytest.mark.parametrize("n", range(12))
def test_shared(made, n):
    time.sleep(0.05)
"""
FREE_MODULE = """
import time
import pytest

@pytest.mark.parametrize("n", range(12))
def test_free(n):
    time.sleep(0.05)

@pytest.mark.serial
@pytest.mark.parametrize("n", range(2))
def test_alone(n):
    time.sleep(0.2)
"""


def test_the_suite_s_workers_make_a_module_s_fixture_once_and_run_a_serial_test_alone(tmp_path: Path) -> None:
    """Under the suite's own options (pyproject's addopts), the tests that share a module-scoped fixture run on one
    worker, which makes it once, and no test runs while a serial one does."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(SCHEDULED_CONFTEST)
    (tmp_path / "test_shared.py").write_text(SHARED_MODULE)
    (tmp_path / "test_free.py").write_text(FREE_MODULE)
    options = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", *shlex.split(options), "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "base"), "test_shared.py", "test_free.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(REPO_ROOT / "tests")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert len((tmp_path / "made.txt").read_text().split()) == 1
    times = [json.loads(line) for line in (tmp_path / "times.jsonl").read_text().splitlines()]
    assert len(times) == 26
    for name, _serial, start, end in (test for test in times if test[1]):
        assert not [other for other, _, other_start, other_end in times
                    if other != name and other_start < end and start < other_end], name
