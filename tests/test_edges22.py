"""Edges users meet: a prompt of - with nothing sent on stdin, a stdout of /dev/full, a prompt beyond the model's
maximum said one way whether a pipe ends or not, and what a --json-schema's uniqueItems is warned of where an answer
could break it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_localgen, run_localgen_process, spawn_localgen
from tests.test_gen_hunt import _warnings

_GIVE_A_PROMPT = '(hint: give a prompt, e.g. localgen run "Why is the sky blue?", or pipe text in'

_UNIQUE_ITEMS = ("the JSON schema's uniqueItems cannot be enforced (a grammar cannot compare an array's items with "
                 "each other, so one may repeat): check the answer")


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": False}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 1}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 0}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "allOf": [{"maxItems": 1}]}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 2}, True),
    ({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True, "maxItems": 1},
                                       "b": {"type": "array", "uniqueItems": True}}}, True),
], ids=["false", "max-one", "max-zero", "max-one-in-all-of", "max-two", "one-of-two-arrays"])
def test_unique_items_is_warned_of_only_where_an_item_could_repeat(schema: dict[str, object], warned: bool) -> None:
    """`"uniqueItems": false` asks for nothing, and an array of at most one item cannot repeat one: neither is warned
    of, where both were said to let an item repeat; an array that may hold two still is."""
    assert _warnings(schema) == ([_UNIQUE_ITEMS] if warned else [])


def test_a_prompt_of_dash_with_stdin_from_dev_null_is_told_the_prompt_is_empty(tmp_path: Path) -> None:
    """`localgen run - </dev/null` was told stdin was empty too and to check what feeds it, which nothing does
    (README: </dev/null runs without stdin): it is told the prompt is empty, as `run "" </dev/null` is; an empty
    pipe is still said to be empty, and to check what feeds it."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    for args in (["-"], ["-f", "-"]):
        result = run_localgen("run", *args, env=env)  # stdin: /dev/null
        assert result.returncode == 2 and "the prompt is empty" in result.err, result.err
        assert _GIVE_A_PROMPT in result.err and "so is stdin" not in result.err, result.err
    piped = run_localgen("run", "-", stdin=b"", env=env)
    assert piped.returncode == 2 and "the prompt is empty, and so is stdin (hint: check what feeds stdin" in \
        piped.err, piped.err


def test_a_prompt_of_dash_ended_at_once_on_a_terminal_is_told_the_prompt_is_empty(tmp_path: Path) -> None:
    """`localgen run -` at a terminal, Ctrl-D typed at once: the person typed no prompt, which they are told, where
    they were told to check what feeds stdin, which was they."""
    child = spawn_localgen("run", "-", env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, encoding="utf-8",
                           timeout=60, dimensions=(24, 300))
    child.expect_exact("Ctrl-D at the start of a line ends it")
    child.sendeof()
    shown = child.read()
    child.close()
    assert child.exitstatus == 2 and "the prompt is empty " + _GIVE_A_PROMPT in shown, shown
    assert "feeds stdin" not in shown, shown


def test_a_prompt_beyond_the_model_is_refused_in_one_wording_whether_its_pipe_ends_or_not(tmp_path: Path) -> None:
    """`yes | head -c 1000000 | localgen run x` (read whole, then counted) was told the prompt was N tokens but the
    context held 8,192, and to shorten the input, where `yes | localgen run x` (refused by its size, as it is read)
    was told the prompt was too long for the model's maximum, and to shorten or split it: both are told the second,
    the pipe that goes on that it takes at least that many tokens."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    whole = run_localgen("run", "x", stdin=b"y\n" * 500_000, env=env)
    endless = run_localgen_process(["bash", "-c", f"yes | {sys.executable} -m localgen run x"], env=env, cwd=REPO_ROOT,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, timeout=120)
    wording = (r"localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes "
               r"(at least )?([\d,]+) tokens with stdin and the prompt \(hint: shorten the input, or split it and ask "
               r"about each part\)\n")
    said = re.fullmatch(wording, whole.err), re.fullmatch(wording, endless.stderr)
    assert whole.returncode == 1 and said[0] is not None and said[0].group(1, 2) == (None, "1,000,032"), whole.err
    assert endless.returncode == 1 and said[1] is not None and said[1][1] == "at least ", endless.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("json_output", [True, False], ids=["json", "text"])
def test_a_stdout_of_dev_full_is_refused_before_stdin_is_read(tmp_path: Path, json_output: bool) -> None:
    """`localgen run --json x > /dev/full` failed only once the whole answer was generated (3 s for 300 tokens), as
    its record is written whole, and text at its first token: both are refused at once, before stdin (a pipe that
    stays open here) is waited for or the model loaded."""
    read_end, write_end = os.pipe()
    try:
        with open("/dev/full", "wb") as full:
            proc = run_localgen_process([sys.executable, "-m", "localgen", "run", *(["--json"] * json_output), "x"],
                                        stdin=read_end, stdout=full, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                                        env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, timeout=30)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (1, "localgen: error: cannot write to stdout: No space left on device: it "
                                                 "is /dev/full, where every write fails (hint: send the output "
                                                 "elsewhere)\n"), proc.stderr
