"""The usage error (exit code 2) a `localgen` command line gets, read from main() in the test process, and the
parameters the parser gives a command line a hint suggests."""

from __future__ import annotations

import shlex

import pytest
import typer

from localgen.cli import _resume_without_value, app, main


def usage_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The message and the hint of the usage error `localgen ARGS` gets (exit code 2), on one line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("localgen: error: ") and err.endswith(")\n") and err.count("\n") == 1, err
    message, _, hint = err.removeprefix("localgen: error: ").rstrip("\n").partition(" (hint: ")
    return message, hint[:-1]


def parsed_command_line(command_line: str) -> dict[str, object]:
    """The parameters the real command line parser gives a suggested `localgen COMMAND ...` (a usage error fails the
    test), chat's --resume alone read as main reads it."""
    words = shlex.split(command_line)
    assert words[0] == "localgen", command_line
    command = typer.main.get_command(app).commands[words[1]]  # type: ignore[attr-defined]
    return command.make_context(words[1], _resume_without_value(words[1:])[1:]).params
