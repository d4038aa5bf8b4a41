"""`localgen run`'s errors name what the user typed (another tool's -N and -T, the --grammar-file given, the
attached file that held nothing), and a dumb terminal is told a long prompt is being read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_localgen, spawn_localgen
from tests.usage_errors import usage_error


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["run", "-N", "5", "hi"], "no such option: -N", "did you mean -n? see `localgen run --help`"),
    (["run", "-N5", "hi"], "no such option: -N5", "did you mean -n? see `localgen run --help`"),
    (["run", "-T", "0.5", "hi"], "no such option: -T", "did you mean --temperature? see `localgen run --help`"),
    (["chat", "-T", "0.5"], "no such option: -T", "did you mean --temperature? see `localgen chat --help`"),
    (["run", "-m", "-T", "0.5", "hi"], "-m needs a value (REF), and the word after it is the option -T",
     "name the model after -m: `localgen run -m NAME --temperature 0.5 hi`; `localgen models list --all` shows the "
     "names"),
])
def test_a_capital_n_or_t_is_hinted_toward_the_token_limit_or_the_temperature(
        args: list[str], message: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """-N 5 (a capital slipped) and -T 0.5 (temperature; -t is --threads) were refused with the help alone."""
    assert usage_error(args, capsys) == (message, hint)


@pytest.mark.parametrize("typed", ["--grammar", "--grammar-file"])
def test_a_missing_grammar_file_is_blamed_on_the_option_typed(typed: str, tmp_path: Path) -> None:
    """--grammar-file missing.gbnf was told to check the path given to --grammar, an option not typed."""
    missing = run_localgen("run", typed, str(tmp_path / "missing.gbnf"), "hi")
    assert (missing.returncode, missing.err) == (
        2, f"localgen: error: no such file: {tmp_path / 'missing.gbnf'} (hint: check the path given to {typed})\n")
    folder = run_localgen("run", f"{typed}={tmp_path}", "hi")
    assert (folder.returncode, folder.err) == (
        2, f"localgen: error: {tmp_path} is a directory (hint: pass a file to {typed})\n")


def test_an_attached_file_of_whitespace_alone_is_named_in_the_error_on_one_line(tmp_path: Path) -> None:
    """`run -f ws.txt </dev/null` warned that ws.txt holds only whitespace, then said the prompt is empty (and -q
    kept the warning back, leaving the error alone to say nothing of the file)."""
    blank, empty = tmp_path / "ws.txt", tmp_path / "empty.txt"
    blank.write_text(" \n\t\n")
    empty.write_text("")
    hint = 'give a prompt, e.g. localgen run "Why is the sky blue?", or pipe text in'
    for quiet in ([], ["-q"]):
        result = run_localgen("run", *quiet, "-f", str(blank))
        assert (result.returncode, result.err) == (
            2, f"localgen: error: nothing to send: the prompt is empty, and {blank} holds only whitespace "
               f"(hint: {hint})\n"), quiet
    both = run_localgen("run", "-f", str(blank), "-f", str(empty), "-f", str(blank))
    assert both.err == (f"localgen: error: nothing to send: the prompt is empty, and {blank} holds only whitespace "
                        f"and {empty} is empty (hint: {hint})\n")
    piped = run_localgen("run", "-f", str(blank), stdin=b"\n")
    assert piped.err == (f"localgen: error: nothing to send: the prompt is empty, and so is stdin; {blank} holds "
                         'only whitespace (hint: check what feeds stdin, or give a prompt, e.g. localgen run "Why is '
                         'the sky blue?")\n')
    dash = run_localgen("run", "-f", "-", stdin=b" ")
    assert dash.err == "localgen: error: nothing to send: the prompt is empty, and stdin (-f -) holds only " \
                       'whitespace (hint: check what feeds stdin, or give a prompt, e.g. localgen run "Why is the ' \
                       'sky blue?")\n'


@pytest.mark.parametrize("term", ["dumb", "xterm"])
def test_a_dumb_terminal_is_told_a_long_prompt_is_read_once_on_a_plain_line(term: str) -> None:
    """TERM=dumb (Emacs' shell) showed nothing while a long prompt was read, which an erasable line could not be
    shown on; it gets a plain line, kept, and other terminals the line erased before the answer."""
    import pexpect

    prompt = "Summarize: " + "river stone cloud " * 60  # several chunks of 64
    child = spawn_localgen("run", "--batch-size", "64", "-n", "2", "--temperature", "0", "--no-cache", prompt,
                           env={**os.environ, "TERM": term}, encoding="utf-8", timeout=120, dimensions=(24, 200))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    if term == "dumb":
        assert child.before.startswith("reading the prompt: 214 tokens\r\n") and "\x1b" not in child.before, \
            child.before
        assert child.before.count("reading the prompt") == 1
    else:
        assert "\r\x1b[2K" in child.before and "reading the prompt: 0/214 tokens (0%)" in child.before, child.before
