"""Run a localgen command where a file system is mounted otherwise (read-only, full), for that command alone."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def run_mounted(setup: str, command: list[str], env: dict[str, str], stdout_to: Path | None = None, *,
                append: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a localgen command in a mount namespace of its own (a user namespace: no root needed) after setup's
    mounts (its stdout sent to the file stdout_to where given, appended to it with append): what it mounts is seen
    by that command alone; skipped where the kernel allows no such namespace."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unprivileged mount namespaces here")
    redirect = f"{'>>' if append else '>'} {shlex.quote(str(stdout_to))}" if stdout_to is not None else ""
    script = f"{setup} && exec {shlex.join([sys.executable, '-m', 'localgen', *command])} {redirect}"
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
