"""Run a localgen command where a file system is mounted otherwise (read-only, full), for that command alone."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


def run_mounted(setup: str, command: list[str], env: dict[str, str],
                stdout_to: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a localgen command in a mount namespace of its own (a user namespace: no root needed) after setup's
    mounts (its stdout sent to the file stdout_to, a redirection as the shell writes it: `> FILE`, `>> FILE`, where
    given): what it mounts is seen by that command alone; skipped where the kernel allows no such namespace."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unprivileged mount namespaces here")
    script = f"{setup} && exec {shlex.join([sys.executable, '-m', 'localgen', *command])} {stdout_to or ''}"
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
