"""`localgen run` as shells and tools start it: nohup, and the like."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pexpect
import pytest


@pytest.mark.skipif(shutil.which("nohup") is None, reason="no nohup here")
def test_a_run_under_nohup_from_a_terminal_answers_its_prompt(tmp_path: Path) -> None:
    """nohup gives a command started at a terminal /dev/null open for writing only as stdin: a run refused it as an
    unreadable stdin (exit 2), where it is no input at all; a prompt of - still says it cannot be read."""
    command = ["nohup", sys.executable, "-m", "localgen", "run", "--temperature", "0", "-n", "3"]
    for prompt, status in (("Say hi.", 0), ("-", 2)):
        child = pexpect.spawn(command[0], [*command[1:], prompt], cwd=str(tmp_path), env=dict(os.environ),
                              timeout=120)
        child.expect(pexpect.EOF)
        child.close()
        said = (tmp_path / "nohup.out").read_text()
        (tmp_path / "nohup.out").unlink()
        assert child.exitstatus == status, said
        if status == 0:
            assert said.strip() and "localgen:" not in said, said
        else:
            assert said == "localgen: error: cannot read stdin: Bad file descriptor (hint: pipe text in, or give " \
                           "the prompt alone with </dev/null)\n", said
