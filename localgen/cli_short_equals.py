"""A short option given its value after = (-s=terse, -n=3), which click reads as the value "=terse": refused before
anything runs, with the command written as it parses (-s terse)."""

from __future__ import annotations

import shlex

import typer

from localgen.cli_args import apart_at_equals, arity, read_words, short_with_equals, typed_command
from localgen.cli_option_values import as_typed, runs_as_written


def short_equals_error(app: typer.Typer, args: list[str]) -> tuple[str, str] | None:
    """For a short option that takes a value written -X=VALUE, where the command line with each such value after a
    space parses (else click's error, and its hint, say what else is wrong): the one-line message and the hint, or
    None. A value that starts with = after a space (-s '=x'), or a long option's (--system==x), is taken as it is."""
    names, command = typed_command(app, args)
    takes_value = arity(command.params)
    words = args[len(names):]
    stuck = [word for word, part in read_words(words, takes_value)
             if part == "option" and short_with_equals(word, takes_value)]
    if not stuck:
        return None
    apart = apart_at_equals(words, takes_value)
    if not runs_as_written(command, apart):
        return None
    option = stuck[0][:2]
    message = f"{stuck[0]}: a short option takes its value after a space ({option} VALUE) or joined ({option}VALUE), " \
        "not after ="
    return as_typed(message), as_typed(f"use `{shlex.join(['localgen', *names, *apart])}`")
