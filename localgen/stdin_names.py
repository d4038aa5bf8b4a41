"""The standard streams where a file is asked for: "-", /dev/stdin and its like for standard input."""

from __future__ import annotations

import fcntl
import os
import re
from typing import IO

from localgen.descriptors import same_file
from localgen.errors import UsageError

STDIN_NAME = "-"  # as a prompt or a -f file: read standard input
_DESCRIPTOR_NAME = re.compile(r"/dev/(?:std(?P<stream>in|out|err)|fd/(?P<fd>\d+))"  # a descriptor's names as a file
                              r"|/proc/(?P<pid>self|\d+)/fd/(?P<n>\d+)")
_STANDARD_DESCRIPTORS = {"in": 0, "out": 1, "err": 2}
PROMPT_READER = "the prompt -"  # run's prompt argument where it reads stdin, as messages name it
UNASKED_STDIN = "piped stdin"  # stdin read because it is a pipe, no option or argument having asked for it


def names_a_descriptor(name: str) -> bool:
    """Whether name is the name of a process's open descriptor rather than of a file: /dev/stdin, /dev/stdout,
    /dev/stderr, /dev/fd/N, /proc/self/fd/N or /proc/PID/fd/N, as written or not (/dev/./stderr)."""
    return _descriptor_name(name) is not None


def own_descriptor(name: str) -> int | None:
    """The descriptor of this process that name names (/dev/stderr: 2, /dev/fd/3: 3, /proc/PID/fd/1 with this
    process's PID: 1), whether or not it is open; None where it names none."""
    match = _descriptor_name(name)
    if match is None or match["pid"] not in (None, "self", str(os.getpid())):
        return None
    return _STANDARD_DESCRIPTORS[match["stream"]] if match["stream"] else int(match["fd"] or match["n"])


def _descriptor_name(name: str) -> re.Match[str] | None:
    """The match of name against the names of descriptors, its directory resolved as the kernel resolves it as the
    file opens (/dev/./stdout and //dev/fd/1 name descriptors; /dev/fd/../stdin does not: /dev/fd links to
    /proc/self/fd, so it is /proc/self/stdin, which is no file)."""
    if not name.startswith("/"):
        return None
    directory, base = os.path.split(name)
    return _DESCRIPTOR_NAME.fullmatch(os.path.join(os.path.realpath(directory), base))


def names_stdin(name: str) -> bool:
    """Whether a file name given to an option reads stdin: "-", or a name of descriptor 0 (/dev/stdin) where it is
    the file stdin is (a pipe read through it leaves none of it for "-": `-f /dev/stdin -f -` reads stdin twice)."""
    if name == STDIN_NAME:
        return True
    return own_descriptor(name) == 0 and same_file(0, name)  # stdin closed (<&-): no; check_file_path says so


def nohup_stdin(stream: IO[bytes]) -> bool:
    """Whether stream is /dev/null open for writing only, as nohup gives a command started from a terminal for
    stdin: no input, rather than one that cannot be read."""
    try:
        fd = stream.fileno()
        write_only = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        return write_only and same_file(fd, os.devnull)
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
