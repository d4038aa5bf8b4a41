"""Hints for command-line habits whose errors misled: a short option's value after =, options before the command,
a prompt given to chat, llm's -o KEY VALUE, Ollama's show options and version flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.test_repl import Chat
from tests.usage_errors import parsed_command_line as _parsed
from tests.usage_errors import usage_error as _usage

_SHORT_EQUALS = "a short option takes its value after a space ({0} VALUE) or joined ({0}VALUE), not after ="


def test_a_short_option_s_value_after_equals_is_refused_not_sent_as_the_system_prompt() -> None:
    """run -s=terse ran with the system prompt "=terse", exit 0."""
    result = run_localgen("run", "-s=terse", "--print-prompt", "hi")
    assert result.returncode == 2 and result.out == "", result.out
    assert result.err == (f"localgen: error: -s=terse: {_SHORT_EQUALS.format('-s')} (hint: use `localgen run -s terse "
                          "--print-prompt hi`)\n")


@pytest.mark.parametrize(("args", "meant"), [
    (["run", "-c=2048", "hi"], {"ctx_size": 2048, "prompt": "hi"}),  # was: `localgen run --continue '2048 hi'`
    (["run", "-t=2", "hi"], {"threads": 2}),  # was: a hint about llm's templates
    (["run", "-f=f.txt", "hi"], {"file": ("f.txt",)}),  # was: no such file: =f.txt
    (["run", "-m=smollm2-135m", "hi"], {"model": "smollm2-135m"}),  # was: '=smollm2-135m' is not a model name
    (["run", "-n=3", "-s=x", "hi"], {"max_tokens": 3, "system": "x"}),  # was: -n takes a whole number
    (["chat", "-n=3"], {"max_tokens": 3}),
    (["bench", "-p=16"], {"n_prompt": 16}),
    (["conversations", "-n=3"], {"limit": 3}),
])
def test_each_command_s_short_options_take_no_value_after_equals(
        args: list[str], meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    message, hint = _usage(args, capsys)
    stuck = next(word for word in args if word[2:3] == "=")
    assert message == f"{stuck}: {_SHORT_EQUALS.format(stuck[:2])}"
    assert hint.startswith("use `localgen ") and hint.endswith("`") and "=" not in hint, hint
    params = _parsed(hint.split("`")[1])
    assert {key: params[key] for key in meant} == meant


@pytest.mark.parametrize("args", [
    ["run", "-s", "=x", "--print-prompt", "hi"],  # a value that starts with =, after a space
    ["run", "--system==x", "--print-prompt", "hi"],  # a long option's value after its =
])
def test_a_value_that_starts_with_equals_is_taken_as_given(args: list[str]) -> None:
    result = run_localgen(*args)
    assert result.returncode == 0, result.err
    assert "<|im_start|>system\n=x<|im_end|>" in result.out


@pytest.mark.parametrize(("args", "hint"), [
    # was: options go after the command: `localgen run --debug hi`, which fails for --debug as well
    (["--debug", "run", "hi"], "`localgen run` has no --debug: the environment's LOCALGEN_DEBUG=1 does it, "
     "`LOCALGEN_DEBUG=1 localgen run hi`"),
    (["run", "--debug", "hi"], "`localgen run` has no --debug: the environment's LOCALGEN_DEBUG=1 does it, "
     "`LOCALGEN_DEBUG=1 localgen run hi`"),  # was: see `localgen run --help`
    (["--no-color", "models", "list"], "`localgen models list` has no --no-color: the environment's NO_COLOR=1 does "
     "it, `NO_COLOR=1 localgen models list`"),  # was: `localgen models --no-color list`
    (["run", "--no-color", "hi"], "`localgen run` has no --no-color: the environment's NO_COLOR=1 does it, "
     "`NO_COLOR=1 localgen run hi`"),
    (["--offline", "models", "list"], "`localgen models list` has no --offline: the environment's LOCALGEN_OFFLINE=1 "
     "does it, `LOCALGEN_OFFLINE=1 localgen models list`"),
    (["--foo", "run", "hi"], "`localgen run` has no --foo either: see `localgen run --help`"),
    (["--json", "models", "list"], "options go after the command: `localgen models list --json`"),  # was: after models
    (["--temp", "0", "run", "hi"], "options go after the command: `localgen run --temp 0 hi`"),
    (["-v"], "use `localgen --version`"),  # Ollama's
    (["-V"], "use `localgen --version`"),
])
def test_an_option_the_command_lacks_is_hinted_what_does_its_work(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    message, said = _usage(args, capsys)
    assert message.startswith("no such option: ") and said == hint


_DEBUG = "`localgen run` has no --debug: the environment's LOCALGEN_DEBUG=1 does it, "


@pytest.mark.parametrize(("args", "hint", "meant"), [
    # was: `localgen run` has no --help either: see `localgen run --help`
    (["-n", "3", "--help"], "options go after the command: `localgen run -n 3 --help`", {}),
    (["-n=5", "run", "hi"], "options go after the command: `localgen run -n 5 hi`",  # was: -n=5, refused
     {"max_tokens": 5, "prompt": "hi"}),
    (["--debug", "-n=2", "run", "hi"], f"{_DEBUG}`LOCALGEN_DEBUG=1 localgen run -n 2 hi`", {"max_tokens": 2}),
    (["--debug", "-x", "run", "hi"], "`localgen run` has no -x either: see `localgen run --help`", {}),  # was: --debug
    (["run", "--debug", "--", "--offline"], f"{_DEBUG}`LOCALGEN_DEBUG=1 localgen run -- --offline`",
     {"prompt": "--offline"}),  # was: LOCALGEN_OFFLINE=1 too, and `localgen run --`
    (["run", "--debug", "-s", "--no-color", "hi"], f"{_DEBUG}`LOCALGEN_DEBUG=1 localgen run -s --no-color hi`",
     {"system": "--no-color", "prompt": "hi"}),  # was: NO_COLOR=1 too, and `localgen run -s hi`
    (["run", "--debug", "--debug", "hi"], f"{_DEBUG}`LOCALGEN_DEBUG=1 localgen run hi`", {}),  # was: --debug or --debug
    (["run", "--debug", "--no-color", "hi"], "`localgen run` has no --debug or --no-color: the environment's "
     "LOCALGEN_DEBUG=1 and NO_COLOR=1 do it, `LOCALGEN_DEBUG=1 NO_COLOR=1 localgen run hi`", {}),  # was: does it
])
def test_a_hint_for_options_the_command_lacks_writes_the_command_as_typed(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    message, said = _usage(args, capsys)
    assert message.startswith("no such option: ") and said == hint
    if meant:
        params = _parsed("localgen " + hint.split("`")[-2].partition("localgen ")[2])  # LOCALGEN_DEBUG=1 aside
        assert {key: params[key] for key in meant} == meant


@pytest.mark.parametrize(("args", "meant"), [
    (["-n5", "hi"], {"max_tokens": 5, "prompt": "hi"}),  # was: see `localgen --help`
    (["-c2048", "hi"], {"ctx_size": 2048}),
    (["-t4", "hi"], {"threads": 4}),
    (["-msmollm2-135m", "hi"], {"model": "smollm2-135m"}),
    (["-sterse", "hi"], {"system": "terse"}),
    (["-n5", "chat"], {"max_tokens": 5}),
    (["-c2048", "-t4", "chat"], {"ctx_size": 2048, "threads": 4}),
    (["-msmollm2-135m", "-sterse", "chat"], {"model": "smollm2-135m", "system": "terse"}),
])
def test_a_short_option_with_its_value_stuck_on_before_the_command_is_hinted_after_it(
        args: list[str], meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    message, hint = _usage(args, capsys)
    command = "chat" if "chat" in args else "run"
    written = ["localgen", command, *[word for word in args if word != "chat"]]
    assert (message, hint) == (f"no such option: {args[0]}", f"options go after the command: `{' '.join(written)}`")
    params = _parsed(hint.split("`")[1])
    assert {key: params[key] for key in meant} == meant


def test_a_flag_with_letters_stuck_on_before_the_command_is_not_moved(capsys: pytest.CaptureFixture[str]) -> None:
    """-q takes no value: -qx is -q and the unknown -x, which run refuses as well."""
    assert _usage(["-qx", "hi"], capsys) == ("no such option: -qx", "see `localgen --help`")


def test_help_with_an_option_before_the_command_is_hinted_the_help_that_works() -> None:
    """localgen help -n 3 was hinted that run has no --help either."""
    result = run_localgen("help", "-n", "3")
    assert (result.returncode, result.err) == (2, "localgen: error: no such option: -n (hint: options go after the "
                                                  "command: `localgen run -n 3 --help`)\n")
    helped = run_localgen("run", "-n", "3", "--help")
    assert helped.returncode == 0 and "Usage: localgen run" in helped.out, helped.err


def test_the_environment_a_hint_names_does_the_work_of_the_option() -> None:
    """The command `localgen --debug run` was hinted failed again: no such option: --debug."""
    hint = run_localgen("--debug", "run", "-n", "1", "hi").err.split("`")[-2]
    assert hint == "LOCALGEN_DEBUG=1 localgen run -n 1 hi"
    setting, _, command = hint.partition(" ")
    result = run_localgen(*command.split()[1:], env=dict([setting.split("=")]))
    assert result.returncode == 0 and "localgen.llama: " in result.err, result.err  # llama.cpp's log


@pytest.mark.parametrize(("args", "hint"), [
    (["models", "show", "--modelfile", "smollm2-135m"], "localgen has no Modelfile: `localgen models show "
     "smollm2-135m` prints what its models.toml entry gives (system prompt, settings, stop strings) and the GGUF's "
     "details; --template prints the chat template"),
    (["models", "show", "smollm2-135m", "--parameters"], "`localgen models show smollm2-135m` prints the settings its "
     "models.toml entry gives, with the GGUF's details"),
    (["models", "show", "--system"], "`localgen models show` prints the system prompt its models.toml entry gives, "
     "with the GGUF's details"),
    (["models", "show", "--license", "smollm2-135m"], "`localgen models show smollm2-135m` prints the license, with "
     "the GGUF's details"),
])
def test_ollama_s_show_options_are_hinted_what_models_show_prints(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each was No such option (hint: see `localgen models show --help`)."""
    message, said = _usage(args, capsys)
    assert message.startswith("no such option: --") and said == hint


_NO_PROMPT = "chat takes no prompt argument: type your messages at its >>> prompt"


@pytest.mark.parametrize(("args", "hint"), [
    (["chat", ""], "start it with `localgen chat`"),  # was: `localgen run ''`, nothing to send
    (["chat", "-n", "5", "smollm2-135m", " "], "start it with `localgen chat -m smollm2-135m -n 5`"),
])
def test_an_empty_prompt_given_to_chat_is_hinted_the_chat_alone(args: list[str], hint: str) -> None:
    result = run_localgen(*args)
    assert result.returncode == 2 and result.err == f"localgen: error: {_NO_PROMPT} (hint: {hint})\n"
    _parsed(hint.split("`")[1])


def test_chat_s_dash_is_hinted_run_with_stdin_piped_to_it() -> None:
    """chat - was hinted `localgen run -- '-'`, which reads stdin rather than sending "-"."""
    result = run_localgen("chat", "-n", "3", "-")
    assert result.returncode == 2
    assert result.err == ("localgen: error: chat takes no prompt argument, and reads no stdin: type your messages at "
                          "its >>> prompt (hint: for one answer to a file's text, use `localgen run -n 3 < FILE` or "
                          "`... | localgen run -n 3`)\n")
    piped = run_localgen("run", "-n", "3", "--temperature", "0", "--print-prompt", stdin=b"the piped text")
    assert piped.returncode == 0 and "the piped text" in piped.out, piped.err


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["run", "-o", "max_tokens", "100", "hi"], "localgen's is -n 100: `localgen run -n 100 hi`", {"max_tokens": 100}),
    (["run", "-o", "num_ctx", "4096", "hi"], "localgen's is -c 4096: `localgen run -c 4096 hi`", {"ctx_size": 4096}),
    (["chat", "-o", "seed", "1"], "localgen's is --seed 1: `localgen chat --seed 1`", {"seed": 1}),
    (["run", "-o", "temperature", "0.2", "--option", "top_p", "0.9", "hi"],
     "localgen's is --temperature 0.2: `localgen run --temperature 0.2 --top-p 0.9 hi`",
     {"temperature": 0.2, "top_p": 0.9}),
    (["chat", "--option", "num_predict", "5"], "localgen's is -n 5: `localgen chat -n 5`", {"max_tokens": 5}),
])
def test_llm_s_setting_option_is_hinted_the_option_for_its_key(
        args: list[str], hint: str, meant: dict[str, object]) -> None:
    """Each was hinted the same fixed text, whatever the key: each setting has its own option here: --temperature 0.2,
    --top-p 0.9, ..."""
    result = run_localgen(*args)
    assert result.returncode == 2
    assert result.err == f"localgen: error: {args[1]} is llm's option for model settings (hint: {hint})\n"
    params = _parsed(hint.split("`")[1])
    assert {key: params[key] for key in meant} == meant


def test_llm_s_setting_option_with_a_key_no_option_sets_keeps_the_general_hint(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(["run", "-o", "foo", "1", "hi"], capsys) == (
        "-o is llm's option for model settings", "each setting has its own option here: --temperature 0.2, --top-p "
        "0.9, ...")


_OTHER_SIZE = "for another size, find the model's GGUF repo on Hugging Face and give it as ORG/REPO[:QUANT]"


@pytest.mark.parametrize(("args", "error"), [
    (["run", "-m", "qwen2.5:14b", "hi"], "the registry has no 14b size of qwen2.5 (hint: it has qwen2.5-0.5b, "
     f"qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b; {_OTHER_SIZE})"),  # was: unknown model 'qwen2.5', 7b left out
    (["run", "-m", "qwen2.5:14b-instruct-q4_K_M", "hi"], "the registry has no 14b size of qwen2.5 (hint: it has "
     f"qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b; {_OTHER_SIZE})"),
    (["chat", "-m", "smollm2:360m"], f"the registry has no 360m size of smollm2 (hint: it has smollm2-135m; "
     f"{_OTHER_SIZE})"),  # was: unknown model 'smollm2' (hint: did you mean smollm2-135m?)
    (["run", "qwen2.5:14b", "hi"], "the registry has no 14b size of qwen2.5 (hint: it has qwen2.5-0.5b, "
     f"qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b; {_OTHER_SIZE})"),  # was: quote the prompt
    (["run", "hi", "llama3.2:1b-text"], "'llama3.2:1b-text' is Ollama's tag of the base model of llama3.2-1b, and "
     "the registry has entries for chat models only (hint: for the chat model, use llama3.2-1b; for the base model, "
     "give its GGUF repo on Hugging Face as ORG/REPO[:QUANT])"),  # was: a traceback
])
def test_ollama_s_size_the_registry_lacks_is_told_the_sizes_it_has(args: list[str], error: str) -> None:
    """Given where the prompt goes, the refusal exited 2, a usage error, where -m's exits 1 as an unknown model does."""
    result = run_localgen(*args)
    assert result.returncode == 1
    assert result.err == f"localgen: error: {error}\n", result.err


@pytest.mark.parametrize("model", ["qwen2.5:14b", "llama3.2:1b-text", "ollama.com/library/llama3.2:1b"])
def test_a_model_refused_where_the_prompt_goes_exits_as_with_m(model: str) -> None:
    """run qwen2.5:14b hi exited 2 where run -m qwen2.5:14b hi exited 1; Ollama's address is a usage error in both."""
    given, with_m = run_localgen("run", model, "hi"), run_localgen("run", "-m", model, "hi")
    assert (given.returncode, given.err) == (with_m.returncode, with_m.err)
    assert given.returncode == (2 if "/" in model else 1), given.err


def test_chat_s_help_says_what_an_empty_system_prompt_and_none_do_as_run_s() -> None:
    """chat --help gave -s as "System prompt." alone."""
    helps = [" ".join(run_localgen(command, "--help").out.split()) for command in ("chat", "run")]
    said = """-s, --system TEXT System prompt ("": an empty one; none: the chat template's own)."""
    assert all(said in shown for shown in helps), helps


def test_chat_s_help_lists_model_with_its_reference_optional(tmp_path: Path) -> None:
    """/help listed /model REF, where /model alone names the model in use."""
    chat = Chat(tmp_path / "home", "-n", "5")
    assert "/model [REF]" in chat.command("/help", "/exit")
    chat.command("/model", "smollm2-135m")
    assert chat.quit() == 0


def test_a_chat_answer_cut_off_names_what_set_the_token_limit(tmp_path: Path) -> None:
    """Each said (/set max_tokens), whether -n or /set had set the limit."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    chat.child.sendline("Describe the sea at length.")
    chat.expect_words("[stopped at the limit of 5 tokens (-n/--max-tokens; /set max_tokens changes it)]")
    chat.sync()
    chat.command("/set max_tokens 4", "max_tokens")
    chat.child.sendline("Describe the sky at length.")
    chat.expect_words("[stopped at the limit of 4 tokens (/set max_tokens)]")
    chat.sync()
    assert chat.quit() == 0


def test_a_chat_answer_cut_off_at_models_toml_s_limit_names_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text("[models.smollm2-135m]\nmax_tokens = 4\n")
    chat = Chat(home, "--temperature", "0", "--no-markdown")
    chat.child.sendline("Describe the sea at length.")
    chat.expect_words("[stopped at the limit of 4 tokens (max_tokens in models.toml; /set max_tokens changes it)]")
    chat.sync()
    assert chat.quit() == 0


@pytest.mark.parametrize("command", [["run", "-m", "qwen2.5", "hi"], ["models", "show", "qwen2.5"],
                                     ["models", "rm", "qwen2.5"], ["fit", "qwen2.5"], ["models", "default", "qwen2.5"]])
def test_a_model_family_s_name_alone_is_told_every_size_the_registry_has(command: list[str]) -> None:
    """Ollama's `qwen2.5` alone names its default size; here the error names every entry of that family, where the
    close names offered three and left qwen2.5-7b out, and the hint one to name, whatever the command (it was told
    `localgen run -m qwen2.5-0.5b` for models rm, fit and models default too)."""
    result = run_localgen(*command, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1
    assert result.err == ("localgen: error: 'qwen2.5' comes in 4 sizes: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, "
                          "qwen2.5-7b (hint: name one of them (the smallest: qwen2.5-0.5b))\n"), result.err


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "--debug", "-z", "hi"], "`localgen run` has no --debug (the environment's LOCALGEN_DEBUG=1 does its "
     "work) nor -z: see `localgen run --help`"),  # was: `LOCALGEN_DEBUG=1 localgen run -z hi`, which fails on -z
    (["run", "--debug", "-s", "-z", "hi"], "`localgen run` has no --debug: the environment's LOCALGEN_DEBUG=1 does "
     "it, `LOCALGEN_DEBUG=1 localgen run -s -z hi`"),  # -z is -s's value
    (["--debug", "--help", "run", "hi"], "`localgen run` has no --debug: the environment's LOCALGEN_DEBUG=1 does it, "
     "`LOCALGEN_DEBUG=1 localgen run --help hi`"),
])
def test_an_environment_hint_offers_no_command_that_fails_on_another_option(args: list[str], hint: str) -> None:
    """Where the command lacks another option too, the hint names it rather than write a command that fails again."""
    result = run_localgen(*args)
    assert (result.returncode, result.err) == (2, f"localgen: error: no such option: --debug (hint: {hint})\n")
