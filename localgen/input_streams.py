"""The streams a file option cannot read: a socket, and a pipe the process itself writes to (its stdout's, say),
whose end a read would wait for forever."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat

from localgen.errors import UsageError
from localgen.stdin_names import own_descriptor


def refuse_unreadable_stream(status: os.stat_result, name: str, option: str) -> None:
    """Refuse a file given to option (named name) that no read can take: a socket (opening one fails with "No such
    device or address"), or a pipe this process holds a writing end of (its stdout in a pipeline with
    `-f /dev/stdout`, `-f FIFO > FIFO`, `-f /dev/fd/3 3> >(cat)`), so that its end, which a read waits for, cannot
    come while it runs."""
    if stat.S_ISSOCK(status.st_mode):
        raise UsageError(f"{name} is a socket, not a file", hint=f"pass a file or a pipe to {option}")
    named = own_descriptor(name)
    fd = _writing_descriptor(status, named) if stat.S_ISFIFO(status.st_mode) else None
    if fd is None:
        return
    hint = f"pass a file, or the pipe the text comes from, to {option}"
    if fd in (1, 2):
        stream, written = ("stdout", "the answer") if fd == 1 else ("stderr", "its messages")
        raise UsageError(f"{name} is {stream}, the pipe this run writes {written} to, so reading it would never end",
                         hint=hint)
    ends = "so that the pipe ends as its writers close it"
    if fd == 0:  # stdin opened on the pipe both ways (<>FIFO): read for reading only, it ends as its writers close it
        hint = f"read the pipe as stdin with < {name}, in place of {option} {name} and <>, {ends}, or {hint}"
    elif fd != named:  # a descriptor opened on the pipe (4<>FIFO, a script's exec 3<>FIFO), which the run needs not
        hint = f"drop the redirect that opens descriptor {fd} on the pipe, or close it for the run ({fd}>&- after " \
               f"the command), {ends}, or {hint}"
    raise UsageError(f"{name} is a pipe this run holds open for writing (as descriptor {fd}), so reading it would "
                     "never end", hint=hint)


def _writing_descriptor(status: os.stat_result, named: int | None) -> int | None:
    """The descriptor of this process open for writing on the pipe that status is of: named, the one its name names
    (/dev/stderr: 2), where it is one, else the lowest (None: none is)."""
    for fd in ([] if named is None else [named]) + _open_descriptors():
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
