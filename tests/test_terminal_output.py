"""`localgen run` with its stdout on a real pseudo-terminal: word-wrapped at its width, escapes shown, not obeyed."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

from tests.conftest import REPO_ROOT, popen_localgen, run_localgen

# The answer, forced by a grammar: an escape sequence (clear the screen) inside words that cross column 40.
ANSWER = "Sure, here is a short sentence about apples \x1b[2J and pears for you."
GRAMMAR = 'root ::= "Sure, here is a short sentence about apples \\x1b[2J and pears for you."'
FORCED = ("--temperature", "0", "-s", "")  # the grammar gives the answer: no system prompt to prefill for it
ARGS = ("run", "--grammar", GRAMMAR, *FORCED, "-n", "40", "Say something.")


def run_on_terminal(*args: str, columns: int, rows: int = 24, timeout: float = 120) -> tuple[int, str, str]:
    """Run `localgen ARGS` with stdout on a pty of columns x rows (stderr piped); the exit status, what the terminal
    got (its CR LF line ends made LF) and stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # the terminal's own size counts
    proc = popen_localgen([sys.executable, "-m", "localgen", *args], stdin=subprocess.DEVNULL, stdout=slave,
                          stderr=subprocess.PIPE, env=env, cwd=REPO_ROOT)
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.2)[0]:
                continue
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the program has exited and closed the terminal
                break
            if not data:
                break
            received += data
        _, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, received.decode("utf-8").replace("\r\n", "\n"), stderr.decode("utf-8", "replace")


def test_run_on_a_terminal_wraps_between_words_and_shows_an_escape_harmlessly() -> None:
    code, screen, err = run_on_terminal(*ARGS, columns=40)
    assert code == 0, err
    assert "\x1b" not in screen, "the model's escape sequence reached the terminal"
    lines = screen.removesuffix("\n").split("\n")
    assert all(len(line) <= 40 for line in lines), lines
    assert " ".join(lines) == ANSWER.replace("\x1b", "^["), "broken at spaces only, each word whole"
    assert lines[0] == "Sure, here is a short sentence about", "each line is filled up to the width"
    assert screen.endswith("\n") and not screen.endswith("\n\n")


def test_run_on_a_pipe_passes_the_text_through_unwrapped_and_unchanged() -> None:
    result = run_localgen(*ARGS)
    assert result.returncode == 0, result.err
    assert result.stdout == ANSWER.encode() + b"\n", "stdout carries the model's text and nothing else"


def test_no_wrap_keeps_the_line_whole_on_a_terminal_and_still_shows_the_escape() -> None:
    code, screen, err = run_on_terminal(*ARGS, "--nowordwrap", columns=40)  # Ollama's name for --no-wrap
    assert code == 0, err
    assert screen == ANSWER.replace("\x1b", "^[") + "\n"


C1_GRAMMAR = 'root ::= "A\\x9b2J\\x9d0;T\\x9c B\\x7f C\\x1b[31m"'  # CSI, OSC, ST: what ESC [, ESC ] and ESC \ are


def test_run_json_escapes_c1_controls_as_it_does_esc_so_a_terminal_shows_them() -> None:
    args = ("run", "--json", "--grammar", C1_GRAMMAR, *FORCED, "-n", "60", "Say something.")
    code, screen, err = run_on_terminal(*args, columns=200)
    assert code == 0, err
    assert not any("\x7f" <= c <= "\x9f" or c == "\x1b" for c in screen), "a control character reached the terminal"
    assert '"text": "A\\u009b2J\\u009d0;T\\u009c B\\u007f C\\u001b[31m"' in screen
    assert json.loads(screen)["text"] == "A\x9b2J\x9d0;T\x9c B\x7f C\x1b[31m"
    piped = run_localgen(*args)
    assert piped.returncode == 0, piped.err
    assert json.loads(piped.stdout)["text"] == "A\x9b2J\x9d0;T\x9c B\x7f C\x1b[31m", "the same text, as valid JSON"
    assert piped.stdout.isascii()


BIDI = "A \u202egnp.exe B \u2066x\u2069 C\u202a\u202b\u202c\u202d\u2067\u2068."  # each embedding, override, isolate
BIDI_GRAMMAR = 'root ::= "A \\u202Egnp.exe B \\u2066x\\u2069 C\\u202A\\u202B\\u202C\\u202D\\u2067\\u2068."'


def test_run_on_a_terminal_shows_bidi_controls_rather_than_letting_them_reorder_the_line() -> None:
    """U+202E would show A gnp.exe as A exe.png on a terminal that lays out bidi text; a pipe gets them as they are."""
    args = ("run", "--grammar", BIDI_GRAMMAR, *FORCED, "-n", "60", "Say something.")
    code, screen, err = run_on_terminal(*args, columns=200)
    assert code == 0, err
    assert screen == "A \ufffdgnp.exe B \ufffdx\ufffd C\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd.\n"
    piped = run_localgen(*args)
    assert piped.returncode == 0, piped.err
    assert piped.stdout == BIDI.encode() + b"\n", "a pipe gets the model's text byte for byte"
    as_json = run_localgen(*args, "--json")
    assert as_json.returncode == 0, as_json.err
    assert b'"text": "A \\u202egnp.exe B \\u2066x\\u2069 C\\u202a' in as_json.stdout and as_json.stdout.isascii()
    assert json.loads(as_json.stdout)["text"] == BIDI
