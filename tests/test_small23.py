"""Small leftovers of the command line: --version given a command, run's --system-file help, the closing line of
models rm that keeps a shared file, and models show's load plan for a split model with shards missing."""

from __future__ import annotations

import subprocess

import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli

from tests.conftest import run_localgen

TWIN = "org/twin-GGUF"


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


def test_models_rm_of_a_model_whose_file_others_share_names_them_in_its_closing_line(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The closing line said `kept 1 file another model uses`, where the question before it names the models."""
    server, env = hub
    same = make_gguf_bytes("twin", 80_000)
    server.add_repo(TWIN, {f"twin-{quant}.gguf": same for quant in ("Q8_0", "F16", "Q4_0")})
    for quant in ("Q8_0", "F16", "Q4_0"):
        assert run_cli(env, "pull", f"{TWIN}:{quant}").returncode == 0

    def removed(quant: str) -> subprocess.CompletedProcess[str]:
        done = run_cli(env, "models", "rm", "-y", f"{TWIN}:{quant}")
        assert done.returncode == 0, done.stderr
        return done

    assert removed("Q8_0").stderr == (f"localgen: removed {TWIN}:Q8_0: freed 0 B, kept 1 file {TWIN}:F16 and "
                                      f"{TWIN}:Q4_0 use\n")
    assert removed("F16").stderr == f"localgen: removed {TWIN}:F16: freed 0 B, kept 1 file {TWIN}:Q4_0 uses\n"
