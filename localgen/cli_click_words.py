"""click's usage errors in localgen's words: `localgen: error: no such option: --x`, lower case and without click's
full stop, as localgen's own errors read, and for a command name with a slip in it the command meant, to run."""

from __future__ import annotations

import re
import shlex
from typing import Any

from localgen.cli_args import typed_command
from localgen.config import login_shell

CLICK_PHRASES = ("No such command", "No such option", "Missing argument", "Missing option", "Missing parameter",
                 "Option '", "Invalid value", "Got unexpected extra argument", "Error:")  # how click's messages begin
CLICK_GUESS = re.compile(  # click's No such command 'X' with its closest name added
    r"^(?P<said>No such command '(?P<typed>[^']*)')\. Did you mean '(?P<meant>[^']*)'\?$")
TYPER_COMPLETION_OPTIONS = ("--install-completion", "--show-completion")  # Typer's, which localgen leaves out
COMPLETE_VAR = "_LOCALGEN_COMPLETE"  # click's _PROG_COMPLETE: set, the shell asks for completion (cli_completion)
COMPLETION_LINE = f'eval "$({COMPLETE_VAR}=bash_source localgen)"'  # the line of ~/.bashrc that turns it on
COMPLETION_HINT = f"turn completion on with `{COMPLETION_LINE}` in ~/.bashrc (zsh_source for zsh, fish_source for fish)"
OTHER_SHELLS_LINES = {  # the line that turns completion on in each other shell, and the start-up file it goes in
    "zsh": (f'eval "$({COMPLETE_VAR}=zsh_source localgen)"', "~/.zshrc, after compinit"),
    "fish": (f"{COMPLETE_VAR}=fish_source localgen | source", "~/.config/fish/completions/localgen.fish")}
COMPLETING_SHELLS = ("bash", *OTHER_SHELLS_LINES)  # the shells localgen completes in (click's)
COMPLETION_COMMANDS = ("completion", "completions")  # localgen's command, and the other spelling other tools use
SHELL_NAMERS = (*COMPLETION_COMMANDS, "--shell", "-s", *TYPER_COMPLETION_OPTIONS)  # the words a shell follows
ASKS_FOR_COMPLETION = re.compile(  # Typer's completion options, and other tools' command for it (gh, pip, rustup)
    rf"^No such (option: ({'|'.join(TYPER_COMPLETION_OPTIONS)})|command '({'|'.join(COMPLETION_COMMANDS)})')(?![\w-])")
_LISTING = "list"  # the subcommand a group's name alone is hinted with (`model`: `localgen models list`, as `ls` is)


def in_localgen_words(app: Any, args: list[str], message: str, hint: str | None) -> tuple[str, str | None]:
    """A click usage error's message and hint as localgen words them: lower case, without click's full stop, and a
    misspelt command's guess as a command to run (localgen's own messages are written so)."""
    close = CLICK_GUESS.match(message)
    if close is not None:
        message = close["said"]
        if not hint or hint.startswith("see `localgen"):  # no hint of the command's own: click's guess, to run
            hint = _command_meant(app, args, close["typed"], close["meant"]) or hint
    if ASKS_FOR_COMPLETION.match(message):
        hint = completion_hint(args)
    if not message.startswith(CLICK_PHRASES):
        return message, hint
    message = message.removeprefix("Error: ").removeprefix("Got ")
    return message[:1].lower() + message[1:].removesuffix("."), hint


def completion_hint(args: list[str]) -> str:
    """How completion is turned on: the line for the start-up file of the shell args name (`completion zsh`,
    `--shell=ZSH`, `--install-completion=fish`), else of $SHELL where it is one localgen completes in, else bash's;
    a shell named that it does not complete in (pwsh) is told which it does."""
    named, login = named_shell(args), login_shell()
    shell = named or (login if login in COMPLETING_SHELLS else "")
    if shell in OTHER_SHELLS_LINES:
        line, start_up_file = OTHER_SHELLS_LINES[shell]
        return f"turn completion on with `{line}` in {start_up_file}"
    if named and named not in COMPLETING_SHELLS:
        return f"localgen completes in {', '.join(COMPLETING_SHELLS[:-1])} and {COMPLETING_SHELLS[-1]}, not " \
               f"{named}: {COMPLETION_HINT}"
    return COMPLETION_HINT


def named_shell(args: list[str]) -> str | None:
    """The shell args name, lower case, as click reads an option's value or an argument: a `--install-completion=` or
    `--show-completion=` value first, else after a word of SHELL_NAMERS, as the next word or its `=` value (`completion
    ZSH`, `--shell=zsh`), `-s`/`--shell` only after `completion` (run's and chat's -s is --system); None where they
    name none (`completion --help`)."""
    given = next((value for namer, equals, value in (word.partition("=") for word in args)
                  if equals and namer in TYPER_COMPLETION_OPTIONS and value), None)
    if given is not None:
        return given.lower()
    namers: tuple[str, ...] = TYPER_COMPLETION_OPTIONS
    for at, word in enumerate(args):
        if word in COMPLETION_COMMANDS:
            namers = SHELL_NAMERS
        namer, equals, value = word.partition("=")
        if namer not in namers:
            continue
        if equals and namer.startswith("-"):
            return value.lower() or None
        following = args[at + 1] if at + 1 < len(args) else ""
        if following and not following.startswith("-"):
            return following.lower()
    return None


def _command_meant(app: Any, args: list[str], typed: str, meant: str) -> str | None:
    """The command line typed with the command name click took a slip for (model list: models list); a group's name
    alone with its listing (model: models list); None where that line names no command either (modles lst)."""
    if typed not in args:
        return None
    at = args.index(typed)
    words = [*args[:at], meant, *args[at + 1:]]
    names, command = typed_command(app, words)
    subcommands = getattr(command, "commands", {})
    if names == words and _LISTING in subcommands:
        words.append(_LISTING)
    elif subcommands and names != words and not words[len(names)].startswith("-"):  # no subcommand of the group
        return None
    return f"use `{shlex.join(['localgen', *words])}`"
