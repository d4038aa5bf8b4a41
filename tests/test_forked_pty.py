"""The suite's pexpect children that tests/zygote.py forks: closed as PtyProcess closes its own, less its sleeps."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from forked_pty import ForkedPty

from tests.conftest import FORK_CHILDREN, spawn_localgen

pytestmark = pytest.mark.skipif(not FORK_CHILDREN, reason="LOCALGEN_TEST_FORK=0: every child starts afresh")


def test_closing_a_chat_at_its_prompt_sees_it_end_on_the_hangup_without_a_fixed_wait(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = spawn_localgen("chat", env=env, encoding="utf-8", timeout=90, dimensions=(30, 100))
    assert isinstance(child.ptyproc, ForkedPty)
    child.expect_exact(">>>")  # at its prompt
    slept: list[float] = []
    with monkeypatch.context() as patched:
        patched.setattr(time, "sleep", slept.append)
        child.close()  # the chat's terminal hangs up: it ends with 129
    assert (child.exitstatus, child.signalstatus, slept) == (129, None, [])
    assert not child.isalive()
