"""Options where they do not fit: one whose value was left out, so that click would take the option after it for its
value (chat --model --quant Q8_0: a model named --quant; run -s --json hi: a system prompt "--json") or that is typed
last without one; the shell's list of files after one -f; and the options of run given to chat, or of chat to carry
over to run."""

from __future__ import annotations

import shlex
from typing import Any

import typer

from localgen.cli_args import apart_at_equals, arity, option_name, read_words, typed_command, words_given

_HELP = ("-h", "--help")
_NAMES = "`localgen models list --all` shows the names"
_MODEL = ("-m", "--model")
_FREE_TEXT = ("TEXT", "FILE", "SCHEMA", "GBNF")  # values that may well start with - (a system prompt, a stop string)
_CONVERSATION_MODE = ("--conversation NAME continues (or starts) conversation NAME: `localgen run --conversation NAME "
                      '"..."`; llama-cli\'s --conversation, its conversation mode, is `localgen chat`')


def value_as_option_error(app: typer.Typer, args: list[str]) -> tuple[str, str] | None:
    """For an option given, in place of its value, a word that reads as an option (_reads_as_option): the one-line
    message and the hint, or None. A value that is -- ends nothing, and a value given with = (--system=--json) is
    taken as it is."""
    names, command = typed_command(app, args)
    if not names:
        return None
    params = {name: param for param in command.params for name in (*param.opts, *param.secondary_opts)}
    takes_value = arity(command.params)
    words = args[len(names):]
    for at, (word, part) in enumerate(read_words(words, takes_value)):  # one part a word: words[at - 1] its option
        if part == "value" and _reads_as_option(word, params[words[at - 1]], names[0], takes_value):
            message, hint = _missing_value(names, command, words, at - 1)
            return as_typed(message), as_typed(hint)
    return None


def as_typed(text: str) -> str:
    """A usage error's message or hint with chat's --resume or --continue written as typed, alone, where a command
    it writes took the word main made of it (--resume=RESUME_LATEST: cli._resume_without_value)."""
    from localgen.cli_options import RESUME_LATEST

    for name in ("--resume", "--continue"):
        text = text.replace(shlex.quote(f"{name}={RESUME_LATEST}"), name).replace(f"{name}={RESUME_LATEST}", name)
    return text


def _reads_as_option(word: str, param: Any, command: str, takes_value: dict[str, bool]) -> bool:
    """Whether the word given for the value of option param reads as an option rather than as its value: one of the
    command's own, or --help; for a model's or a conversation's name, which no one starts with -, also another tool's
    option (-hf, --quant) or one of the command's with its value stuck on (-n5). Any other word is the value, as click
    takes it (--stop --END--, -s -sys, -m --)."""
    name = word.partition("=")[0]
    if name in takes_value or name in _HELP:
        return True
    return param.metavar in ("REF", "NAME") and (
        _other_tools_option(command, name) or (name[1:2] != "-" and takes_value.get(name[:2], False)))


def _other_tools_option(command: str, name: str) -> bool:
    """Whether an option's name is one that users of other tools give command, which localgen knows: llama-cli's -hf,
    a quant's --quant, an output file's -o, a context's --num-ctx."""
    from localgen.other_tools import GUESSED_OPTIONS, OPTIONS_OF_OTHER_TOOLS, OUTPUT_OPTIONS, QUANT_OPTIONS

    return name in OPTIONS_OF_OTHER_TOOLS.get(command, {}) or name in (*QUANT_OPTIONS, *OUTPUT_OPTIONS) \
        or name in GUESSED_OPTIONS


def _missing_value(names: list[str], clicked: Any, words: list[str], at: int) -> tuple[str, str]:
    """The message and the hint for option words[at] (of the command names, clicked its click command, words its
    words), given the option words[at + 1] in place of its value."""
    option, given = words[at], words[at + 1].partition("=")[0]
    param = _param(clicked, option)
    metavar = "|".join(_choices(param)) or param.metavar or param.name.upper()
    message = f"{option} needs a value ({metavar}), and the word after it is the option {given}"
    if given in _HELP:
        return message, f"see `{shlex.join(['localgen', *names, '--help'])}`"
    return message, _value_hint(names, clicked, words, at)


def _param(clicked: Any, option: str) -> Any:
    """The parameter of a click command that option names."""
    return next(param for param in clicked.params if option in (*param.opts, *param.secondary_opts))


def _choices(param: Any) -> tuple[str, ...]:
    """The values a click parameter takes where they are a fixed few (--think's), else none."""
    if param.name != "think":
        return ()
    from localgen.think_switch import THINK_VALUES

    return THINK_VALUES


def _value_hint(names: list[str], clicked: Any, words: list[str], at: int) -> str:
    """What to give option words[at] (of the command names, clicked its click command, words its words), which has no
    value: the command written with one (the first of a fixed few, all named)."""
    from localgen.cli_continue import continue_hint

    param = _param(clicked, words[at])
    option, metavar, command = words[at], param.metavar or param.name.upper(), ["localgen", *names]
    if choices := _choices(param):
        written = shlex.join([*command, *words[:at + 1], choices[0], *words[at + 1:]])
        return f"give {option} one of {', '.join(choices)}: `{written}`"
    if option in _MODEL:
        return _model_hint(command, clicked, words, at)
    if option == "--conversation":
        return _CONVERSATION_MODE
    if option == "-c" and names[0] in ("run", "chat"):  # llm's -c: continue
        return continue_hint(clicked, words, at)
    written = shlex.join([*command, *words[:at + 1], metavar, *words[at + 1:]])
    long = option if option.startswith("--") else next((name for name in param.opts if name.startswith("--")), None)
    value = shlex.quote(words[at + 1]) if at + 1 < len(words) else None
    literally = f"; for the value {value} itself, write {long}={value}" if value and long and metavar in _FREE_TEXT \
        else ""
    return f"give {option} its value: `{written}`{literally}"


def _model_hint(command: list[str], clicked: Any, words: list[str], at: int) -> str:
    """Name the model after -m (the command so written): with the quant in its reference where another tool's quant
    option followed (chat -m --quant Q8_0: -m NAME:Q8_0), or the repo llama-cli's -hf named (run -m -hf ORG/REPO: -m
    ORG/REPO); an option of the command's own (run's -q, --quiet) stays as typed, and one it lacks is written as
    localgen's (-sys TEXT as -s TEXT, --num-ctx N as --ctx-size N; --ctx-size INTEGER where no number followed), or
    else left to the hint it would be refused with (-x, -b hi), never kept in a command that would be refused for it
    (clicked: the command's click command)."""
    from localgen.other_tools import (
        GUESSED_OPTIONS,
        HUB_REPO_OPTIONS,
        OPTIONS_OF_OTHER_TOOLS,
        OUTPUT_OPTIONS,
        QUANT_OPTIONS,
    )
    from localgen.other_tools_command import run_in_localgen_s_words
    from localgen.other_tools_values import output_hint, quant_option

    name, takes_value = words[at], arity(clicked.params)
    rest, model = words[at + 1:], "NAME"
    option, equals, value = (rest or [""])[0].partition("=")
    if option in takes_value:  # the command's own
        pass
    elif option in QUANT_OPTIONS:
        _, quant, rest = quant_option(rest, 0)
        model = f"NAME:{quant}" if quant else model
    elif option in HUB_REPO_OPTIONS:
        named = value or (rest[1] if len(rest) > 1 and not rest[1].startswith("-") else "")
        model, rest = named or "ORG/REPO", rest[1 + (bool(named) and not value):]
        return f"{name} takes the repo: `{shlex.join([*command, *words[:at + 1], model, *rest])}`"
    elif option in OPTIONS_OF_OTHER_TOOLS.get(command[1], {}):
        given = [*words[:at + 1], model, *rest]
        written = run_in_localgen_s_words(given, takes_value) if command[1] == "run" else None
        if written is not None:  # run -m -sys "be brief" hi: -m NAME -s 'be brief' hi
            return f"name the model after {name}, with localgen's options: `{written}`; {_NAMES}"
        return f"name the model after {name} ({_NAMES}); {_refusal(command[1], given, takes_value)}"  # -x; -b hi
    elif GUESSED_OPTIONS.get(option, "").rpartition("/")[2] in takes_value:  # --num-ctx 4096: --ctx-size 4096
        meant = GUESSED_OPTIONS[option].rpartition("/")[2]
        number = value if equals else (rest[1] if len(rest) > 1 else "")
        if not _takes(_param(clicked, meant), number):  # --num-ctx hi: the prompt is no context size
            kept = rest[2:] if not equals and number[:1].isdigit() else rest[1:]  # 8k, 4,096: a number mistyped
            written = shlex.join([*command, *words[:at + 1], model, meant, "INTEGER", *kept])
            return f"name the model after {name}, and give {meant} its value: `{written}`; {_NAMES}"
        rest = [meant + equals + value, *rest[1:]]
    elif option in OUTPUT_OPTIONS:  # run -m --output a.txt hi: -m NAME hi > a.txt
        said = output_hint(command[1], [*words[:at + 1], model, *rest], at + 2)
        return f"name the model after {name} ({_NAMES}); {said or 'send the output to a file with > FILE'}"
    written = [*words[:at + 1], model, *rest]
    if not runs_as_written(clicked, written):  # run -m -n hi: -n's value left out too
        return f"name the model after {name} ({_NAMES})"
    return f"name the model after {name}: `{shlex.join([*command, *written])}`; {_NAMES}"


def _takes(param: Any, word: str) -> bool:
    """Whether a click parameter takes word for its value."""
    try:
        param.type.convert(word, param, None)
    except (typer.TyperException, ValueError):
        return False
    return True


def runs_as_written(clicked: Any, words: list[str]) -> bool:
    """Whether the words of a command line written for a hint (after the command's name, as main gives them) parse
    for clicked, its click command, and for run continue as they say (not --continue with --conversation, or with
    --raw); False with --help among them, which would print the help here."""
    from localgen.cli_args import not_values
    from localgen.errors import LocalgenError

    if any(word in _HELP for word in not_values(words, arity(clicked.params))):
        return False
    try:
        params = clicked.make_context(clicked.name, list(words)).params
        if clicked.name == "run":
            from localgen.run_conversation import check_continuation

            check_continuation(params["continue_latest"], params["conversation_name"], raw=params["raw"])
    except (typer.TyperException, LocalgenError):
        return False
    return True


def _refusal(command: str, words: list[str], takes_value: dict[str, bool]) -> str:
    """What command's words are refused with for another tool's option among them: its use there and localgen's way
    (-x is llm's option for the first code block: ...), or, for one named alike (-o FILE), the hint alone."""
    from localgen.errors import UsageError
    from localgen.other_tools import check_options

    try:
        check_options(command, words, takes_value)
    except UsageError as exc:
        return (exc.hint or "") if exc.message.startswith("no such option") else f"{exc.message}: {exc.hint}"
    raise AssertionError(f"no other tool's option in {words}")


def missing_value_hint(app: typer.Typer, exc: Exception, args: list[str]) -> str | None:
    """For an option typed last without its value (click's "requires an argument": run hi -m, run -m M.gguf
    --conversation, as llama-cli's conversation mode is typed): the command written with one; None for other
    errors."""
    typed = getattr(exc, "option_name", "")
    names, command = typed_command(app, args)
    params = {name: param for param in command.params for name in (*param.opts, *param.secondary_opts)}
    words = args[len(names):]
    if not names or "requires an argument" not in str(exc) or typed not in params or typed not in words \
            or params[typed].name in ("ctx_size", "ctx"):  # the context size's hint says what it takes (cli_usage)
        return None
    return _value_hint(names, command, words, len(words) - 1 - words[::-1].index(typed))


_OTHER_COMMAND = {"chat": ("run", "which answers one prompt"), "run": ("chat", "the conversation at a terminal")}


def other_command_option_hint(app: typer.Typer, command: str, typed: str) -> str | None:
    """For an option of run given to chat (--json, --grammar, --no-wrap), or of chat given to run (--no-markdown,
    --no-prefill-while-typing): whose it is; None for another."""
    from localgen.cli_args import option_arity

    other, what = _OTHER_COMMAND.get(command, ("", ""))
    if not other or typed.partition("=")[0] not in option_arity(app, other):
        return None
    return (f"{typed} is an option of `localgen {other}`, {what}; {command} has none like it "
            f"(`localgen {command} --help` lists its own)")


def run_options_of_chat(app: typer.Typer, args: list[str]) -> list[str]:
    """The options of chat's words args as run takes them, each with its value: chat's --resume NAME is run's
    --conversation NAME, --resume alone its --continue; what run has no like of (--no-markdown) is left out."""
    from localgen.cli_args import option_arity
    from localgen.cli_options import RESUME_LATEST

    takes_value, run_takes = option_arity(app, "chat"), option_arity(app, "run")
    options: list[str] = []
    kept: str | None = None  # what the last option's value goes to: "" its own, "--conversation", None nothing
    for word, part in read_words(args, takes_value):
        name, equals, value = word.partition("=")
        if part == "value" and kept is not None:
            options += [kept, word] if kept else [word]
        elif part == "option" and name in ("--resume", "--continue"):  # chat's --resume NAME, --resume alone
            kept = None if equals else "--conversation"
            options += ["--continue"] if value == RESUME_LATEST else ["--conversation", value] if equals else []
        elif part == "option":
            kept = "" if name in run_takes or word[:2] in run_takes else None  # -n5: -n with its value
            options += [word] if kept is not None else []
    return options


def files_after_file_hint(app: typer.Typer, args: list[str], text: str) -> str | None:
    """For `run -f *.md "summarize"` (or chat's), the shell's list of files after one -f, which takes one: each file
    with its own -f, the command so written; None for other errors (text: click's, in lower case)."""
    from localgen.cli_args import option_arity
    from localgen.typed_paths import is_existing_file

    if not args or args[0] not in ("run", "chat") or "unexpected extra argument" not in text:
        return None
    options: list[str] = []
    prompt: list[str] = []
    files = 0  # the files given after a -f's one
    after_file = False
    takes_value = option_arity(app, args[0])
    for word, part in read_words(args[1:], takes_value):
        if part == "word" and after_file and is_existing_file(word):
            options += ["-f", word]
            files += 1
            continue
        after_file = (part == "value" and options[-1:] in (["-f"], ["--file"])) or word.startswith("--file=") or (
            part == "option" and word.startswith("-f") and len(word) > 2)
        if part in ("option", "value"):
            options.append(word)
        elif part != "end":
            prompt.append(word)
    if not files:
        return None
    said = " ".join(prompt)
    ends = ["--"] if said.startswith("-") else []  # a prompt led by - goes after --
    written = shlex.join(["localgen", args[0], *apart_at_equals(options, takes_value), *ends, *[said][:len(said)]])
    return f"each file takes its own -f: `{written}`"


_WHOLE_EXAMPLES = {  # a typical value of each whole-number option (beside the chat settings'), by parameter name
    "batch_size": "512", "ubatch_size": "512", "gpu_layers": "-1", "ctx_size": "4096", "ctx": "4096",
    "n_prompt": "512", "n_gen": "128", "reps": "5", "limit": "10"}  # --threads: the physical cores


def number_hint(app: typer.Typer, exc: Exception, args: list[str]) -> str | None:
    """For a number's option given text it cannot read (--temp warm; for a whole number, --top-k 1.5, -n five): that
    it takes a number (a whole one), and the command written with one (the number the text is where the option's
    range check takes it, 2.0 or 1e3 for a whole number, else a typical value), or that value alone where the
    command would be refused for something else (run's prompt "..." where none was typed); None for other errors."""
    from localgen.cli_args import option_typed
    from localgen.cli_options import NumberSlip
    from localgen.params import SETTING_EXAMPLES

    param = getattr(exc, "param", None)
    names, command = typed_command(app, args)
    name = getattr(param, "name", "")
    example = {**SETTING_EXAMPLES, **_WHOLE_EXAMPLES}.get(name) or (_cores() if name in _THREADS else None)
    if not isinstance(exc, NumberSlip) or param is None or not names or example is None:
        return None
    words, takes_value = args[len(names):], arity(command.params)
    option = option_typed(words, (*param.opts, *param.secondary_opts), takes_value)
    read = _whole_value(exc.text) if exc.whole else _real_value(exc.text)
    value = read if read is not None and _in_range(name, int(read) if exc.whole else float(read)) else example
    written = _with_value(words, option, value, takes_value)
    takes = f"{option} takes {'a whole number' if exc.whole else 'a number'}"
    if written is None or not runs_as_written(command, written):
        return f"{takes}, e.g. {option} {value}"
    prompt = ' "..."' if names == ["run"] and not words_given(written, takes_value) else ""  # as continue_hint
    return f"{takes}: `{shlex.join(['localgen', *names, *written])}{prompt}`"


_THREADS = ("threads", "threads_batch")


def _cores() -> str:
    """The physical core count, the typical --threads (and its default)."""
    from localgen.hardware import physical_cores

    return str(physical_cores())


def _in_range(name: str, value: float) -> bool:
    """Whether the option of parameter name takes value, by its own range check (-1 for --seed, not for --top-k;
    0.7 for --temp, not 1.5 for --top-p)."""
    from collections.abc import Callable

    from localgen.bench import BenchConfig
    from localgen.errors import UsageError
    from localgen.params import MIN_CONTEXT, LoadOptions, check_context_bounds, check_gpu_layers, check_setting

    if name == "limit":  # conversations -n: a count of at least 1 (cli_conversations.conversations)
        return value >= 1
    checks: dict[str, Callable[[], object]] = {
        **dict.fromkeys(_THREADS, lambda: LoadOptions(MIN_CONTEXT, value, value)),
        "batch_size": lambda: LoadOptions(MIN_CONTEXT, 1, 1, n_batch=value),
        "ubatch_size": lambda: LoadOptions(MIN_CONTEXT, 1, 1, n_ubatch=value),
        "gpu_layers": lambda: check_gpu_layers(value),
        **dict.fromkeys(("ctx_size", "ctx"), lambda: check_context_bounds(value)),
        **{key: lambda key=key: BenchConfig(**{key: value}) for key in ("n_prompt", "n_gen", "reps")},
    }
    try:
        checks.get(name, lambda: check_setting(name, value))()  # the chat settings': --top-k, -n, --seed...
    except UsageError:
        return False
    return True


def _whole_value(text: str) -> str | None:
    """The whole number a decimal is (2.0: 2, 1e3: 1000), or None (1.5, five, and 1e20, beyond every option's range)."""
    try:
        number = float(text)
    except ValueError:
        return None
    return str(int(number)) if number.is_integer() and abs(number) < 2**31 else None


def _real_value(text: str) -> str | None:
    """The number text is in digits of another script (０.７: 0.7), or None (warm, 1.5.2, and inf or nan)."""
    import math

    try:
        number = float(text)
    except ValueError:
        return None
    return repr(number) if math.isfinite(number) else None


def _with_value(words: list[str], option: str, value: str, takes_value: dict[str, bool]) -> list[str] | None:
    """A command's words with the value of the last option typed as option (--top-k 1.5, --top-k=1.5, -n1.5)
    replaced by value, the two written apart; None where option was not typed."""
    parts = list(read_words(words, takes_value))
    named = [option_name(word, takes_value) for word, _ in parts]  # -n1.5 is -n, -ngl is itself
    typed = [at for at, (_, part) in enumerate(parts) if part == "option" and named[at] == option]
    if not typed:
        return None
    at = typed[-1]
    stuck = parts[at][0] != option  # --top-k=1.5, -n1.5: the value in the option's word
    if not stuck and (at + 1 == len(parts) or parts[at + 1][1] != "value"):
        return None
    return [*words[:at], option, value, *words[at + 1 + (not stuck):]]
