"""Writing output whole to a file, a pipe or a terminal: a full one is waited on, until a signal ends the program."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NamedTuple, TextIO

from localgen.config import settings
from localgen.descriptors import same_file
from localgen.errors import SIZE_LIMITS, LocalgenError, os_reason
from localgen.signals import SignalExit


class WriteGivenUp(BrokenPipeError):
    """A write its reader kept waiting past the bound once a signal ended the program: the output is given up, as a
    closed pipe's is, and the program ends as the signal (signum) says."""

    def __init__(self, signum: int) -> None:
        super().__init__(errno.EPIPE, "its reader took no more as the program ended")
        self.signum = signum


ROOM_CHECK_SECONDS = 0.5  # how often a --json answer's file is looked at again for room others may have taken
_ending: int | None = None  # the signal ending the program, once it has come
_wait_left = 0.0  # how long writes may still wait on their reader once it has come (set as it comes)
_writing = False  # the main thread's write is under way (signal handlers run in that thread alone)
_in_system_call = False  # the main thread's write is in os.write or its wait for the reader, where the timer may cut it
_timed_since: float | None = None  # when the timer bounding that write was set going
_alarm_handler: object = None  # SIGALRM's handler before the timer's, put back once the write is over


def write_out(stream: TextIO, text: str, *, on_written: Callable[[int], None] | None = None) -> None:
    """Write model output and flush: a closed pipe, or a socket its reader reset, is a BrokenPipeError, a closed
    terminal ends the program as its SIGHUP does (SignalExit), any other failure is a LocalgenError. on_written, when
    given, is told how many bytes each write put."""
    try:
        write_whole(stream, text, on_written=on_written)
        stream.flush()
    except BrokenPipeError:
        raise
    except ConnectionResetError as exc:  # the reader has gone as a closed pipe's has, only less gently
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE)) from exc
    except OSError as exc:
        if terminal_hung_up(exc, stream):
            raise SignalExit(signal.SIGHUP) from exc
        raise stdout_error(exc) from exc


def write_whole(stream: TextIO, text: str, *, on_written: Callable[[int], None] | None = None) -> None:
    """stream.write(text), its bytes written straight to the stream's file in as many writes as the file takes: a
    pipe's reader that leaves part way is met as a BrokenPipeError, where Python's unbuffered text layer (`python
    -u`, PYTHONUNBUFFERED=1) drops the rest of a long text without a word, and a full pipe or terminal left
    non-blocking (by a Node.js parent, say) is waited on, as a blocking one is, where Python's buffered layer fails
    and its unbuffered one retries at full speed. Once a signal ends the program (end_writes_on), writes wait on
    their reader LOCALGEN_ENDING_WRITE_WAIT's seconds (2 by default) in all at most (WriteGivenUp), counted while they
    wait: the file's flags, which its other writers share, stay as they are. on_written, when given, is told how
    many bytes each write put. A stream with no file (a test's) is written as it is."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        stream.write(text)
        return
    data = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
    buffered = True  # what another writer left in the stream's buffer goes first
    with _bounded_once_ending(fd) as waiting_on_reader:
        while data:
            try:
                if buffered:
                    stream.flush()
                    buffered = False
                with waiting_on_reader():
                    put = os.write(fd, data)
                data = data[put:]
                if on_written is not None:
                    on_written(put)
            except BlockingIOError:
                with waiting_on_reader():
                    _wait_writable(fd)  # until the reader takes some, or leaves (the next write's BrokenPipeError)


class WholeWrites:
    """A text stream whose writes are write_whole's (a full terminal waited on, the wait bounded once a signal ends
    the program), for a writer that writes to the stream itself (rich's Console); the rest is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._given_up = False  # a write was given up: the output is over

    def write(self, text: str) -> int:
        """Write text whole; a write given up ends the program as its signal says (SignalExit), where rich would
        take it for a closed pipe (exit 1, stdout sent to /dev/null). Once one is given up, every later write is
        taken and dropped, as rich drops a closed pipe's: rich keeps what it failed to write and sends it again with
        each later print (the view's close), which a terminal read on would show twice."""
        if self._given_up:
            return len(text)
        try:
            write_whole(self._stream, text)
        except WriteGivenUp as exc:
            self._given_up = True
            raise SignalExit(exc.signum) from exc
        return len(text)

    def __getattr__(self, name: str) -> Any:
        """The stream's own (flush, fileno, isatty, encoding)."""
        return getattr(self._stream, name)


def write_record(stream: TextIO, text: str) -> None:
    """Write a record (a JSON document: run's, or a listing's) whole (write_out): where the stream is a regular file,
    one that fails part way (a full disk, a size limit) is cut back off it before its error, so that no part of it
    stays, unless another process wrote to the file meanwhile (a shared `>> log`), whose lines stay, the error saying
    the file may end in part of the record; a pipe's reader keeps what it has read, which cannot be taken back."""
    end = _file_end(stream)
    put = 0  # the bytes this write put in the file

    def count(written: int) -> None:
        nonlocal put
        put += written

    try:
        write_out(stream, text, on_written=count)
    except LocalgenError as exc:
        if end is not None and put and not _cut_back(stream, end, put):
            raise LocalgenError(f"{exc.message}; the file may end in part of the record, as another process wrote "
                                "to it too", hint=exc.hint, exit_code=exc.exit_code) from exc
        raise
    except BaseException:
        if end is not None and put:
            _cut_back(stream, end, put)
        raise


def _cut_back(stream: TextIO, end: int, put: int) -> bool:
    """Cut the file stream writes to back to end, where it holds just what was there and the put bytes written on
    (no other process wrote to it meanwhile, whose part would go too); whether it holds no part of them now."""
    with contextlib.suppress(OSError, ValueError):
        fd = stream.fileno()
        if os.fstat(fd).st_size != end + put:
            return False
        os.ftruncate(fd, end)
        os.lseek(fd, end, os.SEEK_SET)  # a stderr sent to the same file writes on from there
        return True
    return False


def _file_end(stream: TextIO) -> int | None:
    """The size of the regular file stream writes to (what it held unwritten written first) where a write goes on at
    its end (a file written from its start, or appended to); None otherwise (a pipe, a terminal, a write over a
    file's middle)."""
    try:
        stream.flush()
        fd = stream.fileno()
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        at = status.st_size if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND else os.lseek(fd, 0, os.SEEK_CUR)
    except (OSError, ValueError, AttributeError):
        return None
    return status.st_size if at >= status.st_size else None


def end_writes_on(signum: int) -> None:
    """A signal handler's part once the signal ends the program: a write its reader keeps waiting (a full pipe, a
    terminal held with Ctrl-S) waits LOCALGEN_ENDING_WRITE_WAIT's seconds (2 by default) more at most, then fails
    (WriteGivenUp); what the reader took stays as it is."""
    global _ending, _wait_left
    if _ending is None:
        _wait_left = settings().ending_write_wait_s  # first: a write cut from here on waits no more than this
        _ending = signum
    if _writing:
        _start_timer()  # the write under way now waits bounded


@contextlib.contextmanager
def _bounded_once_ending(fd: int) -> Iterator[Callable[[], contextlib.AbstractContextManager[None]]]:
    """While a write in the main thread to a reader that can keep it waiting (a pipe, a socket, a terminal) is under
    way: once a signal ends the program, a timer cuts it at the bound. Gives what marks the write's system calls
    (_waiting_on_reader). A regular file's write is never cut; another thread's leaves the main thread's state as
    it is, as does one a signal handler (Ctrl-Z's) makes while the main thread's write is under way, cut by that
    write's timer: its end neither stops the timer nor marks that write as over."""
    global _writing
    if threading.current_thread() is not threading.main_thread():
        yield contextlib.nullcontext  # no signal cuts another thread's write
        return
    cuttable = _has_a_reader(fd)  # a file's write does not wait on a reader
    if _writing or not cuttable:
        yield lambda: _waiting_on_reader(cuttable)
        return
    _writing = True
    try:
        if _ending is not None:
            _start_timer()
        yield lambda: _waiting_on_reader(True)
    finally:
        _writing = False  # first: a timer going off from now on changes nothing
        _stop_timer()


def _start_timer() -> None:
    """Set the timer going for the time writes may still wait (SIGALRM then gives the write up)."""
    global _timed_since, _alarm_handler
    if _timed_since is not None:
        return
    _timed_since = time.monotonic()  # first: a signal's handler landing from here on finds the timer going
    _alarm_handler = signal.signal(signal.SIGALRM, _give_up)
    signal.setitimer(signal.ITIMER_REAL, max(_wait_left, 0.001))  # 0 would not set it going


def _stop_timer() -> None:
    """Stop the timer, counting the time the write waited off what is left, and put SIGALRM's handler back."""
    global _timed_since, _wait_left
    if _timed_since is None:
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    _wait_left -= time.monotonic() - _timed_since
    _timed_since = None
    previous = signal.SIG_DFL if _alarm_handler is None else _alarm_handler
    signal.signal(signal.SIGALRM, previous)  # type: ignore[arg-type]


def _give_up(_signum: int, _frame: FrameType | None) -> None:
    """SIGALRM's handler while a write is timed: the write (blocked, its system call cut by the signal) gives up."""
    if _writing and _in_system_call and _ending is not None:
        raise WriteGivenUp(_ending)


@contextlib.contextmanager
def _waiting_on_reader(cuttable: bool) -> Iterator[None]:
    """Mark the main thread's system call (a write, or the wait for the reader to take more) as one the timer may
    cut or not: the give-up is raised in a cuttable one alone, never between a write that returned and the count of
    what it put. The mark it found (that of the write a signal handler's write cut in on) is put back after it."""
    global _in_system_call
    found = _in_system_call
    _in_system_call = cuttable
    try:
        yield
    finally:
        _in_system_call = found


def _has_a_reader(fd: int) -> bool:
    """Whether fd leads to a reader that can keep a write waiting: a pipe, a socket or a terminal (a character
    device), not a regular file, whose writes the timer could not cut in any case."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return True
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _wait_writable(fd: int) -> None:
    """Wait until fd takes more (a signal's timer cuts the wait as it cuts a blocked write)."""
    writable = select.poll()
    writable.register(fd, select.POLLOUT)
    writable.poll()


def terminal_hung_up(exc: OSError, stream: TextIO) -> bool:
    """Whether a failed write went to a terminal that has closed: EIO from a character device (isatty() itself
    fails on a terminal once its window is gone)."""
    try:
        return exc.errno == errno.EIO and stat.S_ISCHR(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


_STDOUT_HINTS_DEFAULT = "free some space or send the output elsewhere"
_STDOUT_HINTS = {errno.EFBIG: f"the file it goes to has reached a size limit {SIZE_LIMITS}: send the output elsewhere",
                 errno.EBADF: "stdout is open for reading only (1< FILE): send the output to a file with > FILE"}


class FileRoom(NamedTuple):
    """Where a regular file is written next (at), and what may go in from there: up to its `ulimit -f` (limit), and
    the bytes its file system has free for it (disk: the room its last block or space set aside leaves counted,
    None where the file system gives no counts)."""

    at: int
    limit: int | None
    disk: int | None

    @property
    def bytes(self) -> int | None:
        """The bytes that may go in from at (None: no bound can be told)."""
        bounds = [bound for bound in (None if self.limit is None else self.limit - self.at, self.disk)
                  if bound is not None]
        return min(bounds) if bounds else None


def file_room(fd: int) -> FileRoom | None:
    """The FileRoom of the regular file fd goes to; None where it is no regular file, or it cannot be told."""
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        at = status.st_size if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND else os.lseek(fd, 0, os.SEEK_CUR)
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        limit = None if limit == resource.RLIM_INFINITY else limit
        try:
            space = os.fstatvfs(fd)
        except (OSError, ValueError):
            return FileRoom(at, limit, None)
    except (OSError, ValueError):
        return None
    free = (space.f_bfree if may_use_reserved_blocks() else space.f_bavail) * space.f_frsize
    allocated = max(status.st_blocks * 512, status.st_size)  # written over, or set aside for it, without a new block
    # past the end of the file (a hole) its blocks leave no room
    return FileRoom(at, limit, free + max(allocated - at, 0) if space.f_blocks else None)


def file_refusal(fd: int, needed: int = 0) -> LocalgenError | None:
    """The error for /dev/full, or a regular file fd goes to that cannot take needed more bytes (0: any), found
    before they are written: past the process's file size limit (`ulimit -f`: every write past it fails), or on a
    file system with too few blocks free for it to grow into (the room a last block leaves, or space set aside for
    it, is written into, and not refused); None where they may go in, or where it cannot be told (a pipe, a
    terminal, a file system that gives no counts)."""
    if writes_to_dev_full(fd):
        return no_space_error(fd)
    room = file_room(fd)
    return None if room is None else room_refusal(fd, room, needed)


def room_refusal(fd: int, room: FileRoom, needed: int) -> LocalgenError | None:
    """file_refusal's error for the file fd goes to, with room found in it (file_room)."""
    if room.limit is not None and room.at + max(needed, 1) > room.limit:
        reached = f"has reached the size limit on files this process writes ({room.limit:,} bytes)" \
            if room.at >= room.limit else f"has no room for the answer ({needed:,} bytes so far) under the size " \
                                          f"limit on files this process writes ({room.limit:,} bytes)"
        return LocalgenError(f"cannot write to stdout: {os.strerror(errno.EFBIG)}: {_file_name(fd)} {reached}",
                             hint="raise it with `ulimit -f`, or send the output elsewhere")
    if room.disk is None or room.disk >= max(needed, 1):
        return None
    return no_space_error(fd, None if not needed else f"has no room left for the answer ({needed:,} bytes so far)")


def writes_to_dev_full(fd: int) -> bool:
    """Whether fd is open on /dev/full, where every write fails for want of space."""
    return same_file(fd, "/dev/full")


def no_space_error(fd: int | None, lack: str | None = None) -> LocalgenError:
    """The error for stdout (fd) out of space, for every command: /dev/full, where no write can go, or the full file
    system of the regular file it goes to (lack: what it lacks, where more than its having no free space)."""
    reason = f"cannot write to stdout: {os.strerror(errno.ENOSPC)}"
    if fd is not None and writes_to_dev_full(fd):
        return LocalgenError(f"{reason}: it is /dev/full, where every write fails", hint="send the output elsewhere")
    with contextlib.suppress(OSError):
        if fd is not None and stat.S_ISREG(os.fstat(fd).st_mode):
            reason += f": the file system of {_file_name(fd)} {lack or 'has no free space'}"
    return LocalgenError(reason, hint=_STDOUT_HINTS_DEFAULT)


class RecordRoom:
    """The room left for a record written whole once the answer ends (--json) in the regular file stdout goes to,
    held against the answer's text as it grows: looked at again as the text outgrows the room last found, or
    ROOM_CHECK_SECONDS after (others may fill the disk), so a disk that fills, or a `ulimit -f` the text outgrows,
    stops the answer then, not once it has all been generated."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._bytes = 0
        self._room = -1  # the bytes the file could take at the last look (none yet: -1)
        self._next_check = 0.0

    @classmethod
    def of_stdout(cls) -> RecordRoom | None:
        """A RecordRoom for stdout where it is a regular file; None otherwise (a pipe, a terminal, closed)."""
        try:
            fd = sys.stdout.fileno()
            return cls(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except (OSError, ValueError, AttributeError):
            return None

    def add(self, text: str) -> None:
        """Count text into the record; the LocalgenError of file_refusal where the file has no room left for it."""
        self._bytes += len(text.encode("utf-8", errors="surrogatepass"))
        now = time.monotonic()
        if self._bytes <= self._room and now < self._next_check:
            return
        self._next_check = now + ROOM_CHECK_SECONDS
        room = file_room(self._fd)
        if room is None:
            self._room = sys.maxsize
            return
        refusal = room_refusal(self._fd, room, self._bytes)
        if refusal is not None:
            raise refusal
        self._room = sys.maxsize if room.bytes is None else room.bytes


CAP_SYS_RESOURCE = 24  # the capability that lets a process write into a file system's blocks set aside (ext4's)


def may_use_reserved_blocks() -> bool:
    """Whether this process might write into the blocks a file system sets aside for root (ext4's 5%), so that only
    none free at all is no room: as root (ext4 gives them to uid 0 unless told otherwise), or holding
    CAP_SYS_RESOURCE (/proc/self/status's CapEff, Linux); so that a write that could go in is never refused."""
    if os.geteuid() == 0:
        return True
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        effective = next((line.split()[1] for line in status if line.startswith("CapEff:")), "0")
        return bool(int(effective, 16) >> CAP_SYS_RESOURCE & 1)
    return False


def _file_name(fd: int) -> str:
    """The path of the file fd is open on, as /proc gives it, else words for it."""
    with contextlib.suppress(OSError):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith("/") and not path.endswith(" (deleted)"):
            return path
    return "the file stdout goes to"


def stdout_error(exc: OSError) -> LocalgenError:
    """The error for output that cannot be written (a full disk, a size limit, an I/O error, stdout open to read)."""
    if exc.errno == errno.ENOSPC:
        return no_space_error(_stdout_fd())
    hint = _STDOUT_HINTS.get(exc.errno or 0, _STDOUT_HINTS_DEFAULT)
    return LocalgenError(f"cannot write to stdout: {os_reason(exc)}", hint=hint)


def _stdout_fd() -> int | None:
    """The descriptor stdout writes to, or None where it has none (closed, replaced)."""
    try:
        return sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return None
