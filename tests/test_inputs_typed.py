"""Text typed at a terminal for `localgen run -` (or a file option naming the terminal), in a real pseudo-terminal on
the real bundled model: the keys it passes on as text."""

from __future__ import annotations

import json
import os

import pexpect
import pytest

from localgen.input_text import typed_at_a_terminal
from tests.conftest import run_localgen, spawn_localgen
from tests.test_run_inputs import chatml

ARROWS_TYPED = "helo wrld\x1b[D\x1b[D\x1b[D\x1b[Do"  # a typo fixed with the arrow keys, as the terminal passes them on


@pytest.mark.parametrize(("args", "message"), [
    (("-",), "helo wrldo"),
    (("-f", "/dev/tty", "Fix it."), "helo wrldo\n\nFix it."),
])
def test_keys_typed_at_a_terminal_that_are_not_text_are_dropped_with_a_warning(args: tuple[str, ...],
                                                                             message: str) -> None:
    """A terminal reading a line passes the arrow keys on as their escape sequences; the model gets the text without
    them, and a warning says so, as the chat drops control characters, where the model got ESC [ D four times and
    nothing was said."""
    child = spawn_localgen("run", "--print-prompt", "--json", *args, env=dict(os.environ), encoding="utf-8",
                           timeout=60, dimensions=(30, 200))
    child.expect_exact("Ctrl-D at the start of a line ends it")
    child.send(ARROWS_TYPED + "\r")
    child.expect_exact("o\r\n")  # the line's echo
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    warning = "warning: dropped 4 non-text keys typed at the terminal (^[[D): arrow keys do not edit"
    assert warning in child.before, child.before
    prompt = json.loads(child.before[child.before.index("{"):])["prompt"]
    assert prompt == chatml(message)


def test_a_control_character_typed_at_a_terminal_is_dropped_with_no_word_of_arrow_keys() -> None:
    """A control character typed at a terminal (Ctrl-V Ctrl-L) is dropped with a warning that names it alone, where
    it said that arrow keys do not edit a line, as though an arrow had been typed."""
    child = spawn_localgen("run", "--print-prompt", "--json", "-", env=dict(os.environ), encoding="utf-8",
                           timeout=60, dimensions=(30, 200))
    child.expect_exact("Ctrl-D at the start of a line ends it")
    child.send("hi\x16\x0c there\r")
    child.expect_exact("there\r\n")  # the line's echo
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "warning: dropped 1 non-text key typed at the terminal (^L)\r\n" in child.before, child.before
    assert "arrow" not in child.before
    assert json.loads(child.before[child.before.index("{"):])["prompt"] == chatml("hi there")


def test_escape_sequences_piped_in_reach_the_model_as_given() -> None:
    result = run_localgen("run", "--print-prompt", "--json", "-", stdin=ARROWS_TYPED.encode())
    assert result.returncode == 0 and "dropped" not in result.err, result.err
    assert json.loads(result.out)["prompt"] == chatml(ARROWS_TYPED)


def test_typed_at_a_terminal_drops_key_sequences_and_control_characters_but_tabs_and_newlines() -> None:
    warnings: list[str] = []
    assert typed_at_a_terminal("a\tb\x1bOA\x1b[1;5C\x1a\nc\x7f\x1b", warnings) == "a\tb\nc"
    assert warnings == ["dropped 5 non-text keys typed at the terminal (^[OA ^[[1;5C ^Z ^? ^[): arrow keys do not "
                        "edit a line typed there (Backspace does)"]
    assert typed_at_a_terminal("plain \u4f60", warnings) == "plain \u4f60" and len(warnings) == 1
    assert typed_at_a_terminal("a\x0cb\x1b[31mc", warnings) == "abc"
    assert warnings[1] == "dropped 2 non-text keys typed at the terminal (^L ^[[31m)", "no arrow among them"
