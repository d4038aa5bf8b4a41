"""How the words of a command line read, for the hints of its usage errors: which are options, which are their
values, which are arguments (a prompt, a model's name), and which command they are given to."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from itertools import pairwise
from typing import Any, Literal

import typer
import typer.main

Part = Literal["option", "value", "word", "end", "after"]  # an option's name, its value, an argument, --, after --
_command_line: list[str] = []  # the words run_app was given (main's argv, which need not be sys.argv)
_help_added: list[bool] = [False]  # whether the last of them is the --help that `localgen help WORDS` became
_built: weakref.WeakKeyDictionary[typer.Typer, tuple[tuple, Any]] = weakref.WeakKeyDictionary()


def remember_command_line(args: list[str], *, help_added: bool = False) -> None:
    """Keep the command line being run, for what its parsed values do not tell (a word given after --); help_added:
    its last word is the --help that `localgen help WORDS` became, which nobody typed."""
    _command_line[:] = args
    _help_added[0] = help_added


def forget_command_line() -> None:
    """Forget the command line run_app ran, so a command run after it (a test's, through click) reads none of it."""
    remember_command_line([])


def given_right_after(option: str, word: str) -> bool:
    """Whether the command line being run gave word as the word right after option (pull's -q Q8_0)."""
    return any(first == option and second == word for first, second in pairwise(_command_line))


def name_given(names: tuple[str, ...], takes_value: dict[str, bool]) -> str:
    """Which of an option's names the command line being run gave it by, the last time (--grammar-file for
    --grammar); its first where none did."""
    return option_typed(_command_line[1:], names, takes_value)


def command_line_with(option: str, word: str, inserted: str) -> list[str] | None:
    """The command line being run with inserted between option and the word typed right after it (where typed more
    than once, the last time: click takes the last), or None where word never came right after option."""
    pairs = [at for at, pair in enumerate(pairwise(_command_line)) if pair == (option, word)]
    if not pairs:
        return None
    at = pairs[-1] + 1
    return [*_command_line[:at], inserted, *_command_line[at:]]


def with_group_options_last(group: str, subcommand: str, options: list[Any]) -> list[str] | None:
    """The command line being run with a group's options given before its subcommand (`conversations -n 2 list`),
    their values too, moved to right after it (`conversations list -n 2`): before its own options, which click takes
    last where one is given twice, and before a -- after it; None where the two names are not found in it."""
    try:
        start = _command_line.index(group) + 1
        end = _command_line.index(subcommand, start)
    except ValueError:
        return None
    takes_value = arity(options)
    moved: list[str] = []
    kept: list[str] = []
    words = kept
    for word, part in read_words(_command_line[start:end], takes_value):
        if part != "value":  # a value goes with its option
            words = moved if part == "option" and is_option(word, takes_value) else kept
        words.append(word)
    typed_after = _command_line[end + 1:len(_command_line) - int(_help_added[0])]  # (not the --help help added)
    return [*_command_line[:start], *kept, subcommand, *moved, *typed_after]


def given_after_double_dash(app: typer.Typer, word: str) -> bool:
    """Whether the command line being run gave word after the -- that ends its command's options (an option's
    value that is -- ends nothing)."""
    if not _command_line:
        return False
    command, *args = _command_line
    return (word, "after") in read_words(args, option_arity(app, command))


def read_words(args: list[str], takes_value: dict[str, bool]) -> Iterator[tuple[str, Part]]:
    """Each word of a command line (after the command's name) with what it is there: an option (--temp, --temp=0),
    an option's value (-s -c: a system prompt), an argument (- too: stdin), the -- that ends the options, or a word
    after it (an argument, whatever it looks like)."""
    expects_value = False
    for index, word in enumerate(args):
        if expects_value:
            expects_value = False
            yield word, "value"
        elif word == "--":
            yield word, "end"
            yield from ((after, "after") for after in args[index + 1:])
            return
        elif word.startswith("-") and word != "-":
            expects_value = takes_value.get(word, False)  # --temp=0 and -n8 hold their value
            yield word, "option"
        else:
            yield word, "word"


def not_values(args: list[str], takes_value: dict[str, bool]) -> Iterator[str]:
    """The words of a command line before the -- that ends its options, but for option values (-s -c: a prompt)."""
    return (word for word, part in read_words(args, takes_value) if part in ("option", "word"))


def words_given(args: list[str], takes_value: dict[str, bool]) -> list[str]:
    """The words of a command line that are neither options nor their values (all of them after --)."""
    return [word for word, part in read_words(args, takes_value) if part in ("word", "after")]


def options_given(args: list[str], takes_value: dict[str, bool]) -> list[str]:
    """The options of a command line before --, each with its value, in the order typed."""
    return [word for word, part in read_words(args, takes_value) if part in ("option", "value")]


def all_options(words: list[str], takes_value: dict[str, bool]) -> bool:
    """Whether words are known options, each with its value when it takes one (--opt VALUE or --opt=VALUE)."""
    parts = list(read_words(words, takes_value))
    known = all(part == "value" or (part == "option" and word.partition("=")[0] in takes_value)
                for word, part in parts)
    return known and not (parts and parts[-1][1] == "option" and takes_value.get(parts[-1][0], False))


def option_arity(app: typer.Typer, command: str) -> dict[str, bool]:
    """Each option name of a command, and whether it takes a value."""
    group = click_command(app)
    return arity(group.commands[command].params if hasattr(group, "commands") else [])  # type: ignore[attr-defined]


def help_option_names(app: typer.Typer) -> list[str]:
    """The options that show a command's help (-h, --help), which no command lists among its own."""
    return list(click_command(app).context_settings.get("help_option_names", ["--help"]))


def click_command(app: typer.Typer) -> Any:
    """The click command of a Typer app, built once while the app keeps the commands it was built from (Typer builds
    it afresh from the functions' annotations at each call, 20-40 ms for localgen's)."""
    shape = registered_shape(app)
    built = _built.get(app)
    if built is None or built[0] != shape:
        built = _built[app] = (shape, typer.main.get_command(app))
    return built[1]


def registered_shape(app: typer.Typer) -> tuple:
    """What a Typer app's click command is built from: its callback, its commands and its groups' (as identities)."""
    return (id(app.registered_callback), tuple(map(id, app.registered_commands)),
            tuple((id(group), registered_shape(group.typer_instance)) for group in app.registered_groups))


def option_typed(args: list[str], names: tuple[str, ...], takes_value: dict[str, bool]) -> str:
    """Which of an option's names was typed last (-c5 as -c, --ctx=5 as --ctx, -ngl=5 as -ngl), values aside; its first
    if none was."""
    typed = [option_name(word, takes_value) for word in not_values(args, takes_value)]
    return next((name for name in reversed(typed) if name in names), names[0])


def option_name(word: str, takes_value: dict[str, bool]) -> str:
    """The option a word of a command line names: --temp of --temp=0, -c of -c5 and -c=5, -ngl of -ngl=5."""
    name = word.partition("=")[0]
    return name if word.startswith("--") or name in takes_value else word[:2]


def apart_at_equals(words: list[str], takes_value: dict[str, bool]) -> list[str]:
    """A command's words as they parse: each short option that takes a value written -X=VALUE (which click reads as
    the value "=VALUE") as -X VALUE, or as -XVALUE where VALUE is an option's name, which after a space would read
    as that option (-s=--grammar-file: -s--grammar-file); an option's value (-s a=b) and any other word as given."""
    return [piece for word, part in read_words(words, takes_value) for piece in (
        _apart(word, takes_value) if part == "option" and short_with_equals(word, takes_value) else [word])]


def _apart(word: str, takes_value: dict[str, bool]) -> list[str]:
    """-X=VALUE as -X VALUE, or -XVALUE where VALUE is an option's name."""
    option, value = word[:2], word[3:]
    return [option + value] if is_option(value, takes_value) else [option, value]


def short_with_equals(word: str, takes_value: dict[str, bool]) -> bool:
    """Whether an option's word is a short option that takes a value, its value after = (-s=terse)."""
    return word[1:2] != "-" and word[2:3] == "=" and takes_value.get(word[:2], False)


def is_option(word: str, takes_value: dict[str, bool]) -> bool:
    """Whether a word of a command line is one of these options: its name, with its value after = or stuck on where it
    takes one (-n5, -msmollm2); -qx is none where -q takes no value."""
    name = option_name(word, takes_value)
    return name in takes_value and (word.partition("=")[0] == name or takes_value[name])


def arity(params: Iterable[Any]) -> dict[str, bool]:
    """Each option name of these click parameters, and whether it takes a value."""
    return {name: not (param.is_flag or param.count) for param in params if hasattr(param, "is_flag")
            for name in (*param.opts, *param.secondary_opts)}


def typed_command(app: typer.Typer, args: list[str]) -> tuple[list[str], Any]:
    """The click command args name (a group's subcommand too: models rm), and the words that name it."""
    command: Any = click_command(app)
    names: list[str] = []
    for word in args:
        subcommand = getattr(command, "commands", {}).get(word)
        if subcommand is None:
            break
        command, names = subcommand, [*names, word]
    return names, command


def listing_options(group: Any) -> dict[Any, Any]:
    """For a group that lists when run alone (models, cache, conversations), each of its options hidden in its help,
    with list's option of that name, whose help it is (`localgen models --json` is `localgen models list --json`)."""
    alone = getattr(group, "invoke_without_command", False)
    listing = getattr(group, "commands", {}).get("list") if alone else None
    if listing is None:
        return {}
    own = {tuple(param.opts): param for param in listing.params if param.param_type_name == "option"}
    return {param: own[tuple(param.opts)] for param in group.params
            if param.param_type_name == "option" and param.hidden and tuple(param.opts) in own}


def asks_for_help(app: typer.Typer, words: list[str]) -> bool:
    """Whether the words given to localgen ask for a command's help (-h or --help among its options, before --),
    which click shows before the command runs."""
    names, command = typed_command(app, words)
    helps = help_option_names(app)
    takes_value = arity(getattr(command, "params", ())) | dict.fromkeys(helps, False)
    return any(word in helps for word in not_values(words[len(names):], takes_value))


def command_names(app: typer.Typer) -> set[str]:
    """The names of the top-level commands and command groups."""
    names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
    return names | {g.name for g in app.registered_groups if g.name}
