"""run's output and usage errors on their edges: a printed prompt's line on a terminal, the hint for a real-number
option given a word, and a model file suggested for a name that prints as the one typed."""

from __future__ import annotations

import os

import pexpect

from tests.conftest import run_localgen, spawn_localgen


def test_a_prompt_printed_on_a_terminal_ends_its_line_and_stays_byte_for_byte_on_a_pipe() -> None:
    """run --raw --print-prompt hi on a terminal ends the prompt's line, so that the shell's prompt starts its own;
    on a pipe the prompt is hi, without a newline added."""
    shown = spawn_localgen("run", "--raw", "--print-prompt", "hi", env=dict(os.environ), encoding="utf-8", timeout=60)
    shown.expect(pexpect.EOF)
    shown.close()
    assert shown.exitstatus == 0 and shown.before == "hi\r\n", repr(shown.before)
    piped = run_localgen("run", "--raw", "--print-prompt", "hi")
    assert piped.returncode == 0 and piped.out == "hi", piped
