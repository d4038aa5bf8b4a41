"""The note a run on a terminal gives while stdin stays open: it names what reads stdin."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.parametrize(("args", "note"), [
    ("hi", "localgen: waiting for stdin to end (it goes to the model with the prompt; </dev/null runs without it)"),
    ("-", "localgen: waiting for stdin to end (the prompt - reads it)"),
    ("-f - Summarize.", "localgen: waiting for stdin to end (-f - reads it)"),
    ("--file /dev/stdin Summarize.", "localgen: waiting for stdin to end (-f /dev/stdin reads it)"),
    ("--system-file - hi", "localgen: waiting for stdin to end (--system-file - reads it)"),
    ("--system-file /dev/stdin hi", "localgen: waiting for stdin to end (--system-file /dev/stdin reads it)"),
], ids=["piped", "prompt-dash", "file-dash", "file-dev-stdin", "system-file-dash", "system-file-dev-stdin"])
def test_the_waiting_note_names_what_reads_stdin(args: str, note: str) -> None:
    """Only stdin piped unasked is told that </dev/null runs without it: where the prompt `-`, `-f -` or
    `--system-file -` asked for stdin, that advice would end in an empty prompt or file; they are named as typed."""
    import pexpect

    child = pexpect.spawn("bash", ["-c", f"head -n 1 | {sys.executable} -m localgen run -n 2 --temperature 0 {args}"],
                          cwd=str(REPO_ROOT), timeout=60, encoding="utf-8", dimensions=(24, 200))
    child.expect(r"localgen: waiting for stdin to end \(([^\r\n]*)\)\r?\n")
    shown = f"localgen: waiting for stdin to end ({child.match.group(1)})"
    child.sendline("go")
    child.expect(pexpect.EOF)
    child.close()
    assert shown == note and child.exitstatus == 0, shown
