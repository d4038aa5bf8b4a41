"""Stdin as run attaches it: said where it is empty, as -f - is."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_localgen, run_localgen_process

RUN = [sys.executable, "-m", "localgen", "run", "--print-prompt"]


@pytest.mark.parametrize(("piped", "said"), [(b"", "is empty"), (b" \n", "holds only whitespace")])
def test_an_empty_pipe_beside_a_prompt_is_warned_about(piped: bytes, said: str) -> None:
    """`cat missing.txt 2>/dev/null | localgen run "summarize"` summarized nothing without a word."""
    result = run_localgen("run", "--print-prompt", "summarize", stdin=piped)
    assert result.returncode == 0 and "summarize" in result.out, result.err
    assert result.err == f"localgen: warning: stdin {said}\n"


def test_an_empty_file_as_stdin_is_warned_about_as_with_f(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    with (tmp_path / "empty.txt").open("rb") as empty:
        result = run_localgen_process([*RUN, "summarize"], stdin=empty, capture_output=True, cwd=REPO_ROOT)
    assert result.returncode == 0 and result.stderr == b"localgen: warning: stdin is empty\n", result.stderr


def test_no_stdin_and_the_rest_of_a_file_read_to_its_end_are_not_warned_about(tmp_path: Path) -> None:
    """/dev/null holds nothing by its nature; a file a loop has read to its end (`read a; read b; localgen run`) was
    not sent to the run."""
    assert run_localgen("run", "--print-prompt", "summarize").err == ""
    (tmp_path / "two.txt").write_text("a\nb\n")
    script = f"{{ read a; read b; {shlex.join(RUN)} summarize; }} < two.txt"
    result = subprocess.run(["bash", "-c", script], capture_output=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0 and result.stderr == b"", result.stderr


def test_an_empty_pipe_alone_is_refused_once_without_a_warning_before() -> None:
    result = run_localgen("run", "--print-prompt", stdin=b"")
    assert result.returncode == 2 and result.err.startswith("localgen: error: nothing to send"), result.err
    assert "warning" not in result.err
