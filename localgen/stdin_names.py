"""The standard streams where a file is asked for: "-", /dev/stdin and its like for standard input."""

from __future__ import annotations

import fcntl
import os
from typing import IO

from localgen.errors import UsageError

STDIN_NAME = "-"  # as a prompt or a -f file: read standard input
STDIN_PATHS = {"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"}  # its names as a file, missing while it is closed
STDOUT_PATHS = {"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"}  # stdout's names as a file
PROMPT_READER = "the prompt -"  # run's prompt argument where it reads stdin, as messages name it
UNASKED_STDIN = "piped stdin"  # stdin read because it is a pipe, no option or argument having asked for it


def names_stdin(name: str) -> bool:
    """Whether a file name given to an option reads stdin: "-", or one of STDIN_PATHS where it is the file stdin is
    (a pipe read through it leaves none of it for "-": `-f /dev/stdin -f -` reads stdin twice)."""
    if name == STDIN_NAME:
        return True
    if name not in STDIN_PATHS:
        return False
    try:
        return os.path.samestat(os.stat(name), os.fstat(0))
    except OSError:  # stdin closed (<&-): check_file_path says so
        return False


def nohup_stdin(stream: IO[bytes]) -> bool:
    """Whether stream is /dev/null open for writing only, as nohup gives a command started from a terminal for
    stdin: no input, rather than one that cannot be read."""
    try:
        fd = stream.fileno()
        write_only = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        return write_only and os.path.samestat(os.fstat(fd), os.stat(os.devnull))
    except (OSError, ValueError, AttributeError):  # closed, or no descriptor behind it
        return False


def nohup_stdin_unread(option: str | None = None) -> UsageError:
    """The error for stdin asked for (as '-', or with option's -) where it is nohup's write-only /dev/null."""
    asked = stdin_reader_name(option) if option else STDIN_NAME
    return UsageError(f"stdin is /dev/null open for writing only (as nohup gives it), so '{asked}' has nothing to read",
                      hint=f"pipe text in (cmd | nohup localgen run {asked}{' PROMPT' if option else ''}), or read a "
                           "file with -f FILE")


def stdin_reader_name(option: str, typed: str | None = None) -> str:
    """The option that reads stdin as messages name it: its short form with the name typed for stdin (`-f -`,
    `--system-file /dev/stdin`); typed None: "-"."""
    return f"{option.split('/')[0]} {typed or STDIN_NAME}"
