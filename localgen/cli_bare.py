"""The error for `localgen` alone with text piped in (`echo text | localgen`, `run` forgotten)."""

from __future__ import annotations

NO_COMMAND_HINT = 'answer a prompt with `... | localgen run "PROMPT"`; `localgen --help` lists the commands'


def no_command_error() -> tuple[str, str]:
    """The error, and its hint, for `localgen` alone where stdin is not a terminal: what was piped in would be
    dropped, and the help written where the answer was meant to go."""
    return "no command given: localgen alone reads nothing from stdin", NO_COMMAND_HINT
