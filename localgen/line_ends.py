"""Ending a terminal's line: the one a Ctrl-C's ^C echo is on, one typed without Enter, and a status message's that a
signal cuts short."""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable
from typing import TextIO

from localgen.output_writes import write_whole
from localgen.signals import SignalExit, interrupt_line_ended, interrupt_line_is_ended, reader_went_with_the_interrupt

LINE_END_WAIT_S = 0.5  # a status message's line a signal cut is ended where stderr takes it within this (not held)


def end_interrupted_line() -> None:
    """After a Ctrl-C that nothing followed on the terminal: end the line its ^C echo is on, once, so that the
    shell's prompt starts a line of its own (not on a pipe or a file, which saw no ^C); on the process's own stderr
    where run -q has set sys.stderr aside, as it ends no line of its own, or on stdout where only it is the
    terminal. Nothing where what the Ctrl-C stopped ended the line itself (signals.interrupt_line_ended), nor where
    stdout's reader died of it too (`localgen run ... | cat`), or stdin's writer, waited on (`sleep 100 | localgen
    run x`), as the shell then ends the line."""
    if interrupt_line_is_ended():
        return
    from localgen.console import is_terminal  # (console says status messages through this module)

    interrupt_line_ended()
    if not _shell_ends_the_line():
        _end_line_shown_by(is_terminal)


def _shell_ends_the_line() -> bool:
    """Whether a Ctrl-C killed stdout's reader or stdin's writer too, waited for a moment (`localgen run ... | cat`,
    `sleep 100 | localgen run x`): the shell then ends the line its ^C is on, as it does for `sleep 100` alone. Not
    where that one is a process substitution's (`> >(cat)`, `< <(sleep 100)`), a child of the run, no part of the
    shell's job, whose death ends no line of the shell's; another substitution (`-f <(sleep 100)`) that died of it
    too changes nothing."""
    from localgen.stdin_writer import writer_went_with_the_interrupt
    from localgen.stdout_reader import await_the_reader_dying, substitution_pipe

    await_the_reader_dying(sys.stdout)
    if not in_a_job_of_its_own():
        return False
    return (reader_went_with_the_interrupt() and not substitution_pipe(1)) \
        or (writer_went_with_the_interrupt() and not substitution_pipe(0))


def in_a_job_of_its_own() -> bool:
    """Whether this process runs in another process group than its parent's: a job of an interactive shell, which
    ends the line of a ^C that killed part of the job; not a script's (`bash -c 'sleep 100 | localgen run x'`),
    whose pipeline shares the script's group, and which ends no line (it exits as the run does, of no signal)."""
    try:
        return os.getpgrp() != os.getpgid(os.getppid())
    except (AttributeError, OSError):  # no process groups (Windows), or the parent gone
        return True


def end_typed_line(source: object, data: bytes) -> None:
    """After data read from source, where it is a terminal whose last line was ended with Ctrl-D, not Enter (`say hi`
    and Ctrl-D twice): end that line where stderr or stdout shows that terminal, so that what comes next (the
    answer, a note) starts a line of its own, not after the text typed. Nothing for a pipe or a file."""
    fileno = getattr(source, "fileno", None)
    if not data or data.endswith(b"\n") or fileno is None:
        return
    with contextlib.suppress(OSError, ValueError):  # a closed terminal
        if os.isatty(fd := fileno()):
            read = os.fstat(fd).st_rdev
            _end_line_shown_by(lambda stream: _shows(stream, read))


def _end_line_shown_by(shows: Callable[[TextIO], bool]) -> None:
    """End a terminal's line on the first of stderr, the process's own stderr (where run -q has set sys.stderr
    aside) and stdout for which shows is true; nothing where it is true for none. A terminal held with Ctrl-S as a
    signal ends the program is waited on for the bounded time alone (write_whole), its line then left as it is."""
    stream = next((s for s in (sys.stderr, sys.__stderr__, sys.stdout) if s is not None and shows(s)), None)
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed terminal, or a held one given up (WriteGivenUp)
            write_whole(stream, "\n")
            stream.flush()


def _shows(stream: TextIO, terminal: int) -> bool:
    """Whether stream is the terminal of this device number (st_rdev), or /dev/tty's (this process's own terminal)
    is given and stream is that terminal."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        if not os.isatty(fd):
            return False
        if terminal == os.stat("/dev/tty").st_rdev:
            os.tcgetpgrp(fd)  # fails (ENOTTY) on a terminal that is not this process's own
            return True
        return os.fstat(fd).st_rdev == terminal
    return False


def write_status_line(line: str) -> None:
    """Write a status message to stderr; one a signal cuts short (/history) is ended, its style reset."""
    # Python raises a Ctrl-C's KeyboardInterrupt as the os.write it landed in returns, so what that write put is never
    # counted: the message's last line end is written on its own, after the rest. A Ctrl-C landing before it, however
    # much of the text went, leaves the line to end; one landing in it leaves it ended (but where a terminal held
    # full with Ctrl-S had not taken that one byte), and one landing before the text's first byte, a blank line.
    text = line.removesuffix("\n")
    try:
        write_whole(sys.stderr, text)
    except (KeyboardInterrupt, SignalExit):  # Ctrl-C, Ctrl-\, SIGTERM, SIGHUP
        if text:
            _end_cut_line()
        raise
    write_whole(sys.stderr, line[len(text):])
    sys.stderr.flush()


def _end_cut_line() -> None:
    """End the line a signal cut on stderr, its style reset, once (interrupt_line_ended), unless stderr is held full;
    the shell ends it where the Ctrl-C killed a neighbour in the pipeline too."""
    from localgen.console import takes_escapes

    with contextlib.suppress(OSError, ValueError):
        if _takes_more(sys.stderr):
            line_end = "" if _shell_ends_the_line() else "\n"
            write_whole(sys.stderr, ("\x1b[0m" if takes_escapes(sys.stderr) else "") + line_end)
            sys.stderr.flush()
            interrupt_line_ended()


def _takes_more(stream: TextIO) -> bool:
    """Whether stream takes more within LINE_END_WAIT_S (one with no file, a test's: at once)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return True
    writable = select.poll()
    writable.register(fd, select.POLLOUT)
    return bool(writable.poll(LINE_END_WAIT_S * 1000))
