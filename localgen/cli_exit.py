"""How a localgen process ends: an exit code for every failure, one-line errors, and a stdout that is closed,
full or a broken pipe."""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

import typer
from typer.core import TyperGroup

from localgen.cli_click_words import in_localgen_words
from localgen.cli_option_values import value_as_option_error
from localgen.cli_short_equals import short_equals_error
from localgen.cli_usage import help_cluster_error, help_words_error, one_dash_error, option_arity, usage_error
from localgen.config import debug_asked
from localgen.descriptors import same_file
from localgen.errors import (
    DISK_FULL_ERRNOS,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    LocalgenError,
    internal_error_text,
    os_reason,
)
from localgen.other_tools import check_options, mentions_other_tools_options
from localgen.refusals import permission_failure
from localgen.signals import ANSWER_ENDING_SIGNALS, QUIT_SIGNALS, SignalExit, signal_exit_code

OUTPUT_FULL_ERRNOS = DISK_FULL_ERRNOS | {errno.EFBIG}

_frees_left_to_exit: list[Callable[[], None]] | None = None  # None: each free is done when it is asked for


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail on a closed pipe."""
    from localgen.stdout_reader import note_stdout_silenced

    if sys.stdout.fileno() == 1:
        note_stdout_silenced()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


GIVEN_WORDS = "localgen.given_words"  # the ctx.meta key of the words given to localgen (InterruptEndsLine)


class InterruptEndsLine(TyperGroup):
    """localgen's command group: a Ctrl-C that ends a command ends the line of its ^C echo on the terminal, before
    Typer turns it into a silent exit 130 (while a prompt is read from the terminal, a pipe waited for, a model
    loaded). It keeps the words it is given (ctx.meta[GIVEN_WORDS]) for its callback to tell a command's help asked.
    """

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        """Parse the words given to localgen, keeping them (the callback runs once click has taken them apart)."""
        ctx.meta[GIVEN_WORDS] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> object:
        """Run the command; end the terminal's line on a Ctrl-C that ends it."""
        from localgen import line_ends

        try:
            return super().invoke(ctx)
        except BaseException as exc:  # a Ctrl-C, or one Python 3.11 wrapped in a RuntimeError as a class was made
            if _echoed_on_the_terminal(interrupt_behind(exc)):  # no name holds it: frames it keeps must go
                line_ends.end_interrupted_line()
            raise


def _echoed_on_the_terminal(interrupt: BaseException | None) -> bool:
    """True for a Ctrl-C or a Ctrl-\\, whose ^C or ^\\ the terminal echoed on the line the command leaves."""
    return isinstance(interrupt, KeyboardInterrupt) or (isinstance(interrupt, SignalExit)
                                                        and interrupt.signum in QUIT_SIGNALS)


def run_app(app: typer.Typer, args: list[str], *, help_asked: bool = False) -> int:
    """Run the Typer app; the exit code for every way it can end. help_asked: args are `localgen help WORDS`'s, WORDS
    --help (_help_as_option), where a word after a command's name is no subcommand of it."""
    from localgen.cli_args import forget_command_line, remember_command_line

    remember_command_line(args, help_added=help_asked)
    try:
        return without_traceback(lambda: _parsed_and_run(app, args, help_asked=help_asked))
    finally:
        forget_command_line()


def _parsed_and_run(app: typer.Typer, args: list[str], *, help_asked: bool) -> int:
    """Parse the command line args and run its command; the exit code for its end and for a usage error (a one-line
    error, exit 2)."""
    from localgen import console
    from localgen.cli_args import click_command

    try:
        if args and mentions_other_tools_options(args[0], args[1:]):
            check_options(args[0], args[1:], option_arity(app, args[0]))
        cluster = ((help_words_error(app, args[:-1]) if help_asked else None) or help_cluster_error(app, args)
                   or one_dash_error(app, args) or short_equals_error(app, args) or value_as_option_error(app, args))
        if cluster is not None:
            console.error(*cluster)
            return EXIT_USAGE
        result = click_command(app).main(args=args, prog_name="localgen", standalone_mode=False)
        return result if isinstance(result, int) else EXIT_OK
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return EXIT_INTERRUPTED
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `localgen` alone, or a group alone: its help
            help_context = getattr(exc, "ctx", None)
            if help_context is not None:
                typer.echo(help_context.get_help())
            return EXIT_OK
        # `run MODEL "prompt"` with a model the registry refuses raises its refusal, as -m MODEL's (a LocalgenError)
        message, hint = in_localgen_words(app, args, *usage_error(app, exc, args))
        console.error(message, hint=hint)
        return EXIT_USAGE


def without_traceback(work: Callable[[], int]) -> int:
    """Do work (a command, or completion's answer to the shell); its exit code, and for every way it can fail a
    one-line error and the exit code that failure has, never a traceback (but with LOCALGEN_DEBUG=1)."""
    from localgen import console

    try:
        return work()
    except LocalgenError as exc:
        if debug_asked():
            logging.getLogger("localgen").exception("debug: the traceback of the error below")
        console.error(exc.message, exc.hint)
        return exc.exit_code
    except (KeyboardInterrupt, SignalExit) as exc:  # SignalExit: SIGTERM or SIGHUP, after the cleanups ran
        return _interrupted_exit(exc)
    except SystemExit:
        if not _closed_pipe_handled():
            raise
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        return _os_error_code(exc)
    except Exception as exc:  # never a traceback for users; LOCALGEN_DEBUG=1 shows it
        if interrupt_behind(exc) is not None:
            logging.getLogger("localgen").debug("an error raised from a Ctrl-C or a signal", exc_info=exc)
            return _interrupted_exit(exc)
        return _internal_error(exc)


def _interrupted_exit(exc: BaseException) -> int:
    """The exit code of the Ctrl-C or ending signal exc is, or was raised from; a Ctrl-C's ^C line is ended."""
    from localgen import line_ends

    interrupt = interrupt_behind(exc)
    if isinstance(interrupt, SignalExit):
        interrupt = _signal_the_reader_died_of(interrupt) or interrupt
    if isinstance(interrupt, SignalExit):
        return signal_exit_code(interrupt.signum)
    line_ends.end_interrupted_line()
    return EXIT_INTERRUPTED


def interrupt_behind(exc: BaseException) -> BaseException | None:
    """The Ctrl-C (KeyboardInterrupt) or ending signal (SignalExit) an exception was raised from, if any: Python 3.11
    wraps one that lands in a class's making (a dataclass field's __set_name__) in a RuntimeError. One raised
    `from None` while a Ctrl-C was handled (typer.Abort, once a confirmation said what it declined) stands alone."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (KeyboardInterrupt, SignalExit)):
            return current
        seen.add(id(current))
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return None


def _signal_the_reader_died_of(exc: SignalExit) -> KeyboardInterrupt | SignalExit | None:
    """The Ctrl-C or signal being handled when exc, the reader's going (SIGPIPE), was raised; else None."""
    if exc.signum != signal.SIGPIPE or exc.__context__ is None or exc.__suppress_context__:
        return None
    behind = interrupt_behind(exc.__context__)
    return behind if isinstance(behind, (KeyboardInterrupt, SignalExit)) else None


def _closed_pipe_handled() -> bool:
    """True when click or rich met a closed stdout and exited 1 themselves: click wraps stdout in a
    PacifyFlushWrapper, rich points the stdout descriptor at /dev/null."""
    if type(sys.stdout).__name__ == "PacifyFlushWrapper":
        return True
    try:
        return same_file(sys.stdout.fileno(), os.devnull)
    except (OSError, ValueError, AttributeError):  # no descriptor behind it
        return False


def _os_error_code(exc: OSError) -> int:
    """The exit code for an OSError no module mapped: a closed stdout, a full disk, a file or folder its permissions
    keep from use (LOCALGEN_DEBUG=1: its traceback), else an internal error."""
    from localgen import console

    closed = _closed_stdout_code(exc)
    if closed is not None:
        return closed
    stdout_read_only = exc.errno == errno.EBADF and exc.filename is None and stdout_open_to_read()
    denied = None if debug_asked() else permission_failure(exc)
    if denied is not None:
        console.error(denied.message, denied.hint)
        return EXIT_RUNTIME
    if exc.errno not in OUTPUT_FULL_ERRNOS and not stdout_read_only:
        return _internal_error(exc)
    if exc.filename is None:  # stdout's errors carry no file name
        return _stdout_error_code(exc)
    console.error(f"cannot write {exc.filename}: {os_reason(exc)}", "free some disk space")  # no module mapped it
    return EXIT_RUNTIME


def stdout_open_to_read() -> bool:
    """True when stdout is a descriptor open for reading only (`1< FILE`), where nothing can be written."""
    import fcntl

    try:
        return fcntl.fcntl(sys.stdout.fileno(), fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    except (OSError, ValueError, AttributeError):
        return False


def _closed_stdout_code(exc: OSError) -> int | None:
    """For a closed pipe or a hung-up terminal: stdout silenced and the exit code; None for other failures."""
    from localgen.output_writes import terminal_hung_up

    if isinstance(exc, BrokenPipeError) or (isinstance(exc, ConnectionResetError) and _stdout_is_a_socket()):
        silence_stdout()  # a socket's reader that reset it has gone as a closed pipe's has
        return EXIT_BROKEN_PIPE
    if terminal_hung_up(exc, sys.stdout):  # the window closed: its SIGHUP says the rest
        silence_stdout()
        return signal_exit_code(signal.SIGHUP)
    return None


def _stdout_is_a_socket() -> bool:
    """Whether stdout is a socket (`localgen ... | nc HOST PORT` with its socket given as stdout)."""
    try:
        return stat.S_ISSOCK(os.fstat(sys.stdout.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def _stdout_error_code(exc: OSError, *, then_silence: bool = False) -> int:
    """Say that stdout cannot be written (a full disk, an I/O error), told by the file it is open on, pointing it at
    /dev/null after where then_silence (silence_stdout); the exit code."""
    from localgen import console
    from localgen.output_writes import stdout_error

    error = stdout_error(exc)
    if then_silence:
        silence_stdout()
    console.error(error.message, error.hint)
    return EXIT_RUNTIME


def _internal_error(exc: Exception) -> int:
    """An unexpected exception: one line and exit 1, or the traceback with LOCALGEN_DEBUG=1; where memory ran out
    (`ulimit -d` reached as the chat starts), what to do about it."""
    from localgen import console

    if debug_asked():
        raise exc
    from localgen.memory_limits import out_of_memory_hint, ran_out_of_memory

    if ran_out_of_memory(exc):
        console.error("out of memory", hint=out_of_memory_hint())
        return EXIT_RUNTIME
    console.error(internal_error_text(exc), hint="run again with LOCALGEN_DEBUG=1 and report the traceback")
    return EXIT_RUNTIME


def flush_stdout(code: int) -> int:
    """Flush stdout before exiting, so a closed pipe or a full disk gets an exit code and a message, not a trace."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        failed = _closed_stdout_code(exc)
        if failed is None:
            # stdout's own error (run_app's may be any write's): the final flush must not meet it
            failed = _stdout_error_code(exc, then_silence=True)
        return code or failed
    return code


def leave_frees_to_exit() -> None:
    """Have free_or_leave_to_exit leave its frees to the process's exit, which end_process makes as the command
    returns (the `localgen` entry point's: an in-process caller of cli.main frees as it goes)."""
    global _frees_left_to_exit
    _frees_left_to_exit = []


def free_or_leave_to_exit(free: Callable[[], None]) -> None:
    """Free memory (a model's weights and context) now, or leave it to the process's exit where end_process is to
    end it, which frees it all at once (llama_model_free alone takes 15-60 ms before the shell's prompt)."""
    if _frees_left_to_exit is None:
        free()
    else:
        _frees_left_to_exit.append(free)


def end_process(code: object) -> NoReturn:
    """End the process with exit code code once the command has returned: stdout and stderr flushed, the atexit
    work done, then os._exit, which skips the interpreter's teardown of every module and object and the frees left
    to it (40-80 ms between the last note and the shell's prompt). Where another thread that is no daemon still runs
    (its work would be cut) or the code is no number, the interpreter ends it as sys.exit does, the frees done."""
    others = [thread for thread in threading.enumerate() if thread is not threading.current_thread()]
    if any(not thread.daemon for thread in others) or not isinstance(code, int | None):
        for free in _frees_left_to_exit or ():
            free()
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # flush_stdout said what a failed stdout means
            stream.flush()
    for late in (signal.SIGINT, *ANSWER_ENDING_SIGNALS):  # the command is over: a late signal changes nothing
        signal.signal(late, signal.SIG_IGN)  # now (a mask would hold only this thread's, not another's to deliver)
    atexit._run_exitfuncs()  # logging's flush, weakref.finalize's, any a library registered
    if "ctypes" in sys.modules:  # what a C library left in its stdio buffers, as exit() would flush it
        import ctypes

        with contextlib.suppress(OSError, TypeError, AttributeError):  # no C library to load by None (Windows)
            ctypes.CDLL(None).fflush(None)
    os._exit(code or 0)
