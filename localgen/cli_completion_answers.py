"""The answers every shell's completion gets, as whole words: the word being completed, each way it can end (click
answers `--model=smo` with smollm2-135m alone, the value, which the shell then takes for the whole word), and whether
the shell may complete file names where none is answered (never for a conversation's name)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from localgen.cli_args import listing_options

NAMES_NO_FILE = "names_no_file"  # set on a click parameter whose value is never a file (a saved conversation's name)
NO_FILES = ":no-files"  # the line that asks localgen's bash and zsh scripts to offer no file names either


@dataclass(frozen=True)
class Answers:
    """The words that complete the word typed, each with its help (""), and whether file names may be offered."""

    words: list[tuple[str, str]]
    files: bool

    def lines(self, word_line: Callable[[str, str], str]) -> str:
        """The answer a script reads: each word's line (word_line of the word and its help), else NO_FILES where the
        shell is to offer nothing at all."""
        if not self.words and not self.files:
            return NO_FILES
        return "\n".join(word_line(word, help_text) for word, help_text in self.words)


def completion_answers(shell: Any, args: list[str], incomplete: str) -> Answers:
    """The words that complete incomplete after args: a long option's value after `=` with the option kept
    (--model=smollm2-135m); none for a short option's (-m=NAME: localgen refuses it)."""
    from typer._click.shell_completion import _resolve_context, _resolve_incomplete

    if args[:1] == ["help"]:
        return _help_answers(shell, args, incomplete)
    if incomplete[:1] == "-" and incomplete[:2] != "--" and "=" in incomplete:
        return Answers([], files=False)
    value = incomplete.partition("=")[2] if incomplete[:2] == "--" and "=" in incomplete else incomplete
    option = incomplete[:len(incomplete) - len(value)]  # --model= (bash may pass the word whole: its breaks)
    ctx = _resolve_context(shell.cli, shell.ctx_args, shell.prog_name, args)  # as click's get_completions does
    completed, typed = _resolve_incomplete(ctx, args, incomplete)
    words = [(option + item.value, item.help or "") for item in completed.shell_complete(ctx, typed)]
    listing = listing_options(ctx.command) if completed is ctx.command else {}
    if listing:
        return _listing_answers(ctx, listing, words, typed)
    return Answers(words, files=not getattr(completed, NAMES_NO_FILE, False))


def _listing_answers(ctx: Any, listing: dict[Any, Any], words: list[tuple[str, str]], typed: str) -> Answers:
    """The answers after a listing group's name: its listing options besides click's (not one given already), and
    no subcommand, nor file, once one is given (`models --json list` is refused: the option is list's)."""
    from typer._click.core import ParameterSource

    given = [param for param in listing if ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE]
    if given:
        words = [(word, help_text) for word, help_text in words if word.startswith("-")]
    offered = [(name, shown.help or "") for param, shown in listing.items() if param not in given
               for name in param.opts if typed[:1] == "-" and name.startswith(typed)]
    return Answers(sorted(words + offered, key=lambda answer: answer[0].lstrip("-")), files=False)


def _help_answers(shell: Any, args: list[str], incomplete: str) -> Answers:
    """What completes `localgen help WORDS`: the subcommands of the command WORDS name (help conversations: list,
    show, ...), as `localgen WORDS --help` lists them; no option, argument or file, which help does not take."""
    command = shell.cli
    for word in itertools.dropwhile(lambda word: word == "help", args):  # help help run: help run
        command = getattr(command, "commands", {}).get(word)
        if command is None:  # help run extra, help nosuch: no command is named
            return Answers([], files=False)
    if incomplete[:1] == "-":
        return Answers([], files=False)
    return Answers([(name, sub.get_short_help_str()) for name, sub in getattr(command, "commands", {}).items()
                    if name.startswith(incomplete) and not sub.hidden], files=False)


class NoFilesLine:
    """The part of each shell's completion class that names, among its script's names, the line that asks for no
    file names either (no_files: NO_FILES)."""

    def source_vars(self) -> dict[str, Any]:
        """The script's names, and no_files."""
        return {**super().source_vars(), "no_files": NO_FILES}  # type: ignore[misc]
