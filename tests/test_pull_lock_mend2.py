"""Pulls beside a `models rm` and other pulls on the locks of a model's blobs: a pull waiting on a lock rm holds that
sorts before one it holds looks at the lock's holder again after each bounded wait, backing off once another pull
holds it, so that the two pulls never wait on each other for good."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from localgen import hub_resume
from localgen.registry_toml import read_toml
from tests.conftest import REPO_ROOT

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
