"""What a command-line usage error says: one line, and a hint that fixes the command typed (another tool's habit,
a prompt split into words, an option in the wrong place, a close option name)."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable
from typing import Any

import typer

from localgen.cli_args import (
    all_options,
    apart_at_equals,
    arity,
    command_names,
    help_option_names,
    is_option,
    listing_options,
    not_values,
    option_arity,
    option_name,
    option_typed,
    options_given,
    read_words,
    typed_command,
    words_given,
)
from localgen.cli_click_words import CLICK_GUESS
from localgen.cli_continue import CONTINUE_LATEST, continue_hint
from localgen.cli_extra_words import (
    chat_prompt_error,
    extra_argument_hint,
    model_first_message,
    refuse_model_given,
    suggested,
)
from localgen.cli_habits import ENVIRONMENT_INSTEAD, environment_hint, habit_hint
from localgen.cli_option_values import (
    as_typed,
    files_after_file_hint,
    missing_value_hint,
    number_hint,
    other_command_option_hint,
)
from localgen.cli_options import NumberSlip, typed_as_number
from localgen.errors import LocalgenError
from localgen.other_tools import (
    GROUP_COMMAND_HABITS,
    GUESSED_OPTIONS,
    RUN_WORDS,
    SUBCOMMAND_HABITS,
    option_habit_hint,
    other_tool_hint,
)
from localgen.other_tools_command import llm_prompt_in_localgen_s_words
from localgen.units import alternatives

CTX_OPTIONS = ("--ctx", "--ctx-size", "-c")  # the context size's names in run, chat and fit
SUGGESTION_CUTOFF = 0.75  # difflib similarity of option names without their dashes (click's 0.6 counts the dashes)


def usage_error(app: typer.Typer, exc: Exception, args: list[str]) -> tuple[str, str]:
    """The one-line message and the hint for a usage error of the command line args, its words as typed; a model
    named where the prompt goes that the registry refuses raises that refusal (a LocalgenError), as -m's would."""
    message, hint = _message_and_hint(app, exc, args)
    return as_typed(message), as_typed(hint)


def _message_and_hint(app: typer.Typer, exc: Exception, args: list[str]) -> tuple[str, str]:
    """The one-line message and the hint for a usage error of the command line args (as main gave them)."""
    text = str(exc).lower()
    files = files_after_file_hint(app, args, text)  # `run -f *.md "..."`: the shell's list of files after one -f
    if not files:
        refuse_model_given(app, args, text)
    special = ((_usage_error_text(exc), files) if files else None) or chat_prompt_error(app, args, text)
    if special is not None:
        return special
    command = args[0] if args and args[0] in command_names(app) else ""
    message = model_first_message(app, args, text) or _as_typed(_usage_error_text(exc), exc, args)
    own = _unknown_command_hint(app, args, command, text) or _subcommand_habit_hint(app, args, command, text)
    if own is not None:  # localgen's way for the command typed: click's closest name (create: chat) would contradict it
        return CLICK_GUESS.sub(r"\g<said>.", message), own
    return message, _usage_hint(app, exc, args)


def help_cluster_error(app: typer.Typer, args: list[str]) -> tuple[str, str] | None:
    """For short options run together after -h (llama-cli's -hf REPO, a prompt "-hello"), which click reads as -h and
    more: the help on stdout, exit 0, as if the command had run. The one-line message and the hint, or None."""
    command = args[0] if args and args[0] in command_names(app) else ""
    takes_value = option_arity(app, command) if command else {}
    for word in not_values(args[1 if command else 0:], takes_value):
        if word.startswith("-h") and len(word) > 2:
            name = f"localgen {_command_with_subcommand(app, args, command)}".strip()
            hint = _dash_prompt_hint(args, command, "no such option") or f"-h alone is --help: see `{name} --help`"
            return f"no such option: {word}", hint
    return None


def help_words_error(app: typer.Typer, words: list[str]) -> tuple[str, str] | None:
    """For `localgen help WORDS` with a word after the name of a command that has no subcommands (help run extra),
    which click would pass over to show the command's help: the one-line message and the hint, or None (a group's
    unknown subcommand is click's No such command)."""
    names, command = typed_command(app, words)
    extra = [word for word in words[len(names):] if word not in ("--help", "-h")]  # help run --help: its help
    if not names or not extra or hasattr(command, "commands"):
        return None
    path = " ".join(names)
    return f"no such command '{extra[0]}': localgen {path} has no subcommands", f"see `localgen help {path}`"


def one_dash_error(app: typer.Typer, args: list[str]) -> tuple[str, str] | None:
    """For a long option's name typed with one dash (-temp, -seed), which click reads as a short option with a value
    stuck to it (-t emp, -s eed) or as unknown letters (-json): no such option, and the name meant (--temp). The
    one-line message and the hint, or None."""
    names, command = typed_command(app, args)
    takes_value = arity(command.params)
    for word in not_values(args[len(names):], takes_value):
        typed = word.partition("=")[0]
        if typed[:1] == "-" and typed[1:2] not in ("-", "") and typed not in takes_value:
            meant = [name for name in _alike_options(typed, command.params) if name.startswith("--")]
            if meant:
                help_command = shlex.join(["localgen", *names, "--help"])
                return f"no such option: {typed}", f"did you mean {meant[0]}? see `{help_command}`"
    return None


def _as_typed(message: str, exc: Exception, args: list[str]) -> str:
    """An unknown short option named as typed: click names -j of -jf (its first letter, unknown), or -Q of -qQ8_0 (the
    letter after a flag's, -q), which no one typed."""
    name = str(getattr(exc, "option_name", "")) if _is_no_such_option(exc) else ""
    typed = next((arg for arg in args if len(name) == 2 and not arg.startswith("--") and (
        (arg.startswith(name) and "=" not in arg) or (arg[:1] == "-" and arg[1:2] != name[1] and arg[2:3] == name[1]))),
        name)
    return message.replace(f"No such option: {name}", f"No such option: {typed}", 1) if typed != name else message


def _is_no_such_option(exc: Exception) -> bool:
    """Whether a usage error is an unknown option (click's NoSuchOption, or the copy typer ships)."""
    return type(exc).__name__ == "NoSuchOption"


def _usage_error_text(exc: Exception) -> str:
    """A one-line version of a command-line usage error."""
    if _is_no_such_option(exc):  # without click's suggestions, which count the dashes as alike
        return f"No such option: {getattr(exc, 'option_name', '')}"
    format_message = getattr(exc, "format_message", None)
    message = format_message() if callable(format_message) else str(exc)
    return " ".join(message.split())


def _close_options(exc: Exception) -> list[str]:
    """For an unknown option, the options whose names (dashes aside) are the same (--n for -n), really close to it
    or start with it."""
    if not _is_no_such_option(exc):
        return []
    typed = str(getattr(exc, "option_name", ""))
    command = getattr(getattr(exc, "ctx", None), "command", None)
    params = getattr(command, "params", ())
    same = _alike_options(typed, params)  # click's possibilities leave out the short options
    if same:
        return same[:1]
    guessed = GUESSED_OPTIONS.get(typed)
    if guessed is not None and guessed.rpartition("/")[2] in {name for param in params for name in param.opts}:
        return [guessed]
    typed = typed.lstrip("-")
    names = {option.lstrip("-"): option for option in getattr(exc, "possibilities", None) or ()}
    close = difflib.get_close_matches(typed, list(names), n=3, cutoff=SUGGESTION_CUTOFF)
    starts = [name for name in names if len(typed) >= 2 and name.startswith(typed) and name not in close]
    return [names[name] for name in [*close, *starts][:3]]


def _alike_options(typed: str, params: Iterable[Any]) -> list[str]:
    """The options named as typed but for their dashes: -n for --n, --seed for -seed."""
    return [option for param in params for option in getattr(param, "opts", ())
            if option.lstrip("-") == typed.lstrip("-") and option != typed]


def _usage_hint(app: typer.Typer, exc: Exception, args: list[str]) -> str:
    """What to do about a usage error: quote a prompt that was split into words, else read the help."""
    command = args[0] if args and args[0] in command_names(app) else ""
    text = str(exc).lower()
    return (_number_slip_hint(app, exc, args, command) or missing_value_hint(app, exc, args)
            or _option_before_command_hint(app, exc, args, command)
            or extra_argument_hint(app, args, command, text)
            or _file_argument_hint(app, args, command, text)
            or _ctx_flag_hint(app, exc, args, command)
            or _threads_flag_hint(app, exc, args, command)
            or number_hint(app, exc, args)
            or _dash_prompt_hint(args, command, text)
            or _spaced_name_hint(app, args, text)
            or _help_hint(app, exc, args, command))


def _spaced_name_hint(app: typer.Typer, args: list[str], text: str) -> str | None:
    """For `conversations show my notes`: the name a listing gives a file copied in as my notes.json, quoted."""
    from localgen.conversation_names import command_words, listed_entry

    if args[:2] != ["conversations", "show"] or "unexpected extra argument" not in text:
        return None
    takes_value = arity(typed_command(app, args[:2])[1].params) | dict.fromkeys(help_option_names(app), False)
    name = " ".join(words_given(args[2:], takes_value))
    if listed_entry(name) is None:
        return None
    options = "".join(f" {shlex.quote(option)}" for option in options_given(args[2:], takes_value))
    command = command_words(f"conversations show{options}", name)
    return f"a name with a space is one word to the shell: `localgen {command}`"


def _number_slip_hint(app: typer.Typer, exc: Exception, args: list[str], command: str) -> str | None:
    """For a number typed with a decimal or a thousands comma (cli_options.NumberSlip): how to write it, given to
    its option as typed (--temp 0.7 for --temp 0,7; -c 4096 for -c 4,096)."""
    param = getattr(exc, "param", None)
    if not isinstance(exc, NumberSlip) or param is None:
        return None
    takes_value = option_arity(app, command) if command else {}
    return exc.hint_for(option_typed(args[1 if command else 0:], (*param.opts, *param.secondary_opts), takes_value))


def _unknown_command_hint(app: typer.Typer, args: list[str], command: str, text: str) -> str | None:
    """For a first word that is no command: localgen's command for another tool's word, or `run` for a prompt (not
    where help was asked for it: `localgen help WORD`)."""
    if command or not args or "no such command" not in text:
        return None
    asks_help = any(word in ("-h", "--help") for word in args)
    return other_tool_hint(args[0], args[1:]) or (None if asks_help else _prompt_as_command_hint(app, args))


def _subcommand_habit_hint(app: typer.Typer, args: list[str], command: str, text: str) -> str | None:
    """For `models ls` or `conversations remove`: the group's own name for it; for `models pull`, the command."""
    groups = {g.name: g.typer_instance for g in app.registered_groups if g.name and g.typer_instance}
    if command not in groups or len(args) < 2 or "no such command" not in text:
        return None
    top = GROUP_COMMAND_HABITS.get((command, args[1]))
    if top is not None:
        return f"use `{shlex.join(['localgen', top, *args[2:]])}`"
    names = {c.name for c in groups[command].registered_commands}
    meant = next((name for name in SUBCOMMAND_HABITS.get(args[1], ()) if name in names), None)
    if meant is None:
        return None
    takes_words = any(param.param_type_name == "argument" for param in typed_command(app, [command, meant])[1].params)
    rest = [word for word in args[2:] if takes_words or word.startswith("-")]  # `cache rm X`: clear takes no X
    return f"use `{shlex.join(['localgen', command, meant, *rest])}`"


def _option_before_command_hint(app: typer.Typer, exc: Exception, args: list[str], command: str) -> str | None:
    """For `localgen --offline chat` or `localgen -m NAME "prompt"`: a command's options go after it (`run`'s when
    no command follows), where they are its options; else what does their work (--debug: LOCALGEN_DEBUG=1) or that
    the command lacks them too."""
    if command or not args or not _is_no_such_option(exc):
        return None
    later = next((i for i, word in enumerate(args) if word in command_names(app)), None)
    if later is not None:
        names = typed_command(app, args[later:])[0]  # models list: the options go after list
        before, after = args[:later], args[later + len(names):]
    elif is_option(args[0], option_arity(app, "run")):  # -n5 hi as -n 5 hi
        names, before, after = ["run"], args, []
    else:
        return None
    takes_value, helps = arity(typed_command(app, names)[1].params), help_option_names(app)
    lacked = [word for word, part in read_words(before, takes_value)
              if part == "option" and option_name(word, takes_value) not in takes_value and word not in helps]
    moved = apart_at_equals([*before, *after], takes_value)  # -n=5: -n 5, as the command parses it
    if not lacked:
        return f"options go after the command: `{shlex.join(['localgen', *names, *moved])}`"
    unset = [word for word in lacked if word.partition("=")[0] not in ENVIRONMENT_INSTEAD]
    if not unset:
        return environment_hint(names, moved, takes_value | dict.fromkeys(helps, False))
    shown = shlex.join(["localgen", *names])
    return f"`{shown}` has no {unset[0]} either: see `{shown} --help`"


def _prompt_as_command_hint(app: typer.Typer, args: list[str]) -> str | None:
    """For a prompt typed where the command goes (`localgen why is the sky blue`; llm's `localgen prompt "hi"`):
    `localgen run PROMPT`, its words quoted as one and run's options kept."""
    word, verb = args[0], args[0] in RUN_WORDS
    misspelt = difflib.get_close_matches(word, command_names(app), cutoff=0.6) and not any(map(str.isspace, word))
    if not verb and (word.startswith("-") or misspelt):  # click's closest name says a command misspelt
        return None
    takes_value, words = option_arity(app, "run"), args[verb:]
    prompt, options = words_given(words, takes_value), options_given(words, takes_value)  # run's options kept
    ask = (llm_prompt_in_localgen_s_words(words, takes_value) if verb else suggested(
        "run", options if all_options(options, takes_value) else [], prompt, takes_value)) if prompt else None
    ask = ask or 'localgen run "..."'
    sure = verb or " " in word  # else perhaps a command misspelt, or another tool's (keys set NAME)
    return f"to ask the model, use `{ask}`" if sure else f"see `localgen --help`; to ask the model: {ask}"


def _file_argument_hint(app: typer.Typer, args: list[str], command: str, text: str) -> str | None:
    """For `pull ORG/REPO FILE` (as `huggingface-cli download` takes it) or `pull ORG/REPO QUANT`, or fit's: the file
    or quant goes in the reference, ORG/REPO/FILE or ORG/REPO:QUANT."""
    from localgen.references import parse_reference, quant_of_filename

    if command not in ("pull", "fit") or "unexpected extra argument" not in text:
        return None
    words = words_given(args[1:], option_arity(app, command))
    if len(words) < 2:
        return None
    try:
        ref = parse_reference(words[0])
    except (LocalgenError, ValueError):
        return None
    extra = words[1]
    if ref.repo is None or ref.quant or ref.filename:
        return None
    if extra.lower().endswith(".gguf"):
        kind, named = "file", f"{words[0]}/{extra}"
    elif quant_of_filename(extra) == extra.upper():
        kind, named = "quant", f"{words[0]}:{extra}"
    else:
        return None
    said = f"`{shlex.join(['localgen', command, named, *[arg for arg in args[1:] if arg not in words]])}`"
    if len(words) > 2:
        return f"one model at a time, its file or quant in the reference: {said}"
    return f"the {kind} goes in the reference: {said}"


def _ctx_flag_hint(app: typer.Typer, exc: Exception, args: list[str], command: str) -> str | None:
    """For the context size's option without a number: -c in `run` or `chat` is --ctx-size here, not continue (but
    where a number was meant: -c 4096,5, -c=nan); --ctx and --ctx-size take a number of tokens."""
    message = _usage_error_text(exc)
    if command not in ("run", "chat", "fit") or not any(f"'{name}'" in message for name in CTX_OPTIONS):
        return None
    typed = option_typed(args[1:], CTX_OPTIONS, option_arity(app, command))
    value = re.search(r"'([^']*)' is not a valid integer", message)
    if typed == "-c" and command in ("run", "chat") and not (value and typed_as_number(value[1])):
        return _continued(app, args)
    kibi = re.fullmatch(r"=?(\d+)[kK]", value[1].strip()) if value else None  # 8k: 8,192 tokens, as sizes go
    return f"{typed} takes the context size, a number of tokens: {typed} {int(kibi[1]) * 1024 if kibi else 4096}"


def _continued(app: typer.Typer, args: list[str]) -> str:
    """For llm's `-c PROMPT` (continue) given to run, or -c given chat: the continue hint for the last -c typed, its
    value stuck on too (-cmore, -c=more: -c more)."""
    command, words = args[0], args[1:]
    typed = [at for at, (word, part) in enumerate(read_words(words, option_arity(app, command)))
             if part == "option" and word[:2] == "-c"]
    if not typed:
        return CONTINUE_LATEST
    at, stuck = typed[-1], words[typed[-1]][2:].removeprefix("=")
    apart = [*words[:at], "-c", *([stuck] if stuck else []), *words[at + 1:]]
    return continue_hint(typed_command(app, args)[1], apart, at)


def _threads_flag_hint(app: typer.Typer, exc: Exception, args: list[str], command: str) -> str | None:
    """For `-t NAME` in `run` or `chat` (llm's template option): it is --threads here (not for -t 2.5 or -t=1e308,
    no name, nor for --threads NAME, which names the option it gives a value)."""
    message = _usage_error_text(exc)
    if command not in ("run", "chat") or "'--threads' / '-t'" not in message or "integer" not in message \
            or (isinstance(exc, NumberSlip) and typed_as_number(exc.text)) \
            or option_typed(args[1:], ("-t", "--threads"), option_arity(app, command)) != "-t":
        return None
    return "-t is --threads N; llm's templates are models.toml entries here, each with a system prompt and settings"


def _dash_prompt_hint(args: list[str], command: str, text: str) -> str | None:
    """For a `run` prompt that starts with "-" (read as an unknown option): put it after --."""
    prompt = args[-1] if args else ""
    if command != "run" or "no such option" not in text or " " not in prompt or not prompt.startswith("-"):
        return None
    return f'a prompt that starts with "-" goes after --: `{shlex.join(["localgen", "run", "--", prompt])}`'


def _help_hint(app: typer.Typer, exc: Exception, args: list[str], command: str) -> str:
    """Read the help of the command (or subcommand) given, led by the options close to an unknown one."""
    command = _command_with_subcommand(app, args, command)
    typed = str(getattr(exc, "option_name", "")) if _is_no_such_option(exc) else ""
    takes_value = arity(typed_command(app, command.split())[1].params) | dict.fromkeys(help_option_names(app), False)
    habit = option_habit_hint(command, typed, args[1:]) or other_command_option_hint(app, command, typed) or \
        habit_hint(command, typed, args[len(command.split()):], takes_value)
    if habit is not None:
        return habit
    close = _close_options(exc)
    guess = f"did you mean {alternatives(close)}? " if close else ""
    listing = {name for param in listing_options(typed_command(app, command.split())[1]) for name in param.opts}
    if close and set(close) <= listing:  # `models --al`: --all is list's, shown in its help, not the group's
        command = f"{command} list"
    return f"{guess}see `localgen {command} --help`".replace("  ", " ")


def _command_with_subcommand(app: typer.Typer, args: list[str], command: str) -> str:
    """The command typed, with its subcommand where it is a group (`models rm`)."""
    groups = {g.name: g.typer_instance for g in app.registered_groups if g.name and g.typer_instance}
    if command in groups and len(args) > 1 and args[1] in {c.name for c in groups[command].registered_commands}:
        return f"{command} {args[1]}"
    return command

