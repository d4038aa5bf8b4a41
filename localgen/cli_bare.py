"""What localgen says before any command: its version line, and the error for text piped in with no command
(`echo text | localgen`, `run` forgotten)."""

from __future__ import annotations

import sys
from typing import NoReturn

NO_COMMAND_HINT = 'answer a prompt with `... | localgen run "PROMPT"`; `localgen --help` lists the commands'


def refuse_no_command() -> NoReturn:
    """Refuse `localgen` alone where stdin is not a terminal: what was piped in would be dropped, and the help
    written where the answer was meant to go."""
    from localgen import console
    from localgen.errors import EXIT_USAGE

    console.error("no command given: localgen alone reads nothing from stdin", hint=NO_COMMAND_HINT)
    sys.exit(EXIT_USAGE)


def version_line() -> str:
    """localgen's version and llama-cpp-python's (read, not imported: its library takes a while to load)."""
    from localgen import __version__
    from localgen.llama_install import installed_version

    return f"localgen {__version__} (llama-cpp-python {installed_version() or 'not installed'})"
