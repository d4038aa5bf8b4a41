"""`localgen run` where it said too little: a whole-number option given a decimal or a word, llm's -c with the prompt
stuck on, --stats beside --print-prompt, no way back to the chat template's own system prompt; a completion's thread
counts named apart from their JSON names; a conversation's model whose file name is not UTF-8."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from gguf_builders import same_file_named

from localgen.cli import app
from localgen.hardware import physical_cores
from tests.conftest import bundled_model_file, run_localgen
from tests.usage_errors import parsed_command_line as _parsed
from tests.usage_errors import usage_error as _usage


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["run", "--top-k", "1.5", "hi"], "--top-k takes a whole number: `localgen run --top-k 40 hi`", {"top_k": 40}),
    (["run", "--top-k=five", "hi"], "--top-k takes a whole number: `localgen run --top-k 40 hi`", {"top_k": 40}),
    (["run", "-n1.5", "hi"], "-n takes a whole number: `localgen run -n 512 hi`", {"max_tokens": 512}),
    (["run", "-n1.5", "-ngl", "5", "hi"], "-n takes a whole number: `localgen run -n 512 -ngl 5 hi`",
     {"max_tokens": 512, "gpu_layers": 5}),  # -ngl, led by -n, is an option of its own
    (["run", "-n", "1e20", "hi"], "-n takes a whole number: `localgen run -n 512 hi`", {"max_tokens": 512}),
    (["run", "-n", "10,5", "hi"], "-n takes a whole number: `localgen run -n 512 hi`", {"max_tokens": 512}),
    (["run", "--repeat-last-n", "1e3", "hi"], "--repeat-last-n takes a whole number: `localgen run "
     "--repeat-last-n 1000 hi`", {"repeat_last_n": 1000}),  # a whole number written as a decimal: that number
    (["run", "--seed", "2.0", "-s", "be brief", "hi"], "--seed takes a whole number: `localgen run --seed 2 -s "
     "'be brief' hi`", {"seed": 2, "system": "be brief"}),
    (["run", "-t", "2.5", "hi"], f"-t takes a whole number: `localgen run -t {physical_cores()} hi`",
     {"threads": physical_cores()}),  # the default, the physical cores
    (["run", "-t=1e308", "hi"], f"-t takes a whole number: `localgen run -t {physical_cores()} hi`",
     {"threads": physical_cores()}),  # a number, = and all: not llm's -t TEMPLATE
    (["run", "--seed", "abc"], '--seed takes a whole number: `localgen run --seed 42 "..."`', {"seed": 42}),
    (["chat", "--top-k", "2.0"], "--top-k takes a whole number: `localgen chat --top-k 2`", {"top_k": 2}),
    (["bench", "-p", "1.5"], "-p takes a whole number: `localgen bench -p 512`", {"n_prompt": 512}),
    (["conversations", "-n", "two"], "-n takes a whole number: `localgen conversations -n 10`", {"limit": 10}),
])
def test_a_whole_number_option_given_a_decimal_or_a_word_gets_a_command_that_runs(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    """Where the hint said only to see `localgen run --help`."""
    message, said = _usage(args, capsys)
    assert "is not a valid integer" in message and said == hint, (message, said)
    params = _parsed(said.split("`")[1].replace(' "..."', ""))
    assert {key: params[key] for key in meant} == meant


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "--top-k", "1.5", "two", "words"], "--top-k takes a whole number, e.g. --top-k 40"),  # refused for more
    (["run", "-t", "summarize", "x"], "-t is --threads N; llm's templates are models.toml entries here, each with a "
     "system prompt and settings"),  # llm's template option, as it was
    (["run", "-n", "4,096", "hi"], "write it without separators: -n 4096"),  # a thousands comma, as it was
    (["run", "-c=nan", "hi"], "-c takes the context size, a number of tokens: -c 4096"),  # not llm's -c (continue)
    (["run", "-c=8k", "hi"], "-c takes the context size, a number of tokens: -c 8192"),
])
def test_a_whole_number_hint_writes_no_command_that_would_be_refused(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys)[1] == hint


def _whole_number_options() -> list[tuple[str, str]]:
    """Each name of each whole-number option of the commands that have them: (command, name)."""
    group = typer.main.get_command(app)
    commands = {name: group.commands[name] for name in ("run", "chat", "bench", "fit")}  # type: ignore[attr-defined]
    commands["conversations"] = group.commands["conversations"]  # type: ignore[attr-defined]
    return [(name, option) for name, command in commands.items() for param in command.params
            if getattr(param, "metavar", None) in ("INTEGER", "N") for option in param.opts]


@pytest.mark.parametrize(("command", "option"), _whole_number_options())
def test_every_whole_number_option_says_it_takes_one(command: str, option: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Each with a typical value that parses (the context size's own hint says it takes a number of tokens)."""
    hint = _usage([command, option, "1.5"], capsys)[1]
    if option in ("-c", "--ctx", "--ctx-size"):
        assert hint == f"{option} takes the context size, a number of tokens: {option} 4096", hint
        return
    assert hint.startswith(f"{option} takes a whole number: `localgen {command} {option} "), hint
    _parsed(hint.split("`")[1].replace(' "..."', ""))


def test_the_real_cli_tells_a_decimal_top_k_it_takes_a_whole_number() -> None:
    result = run_localgen("run", "--top-k", "1.5", "hi")
    assert result.returncode == 2 and result.stdout == b""
    assert result.err == ("localgen: error: invalid value for '--top-k': '1.5' is not a valid integer (hint: --top-k "
                          "takes a whole number: `localgen run --top-k 40 hi`)\n"), result.err


_CONTINUE = "-c is --ctx-size; to continue the latest conversation use --continue"


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["run", "-cmore"], f"{_CONTINUE}: `localgen run --continue more`", {"prompt": "more"}),
    (["run", "-c=more"], f"{_CONTINUE}: `localgen run --continue more`", {"prompt": "more"}),
    (["run", "-n", "5", "-cand then?"], f"{_CONTINUE}: `localgen run -n 5 --continue 'and then?'`",
     {"prompt": "and then?", "max_tokens": 5}),
    (["run", "-c5", "-cmore"], f"{_CONTINUE}: `localgen run -c5 --continue more`", {"prompt": "more", "ctx_size": 5}),
    (["run", "-cmore", "--conversation", "foo"], "-c is --ctx-size; --conversation foo already continues "
     "conversation foo: `localgen run --conversation foo more`", {"prompt": "more", "conversation_name": "foo"}),
])
def test_llm_s_continue_with_its_prompt_stuck_on_gets_the_command_that_continues(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    """As -c "and then?" was hinted; -cmore got the lead alone, with no command to run."""
    message, said = _usage(args, capsys)
    assert "is not a valid integer" in message and said == hint, (message, said)
    params = _parsed(said.split("`")[1])
    assert {key: params[key] for key in meant} == meant
    assert params["continue_latest"] is ("--conversation" not in args)


@pytest.mark.parametrize("args", [["run", "-cmore", "--raw"], ["chat", "-cmore"]])
def test_llm_s_continue_with_its_prompt_stuck_on_gets_no_command_that_would_be_refused(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """run --continue --raw is refused (a plain completion continues nothing); chat takes no prompt."""
    assert _usage(args, capsys)[1] == _CONTINUE


def test_print_prompt_with_stats_says_the_prompt_s_tokens_and_the_context_on_stderr() -> None:
    """As --stats says them after an answer, where --stats beside --print-prompt said nothing."""
    counted = run_localgen("run", "--print-prompt", "--json", "-c", "512", "hi")
    assert counted.returncode == 0, counted.err
    tokens = json.loads(counted.out)["prompt_tokens"]
    plain = run_localgen("run", "--print-prompt", "-c", "512", "hi")
    result = run_localgen("run", "--print-prompt", "--stats", "-c", "512", "hi")
    assert result.returncode == 0 and result.stdout == plain.stdout and plain.err == "", (result.err, plain.err)
    assert result.err == f"prompt {tokens:,} tok, context {tokens:,}/512\n", result.err


_TEMPLATE_S_OWN = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # the bundled model's


@pytest.mark.parametrize(("given", "system"), [
    ((), "Answer in French."), (("-s", "none"), _TEMPLATE_S_OWN), (("-s", "OFF"), _TEMPLATE_S_OWN),
    (("-s", ""), ""), (("-s", "Be brief."), "Be brief."),
])
def test_run_s_none_goes_back_to_the_template_s_own_system_prompt_from_a_models_toml_entry_s(
        given: tuple[str, ...], system: str, tmp_path: Path) -> None:
    """As chat's /system none does, where -s none sent the system prompt "none"."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.toml").write_text('[models.smollm2-135m]\nsystem = "Answer in French."\n')
    result = run_localgen("run", "--print-prompt", *given, "hi", env={"LOCALGEN_HOME": str(tmp_path)})
    assert result.returncode == 0 and result.err == "", result.err
    assert result.out.startswith(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nhi<|im_end|>"), result.out


def test_run_s_none_gives_a_continued_conversation_the_template_s_own_system_prompt(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path)}
    first = run_localgen("run", "--conversation", "work", "-s", "Be brief.", "-n", "1", "hi", env=env)
    assert first.returncode == 0, first.err
    again = run_localgen("run", "--conversation", "work", "-s", "none", "-n", "1", "and then?", env=env)
    assert again.returncode == 0, again.err
    assert "localgen: conversation 'work' now has the model's default instead of 'Be brief.'" in again.err, again.err
    shown = run_localgen("conversations", "show", "work", "--json", env=env)
    saved = json.loads(shown.out)
    assert saved["system"] is None and len(saved["turns"]) == 2, saved


def test_a_completion_s_thread_counts_go_by_their_json_names() -> None:
    """threads is the count chosen (--threads), decode_threads those decoding at the end, in Python as in --json,
    where the Python names were threads_chosen and threads."""
    from localgen.events import Finished, Timings, Usage

    done = Finished(text="x", finish_reason="length", usage=Usage(3, 0, 2), timings=Timings(0.1, 0.1, 30.0, 0.1, 10.0),
                    seed=7, threads=4, decode_threads=3)
    record = done.to_dict()
    names = ("text", "finish_reason", "seed", "threads", "decode_threads")
    assert {name: record[name] for name in names} == {name: getattr(done, name) for name in names}
    assert (record["threads"], record["decode_threads"]) == (4, 3)


def test_a_conversation_goes_on_with_a_model_whose_file_name_is_not_utf_8(tmp_path: Path) -> None:
    """Its path is saved as JSON's \\udcff, as --json writes it, and read back as the byte it stands for, where it
    was read back as U+FFFD and the conversation could not go on without -m."""
    model = tmp_path / os.fsdecode(b"smol\xff.gguf")
    same_file_named(bundled_model_file(), model)
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    first = run_localgen("run", "-m", str(model), "--conversation", "work", "-n", "1", "hi", env=env)
    assert first.returncode == 0, first.err
    again = run_localgen("run", "--conversation", "work", "-n", "1", "and then?", env=env)
    assert again.returncode == 0, again.err
    saved = json.loads(run_localgen("conversations", "show", "work", "--json", env=env).out)
    assert os.fsencode(saved["model"]) == os.fsencode(model) and len(saved["turns"]) == 2, saved
    assert all(os.fsencode(turn["model"]) == os.fsencode(model) for turn in saved["turns"]), saved["turns"]
    plain = run_localgen("run", "-m", str(model), "-n", "1", "hi", env=env)  # the last run, kept in the same format
    assert plain.returncode == 0, plain.err
    more = run_localgen("run", "--continue", "-n", "1", "more", env=env)
    assert more.returncode == 0, more.err
