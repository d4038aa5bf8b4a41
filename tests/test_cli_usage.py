"""The hints of command-line usage errors: a command they suggest runs as meant (its options kept, the prompt whole),
and localgen's own way for a command typed is not contradicted by click's closest name."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from localgen.cli import _resume_without_value, app
from localgen.cli_args import apart_at_equals, click_command
from localgen.cli_exit import run_app
from localgen.cli_options import RESUME_LATEST
from localgen.other_tools import GROUP_COMMAND_HABITS, OTHER_TOOLS_COMMANDS, OTHER_TOOLS_WORDS, SUBCOMMAND_HABITS
from tests.conftest import REPO_ROOT, run_localgen, run_localgen_process
from tests.usage_errors import parsed_command_line as _parsed
from tests.usage_errors import usage_error as _usage


def test_a_short_option_s_value_after_equals_is_set_apart_and_every_other_word_kept_as_given() -> None:
    """The one place a hint writes -X=VALUE as -X VALUE: only where -X takes a value, and never in a value."""
    takes_value = {"-n": True, "-s": True, "-q": False, "--temp": True}
    words = ["-n=5", "-s", "a=b", "-q=x", "--temp=0", "-s=-x=y", "-s", "-n=3", "w=z", "--", "-n=3"]
    assert apart_at_equals(words, takes_value) == [
        "-n", "5", "-s", "a=b", "-q=x", "--temp=0", "-s", "-x=y", "-s", "-n=3", "w=z", "--", "-n=3"]


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["run", "-f", "-", "summarize", "this"], "quote the prompt: `localgen run -f - 'summarize this'`",
     {"prompt": "summarize this", "file": ("-",)}),  # was: stdin comes before the prompt: `localgen run -f - this`
    (["run", "-", "explain", "--temperature", "0"],
     "stdin comes before the prompt with -f -: `localgen run -f - --temperature 0 explain`",
     {"prompt": "explain", "file": ("-",), "temperature": 0.0}),  # was: `localgen run -f - 0`
    (["run", "-", "x", "-n", "8"], "stdin comes before the prompt with -f -: `localgen run -f - -n 8 x`",
     {"prompt": "x", "file": ("-",), "max_tokens": 8}),  # was: `localgen run -f - 8`
    (["run", "-s", "-", "hi", "there"], "quote the prompt: `localgen run -s - 'hi there'`",
     {"prompt": "hi there", "system": "-", "file": ()}),  # was: `localgen run -f - there`
    (["run", "-n", "3", "-", "--", "-v", "means"],
     "stdin comes before the prompt with -f -: `localgen run -f - -n 3 -- '-v means'`",
     {"prompt": "-v means", "file": ("-",), "max_tokens": 3}),
    (["run", "--temperature", "0", "smollm2-135m", "hi"],
     "the model goes after -m: `localgen run -m smollm2-135m --temperature 0 hi`",
     {"prompt": "hi", "model": "smollm2-135m", "temperature": 0.0}),  # was: quote the prompt
    (["run", "--temperature=0", "--system", "be brief", "smollm2-135m", "Say", "hi."],
     "the model goes after -m: `localgen run -m smollm2-135m --temperature=0 --system 'be brief' 'Say hi.'`",
     {"prompt": "Say hi.", "model": "smollm2-135m", "system": "be brief", "temperature": 0.0}),
    (["run", "-n", "5", "./link.gguf", "hi"], "the model goes after -m: `localgen run -m ./link.gguf -n 5 hi`",
     {"prompt": "hi", "model": "./link.gguf", "max_tokens": 5}),
    (["run", "-m", "smollm2-135m", "smollm2-135m", "hi"],  # -m given already: the words are the prompt's
     "quote the prompt: `localgen run -m smollm2-135m 'smollm2-135m hi'`",
     {"prompt": "smollm2-135m hi", "model": "smollm2-135m"}),
    (["run", "summarize this", "smollm2-135m"], "the model goes after -m: `localgen run -m smollm2-135m 'summarize "
     "this'`", {"prompt": "summarize this", "model": "smollm2-135m"}),  # Ollama's order turned: was quote the prompt
    (["run", "-n", "5", "hi", "./link.gguf"], "the model goes after -m: `localgen run -m ./link.gguf -n 5 hi`",
     {"prompt": "hi", "model": "./link.gguf", "max_tokens": 5}),
    (["run", "-f=a.md", "summarize", "this"], "quote the prompt: `localgen run -f a.md 'summarize this'`",
     {"prompt": "summarize this", "file": ("a.md",)}),  # was: run -f=a.md, read as the file =a.md
    (["run", "-s", "ab=c", "summarize", "this"], "quote the prompt: `localgen run -s ab=c 'summarize this'`",
     {"prompt": "summarize this", "system": "ab=c"}),  # was: -s ab c, the system prompt ab and c a prompt word
    (["run", "-s", "-x=y", "summarize", "this"], "quote the prompt: `localgen run -s -x=y 'summarize this'`",
     {"prompt": "summarize this", "system": "-x=y"}),  # was: -s -x y
    (["run", "compare", "and/or"], "quote the prompt: `localgen run 'compare and/or'`",  # a word, not ORG/REPO
     {"prompt": "compare and/or"}),
    (["chat", "-n", "5", "smollm2-135m"], "the model goes after -m: `localgen chat -m smollm2-135m -n 5`",
     {"model": "smollm2-135m", "max_tokens": 5}),  # was: chat takes no prompt; `localgen run smollm2-135m`
])
def test_a_suggested_command_keeps_every_option_with_its_value_and_runs_with_the_prompt_meant(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys)[1] == hint
    params = _parsed(hint.split("`")[1])
    assert {key: params[key] for key in meant} == meant, params


@pytest.mark.parametrize(("args", "named"), [
    (["run", "smollm2-135m", "hi"], "smollm2-135m"), (["run", "-n", "5", "./link.gguf", "hi", "there"], "./link.gguf"),
    (["run", "smollm2-135m", "--", "hi"], "smollm2-135m"), (["run", "hi", "smollm2-135m"], None),  # click names it
    (["run", "-m", "smollm2-135m", "smollm2-135m", "hi"], None),  # -m given: the words are the prompt's
    (["run", "--", "smollm2-135m", "hi"], None), (["run", "TCP/IP", "explained"], None),  # -- sends words as typed
    (["run", "input/output", "is", "what"], None), (["run", "org/Some-GGUF", "hi"], None),  # no model known so
    (["run", "./absent.gguf", "hi"], None)])
def test_a_model_where_the_prompt_goes_is_what_the_error_names(args: list[str], named: str | None, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`run smollm2-135m hi` called hi the extra argument, where the model was what was misplaced (the hint, which
    puts it after -m, was right); a word is called a model only where the registry knows it or the .gguf file is
    there, and never after --."""
    (tmp_path / "link.gguf").write_bytes(b"GGUF")
    monkeypatch.chdir(tmp_path)
    message = _usage(args, capsys)[0]
    if named is None:
        assert message.startswith("unexpected extra argument"), message
    else:
        assert message == f"'{named}' is the name of a model, not a prompt", message


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "--", "smollm2-135m", "hi"], "quote the prompt: `localgen run -- 'smollm2-135m hi'`"),
    (["run", "TCP/IP", "explained"], "quote the prompt: `localgen run 'TCP/IP explained'`"),
    (["run", "hi", "--", "smollm2-135m"], "quote the prompt: `localgen run 'hi smollm2-135m'`")])
def test_words_after_double_dash_or_a_slash_in_a_word_are_the_prompt_s_in_the_hint(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`run -- smollm2-135m hi` sends the words as typed, and TCP/IP is no model: the hint quotes the prompt, where it
    put the word after -m."""
    assert _usage(args, capsys)[1] == hint


@pytest.mark.parametrize(("args", "hint"), [
    (["models", "--al"], "did you mean --all? see `localgen models list --help`"),
    (["cache", "--jsn"], "did you mean --json? see `localgen cache list --help`"),
    (["conversations", "--limt"], "did you mean --limit? see `localgen conversations list --help`"),
    (["models", "--bogus"], "see `localgen models --help`")])
def test_a_listing_option_misspelt_after_its_group_points_to_the_help_that_lists_it(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`models --al` was sent to `localgen models --help`, which lists no --all: the group alone takes list's options,
    which list's help shows."""
    assert _usage(args, capsys)[1] == hint


def _subcommands(group: str) -> set[str]:
    """The names of a command group's commands."""
    return set(click_command(app).commands[group].commands)  # built once, where each call built it (0.8 s a worker)


def _commands_named(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The usage error of a command typed by a name localgen has no command for."""
    message, hint = _usage(args, capsys)
    assert message.startswith(f"no such command '{args[-1]}'"), message
    return message, hint


@pytest.mark.parametrize("word", sorted({*OTHER_TOOLS_COMMANDS, *OTHER_TOOLS_WORDS}))
def test_another_tool_s_command_gets_localgen_s_way_without_click_s_closest_name(
        word: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`localgen create` said: Did you mean 'chat'? (hint: models are entries of models.toml ...)."""
    message, hint = _commands_named([word], capsys)
    assert message == f"no such command '{word}'" and hint and "--help" not in hint, (message, hint)


@pytest.mark.parametrize("args", [[group, word] for group in ("models", "conversations", "cache")
                                  for word in SUBCOMMAND_HABITS if word not in _subcommands(group)]
                         + [list(key) for key in GROUP_COMMAND_HABITS])
def test_a_group_s_command_by_another_tool_s_name_has_no_closest_name_beside_localgen_s_way(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    message, hint = _commands_named(args, capsys)
    if hint.startswith("use `"):
        assert message == f"no such command '{args[-1]}'", (message, hint)


def test_a_misspelt_command_is_hinted_the_command_meant_and_help_names_the_commands_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`modles` was told click's words, No such command 'modles'. Did you mean 'models'? (hint: see `localgen
    --help`); `model` was not told what `ls` is."""
    assert _usage(["modles"], capsys) == ("no such command 'modles'", "use `localgen models list`")
    assert _usage(["model"], capsys) == ("no such command 'model'", "use `localgen models list`")  # as ls is told
    assert _usage(["ls"], capsys) == ("no such command 'ls'", "use `localgen models list`")
    assert _usage(["model", "rm", "x"], capsys)[1] == "use `localgen models rm x`"
    assert _usage(["models", "lst", "--all"], capsys) == ("no such command 'lst'", "use `localgen models list --all`")
    assert _usage(["help", "cht"], capsys) == ("no such command 'cht'", "use `localgen chat --help`")
    assert _usage(["help", "nope"], capsys) == ("no such command 'nope'", "see `localgen --help`")  # not: run nope
    assert _usage(["nope"], capsys)[1] == "see `localgen --help`; to ask the model: localgen run nope"
    assert _usage(["help", "ls"], capsys)[1] == "use `localgen models list`"
    assert _usage(["modles", "lst"], capsys)[1] == "see `localgen --help`"  # was: use `localgen models lst`
    assert _usage(["model", "model"], capsys)[1] == "see `localgen --help`"  # was: use `localgen models model`
    assert _usage(["modles", "--help"], capsys)[1] == "use `localgen models --help`"


@pytest.mark.parametrize(("model", "message"), [
    ("Error: bad.gguf", "Error: bad.gguf: not a GGUF file (text: 'hi')"),  # was: bad.gguf: not a GGUF file
    ("Option 'A.gguf", "Option 'A.gguf: not a GGUF file (text: 'hi')"),  # was: option 'A.gguf: ...
    ("Missing option/", "Missing option/ is not a file"),  # was: missing option/ is not a file
])
def test_localgen_s_own_error_naming_a_path_as_click_s_errors_begin_is_printed_as_written(
        tmp_path: Path, model: str, message: str) -> None:
    """Every error was reworded as click's are, so a path that began with click's words was changed."""
    (tmp_path / "Error: bad.gguf").write_text("hi")
    (tmp_path / "Option 'A.gguf").write_text("hi")
    (tmp_path / "Missing option").mkdir()
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1",
           "PYTHONPATH": str(REPO_ROOT)}
    refused = run_localgen_process([sys.executable, "-m", "localgen", "run", "-m", model, "hi"], cwd=tmp_path,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert refused.returncode == 1 and refused.stderr.startswith(f"localgen: error: {message} (hint: "), refused.stderr


def test_help_says_how_to_see_a_command_s_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_app(app, ["--help"]) == 0
    shown = capsys.readouterr().out
    assert "`localgen help COMMAND` (or `localgen COMMAND --help`) shows a command's options." in \
        " ".join(shown.split())
    assert ('  Examples:\n    localgen run "Why is the sky blue?"\n'
            '    cat notes.md | localgen run "Summarize this" > summary.txt\n') in shown, "each example as typed"


@pytest.mark.parametrize("command", ["run", "chat", "bench", "pull", "fit"])
def test_each_command_s_help_ends_with_examples_that_its_options_parse(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`localgen run --help` and the others end with examples, each a command line the CLI takes as written: every
    option named exists, takes the values given, and the arguments fit (a renamed option would fail here)."""
    assert run_app(app, [command, "--help"]) == 0
    shown = capsys.readouterr().out
    examples = shown.split("\n  Examples:\n", 1)[1].splitlines()
    assert examples and all(line.startswith("    ") for line in examples), shown
    group = typer.main.get_command(app)
    for line in examples:
        ours = next(part for part in line.split(" | ") if part.lstrip().startswith("localgen "))  # cat f | localgen
        words = _resume_without_value(shlex.split(ours.split(" > ")[0], comments=True)[1:])  # as main() takes them
        assert words[0] == command, line
        sub = group.commands[command]  # type: ignore[attr-defined]
        with sub.make_context(command, words[1:], parent=group.make_context("localgen", [command])) as ctx:
            assert ctx.params, line


def _command_paths(group: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The words naming each command and subcommand of the app (models rm: ("models", "rm"))."""
    commands = getattr(group, "commands", {})
    return [path] + [found for name, command in sorted(commands.items())
                     for found in _command_paths(command, (*path, name))]


def test_every_usage_line_writes_a_required_argument_as_click_does(capsys: pytest.CaptureFixture[str]) -> None:
    """pull REF..., not {REF...} as Typer writes it, which reads as a set of choices; optional ones in brackets."""
    usages = {}
    for path in _command_paths(typer.main.get_command(app)):
        assert run_app(app, [*path, "--help"]) == 0
        usages[path] = capsys.readouterr().out.splitlines()[0]
        assert "{" not in usages[path] and "}" not in usages[path], usages[path]
    assert usages[("pull",)] == "Usage: localgen pull [OPTIONS] REF..."
    assert usages[("models", "rm")] == "Usage: localgen models rm [OPTIONS] REF..."
    assert usages[("conversations", "rm")] == "Usage: localgen conversations rm [OPTIONS] NAME..."
    assert usages[("run",)] == "Usage: localgen run [OPTIONS] [PROMPT]"


def test_every_command_with_quiet_takes_q_for_it_and_none_takes_q_for_anything_else() -> None:
    """pull had --quiet alone (its -q refused as a quant option), where run's -q is --quiet."""
    group = typer.main.get_command(app)
    quiet = {}
    for path in _command_paths(group):
        command = group
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        for param in command.params:
            if "--quiet" in param.opts or "-q" in param.opts:
                quiet[path] = sorted(param.opts)
    assert quiet == {("pull",): ["--quiet", "-q"], ("run",): ["--quiet", "-q"]}, quiet


@pytest.mark.parametrize(("args", "typed"), [
    (("pull", "org/M-GGUF", "-qQ8_0"), "-qQ8_0"), (("pull", "org/M-GGUF", "-quant", "Q8_0"), "-quant"),
    (("run", "-qx", "hi"), "-qx"),
])
def test_an_unknown_letter_after_q_is_named_as_the_word_typed(args: tuple[str, ...], typed: str) -> None:
    """Where -q is --quiet, click reads -qQ8_0 as -q and an unknown -Q, which no one typed."""
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 2 and result.err.startswith(f"localgen: error: no such option: {typed} (hint: "), \
        result.err


@pytest.mark.parametrize("command", ["run", "chat"])
def test_help_says_the_context_size_s_default(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """-c's help ("Context size in tokens.") said nothing of the size a run or chat gets without it."""
    assert run_app(app, [command, "--help"]) == 0
    assert "Context size in tokens (default: a resumed conversation's, else models.toml's, else the model's up to " \
        "8,192; more for a long input)." in \
        " ".join(capsys.readouterr().out.split())


def test_a_word_after_the_double_dash_is_told_from_an_option_s_value() -> None:
    """`run -- NAME` sends a model's name as the prompt: the -- is read in the command line run_app was given (not
    sys.argv, which an embedding main(argv) leaves alone), and a -- given as an option's value ends nothing."""
    from localgen.cli_args import given_after_double_dash, remember_command_line

    remember_command_line(["run", "-n", "2", "--", "smollm2-135m"])
    assert given_after_double_dash(app, "smollm2-135m")
    remember_command_line(["run", "--stop", "--", "smollm2-135m"])
    assert not given_after_double_dash(app, "smollm2-135m"), "--stop's value"
    remember_command_line(["run", "smollm2-135m"])
    assert not given_after_double_dash(app, "smollm2-135m")


@pytest.mark.parametrize(("words", "unknown", "named"), [(["run", "extra"], "extra", "run"),
                                                         (["models", "list", "--json"], "--json", "models list")])
def test_help_with_a_word_after_a_command_without_subcommands_names_that_word(words: list[str], unknown: str,
                                                                               named: str) -> None:
    """`localgen help run extra` showed run's help, as if extra were not there (click reads run extra --help)."""
    result = run_localgen("help", *words)
    assert result.returncode == 2 and result.out == "", result.out
    assert result.err == f"localgen: error: no such command '{unknown}': localgen {named} has no subcommands " \
                         f"(hint: see `localgen help {named}`)\n", result.err
    assert run_localgen("help", *words[:-1], "--help").returncode == 0, "its own --help is its help"


@pytest.mark.parametrize(("args", "error", "code"), [
    (("--bogus-option",), "no such option: --bogus-option", 2),
    (("--temperature", "-5"), "temperature -5 is out of range", 2),
    (("--threads", "0"), "--threads", 2),
    (("-f", "no-such-file.txt"), "no such file: no-such-file.txt", 2),
    (("--resume", "no-such-chat"), "no saved conversation named 'no-such-chat'", 1),
])
def test_chat_without_a_terminal_says_what_is_wrong_with_its_arguments_first(args: tuple[str, ...], error: str,
                                                                             code: int, tmp_path: Path) -> None:
    """As run (and every other command) does: the command line's own errors come before the terminal chat needs."""
    result = run_localgen("chat", *args, env={"LOCALGEN_HOME": str(tmp_path)})
    assert result.returncode == code and "needs a terminal" not in result.err, result.err
    assert result.err.startswith(f"localgen: error: {error}"), result.err
    assert "needs a terminal" in run_localgen("chat", env={"LOCALGEN_HOME": str(tmp_path)}).err


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "--temp", "0,7", "hi"], "the decimal point is '.': --temp 0.7"),
    (["run", "--top-p=0,95", "hi"], "the decimal point is '.': --top-p 0.95"),
    (["chat", "--repeat-penalty", "1,1"], "the decimal point is '.': --repeat-penalty 1.1"),
    (["run", "--min-p", ",05", "hi"], "the decimal point is '.': --min-p .05"),
    (["run", "-c", "4,096", "hi"], "write it without separators: -c 4096"),  # not -c's hint for a word
    (["run", "-n", "1,000", "hi"], "write it without separators: -n 1000"),
    (["run", "--ctx=1,000", "-c", "2,000", "hi"], "write it without separators: -c 2000"),  # the last, refused
    (["conversations", "-n", "1,000"], "write it without separators: -n 1000"),
    (["run", "--temp", "0.7.1", "hi"], "--temp takes a number: `localgen run --temp 0.7 hi`"),  # a typical value
    (["run", "-n", "10,5", "hi"], "-n takes a whole number: `localgen run -n 512 hi`"),
    (["run", "-c", "4096,5", "hi"], "-c takes the context size, a number of tokens: -c 4096"),  # not --continue
    (["chat", "-c", "4096.5"], "-c takes the context size, a number of tokens: -c 4096"),
    (["run", "-c", "8k", "hi"], "-c takes the context size, a number of tokens: -c 8192"),
])
def test_a_number_with_a_decimal_or_thousands_comma_is_told_how_to_write_it(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    message, said = _usage(args, capsys)
    assert "is not a valid" in message and said == hint, (message, said)


def _number_options(*commands: str) -> list[tuple[str, str, str]]:
    """Each name of each whole-number and decimal option of these commands: (command, name, INTEGER or FLOAT)."""
    group = typer.main.get_command(app)
    return [(command, name, param.metavar) for command in commands
            for param in group.commands[command].params  # type: ignore[attr-defined]
            if getattr(param, "metavar", None) in ("INTEGER", "FLOAT") for name in param.opts]


@pytest.mark.parametrize(("command", "option", "kind"), _number_options("run", "chat", "bench"))
def test_every_number_option_s_comma_hint_names_the_option_as_typed(
        command: str, option: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """As the chat's /set names its setting (/set max_tokens 1000), where the hint gave the number alone (and bench
    took 1,000 for a llama-bench list of 1 and 000)."""
    typed, meant = ("1,000", "write it without separators: {} 1000") if kind == "INTEGER" else \
        ("0,5", "the decimal point is '.': {} 0.5")
    message, hint = _usage([command, option, typed, *(["hi"] if command == "run" else [])], capsys)
    assert "is not a valid" in message and hint == meant.format(option), (message, hint)


_TO_STDOUT = "localgen writes the answer to stdout: send it to a file with >, "
_CHAT_SAVES = ("chat saves the conversation: `localgen conversations show NAME` prints it; `localgen run \"...\" > "
               "FILE` writes one answer to a file")


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["run", "--context", "4096", "hi"], "no such option: --context", "did you mean -c/--ctx-size? see `localgen run "
                                                                      "--help`"),
    (["chat", "--num-ctx", "4096"], "no such option: --num-ctx", "did you mean -c/--ctx-size? see `localgen chat "
                                                                 "--help`"),
    (["run", "--output", "answer.txt", "Say hi."], "no such option: --output",
     _TO_STDOUT + "`localgen run 'Say hi.' > answer.txt`"),
    (["run", "-n", "5", "--output-file=out/a.md", "hi"], "no such option: --output-file",
     _TO_STDOUT + "`localgen run -n 5 hi > out/a.md`"),
    (["run", "-o", "answer.txt", "hi"], "no such option: -o", _TO_STDOUT + "`localgen run hi > answer.txt`"),
    (["run", "-o", "answer.txt"], "no such option: -o", _TO_STDOUT + '`localgen run "..." > answer.txt`'),
    (["run", "hi", "--output"], "no such option: --output", _TO_STDOUT + '`localgen run "..." > FILE`'),
    (["run", "-o=answer.txt", "hi"], "no such option: -o", _TO_STDOUT + "`localgen run hi > answer.txt`"),
    (["run", "-oanswer.txt", "hi"], "no such option: -oanswer.txt", _TO_STDOUT + "`localgen run hi > answer.txt`"),
    (["run", "-output", "answer.txt", "hi"], "no such option: -output", _TO_STDOUT + "`localgen run hi > answer.txt`"),
    (["run", "--output", "json", "hi"], "no such option: --output",
     "localgen run --json writes the answer as a JSON record: `localgen run hi --json`"),
    (["chat", "--output", "chat.txt"], "no such option: --output", _CHAT_SAVES),
    (["chat", "-o", "chat.txt"], "no such option: -o", _CHAT_SAVES),
    (["run", "-o", "top_p", "0.9", "hi"], "-o is llm's option for model settings",
     "localgen's is --top-p 0.9: `localgen run --top-p 0.9 hi`"),  # llm's -o KEY VALUE
])
def test_a_context_or_output_option_guessed_gets_localgen_s_way(args: list[str], message: str, hint: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys) == (message, hint)
    if hint.endswith("`") and " > " in hint:  # the command suggested runs as meant
        suggested, _, file = hint.split("`")[1].partition(" > ")
        assert file and file not in _parsed(suggested).values()


_NAMES = "`localgen models list --all` shows the names"


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["chat", "--model", "--quant", "Q8_0"], "--model needs a value (REF), and the word after it is the option --quant",
     f"name the model after --model: `localgen chat --model NAME:Q8_0`; {_NAMES}"),  # was: a model named --quant
    (["chat", "-m", "--quant=Q8_0"], "-m needs a value (REF), and the word after it is the option --quant",
     f"name the model after -m: `localgen chat -m NAME:Q8_0`; {_NAMES}"),
    (["run", "-m", "-n", "5", "hi"], "-m needs a value (REF), and the word after it is the option -n",
     f"name the model after -m: `localgen run -m NAME -n 5 hi`; {_NAMES}"),  # was: quote the prompt: -m -n '5 hi'
    (["run", "-m", "-hf", "org/M-GGUF", "hi"], "-m needs a value (REF), and the word after it is the option -hf",
     "-m takes the repo: `localgen run -m org/M-GGUF hi`"),
    (["run", "-f", "--json", "hi"], "-f needs a value (FILE), and the word after it is the option --json",
     "give -f its value: `localgen run -f FILE --json hi`; for the value --json itself, write --file=--json"),
    (["run", "--system", "--json", "hi"], "--system needs a value (TEXT), and the word after it is the option --json",
     "give --system its value: `localgen run --system TEXT --json hi`; for the value --json itself, write "
     "--system=--json"),  # was: run with the system prompt "--json"
    (["run", "-c", "x", "--system", "--ctx", "hi"], "--system needs a value (TEXT), and the word after it is the "
     "option --ctx", "give --system its value: `localgen run -c x --system TEXT --ctx hi`; for the value --ctx "
     "itself, write --system=--ctx"),
    (["run", "-n", "-c", "5", "hi"], "-n needs a value (INTEGER), and the word after it is the option -c",
     "give -n its value: `localgen run -n INTEGER -c 5 hi`"),  # was: --ctx takes the context size
    (["run", "-c", "-n", "4", "hi"], "-c needs a value (INTEGER), and the word after it is the option -n",
     "-c is --ctx-size; to continue the latest conversation use --continue: `localgen run --continue -n 4 hi`"),
    (["chat", "-c", "--stats"], "-c needs a value (INTEGER), and the word after it is the option --stats",
     "-c is --ctx-size; to continue the latest conversation use --continue: `localgen chat --continue --stats`"),
    (["fit", "-c", "--json"], "-c needs a value (INTEGER), and the word after it is the option --json",
     "give -c its value: `localgen fit -c INTEGER --json`"),
    (["bench", "-m", "-n", "5"], "-m needs a value (REF), and the word after it is the option -n",
     f"name the model after -m: `localgen bench -m NAME -n 5`; {_NAMES}"),  # was: unexpected extra argument (5)
    (["bench", "-p", "--json"], "-p needs a value (INTEGER), and the word after it is the option --json",
     "give -p its value: `localgen bench -p INTEGER --json`"),
    (["fit", "-m", "--json"], "-m needs a value (REF), and the word after it is the option --json",
     f"name the model after -m: `localgen fit -m NAME --json`; {_NAMES}"),
    (["run", "-m", "--help"], "-m needs a value (REF), and the word after it is the option --help",
     "see `localgen run --help`"),
    (["run", "-m", "-q", "what is Q4_K_M.gguf"], "-m needs a value (REF), and the word after it is the option -q",
     f"name the model after -m: `localgen run -m NAME -q 'what is Q4_K_M.gguf'`; {_NAMES}"),  # run's -q: --quiet
    (["run", "-m", "-q", "-n", "5", "hi"], "-m needs a value (REF), and the word after it is the option -q",
     f"name the model after -m: `localgen run -m NAME -q -n 5 hi`; {_NAMES}"),  # was: -m NAME -n 5 hi, -q gone
    (["run", "-m", "-hf", "-n", "5", "hi"], "-m needs a value (REF), and the word after it is the option -hf",
     "-m takes the repo: `localgen run -m ORG/REPO -n 5 hi`"),  # was: -m NAME -hf -n 5 hi, which refuses -hf
])
def test_an_option_given_in_place_of_a_value_is_refused_with_the_value_asked_for(
        args: list[str], message: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """click took the option after one left without its value for that value: a model named --quant, a system
    prompt "--json" that then ran."""
    assert _usage(args, capsys) == (message, hint)


@pytest.mark.parametrize("args", [
    ["run", "-s", "-sys", "hi"], ["run", "--stop", "--", "hi"], ["run", "-f", "-", "hi"], ["run", "-n", "-1", "hi"],
    ["run", "-ngl", "-1", "hi"], ["run", "--system=--json", "hi"], ["run", "--", "-m", "--json"],
    ["run", "-s", "- a list", "hi"], ["chat", "--stop", "---"], ["run", "--temp", "-0", "hi"],
    ["run", "--stop", "--END--", "-n", "3", "hi"], ["chat", "-s", "--terse"], ["run", "-m", "--", "hi"],
    ["run", "--conversation", "--"], ["run", "-m", "-zz", "hi"],  # no option of run's, or of another tool's, as click
])  # reads them: the value (was: the word after it is the option --END--, and a hint whose command failed)
def test_a_value_that_starts_with_a_dash_but_names_no_option_is_the_value(args: list[str]) -> None:
    from localgen.cli_option_values import value_as_option_error

    assert value_as_option_error(app, args) is None


def test_a_stop_string_that_looks_like_a_long_option_stops_the_answer() -> None:
    result = run_localgen("run", "--stop", "--END--", "-n", "1", "hi")
    assert result.returncode == 0 and result.out and "--END--" not in result.err, result.err


def test_a_system_prompt_left_out_before_an_option_runs_nothing() -> None:
    result = run_localgen("run", "--system", "--json", "-n", "2", "hi")
    assert result.returncode == 2 and result.out == ""
    assert result.err.startswith("localgen: error: --system needs a value (TEXT), and the word after it is the "
                                 "option --json (hint: ")


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["why", "is", "the", "sky", "blue"], "see `localgen --help`; to ask the model: localgen run 'why is the sky "
     "blue'", {"prompt": "why is the sky blue"}),  # was: to ask the model: localgen run why
    (["summarize", "-n", "5", "this"], "see `localgen --help`; to ask the model: localgen run -n 5 'summarize this'",
     {"prompt": "summarize this", "max_tokens": 5}),
    (["prompt", "-m", "smollm2-135m", "hi there"], "to ask the model, use `localgen run -m smollm2-135m 'hi there'`",
     {"prompt": "hi there", "model": "smollm2-135m"}),  # llm prompt; was: localgen run prompt
    (["ask", "-x", "hi"], 'to ask the model, use `localgen run "..."`', {"prompt": "..."}),  # llm's extract: none
    (["prompt", "--cid", "abc", "hi there"], "to ask the model, use `localgen run --conversation abc 'hi there'`",
     {"prompt": "hi there", "conversation_name": "abc"}),  # was: localgen run 'abc hi there'
    (["prompt", "-o", "temperature", "0.2", "hi"], 'to ask the model, use `localgen run "..."`', {"prompt": "..."}),
    (["prompt", "-t", "tmpl", "hi"], 'to ask the model, use `localgen run "..."`', {"prompt": "..."}),  # not threads
    (["prompt"], 'to ask the model, use `localgen run "..."`', {"prompt": "..."}),
    (["prompt", "-b", "hi"], 'to ask the model, use `localgen run "..."`', {"prompt": "..."}),  # was: `localgen
    # run --batch-size hi`, refused: hi is no number
    (["hello"], "see `localgen --help`; to ask the model: localgen run hello", {"prompt": "hello"}),
])
def test_a_prompt_typed_where_the_command_goes_is_suggested_whole_to_run(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys) == (f"no such command '{args[0]}'", hint)
    suggested = hint.partition("use `")[2].rstrip("`") or hint.rpartition(": ")[2]
    params = _parsed(suggested)
    assert {key: params[key] for key in meant} == meant, params


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "hi", "-m"], f"name the model after -m: `localgen run hi -m NAME`; {_NAMES}"),  # was: see --help
    (["chat", "-m"], f"name the model after -m: `localgen chat -m NAME`; {_NAMES}"),
    (["run", "hi", "-f"], "give -f its value: `localgen run hi -f FILE`"),
    (["run", "-n", "5", "--stop"], "give --stop its value: `localgen run -n 5 --stop TEXT`"),
    (["bench", "-p"], "give -p its value: `localgen bench -p INTEGER`"),
    (["fit", "-c"], "-c takes the context size, a number of tokens: -c 4096"),  # its own hint, as before
])
def test_an_option_typed_last_without_its_value_gets_the_command_written_with_one(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys) == (f"option '{args[-1]}' requires an argument", hint)


@pytest.mark.parametrize("option", ["--json", "--grammar=root.gbnf", "--no-cache", "--quiet", "--print-prompt",
                                    "-q"])  # -q naming no quant is run's --quiet (was: the quant goes in -m's ...)
def test_an_option_of_run_given_to_chat_is_said_to_be_run_s(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """chat --json got only `see localgen chat --help`, as an option no command has does."""
    name = option.partition("=")[0]
    assert _usage(["chat", option], capsys) == (f"no such option: {name}", f"{name} is an option of `localgen run`, "
                                                "which answers one prompt; chat has none like it (`localgen chat "
                                                "--help` lists its own)")
    assert _usage(["chat", "--bogus"], capsys) == ("no such option: --bogus", "see `localgen chat --help`")


@pytest.mark.parametrize("option", ["--no-markdown", "--no-prefill-while-typing"])
def test_an_option_of_chat_given_to_run_is_said_to_be_chat_s(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """run --no-markdown got only `see localgen run --help`, as an option no command has does."""
    assert _usage(["run", option, "hi"], capsys) == (f"no such option: {option}", f"{option} is an option of "
                                                     "`localgen chat`, the conversation at a terminal; run has none "
                                                     "like it (`localgen run --help` lists its own)")


@pytest.mark.parametrize(("args", "ask", "meant"), [
    (["chat", "-m", "smollm2-135m", "-f", "notes.md", "summarize"], "localgen run -m smollm2-135m -f notes.md "
     "'summarize'", {"model": "smollm2-135m", "file": ("notes.md",), "prompt": "summarize"}),  # was: run 'summarize'
    (["chat", "-s", "be brief", "--no-markdown", "-c", "512", "hi"], "localgen run -s 'be brief' -c 512 'hi'",
     {"system": "be brief", "ctx_size": 512, "prompt": "hi"}),  # chat's own --no-markdown left out
    (["chat", "--resume", "work", "-n5", "hi"], "localgen run --conversation work -n5 'hi'",
     {"conversation_name": "work", "max_tokens": 5, "prompt": "hi"}),
    (["chat", "--resume", "--temp", "0", "hi"], "localgen run --continue --temp 0 'hi'",
     {"continue_latest": True, "temperature": 0.0, "prompt": "hi"}),
])
def test_chat_given_a_prompt_points_at_run_with_its_options(args: list[str], ask: str, meant: dict[str, object],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys) == ("chat takes no prompt argument: type your messages at its >>> prompt",
                                    f"for one answer, use `{ask}`")
    params = _parsed(ask)
    assert {key: params[key] for key in meant} == meant, params


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "-f", "a.md", "b.md", "c.md", "summarize"], "`localgen run -f a.md -f b.md -f c.md summarize`"),
    (["run", "summarize", "-n", "5", "-f", "a.md", "b.md", "c.md"],
     "`localgen run -n 5 -f a.md -f b.md -f c.md summarize`"),
    (["chat", "-f", "a.md", "b.md"], "`localgen chat -f a.md -f b.md`"),  # was: chat takes no prompt argument
    (["run", "-f=a.md", "b.md", "c.md", "summarize"], "`localgen run -f a.md -f b.md -f c.md summarize`"),  # was:
    # -f=a.md kept, which click reads as the file =a.md
    (["run", "-s", "ab=c", "-f", "a.md", "b.md", "summarize"],
     "`localgen run -s ab=c -f a.md -f b.md summarize`"),  # was: -s ab c
])
def test_the_shell_s_list_of_files_after_one_f_is_given_an_f_each(
        args: list[str], hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`localgen run -f *.md "summarize"` was told to quote the prompt: `localgen run -f a.md 'b.md c.md summarize'`."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text(name)
    message, said = _usage(args, capsys)
    assert message.startswith("unexpected extra argument(s)") and said == f"each file takes its own -f: {hint}"
    assert _parsed(hint.strip("`"))["file"] == tuple(word.removeprefix("-f=") for word in args if word.endswith(".md"))


@pytest.mark.parametrize(("args", "prompt", "meant"), [
    (["run", "-c", "and then?"], "and then?", {}),  # llm's -c: continue the last conversation
    (["run", "-n", "5", "-c", "and then?", "--temp", "0"], "and then?", {"max_tokens": 5, "temperature": 0.0}),
    (["run", "-c", "more", "and then?"], "more and then?", {}),
    (["run", "why?", "-c"], "why?", {}),
])
def test_llm_s_c_for_continue_is_hinted_with_the_command_written_with_continue(
        args: list[str], prompt: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    """Where the hint said to use --continue and left the command to write, as other tools' habits do not."""
    _, hint = _usage(args, capsys)
    lead, _, command = hint.partition(": `")
    assert lead == "-c is --ctx-size; to continue the latest conversation use --continue" and command.endswith("`")
    params = _parsed(command[:-1])
    assert (params["continue_latest"], params["prompt"], params["ctx_size"]) == (True, prompt, None), params
    assert {key: params[key] for key in meant} == meant, params


_LEAD = "-c is --ctx-size; to continue the latest conversation use --continue"


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["chat", "--resume", "work", "-c"], "-c is --ctx-size; --resume work already continues conversation work: "
     "`localgen chat --resume work`", {"resume": "work"}),  # was: `localgen chat --resume work --continue`, the latest
    (["run", "--conversation", "foo", "-c", "hi"], "-c is --ctx-size; --conversation foo already continues "
     "conversation foo: `localgen run --conversation foo hi`",
     {"conversation_name": "foo", "continue_latest": False, "prompt": "hi"}),  # was: --continue added, refused
    (["run", "--continue", "-c", "hi"], "-c is --ctx-size; --continue already continues the latest conversation: "
     "`localgen run --continue hi`", {"continue_latest": True, "prompt": "hi"}),  # was: --continue --continue hi
    (["chat", "-c", "--continue"], "-c is --ctx-size; --continue already continues the latest conversation: "
     "`localgen chat --continue`", {"resume": RESUME_LATEST}),  # was: `localgen chat --continue '--continue=?'`
    (["chat", "-c", "--resume", "-n", "5"], "-c is --ctx-size; --resume already continues the latest conversation: "
     "`localgen chat --resume -n 5`", {"resume": RESUME_LATEST, "max_tokens": 5}),
])
def test_llm_s_c_beside_an_option_that_continues_is_hinted_with_that_option_alone(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    """--continue added beside chat's --resume NAME took the latest instead, and beside run's --conversation NAME was
    refused as contradicting it."""
    assert _usage(args, capsys)[1] == hint
    params = _parsed(hint.split("`")[1])
    assert {key: params[key] for key in meant} == meant and params["ctx_size"] is None, params


@pytest.mark.parametrize("args", [
    ["run", "-c", "--resume", "hi"], ["run", "-c", "--bogus", "hi"],  # was: `localgen run --continue --resume hi`
    ["chat", "-c", "-c"], ["run", "--raw", "-c", "hi"], ["run", "--help", "-c"],
])
def test_llm_s_c_gets_no_command_where_the_one_written_would_be_refused(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(args, capsys)[1] == _LEAD


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "-m", "-x", "hi"], f"name the model after -m ({_NAMES}); -x is llm's option for the first code block: "
     "localgen prints the whole answer: ask the model for the code alone, or cut it out of stdout"),  # was:
    # `localgen run -m NAME -x hi`, refused for -x
    (["run", "-m", "-sys", "be brief", "hi"],
     f"name the model after -m, with localgen's options: `localgen run -m NAME -s 'be brief' hi`; {_NAMES}"),
    (["run", "-m", "-o", "a.txt", "hi"], f"name the model after -m ({_NAMES}); localgen writes the answer to stdout: "
     "send it to a file with >, `localgen run -m NAME hi > a.txt`"),
    (["run", "-m", "--output", "a.txt", "hi"], f"name the model after -m ({_NAMES}); localgen writes the answer to "
     "stdout: send it to a file with >, `localgen run -m NAME hi > a.txt`"),
    (["run", "-m", "--num-ctx", "4096", "hi"], f"name the model after -m: `localgen run -m NAME --ctx-size 4096 hi`; "
     f"{_NAMES}"),
    (["run", "-m", "-b", "hi"], f"name the model after -m ({_NAMES}); -b is llama-cli's option for the batch size: "
     "localgen's is --batch-size N"),  # was: `localgen run -m NAME --batch-size hi`, refused: hi is no integer
    (["run", "-m", "-n", "hi"], f"name the model after -m ({_NAMES})"),  # was: `localgen run -m NAME -n hi`
    (["chat", "-m", "-u"], f"name the model after -m ({_NAMES}); -u is llm's option for token usage: localgen's is "
     "chat --stats, token counts and speeds after every answer (/stats in the chat)"),
    (["bench", "-m", "-fa", "1"], f"name the model after -m ({_NAMES}); -fa is llama-bench's option for flash "
     "attention: localgen's is --flash-attn auto|on|off"),
])
def test_a_model_left_out_before_another_tool_s_option_gets_no_command_refused_for_it(
        args: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each command the hint writes runs as written, the model named: no option of another tool's in it."""
    from localgen.other_tools import mentions_other_tools_options

    message, said = _usage(args, capsys)
    assert message.startswith(f"-m needs a value (REF), and the word after it is the option {args[2]}")
    assert said == hint
    for command in said.split("`")[1::2]:
        if command.startswith("localgen "):
            words = shlex.split(command.partition(" > ")[0].replace("NAME", "smollm2-135m"))
            assert not mentions_other_tools_options(words[1], words[2:]), command
            _parsed(shlex.join(words))


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["chat", "-n", "5", "smollm2-135m", "--resume"], "the model goes after -m: `localgen chat -m smollm2-135m -n 5 "
     "--resume`", {"model": "smollm2-135m", "max_tokens": 5}),  # was: `... -n 5 '--resume=?'`
    (["chat", "-m", "--continue"], f"name the model after -m: `localgen chat -m NAME --continue`; {_NAMES}", {}),
    (["chat", "--resume", "-n"], "give -n its value: `localgen chat --resume -n INTEGER`", {"max_tokens": 5}),
])
def test_a_hint_writes_chat_s_resume_alone_as_typed(args: list[str], hint: str, meant: dict[str, object],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """main reads chat's --resume (or --continue) alone as --resume=RESUME_LATEST, and hints wrote that word."""
    assert _usage(args, capsys)[1] == hint
    params = _parsed(hint.split("`")[1].replace("NAME", "smollm2-135m").replace("INTEGER", "5"))
    assert {key: params[key] for key in meant} == meant and params["resume"] == RESUME_LATEST, params


@pytest.mark.parametrize(("args", "hint", "meant"), [
    (["run", "-m", "--num-ctx", "hi"], "`localgen run -m NAME --ctx-size INTEGER hi`", {"prompt": "hi"}),  # was:
    # `localgen run -m NAME --ctx-size hi`, refused: hi is no integer
    (["run", "-m", "--num-ctx=abc", "-n", "5", "hi"], "`localgen run -m NAME --ctx-size INTEGER -n 5 hi`",
     {"prompt": "hi", "max_tokens": 5}),
    (["chat", "-m", "--context"], "`localgen chat -m NAME --ctx-size INTEGER`", {}),  # was: --ctx-size, no value
    (["fit", "-m", "--n-ctx", "8k"], "`localgen fit -m NAME --ctx-size INTEGER`", {}),  # 8k: the number meant
])
def test_a_context_option_guessed_without_its_number_is_written_with_one_before_the_prompt(
        args: list[str], hint: str, meant: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    """The word after another program's context option, no number, was written as --ctx-size's value."""
    message, said = _usage(args, capsys)
    assert message.startswith(f"-m needs a value (REF), and the word after it is the option {args[2][:9]}")
    assert said == f"name the model after -m, and give --ctx-size its value: {hint}; {_NAMES}"
    params = _parsed(hint.strip("`").replace("NAME", "smollm2-135m").replace("INTEGER", "4096"))
    assert {key: params[key] for key in meant} == meant and params.get("ctx_size", params.get("ctx")) == 4096, params
