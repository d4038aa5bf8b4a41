"""What localgen says before any command: its version line, and the error for text piped in with no command
(`echo text | localgen`, `run` forgotten)."""

from __future__ import annotations

import os
import stat
import sys
from typing import NoReturn

from localgen.descriptors import same_file

NO_COMMAND_HINT = 'answer a prompt with `... | localgen run "PROMPT"`; `localgen --help` lists the commands'


def stdin_may_send_text() -> bool:
    """Whether stdin may hold text that `localgen` alone would drop: a pipe, a socket, a file with text in it or a
    device other than a terminal; not a terminal, /dev/null, an empty file, nor a closed stdin (<&-)."""
    try:
        status = os.fstat(0)
    except OSError:  # closed
        return False
    if os.isatty(0) or (stat.S_ISREG(status.st_mode) and status.st_size == 0):
        return False
    return not same_file(0, os.devnull)


def refuse_no_command() -> NoReturn:
    """Refuse `localgen` alone where stdin may send text (stdin_may_send_text): what was piped in would be dropped,
    and the help written where the answer was meant to go."""
    from localgen import console
    from localgen.errors import EXIT_USAGE

    console.error("no command given: localgen alone reads nothing from stdin", hint=NO_COMMAND_HINT)
    sys.exit(EXIT_USAGE)


def version_line() -> str:
    """localgen's version and llama-cpp-python's (read, not imported: its library takes a while to load)."""
    from localgen import __version__
    from localgen.llama_install import installed_version

    return f"localgen {__version__} (llama-cpp-python {installed_version() or 'not installed'})"
