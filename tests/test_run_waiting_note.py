"""The note a run on a terminal gives while stdin stays open: it names what reads stdin."""

from __future__ import annotations

import shlex
import sys

import pytest

from tests.conftest import REPO_ROOT

QUICK_NOTE_S = 0.2  # how long a pipe keeps quiet before its note, in the runs quick_note_localgen starts


def quick_note_localgen() -> str:
    """The shell words of `python -m localgen` whose note of a quiet pipe comes after QUICK_NOTE_S, not after
    inputs.STDIN_QUIET_S (2 s): the tests wait for the note, and each waited that long."""
    start = (f"import localgen.inputs; localgen.inputs.STDIN_QUIET_S = {QUICK_NOTE_S}; import runpy; "
             "runpy.run_module('localgen', run_name='__main__', alter_sys=True)")
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(start)}"


@pytest.mark.parametrize(("args", "note", "answered"), [
    ("hi", "localgen: waiting for stdin to end (it goes to the model with the prompt; </dev/null runs without it)",
     True),  # (this one after the real STDIN_QUIET_S)
    ("-", "localgen: waiting for stdin to end (the prompt - reads it)", False),
    ("-f - Summarize.", "localgen: waiting for stdin to end (-f - reads it)", False),
    ("--file /dev/stdin Summarize.", "localgen: waiting for stdin to end (-f /dev/stdin reads it)", True),
    ("--system-file - hi", "localgen: waiting for stdin to end (--system-file - reads it)", False),
    ("--system-file /dev/stdin hi", "localgen: waiting for stdin to end (--system-file /dev/stdin reads it)", False),
], ids=["piped", "prompt-dash", "file-dash", "file-dev-stdin", "system-file-dash", "system-file-dev-stdin"])
def test_the_waiting_note_names_what_reads_stdin(args: str, note: str, answered: bool) -> None:
    """Only stdin piped unasked is told that </dev/null runs without it: where the prompt `-`, `-f -` or
    `--system-file -` asked for stdin, that advice would end in an empty prompt or file; they are named as typed.
    The pipe stays open (head waits for a line typed on the terminal) and gets the note, however long start-up takes;
    the line typed then ends stdin, and the run goes on to its answer (answered: stdin piped unasked and stdin
    asked for by a name; the others read it as the asked one does, and are ended at their note)."""
    import pexpect

    start = f"{shlex.quote(sys.executable)} -m localgen" if args == "hi" else quick_note_localgen()
    run = f"{start} run -n 2 --temperature 0 --ctx-size 256 {args}"
    child = pexpect.spawn("bash", ["-c", f"head -n 1 | {run}"], cwd=str(REPO_ROOT), timeout=60, encoding="utf-8",
                          dimensions=(24, 200))
    child.expect(r"localgen: waiting for stdin to end \(([^\r\n]*)\)\r?\n")
    shown = f"localgen: waiting for stdin to end ({child.match.group(1)})"
    assert shown == note
    if not answered:
        child.close(force=True)
        return
    child.sendline("go")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
