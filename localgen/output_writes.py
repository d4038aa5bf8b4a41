"""Writing output whole to a file, a pipe or a terminal: a full one is waited on, until a signal ends the program."""

from __future__ import annotations

import errno
import os
import select
import signal
import stat
import threading
import time
from typing import TextIO

from localgen.errors import LocalgenError
from localgen.signals import SignalExit

ENDING_WRITE_WAIT_S = 2.0  # once a signal ends the program: how long a write its reader keeps waiting still waits


class WriteGivenUp(BrokenPipeError):
    """A write its reader kept waiting past the bound once a signal ended the program: the output is given up, as a
    closed pipe's is, and the program ends as the signal (signum) says."""

    def __init__(self, signum: int) -> None:
        super().__init__(errno.EPIPE, "its reader took no more as the program ended")
        self.signum = signum


class _WaitCut(Exception):
    """Raised by a signal that ends the program into a wait for a full output to take more: it waits bounded now."""


_ending: tuple[int, float] | None = None  # the signal ending the program, and when a blocked write gives up
_writing: int | None = None  # the descriptor the main thread's write is under way to
_waiting = False  # that write waits (poll) for its reader to take some
_unblocked: int | None = None  # a descriptor made non-blocking here while the program ends, to be put back


def write_out(stream: TextIO, text: str) -> None:
    """Write model output and flush: a closed pipe, or a socket its reader reset, is a BrokenPipeError, a closed
    terminal ends the program as its SIGHUP does (SignalExit), any other failure is a LocalgenError."""
    try:
        write_whole(stream, text)
        stream.flush()
    except BrokenPipeError:
        raise
    except ConnectionResetError as exc:  # the reader has gone as a closed pipe's has, only less gently
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE)) from exc
    except OSError as exc:
        if terminal_hung_up(exc, stream):
            raise SignalExit(signal.SIGHUP) from exc
        raise stdout_error(exc) from exc


def write_whole(stream: TextIO, text: str) -> None:
    """stream.write(text), its bytes written straight to the stream's file in as many writes as the file takes: a
    pipe's reader that leaves part way is met as a BrokenPipeError, where Python's unbuffered text layer (`python
    -u`, PYTHONUNBUFFERED=1) drops the rest of a long text without a word, and a full pipe or terminal left
    non-blocking (by a Node.js parent, say) is waited on, as a blocking one is, where Python's buffered layer fails
    and its unbuffered one retries at full speed. Once a signal ends the program (end_writes_on), a full one is
    waited on ENDING_WRITE_WAIT_S at most (WriteGivenUp). A stream with no file (a test's) is written as it is."""
    global _writing
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        stream.write(text)
        return
    data = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
    buffered = True  # what another writer left in the stream's buffer goes first
    main = threading.current_thread() is threading.main_thread()  # the thread signal handlers run in
    if main:
        _writing = fd
    try:
        while data:
            try:
                if buffered:
                    stream.flush()
                    buffered = False
                if _ending is not None:
                    _unblock(fd)  # a write cannot wait past the bound
                data = data[os.write(fd, data):]
            except BlockingIOError:
                _wait_writable(fd)  # until the reader takes some, or leaves (the next write's BrokenPipeError)
    finally:
        if main:
            _writing = None
        _put_back_blocking(fd)


def end_writes_on(signum: int) -> None:
    """A signal handler's part once the signal ends the program: a write its reader keeps waiting (a full pipe, a
    terminal held with Ctrl-S) waits ENDING_WRITE_WAIT_S more at most, then fails (WriteGivenUp); what the reader
    took stays as it is."""
    global _ending
    if _ending is None:
        _ending = (signum, time.monotonic() + ENDING_WRITE_WAIT_S)
    if _writing is not None:
        _unblock(_writing)  # the write blocked now comes back (EAGAIN) to wait with the bound
    if _waiting:
        raise _WaitCut  # out of a poll that would be retried unbounded


def _wait_writable(fd: int) -> None:
    """Wait until fd takes more, bounded once a signal ends the program: then WriteGivenUp at the bound."""
    global _waiting
    writable = select.poll()
    writable.register(fd, select.POLLOUT)
    main = threading.current_thread() is threading.main_thread()  # a signal cuts the main thread's wait alone
    try:
        try:
            while _ending is None:
                _waiting = main
                ready = writable.poll()
                _waiting = False  # at once: the signal's handler raises only while it is set
                if ready:
                    return
        except _WaitCut:
            pass
    finally:
        _waiting = False
    assert _ending is not None  # the loop ends once a signal has set it
    signum, gives_up_at = _ending
    if not writable.poll(max(0, (gives_up_at - time.monotonic()) * 1000)):
        raise WriteGivenUp(signum)


def _unblock(fd: int) -> None:
    """Make fd non-blocking (a write to it returns rather than waits), noting it to be put back."""
    global _unblocked
    if _unblocked is None and os.get_blocking(fd):
        _unblocked = fd
        os.set_blocking(fd, False)


def _put_back_blocking(fd: int) -> None:
    """Make fd blocking again where _unblock made it non-blocking: its other writers (a shell) expect it so."""
    global _unblocked
    if _unblocked == fd:
        _unblocked = None
        os.set_blocking(fd, True)


def terminal_hung_up(exc: OSError, stream: TextIO) -> bool:
    """Whether a failed write went to a terminal that has closed: EIO from a character device (isatty() itself
    fails on a terminal once its window is gone)."""
    try:
        return exc.errno == errno.EIO and stat.S_ISCHR(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


_STDOUT_HINTS = {errno.EFBIG: "the file it goes to has reached a size limit (`ulimit -f`, or the file system's: 4 GiB "
                              "on FAT32): send the output elsewhere",
                 errno.EBADF: "stdout is open for reading only (1< FILE): send the output to a file with > FILE"}


def stdout_error(exc: OSError) -> LocalgenError:
    """The error for output that cannot be written (a full disk, a size limit, an I/O error, stdout open to read)."""
    hint = _STDOUT_HINTS.get(exc.errno or 0, "free some space or send the output elsewhere")
    return LocalgenError(f"cannot write to stdout: {exc.strerror or exc}", hint=hint)
