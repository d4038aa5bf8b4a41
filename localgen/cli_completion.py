"""Shell completion, as click offers it: `eval "$(_LOCALGEN_COMPLETE=bash_source localgen)"` (zsh_source, fish_source)
prints the script a shell sources, and the script asks `localgen` for the words that complete a command line: command
and option names, the models -m, pull, fit and `models show|default|rm` take, and the saved conversations --resume,
--conversation and `conversations show|rm|mv|rename` take (the scripts and answers are localgen's own:
cli_completion_bash, cli_completion_zsh_fish). Imported only when the shell asks, so that no other start of localgen
pays for it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from localgen import offered_names
from localgen.cli_completion_answers import NAMES_NO_FILE

CLICK_STYLE = r"^(?P<shell>bash|zsh|fish)_(?P<step>source|complete)$"  # click's bash_source, as a user types it
TYPER_STYLE = r"^(?P<step>source|complete)_(?P<shell>bash|zsh|fish)$"  # what the sourced script sends back


def complete(app: Any, variable: str) -> int:
    """Answer the shell that set variable (_LOCALGEN_COMPLETE): print the script to source, or the words that complete
    the command line it gives; the exit code (2, with a one-line error, for an instruction that is none of these)."""
    from typer._click.shell_completion import add_completion_class
    from typer.completion import shell_complete

    from localgen import console
    from localgen.cli_args import click_command
    from localgen.cli_click_words import COMPLETION_LINE
    from localgen.errors import EXIT_USAGE

    instruction = os.environ.get(variable, "").strip()
    found = re.match(CLICK_STYLE, instruction) or re.match(TYPER_STYLE, instruction)
    if found is None:
        console.error(f"{variable}={instruction} is no completion instruction",
                      hint=f"use `{COMPLETION_LINE}` (or zsh_source, fish_source)")
        return EXIT_USAGE
    from localgen.cli_completion_bash import BashLine
    from localgen.cli_completion_zsh_fish import FishLine, ZshLine

    add_completion_class(BashLine, "bash")  # localgen's own, for bash the line as typed, for each shell whole words
    add_completion_class(ZshLine, "zsh")
    add_completion_class(FishLine, "fish")
    command = click_command(app)
    _add_completers(command)
    return shell_complete(command, {}, "localgen", variable, f"{found['step']}_{found['shell']}") or 0


def _add_completers(command: Any) -> None:
    """Give each option and argument that names a model or a saved conversation or takes one of a few values its names,
    and each number option none, in every command (a completer of click's parameter, set for this process alone), and
    mark those whose value is never a file's path."""
    for path, param in parameters(command):
        completion = ARGUMENTS.get((path, param.name)) or next(
            (completion for option, completion in OPTIONS if option in param.opts), None) or (
            _NUMBER if param.param_type_name == "option" and param.metavar in NUMBER_METAVARS else None)
        if completion is None:
            continue
        param._custom_shell_complete = _completer(completion)  # as click's Parameter(shell_complete=...) sets it
        if not completion.files:
            setattr(param, NAMES_NO_FILE, True)  # where none is offered, no file is either


def parameters(command: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Each parameter of command and of its subcommands, with its command's words after localgen (`models rm`)."""
    for param in getattr(command, "params", ()):
        yield path, param
    for name, subcommand in getattr(command, "commands", {}).items():
        yield from parameters(subcommand, f"{path} {name}".strip())


def model_names(typed: str) -> list[str]:
    """The models -m takes by name, and the quants of the one typed before a colon, as the chat's /model offers them
    (offline: the downloaded ones alone)."""
    from localgen.config import settings

    return [name for name, _ in offered_names.models_offered(offline=settings().offline, typed=typed)]


def listed_model_names(typed: str) -> list[str]:
    """The models `models list --all` lists, downloaded or not: those `models show` describes and `models default`
    sets, offline too."""
    return [name for name, _ in offered_names.models_offered(offline=False, typed=typed)]


def conversation_names(typed: str) -> list[str]:
    """The saved conversations' names."""
    return offered_names.conversations_offered()


def think_values(typed: str) -> list[str]:
    """--think's values."""
    from localgen.think_switch import THINK_VALUES

    return list(THINK_VALUES)


def draft_values(typed: str) -> list[str]:
    """--draft's values."""
    from localgen.speculative import DRAFT_MODES

    return list(DRAFT_MODES)


def kv_type_values(typed: str) -> list[str]:
    """--kv-type's values."""
    from localgen.params import KV_TYPE_NAMES

    return list(KV_TYPE_NAMES)


def flash_attn_values(typed: str) -> list[str]:
    """--flash-attn's values."""
    from localgen.params import FLASH_ATTN_NAMES

    return list(FLASH_ATTN_NAMES)


def no_names(typed: str) -> list[str]:
    """Nothing: a name not taken yet (`conversations mv OLD NEW`), a number."""
    return []


@dataclass(frozen=True)
class Completion:
    """What completes a parameter's value: its names (of the word typed), whether the shell may complete a file's
    name where none of them is offered (the value may be a file's path: -m ./model.gguf), and what makes two names
    one (a model's name in any case; a conversation's file, notes and NOTES two but on a case-insensitive one)."""

    names: Callable[[str], list[str]]
    files: bool
    identity: Callable[[str], Hashable] = str.lower


_MODEL = Completion(model_names, files=True)
_CONVERSATION = Completion(conversation_names, files=False, identity=offered_names.conversation_identity)
_LISTED_CONVERSATION = Completion(offered_names.conversations_listed, files=False,
                                  identity=offered_names.conversation_identity)  # by the name listed (my notes too)
OPTIONS: tuple[tuple[str, Completion], ...] = (  # the options whose values are completed, and with what
    ("--model", _MODEL), ("--resume", _CONVERSATION), ("--conversation", _CONVERSATION),
    ("--think", Completion(think_values, files=False)), ("--draft", Completion(draft_values, files=False)),
    ("--kv-type", Completion(kv_type_values, files=False)),
    ("--flash-attn", Completion(flash_attn_values, files=False)))
NUMBER_METAVARS = frozenset({"INTEGER", "FLOAT", "N"})  # an option's value that is a number: no name, no file
_NUMBER = Completion(no_names, files=False)
ARGUMENTS: dict[tuple[str, str], Completion] = {  # (command, parameter): what completes the argument
    ("pull", "references"): Completion(offered_names.models_to_pull, files=False),  # a file: nothing to download
    ("fit", "reference"): _MODEL,
    ("models show", "reference"): Completion(listed_model_names, files=True),
    ("models default", "name"): Completion(listed_model_names, files=True),
    ("models rm", "references"): Completion(offered_names.models_removable, files=False),  # never a file of one's own
    ("conversations show", "name"): _LISTED_CONVERSATION,
    ("conversations rm", "names"): _LISTED_CONVERSATION,
    ("conversations mv", "old"): _LISTED_CONVERSATION,
    ("conversations mv", "new"): Completion(no_names, files=False),
    ("conversations rename", "old"): _LISTED_CONVERSATION,  # mv's other name
    ("conversations rename", "new"): Completion(no_names, files=False),
}


def _completer(completion: Completion) -> Callable[[Any, Any, str], list[str]]:
    """A click completer offering the names that start with what was typed, in any case, but those the argument was
    already given (models rm a b), and none where they cannot be listed; offline where the line gives --offline."""
    from localgen.config import offline_given

    def offered(ctx: Any, param: Any, typed: str) -> list[str]:
        """The names that start with typed."""
        try:
            with offline_given(bool(ctx.params.get("offline"))):
                listed = completion.names(typed)
        except Exception:  # a folder that is a link to itself: the shell is offered nothing, never a traceback
            return []
        given = ctx.params.get(param.name) if param.multiple or param.nargs != 1 else None
        taken = {completion.identity(name) for name in given or ()}
        return [name for name in offered_names.starting_with(listed, typed) if completion.identity(name) not in taken]

    return offered
