"""The chat's prompt on a TERM=dumb terminal (Emacs' shell): prompt_toolkit's plain prompt, in a real pty."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pexpect
import pytest

from tests.conftest import spawn_localgen
from tests.test_repl import TIMEOUT, _env


@pytest.mark.parametrize("term", ["dumb", "unknown"])
def test_a_dumb_terminal_gets_the_plain_prompt_each_key_shown_once(term: str, tmp_path: Path) -> None:
    """Emacs' shell gets prompt_toolkit's plain prompt: `>>> ` written once per prompt, each key typed written once
    after it, Backspace and Tab writing nothing, where the whole-screen prompt, its escapes left out, wrote `>>>`,
    then `>>> a` again on each key, a line of padding spaces as it ended. prompt_toolkit takes TERM=unknown for dumb
    too: its plain prompt, as before the prompt's writes were bounded."""
    child = spawn_localgen("chat", "-n", "3", "--temperature", "0", env={**_env(tmp_path / "home"), "TERM": term},
                           encoding="utf-8", timeout=TIMEOUT)
    child.logfile_read = transcript = io.StringIO()
    try:
        child.expect_exact(">>>")
        child.send("x\x7fhi\r")  # a key, Backspace, then a message
        child.expect_exact("[stopped at the limit of 3 tokens")
        child.expect_exact(">>>")
        child.send("/fi\t\x15")  # Tab, then Ctrl-U clearing the line
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        child.close()
        screen = transcript.getvalue()
        assert child.exitstatus == 0, screen
        assert ">>> xhi\r" in screen and ">>> /fi\r" in screen, screen
        assert screen.count(">>>") == screen.count(">>> ") == 2, screen
        assert not re.search(" {3}", screen), screen  # no padding to the terminal's width
        assert "\x1b" not in screen or term != "dumb", screen
    finally:
        if child.isalive():
            child.terminate(force=True)
