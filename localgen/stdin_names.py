"""The standard streams where a file is asked for: "-", /dev/stdin and its like for standard input; and the streams a
file option cannot read: a socket, and a pipe the process itself writes to (its stdout's, say)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
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


def refuse_unreadable_stream(status: os.stat_result, name: str, option: str) -> None:
    """Refuse a file given to option (named name) that no read can take: a socket (opening one fails with "No such
    device or address"), or a pipe this process holds a writing end of (its stdout in a pipeline with
    `-f /dev/stdout`, `-f FIFO > FIFO`, `-f /dev/fd/3 3> >(cat)`), so that its end, which a read waits for, cannot
    come while it runs."""
    if stat.S_ISSOCK(status.st_mode):
        raise UsageError(f"{name} is a socket, not a file", hint=f"pass a file or a pipe to {option}")
    fd = _writing_descriptor(status) if stat.S_ISFIFO(status.st_mode) else None
    if fd is None:
        return
    hint = f"pass a file, or the pipe the text comes from, to {option}"
    if fd in (1, 2):
        stream, written = ("stdout", "the answer") if fd == 1 else ("stderr", "its messages")
        raise UsageError(f"{name} is {stream}, the pipe this run writes {written} to, so reading it would never end",
                         hint=hint)
    raise UsageError(f"{name} is a pipe this run holds open for writing (as descriptor {fd}), so reading it would "
                     "never end", hint=hint)


def _writing_descriptor(status: os.stat_result) -> int | None:
    """The lowest of this process's descriptors open for writing on the pipe that status is of (None: none is)."""
    for fd in _open_descriptors():
        with contextlib.suppress(OSError):  # closed since it was listed (the listing's own)
            if os.path.samestat(status, os.fstat(fd)) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
                return fd
    return None


def _open_descriptors() -> list[int]:
    """This process's open descriptors, lowest first (where no folder lists them: the standard three)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return sorted(int(entry) for entry in os.listdir(folder))
    return [0, 1, 2]


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
