"""The suite's own set-up (conftest): what it keeps between runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


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
