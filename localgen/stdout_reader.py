"""Notice that the reader of a pipe on stdout has gone while nothing is written to it (stdin waited for, the model
loaded, a long prompt read, a --json answer generated), so the work stops then, not at the next write."""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TextIO

from localgen.console import pipe_or_socket
from localgen.signals import (
    READER_GONE_SIGNAL,
    SignalExit,
    handled_after_the_c_call,
    interrupted_at,
    note_reader_gone,
    restore_handlers,
)

READER_DYING_S = 0.1  # how long after a Ctrl-C the run's end waits for a pipe's reader to die of it too (cat: ms)
_PEER_GONE = {errno.EPIPE, errno.ECONNRESET}  # a socket's errors that say its reader closed it, or reset it
_silenced_stdout: os.stat_result | None = None  # stdout's file before silence_stdout pointed it at /dev/null


class ReaderWatch:
    """Whether stdout's reader has gone while the watch lasted."""

    def __init__(self) -> None:
        self.gone = False

    def wait(self, fd: int, is_socket: bool, wake: int, stop: Callable[[], None]) -> None:
        """Wait until fd's reader goes (then note it and call stop), wake can be read (the watch is over), or a
        socket has another error (a refused datagram, a timestamp queued), which is no reader gone: the watch ends."""
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR and POLLHUP are always reported; nothing else is asked for
        poller.register(wake, select.POLLIN)
        while True:
            events = dict(poller.poll())
            happened = events.get(fd, 0)
            if wake in events or happened & select.POLLNVAL:
                return
            if happened:
                if not is_socket or _peer_gone(fd, happened):
                    note_reader_gone()
                    self.gone = True
                    stop()
                return


def _peer_gone(fd: int, happened: int) -> bool:
    """Whether a socket's POLLERR or POLLHUP says its reader has gone: its error is EPIPE or ECONNRESET (closed, or
    reset as a TCP peer's SO_LINGER 0 close does), or there is none and it hung up, as a write would then find.
    Reading the error clears it: a write after a reset meets EPIPE."""
    error = 0
    if happened & select.POLLERR:
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as sock:
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return error in _PEER_GONE or (error == 0 and bool(happened & select.POLLHUP))


def await_the_reader_dying(stream: TextIO) -> None:
    """Wait up to READER_DYING_S after a Ctrl-C for stream's reader, a pipe's, to die of it too, noting it if so."""
    piped, at = _pipe_fd(stream), interrupted_at()
    if piped is None or piped[1] or at is None:
        return
    poller = select.poll()
    poller.register(piped[0], 0)  # POLLERR: the read end closed
    if poller.poll(max(0.0, at + READER_DYING_S - time.monotonic()) * 1000):
        note_reader_gone()


def reader_shows_on_a_terminal(stream: TextIO) -> bool:
    """Whether the process reading stream's pipe as its stdin writes its stdout to the terminal stderr shows
    (`localgen run x | (trap '' INT; cat)`, alive after a Ctrl-C): what is written to stream shows there, its
    newline ending the ^C's line. A shell holding the pipe while its child reads it (the subshell around cat) is
    passed over. False where /proc cannot tell."""
    piped = _pipe_fd(stream)
    terminal = next((_terminal(s) for s in (sys.stderr, sys.__stderr__) if _terminal(s) is not None), None)
    if piped is None or piped[1] or terminal is None:
        return False
    with contextlib.suppress(OSError):
        pipe = f"pipe:[{os.fstat(piped[0]).st_ino}]"
        readers = {entry.name for entry in os.scandir("/proc")
                   if entry.name.isdigit() and _link(f"/proc/{entry.name}/fd/0") == pipe}
        parents = {parent_pid(reader) for reader in readers}
        return any(_terminal(f"/proc/{reader}/fd/1") == terminal for reader in readers - parents)
    return False


def substitution_pipe(fd: int) -> bool:
    """Whether fd (stdout as it was before silence_stdout pointed it at /dev/null) is a pipe the shell made for a
    process substitution (`> >(cat)`, `< <(sleep 100)`), whose other end a child of this process holds, no part of
    the shell's job: bash leaves the descriptor it named (/dev/fd/63) open beside fd, so that another descriptor of
    this process is the same pipe. False where none is (`| cat`, a neighbour in the pipeline), or where /proc cannot
    tell."""
    try:
        pipe = _silenced_stdout if fd == 1 and _silenced_stdout is not None else os.fstat(fd)
        if not stat.S_ISFIFO(pipe.st_mode):
            return False
        others = [int(name) for name in os.listdir("/proc/self/fd") if name.isdigit() and int(name) > 2]
    except OSError:
        return False
    for other in others:
        with contextlib.suppress(OSError):  # (the folder's own descriptor, closed once listed)
            if other != fd and os.path.samestat(os.fstat(other), pipe):
                return True
    return False


def note_stdout_silenced() -> None:
    """Note what stdout is as it is about to be pointed at /dev/null (silence_stdout), for substitution_pipe."""
    global _silenced_stdout
    with contextlib.suppress(OSError):
        _silenced_stdout = _silenced_stdout or os.fstat(1)


def _status_fields(pid: str) -> list[str] | None:
    """The fields of /proc/PID/stat after the process's name (state, parent, ...), or None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as status:
            return status.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def parent_pid(pid: str) -> str | None:
    """The process id of pid's parent (as /proc names it), or None where it is gone."""
    fields = _status_fields(pid)
    return fields[1] if fields and len(fields) > 1 else None


def _link(path: str) -> str | None:
    """Where the link at path leads, or None where it cannot be read (a process gone, or another user's)."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def _terminal(what: TextIO | str | None) -> int | None:
    """The device number of the terminal a stream or a path (/proc/PID/fd/1) is, or None where it is none."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd_or_path = what if isinstance(what, str) else what.fileno()  # type: ignore[union-attr]
        status = os.stat(fd_or_path)
        if stat.S_ISCHR(status.st_mode) and (isinstance(what, str) or os.isatty(fd_or_path)):
            return status.st_rdev
    return None


def _pipe_fd(stream: TextIO) -> tuple[int, bool] | None:
    """stream's descriptor, and whether it is a socket, where it is a pipe or a socket, whose reader can go; None for
    a file or a terminal."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    return (fd, stat.S_ISSOCK(mode)) if pipe_or_socket(mode) else None


@contextlib.contextmanager
def watching_the_reader(stream: TextIO, stop: Callable[[], None]) -> Iterator[ReaderWatch]:
    """While active, a thread calls stop() as soon as the reader of stream (a pipe or a socket) goes, which a
    write would only find out at the next write; the watch's gone says whether it did."""
    watch = ReaderWatch()
    piped = _pipe_fd(stream)
    if piped is None:
        yield watch
        return
    wake_read, wake_write = os.pipe()
    try:
        thread = threading.Thread(target=watch.wait, args=(*piped, wake_read, stop), name="stdout reader watch",
                                  daemon=True)
        thread.start()
        try:
            yield watch
        finally:
            os.write(wake_write, b"x")
            thread.join()
    finally:
        os.close(wake_read)
        os.close(wake_write)


def _end_as_a_closed_pipe(signum: int, frame: FrameType | None) -> None:
    """READER_GONE_SIGNAL's handler: the program ends as SIGPIPE would end it (exit 141), its cleanups run."""
    if not handled_after_the_c_call(signum, frame):
        raise SignalExit(signal.SIGPIPE)


@contextlib.contextmanager
def ending_when_the_reader_goes(stream: TextIO) -> Iterator[None]:
    """While active, the reader of stream (a pipe or a socket) going ends the program (SignalExit, exit 141) in the
    main thread at once, as a Ctrl-C would: a wait for stdin or for a pipe is cut short, and a model's load gives up
    first (signals.deferred_signals notes the signal, which its progress callback reads, and raises it after)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets Python's handlers
        yield
        return
    main = threading.main_thread().ident
    assert main is not None
    previous = {READER_GONE_SIGNAL: signal.signal(READER_GONE_SIGNAL, _end_as_a_closed_pipe)}
    try:
        with watching_the_reader(stream, lambda: signal.pthread_kill(main, READER_GONE_SIGNAL)):
            yield
    finally:
        restore_handlers(previous)
