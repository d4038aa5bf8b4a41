"""Small leftovers of the command line: --version given a command, run's --system-file help, the closing line of
models rm that keeps a shared file, and models show's load plan for a split model with shards missing."""

from __future__ import annotations

import pytest

from tests.conftest import run_localgen


@pytest.mark.parametrize("args", [["run", "--version"], ["run", "hi", "--version"], ["models", "list", "--version"]])
def test_version_given_a_command_is_hinted_localgen_s_own(args: list[str]) -> None:
    """Was: see `localgen run --help`, which lists no --version."""
    result = run_localgen(*args)
    command = " ".join(word for word in args if word not in ("hi", "--version"))
    assert result.returncode == 2 and result.out == ""
    assert result.err == (f"localgen: error: no such option: --version (hint: `localgen {command}` has no --version: "
                          "use `localgen --version`)\n")


def test_run_s_system_file_help_says_that_dash_reads_stdin_as_run_does_and_chat_s_does_not() -> None:
    """run's --system-file help read as chat's, which refuses -, where README says - is stdin and run takes it."""
    run_help = " ".join(run_localgen("run", "--help").out.split())
    assert "--system-file FILE System prompt read from a text file (- is stdin)." in run_help, run_help
    piped = run_localgen("run", "--system-file", "-", "--print-prompt", "hi", stdin=b"Answer in one word.\n")
    assert piped.returncode == 0, piped.err
    assert "<|im_start|>system\nAnswer in one word.<|im_end|>" in piped.out, piped.out
    chat_help = " ".join(run_localgen("chat", "--help").out.split())
    assert "--system-file FILE System prompt read from a text file. " in chat_help, chat_help
