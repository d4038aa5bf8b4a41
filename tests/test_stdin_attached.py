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


@pytest.mark.parametrize(("args", "message"), [
    (("-f", "/dev/stdin", "-f", "-", "x"), "-f /dev/stdin and -f - both read stdin, which is read once (hint: give one "
                                           "of them)"),
    (("-f", "/dev/fd/0", "-"), "-f /dev/fd/0 and the prompt - both read stdin, which is read once (hint: drop one: "
                               "-f /dev/fd/0 attaches stdin before the prompt; a prompt of - is stdin itself)"),
    (("-f", "/proc/self/fd/0", "-f", "/proc/self/fd/0", "x"), "-f /proc/self/fd/0 is given twice, but stdin is read "
                                                              "once (hint: give -f /proc/self/fd/0 once)"),
    (("--system-file", "/dev/stdin", "-f", "-", "x"), "--system-file /dev/stdin cannot read stdin: -f - reads it "
                                                      "(hint: give the system prompt's file by name)"),
])
def test_stdin_by_its_file_name_beside_another_reader_of_it_is_refused_as_read_once(args: tuple[str, ...],
                                                                                      message: str) -> None:
    """`-f /dev/stdin -f -` read the pipe through its name, then warned that -f - found it empty and that it was
    attached once; `-f - -f -` was refused."""
    result = run_localgen("run", "--print-prompt", *args, stdin=b"piped")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == f"localgen: error: {message}\n"


@pytest.mark.parametrize(("args", "part"), [(("-f", "/dev/stdin", "x"), "user\npiped\n\nx"),
                                             (("--system-file", "/dev/fd/0", "x"), "system\npiped<|im_end|>")])
def test_stdin_by_its_file_name_is_stdin_read_once(args: tuple[str, ...], part: str) -> None:
    """Read through its name, the pipe left nothing for the stdin a run attaches unasked, found empty after."""
    result = run_localgen("run", "--print-prompt", *args, stdin=b"piped\n")
    assert result.returncode == 0 and part in result.out and result.out.count("piped") == 1, result.out
    assert result.err == ""


@pytest.mark.parametrize(("option", "said"), [
    ("-f", "chat reads its messages from the terminal, so -f /dev/stdin has no stdin to read"),
    ("--system-file", "--system-file /dev/stdin cannot read stdin: chat reads its messages from the terminal")])
def test_chat_refuses_stdin_by_its_file_name_as_it_refuses_a_dash(option: str, said: str) -> None:
    import pexpect

    from tests.conftest import spawn_localgen

    refused = spawn_localgen("chat", option, "/dev/stdin", env=dict(os.environ), encoding="utf-8", timeout=60,
                             dimensions=(30, 200))
    refused.expect(pexpect.EOF)
    refused.close()
    assert refused.exitstatus == 2 and said in refused.before, refused.before
