"""Words that mean the same to every command and option that takes them: chat's -s none as run's, the names of stdin
as -, and the lines and hints around a run's prompt and its stdin, on the real bundled model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from localgen.hardware import physical_cores
from tests.conftest import run_localgen, run_localgen_process, spawn_localgen, user_registry
from tests.test_repl import Chat

SAVED = Path("data") / "conversations"


def test_chat_s_none_is_the_template_s_system_prompt_as_slash_system_none_is(home: Path) -> None:
    """chat -s none (or off) gives no system prompt, not models.toml's, nor the word "none"; given with --resume, it
    replaces the conversation's."""
    user_registry(home, '[models.smollm2-135m]\nsystem = "Answer in French."\n')
    chat = Chat(home, "-s", "none", "--no-markdown")
    chat.command("/system", "the chat template adds its own")
    chat.command("/save x1", "saved")
    assert json.loads((home / SAVED / "x1.json").read_text())["system"] is None
    chat.command("/system Be brief.", "system prompt set")
    chat.command("/save x1", "saved")
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", "x1", "-s", "OFF", "--no-markdown")
    banner = " ".join(resumed.transcript.getvalue().split())
    assert "now has the model's default instead of 'Be brief.'" in banner, banner
    resumed.command("/system", "the chat template adds its own")
    resumed.command("/save x1", "saved")
    assert json.loads((home / SAVED / "x1.json").read_text())["system"] is None
    assert resumed.quit() == 0


@pytest.mark.parametrize(("args", "said"), [
    (("run", "--json-schema", "/dev/stdin", "-f", "-", "q"), "--json-schema does not read stdin"),
    (("run", "--grammar-file", "/dev/fd/0", "--system-file", "/dev/stdin", "q"), "--grammar-file does not read stdin"),
    (("run", "--chat-template", "/proc/self/fd/0", "q"), "--chat-template does not read stdin"),
    (("run", "--chat-template", "-", "q"), "--chat-template does not read stdin"),
    (("chat", "--chat-template", "/dev/stdin"), "--chat-template does not read stdin"),
])
def test_a_schema_grammar_or_template_named_as_stdin_is_refused_as_one_of_dash_is(args: tuple[str, ...],
                                                                                  said: str) -> None:
    """/dev/stdin and its like are stdin to --json-schema, --grammar and --chat-template, as - is: refused, where the
    pipe was read by name and the prompt found stdin empty."""
    result = run_localgen(*args, stdin=b'{"type": "string"}\n')
    assert result.returncode == 2 and said in result.err and "Traceback" not in result.err, result.err


def test_a_prompt_printed_on_the_terminal_stderr_shares_ends_its_line_before_the_stats() -> None:
    """run --raw --print-prompt --stats on one terminal: the stats line starts a line of its own, not glued to the
    prompt (hi), which a pipe still gets byte for byte."""
    shown = spawn_localgen("run", "--raw", "--print-prompt", "--stats", "hi", env=dict(os.environ), encoding="utf-8",
                           timeout=60)
    shown.expect(pexpect.EOF)
    shown.close()
    assert shown.exitstatus == 0 and shown.before.startswith("hi\r\nprompt 1 tok, context 1/"), shown.before
    piped = run_localgen("run", "--raw", "--print-prompt", "--stats", "hi")
    assert piped.returncode == 0 and piped.out == "hi" and piped.err.startswith("prompt 1 tok"), piped


@pytest.mark.parametrize(("given", "hinted"), [
    (("run", "--top-k", "-2.0", "hi"), "run --top-k 40 hi"), (("run", "-n", "-7.0", "hi"), "run -n 512 hi"),
    (("run", "--batch-size", "-1.0", "hi"), "run --batch-size 512 hi"),
    (("run", "--threads", "-3.0", "hi"), "run --threads {cores} hi"),
    (("run", "--threads", "2.5", "hi"), "run --threads {cores} hi"),
    (("run", "--threads-batch", "0.0", "hi"), "run --threads-batch {cores} hi"),
    (("run", "--seed", "-1.0", "hi"), "run --seed -1 hi"), (("run", "-n", "-1.0", "hi"), "run -n -1 hi"),
    (("run", "--top-k", "2.0", "hi"), "run --top-k 2 hi"),
    (("conversations", "-n", "0.0"), "conversations -n 10"), (("bench", "-r", "0.0"), "bench -r 5"),
    (("bench", "-p", "-3.0"), "bench -p 512"), (("bench", "-p", "0.0"), "bench -p 0"),
])
def test_the_whole_number_hint_offers_a_value_the_option_takes(given: tuple[str, ...], hinted: str) -> None:
    """A decimal's own whole value where the option's range check takes it, else the option's typical value (for
    --threads, the physical cores), never one that the command then refuses."""
    result = run_localgen(*given)
    written = f"`localgen {hinted.format(cores=physical_cores())}`"
    assert result.returncode == 2 and f"takes a whole number: {written})" in result.err, result.err


def test_stdin_a_socket_at_its_end_is_not_warned_about_as_an_empty_pipe_is() -> None:
    """A socket stdin (ssh's, a service manager's) with nothing sent on it: no `stdin is empty` warning, which an
    empty pipe beside a prompt still gets."""
    command = [sys.executable, "-m", "localgen", "run", "--print-prompt", "hi"]
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.shutdown(socket.SHUT_WR)
        by_socket = run_localgen_process(command, stdin=theirs.fileno(), capture_output=True, timeout=120)
    assert by_socket.returncode == 0 and b"stdin" not in by_socket.stderr, by_socket.stderr
    read, write = os.pipe()
    os.close(write)
    with open(read, "rb") as pipe:
        by_pipe = run_localgen_process(command, stdin=pipe, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       timeout=120)
    assert by_pipe.returncode == 0 and b"stdin is empty" in by_pipe.stderr, by_pipe.stderr
