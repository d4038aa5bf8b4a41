"""The chat's terminal: its modes kept and put back, keys unechoed outside the prompt, bracketed paste, Ctrl-Z."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO, cast

from localgen import console
from localgen.descriptors import in_background
from localgen.output_writes import WholeWrites, end_writes_on, write_whole
from localgen.signals import (
    ANSWER_ENDING_SIGNALS,
    ENDING_SIGNALS,
    DeferredSignals,
    SignalExit,
    handled_after_the_c_call,
    interrupt_line_ended,
    restore_handlers,
)

if TYPE_CHECKING:
    from prompt_toolkit.application import Application
    from prompt_toolkit.output import Output


class PromptWrites(WholeWrites):
    """The stream prompt_toolkit draws the prompt on: its writes are write_whole's, so that once a signal ends the
    chat, a redraw (the prompt's closing one) waits on a terminal that stopped reading a bounded time, where
    prompt_toolkit's own writes waited for ever. Characters the terminal cannot show are replaced, as
    prompt_toolkit replaces them."""

    def write(self, text: str) -> int:
        """Write text whole (WholeWrites.write), what the stream's encoding lacks written as ?."""
        encoding = self._stream.encoding or "utf-8"
        return super().write(text.encode(encoding, "replace").decode(encoding))

    def __getattr__(self, name: str) -> Any:
        """The stream's own, less its binary buffer: prompt_toolkit writes there where a stream has one."""
        if name == "buffer":
            raise AttributeError(name)
        return super().__getattr__(name)


def prompt_output() -> Output | None:
    """prompt_toolkit's output for the chat's prompt: stdout, through PromptWrites. None on a terminal that shows
    escape sequences as text (TERM=dumb: Emacs' shell) or that prompt_toolkit takes for dumb (TERM=unknown too): it
    draws its plain prompt for such terminals only for a session given no output, on the output
    plain_prompts_on_a_dumb_terminal() sets (TERM=dumb's; TERM=unknown's its own)."""
    from prompt_toolkit.output import create_output
    from prompt_toolkit.utils import is_dumb_terminal

    if console.shows_escapes_as_text(sys.stdout) or is_dumb_terminal():  # prompt_toolkit's own rule: TERM=unknown too
        return None
    return create_output(stdout=cast(TextIO, PromptWrites(sys.stdout)))


@contextlib.contextmanager
def plain_prompts_on_a_dumb_terminal() -> Iterator[None]:
    """On a terminal that shows escape sequences as text (TERM=dumb: Emacs' shell), prompt_toolkit's prompts write
    plain text, through PromptWrites: its prompt for such terminals is plain, but setting it up shows the cursor
    with escape sequences.

    prompt_toolkit is imported here, not with this module: the chat turns echo off before it is loaded.
    """
    if not console.shows_escapes_as_text(sys.stdout):
        yield
        return
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.output.vt100 import Vt100_Output

    class PlainTextOutput(Vt100_Output):
        """prompt_toolkit's terminal output less every escape sequence (cursor shape and visibility, colours,
        moves): the prompt and the keys typed still show."""

        def write_raw(self, data: str) -> None:
            """Leave out an escape sequence (prompt_toolkit writes text with write())."""

    with create_app_session(output=PlainTextOutput.from_pty(cast(TextIO, PromptWrites(sys.stdout)), term="dumb")):
        yield


@contextlib.contextmanager
def terminal_modes_kept(fd: int | None = None) -> Iterator[None]:
    """Put the terminal's modes (echo, line editing) back as they were on the way out, however the way out goes.

    prompt_toolkit restores them itself, except when a signal's exception lands inside its own clean-up.
    """
    try:
        import termios
    except ImportError:  # not a Unix terminal
        yield
        return
    try:
        fd = sys.stdin.fileno() if fd is None else fd
        saved = termios.tcgetattr(fd)
    except (AttributeError, ValueError, OSError, termios.error):  # stdin is not a terminal
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


@dataclass
class TypedAhead:
    """What was typed before the chat took its terminal out of line mode, read from the terminal then: the lines it
    held, each end of input typed on an empty line among them as the Ctrl-D it was, for the first prompt to read first
    (out of line mode, Linux gives an end of input to a read as a NUL byte, the key Ctrl-@)."""

    text: str = ""

    def forget(self) -> None:
        """Drop it (the first prompt has it, or the shell had the terminal, as it has keys typed ahead)."""
        self.text = ""


@contextlib.contextmanager
def chat_terminal(before_suspend: Callable[[], None]) -> Iterator[TypedAhead]:
    """The terminal for a whole chat, its model load included: keys typed ahead wait unechoed for the prompt
    (Ctrl-D too, even one typed before the chat took the terminal: TypedAhead), and the modes found at start come back
    at the end, however it ends (main() turns SIGTERM and SIGHUP into SignalExit)."""
    with terminal_modes_kept(), keys_not_echoed(before_suspend=before_suspend) as typed_ahead, \
            plain_prompts_on_a_dumb_terminal():
        yield typed_ahead


def lines_typed_ahead(fd: int) -> str:
    """Read the whole lines a terminal in line mode holds, as text, and an end of input typed on an empty line among
    them as the Ctrl-D (\\x04) it was, after which reading stops (the chat ends there); a line not ended yet stays
    for the prompt to read. Nothing in the background, where a read would stop the chat."""
    import codecs
    import termios

    if not termios.tcgetattr(fd)[3] & termios.ICANON or in_background(fd):
        return ""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")  # as prompt_toolkit decodes keys
    pieces: list[str] = []
    with contextlib.suppress(OSError):  # the terminal gone: what was read is kept
        while select.select([fd], [], [], 0)[0]:
            data = os.read(fd, 4096)  # one line at most, in line mode; nothing for an end of input
            if not data:
                return "".join(pieces) + decoder.decode(b"", final=True) + "\x04"
            pieces.append(decoder.decode(data))
    return "".join(pieces) + decoder.decode(b"", final=True)


def bracketed_paste(on: bool) -> None:
    """Ask the terminal on stdout to mark pasted text (xterm's mode 2004), or to stop marking it (a terminal held
    with Ctrl-S as a signal ends the chat is waited on a bounded time: write_whole)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # a terminal gone, or given up: nothing to tell
        if console.takes_escapes(sys.stdout):
            write_whole(sys.stdout, "\x1b[?2004h" if on else "\x1b[?2004l")


@contextlib.contextmanager
def keys_not_echoed(before_suspend: Callable[[], None] = lambda: None) -> Iterator[TypedAhead]:
    """Outside the prompt (prompt-toolkit puts back the modes it found), the terminal echoes no keys (nor ^C):
    echoed text would shift an answer's live region, leaving a stale copy of its lines. Keys typed ahead stay
    buffered for the next prompt, Ctrl-C included, and Ctrl-D too: out of line mode, it is a key for the prompt
    rather than an end of input the terminal consumes, even typed just as a command ends. Enter stays a carriage
    return (no ICRNL), so Alt-Enter typed ahead is a newline in the message, as at the prompt.

    Bracketed paste stays on, so a paste typed ahead reaches the next prompt as one paste, its newlines in one
    message, rather than as lines each sent by its Enter (prompt-toolkit turns it off as each prompt ends: the
    REPL calls bracketed_paste(True) again).

    Ctrl-Z calls before_suspend (to clear what is drawn live), gives the shell its terminal modes back and
    stops; `fg` turns echo off again and the answer goes on (after `bg`, a download or an answer goes on in the
    background with the shell's modes, and the next prompt waits for `fg`). Lines typed before, in line mode, are read
    then, a Ctrl-D among them kept as the key it was, for the first prompt to read first (TypedAhead); they are
    kept across a Ctrl-Z as the chat starts (read already, they are the chat's, not the shell's).
    """
    typed_ahead = TypedAhead()
    try:
        import termios
    except ImportError:  # not a Unix terminal
        yield typed_ahead
        return
    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        typed_ahead.text = lines_typed_ahead(fd)
        quiet = list(saved)
        quiet[0] &= ~termios.ICRNL  # Enter typed ahead stays CR: Esc then LF would be no Alt-Enter at the prompt
        quiet[3] = (quiet[3] & ~(termios.ECHO | termios.ECHOCTL | termios.ICANON)) | termios.NOFLSH  # keeps keys
        quiet[6] = list(quiet[6])
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        bracketed_paste(True)
    except (AttributeError, ValueError, OSError, termios.error):  # stdin is not a terminal
        yield typed_ahead
        return

    def suspend(_signum: int, _frame: object) -> None:
        with contextlib.suppress(Exception):  # drawing may fail; stopping must not
            before_suspend()
        bracketed_paste(False)
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        ending = stopped_until_continued(backgrounded=lambda: in_background(fd))
        signal.signal(signal.SIGTSTP, suspend)
        if ending is not None:  # SIGTERM, or SIGHUP from a closed terminal, while stopped: no modes to put back
            # ended in the background (kill -HUP %1 continues it there): setting the terminal's modes on the way out
            # must not stop it again, waiting on `fg` (Stopped (tty output))
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            end_after_suspend(ending)
            return
        if in_background(fd):  # the shell took the terminal back meanwhile (setting it would stop us)
            return
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, quiet)
        bracketed_paste(True)

    on_main_thread = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTSTP")
    previous = signal.signal(signal.SIGTSTP, suspend) if on_main_thread else None
    try:
        yield typed_ahead
    except KeyboardInterrupt:  # one that ends the chat (as its model loads) was not echoed: no ^C line to end
        interrupt_line_ended()
        raise
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTSTP, signal.SIG_DFL if previous is None else previous)
        bracketed_paste(False)
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def stopped_until_continued(backgrounded: Callable[[], bool]) -> int | None:
    """Stop this process (SIGTSTP) until it is continued; return the SIGTERM or SIGHUP that came meanwhile, held
    back rather than raised here (a shell that closes sends a stopped job SIGHUP, then SIGCONT).

    Continued in the background (`bg`, or bash's `kill %1`: SIGTERM, then SIGCONT), this waits until the terminal is
    its own again (`fg`) or an ending signal comes: such a signal may be taken by another of the process's threads,
    whose handler sets Python's flag a moment after this thread goes on, and the chat, going on without it, put its
    terminal modes back from the background and stopped again, waiting on `fg` to end.
    """
    held = DeferredSignals()
    previous = {sig: signal.signal(sig, held.record) for sig in ENDING_SIGNALS
                if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until `fg` (or `bg`)
        while not held.pending() and backgrounded():
            time.sleep(0.02)  # Python runs the signal handlers between these sleeps
    finally:
        restore_handlers(previous)
    return held.received[0] if held.received else None


def end_after_suspend(signum: int) -> None:
    """End the chat for a signal held while it was stopped. At the prompt, Ctrl-Z runs in one of prompt-toolkit's
    tasks, where an exception raised would end only that task (and with the terminal gone, the chat would wait on
    it for good): the prompt is made to raise SignalExit instead, its closing redraw and what the chat writes as it
    ends waiting bounded (end_writes_on), as the signal's own handler makes them. Elsewhere that handler gets it."""
    from prompt_toolkit.application import get_app_or_none

    app = get_app_or_none()
    if app is not None and app.is_running and not app.is_done:
        end_writes_on(signum)
        with contextlib.suppress(Exception):  # already ending
            app.exit(exception=SignalExit(signum))
            return
    signal.raise_signal(signum)


@contextlib.contextmanager
def signals_end_the_prompt(app: Application[Any]) -> Iterator[None]:
    """While the prompt reads a line, SIGTERM, SIGHUP and SIGQUIT end it by making it raise SignalExit, as it ends on
    Ctrl-D.

    Their own handlers raise SignalExit where the signal lands: inside one of prompt-toolkit's tasks (the one
    loading the input history at each prompt, say), the exception would end only that task, with a traceback on the
    screen. Outside prompt-toolkit's event loop, they raise it at once, as before, and so does the same signal sent
    again (a prompt stuck in a task never takes the first); one that came too late for the prompt to take it is
    raised as the prompt returns. From the first, writes to a terminal that stopped reading wait a bounded time
    (end_writes_on): the prompt's own, through PromptWrites, and the chat's as it ends.
    """
    held = DeferredSignals()

    def end_prompt(signum: int) -> None:
        if app.future is not None and not app.future.done():
            app.exit(exception=SignalExit(signum))

    def handler(signum: int, frame: FrameType | None) -> None:
        if handled_after_the_c_call(signum, frame):
            return
        end_writes_on(signum)  # the prompt's closing redraw, and what the chat writes as it ends, wait bounded
        loop = app.loop
        if loop is None or signum in held.received:  # a second one: the prompt may be stuck
            raise SignalExit(signum)
        held.record(signum, None)
        loop.call_soon_threadsafe(end_prompt, signum)

    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, handler) for sig in ANSWER_ENDING_SIGNALS
                if on_main_thread and signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        restore_handlers(previous)
        if held.received:
            raise SignalExit(held.received[0])


def cursor_requests_given_up_once_unanswered(app: Application[Any]) -> None:
    """After a prompt whose request for the cursor's position went unanswered, ask no more: prompt_toolkit gives up
    asking only once 2 s pass at one prompt, and until then holds the end of each prompt sent sooner for up to 1 s,
    waiting for the answer."""
    from prompt_toolkit.renderer import CPR_Support

    if app.renderer.cpr_support == CPR_Support.UNKNOWN:  # an answer makes it SUPPORTED
        app.renderer.cpr_support = CPR_Support.NOT_SUPPORTED
