"""Turn SIGINT/SIGTERM/SIGHUP into a clean stop or a clean exit instead of a killed process."""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import TypeVar

ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
QUIT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGQUIT",) if hasattr(signal, name))  # Ctrl-\
ANSWER_ENDING_SIGNALS = ENDING_SIGNALS + QUIT_SIGNALS  # run and chat end on Ctrl-\ as on SIGTERM: answer kept and saved
READER_GONE_SIGNAL = signal.SIGURG  # stdout_reader's watch tells the main thread with it: nothing else sends it, and
# its default is to ignore it


_CALLED_FROM_C: set[CodeType] = set()  # functions a C library calls back: an exception raised in them is printed, lost
Function = TypeVar("Function", bound=Callable[..., object])


def called_from_c(function: Function) -> Function:
    """Mark function as one a C library calls back (llama.cpp's log callback): signals met there wait for its end."""
    _CALLED_FROM_C.add(function.__code__)
    return function


def handled_after_the_c_call(signum: int, frame: FrameType | None) -> bool:
    """Whether the signal met Python code a C library called back (ctypes prints an exception raised there and goes
    on, the signal lost): if so it is sent again 1 ms later, from a thread, for the handler to meet once the C call
    has returned (tripped at once, the handler would meet it again within itself)."""
    while frame is not None:
        if frame.f_code in _CALLED_FROM_C:
            again = threading.Timer(0.001, _send_again, (signum,))
            again.daemon = True
            again.start()
            return True
        frame = frame.f_back
    return False


def resend_unraisable_signals() -> None:
    """Have a signal whose handler raised where Python cannot raise (a weakref's callback, as importlib's when an
    import's module lock goes, a __del__, a C library's callback) sent again once the hook has returned, for the
    handler to meet in the main thread's own code, where Python printed "Exception ignored in ..." and lost it."""
    previous = sys.unraisablehook

    def resend(unraisable: sys.UnraisableHookArgs) -> None:
        """Send again the signal behind a KeyboardInterrupt or a SignalExit; print any other exception as before."""
        exc, signum = unraisable.exc_value, None
        if isinstance(exc, SignalExit):  # the pipe's reader gone ends the program as SIGPIPE, told by its own signal
            signum = READER_GONE_SIGNAL if exc.signum == signal.SIGPIPE else exc.signum
        elif isinstance(exc, KeyboardInterrupt):
            signum = signal.SIGINT
        if signum is None:
            previous(unraisable)
            return
        threading.Thread(target=_send_once_out_of, args=(resend.__code__, signum), name="signal sent again",
                         daemon=True).start()

    sys.unraisablehook = resend


def _send_once_out_of(code: CodeType, signum: int) -> None:
    """Send the main thread the signal once code has returned there (the hook that resends it: a signal met in it
    would be printed and lost, where a timer's 1 ms could end first on busy CPUs)."""
    main = threading.main_thread().ident
    while (frame := sys._current_frames().get(main or 0)) is not None and _runs(frame, code):
        time.sleep(0.001)
    _send_again(signum)


def _runs(frame: FrameType | None, code: CodeType) -> bool:
    """Whether code runs in frame or in one of its callers."""
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame is not None


_interrupt_line_ended = False  # the terminal's line a Ctrl-C's ^C echo is on was ended, or no ^C was echoed


def interrupt_line_ended() -> None:
    """Note that the terminal is on a fresh line after a Ctrl-C: what it stopped ended its line itself (a download's
    progress bars, drawn again over the ^C), or no ^C was echoed (the chat's terminal, echo off), or it was ended."""
    global _interrupt_line_ended
    _interrupt_line_ended = True


def interrupt_line_is_ended() -> bool:
    """True once interrupt_line_ended said so: line_ends.end_interrupted_line then adds no line end."""
    return _interrupt_line_ended


READER_DIED_WITHIN_S = 0.5  # stdout's reader (or stdin's writer) seen gone this soon before a Ctrl-C met its handler
# went with it: the handler waits for a call into llama.cpp to return, or for a busy machine, where the reader (cat)
# dies at once


_interrupted_at: float | None = None  # when the first Ctrl-C met a handler (time.monotonic())
_reader_gone_at: float | None = None  # when stdout's reader was first seen gone


def note_interrupt(signum: int) -> None:
    """Note the time of the first Ctrl-C (signum SIGINT)."""
    global _interrupted_at
    if signum == signal.SIGINT and _interrupted_at is None:
        _interrupted_at = time.monotonic()


def note_reader_gone() -> None:
    """Note the time stdout's reader was first seen gone."""
    global _reader_gone_at
    if _reader_gone_at is None:
        _reader_gone_at = time.monotonic()


CTRL_C_BEHIND_READER_S = 0.05  # a Ctrl-C sent to this process apart from stdout's reader (kill -INT by hand, the
# reader first) is awaited this long after the reader was seen gone: the exit is then a Ctrl-C's (130), not 141


def await_a_ctrl_c_behind_the_reader(received: Callable[[], bool]) -> None:
    """Wait until CTRL_C_BEHIND_READER_S after stdout's reader was seen gone (noted now where it was not), or until
    received() says a signal came, so that a Ctrl-C its reader died of a moment before meets its handler first;
    nothing where one came already (a write given up as it ended the program: no reader gone)."""
    if received():
        return
    note_reader_gone()
    assert _reader_gone_at is not None
    while not received() and (left := _reader_gone_at + CTRL_C_BEHIND_READER_S - time.monotonic()) > 0:
        time.sleep(min(left, 0.002))


def interrupted_at() -> float | None:
    """The time.monotonic() of the first Ctrl-C, if any."""
    return _interrupted_at


def reader_went_with_the_interrupt() -> bool:
    """True when stdout's reader went at the Ctrl-C or after it (`localgen run ... | cat`: it died of it too)."""
    return _interrupted_at is not None and _reader_gone_at is not None \
        and _reader_gone_at >= _interrupted_at - READER_DIED_WITHIN_S


def signal_exit_code(signum: int) -> int:
    """The exit code of a process ended by a signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


class SignalExit(SystemExit):
    """A signal that ends the program, raised so that cleanups run; its code is 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_exit_code(signum))
        self.signum = signum


def _send_again(signum: int) -> None:
    """Send the main thread the signal (a real one, which cuts a wait short as the first did)."""
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(threading.main_thread().ident or 0, signum)
    else:
        _thread.interrupt_main(signum)


def raise_signal_exit(signum: int, frame: FrameType | None) -> None:
    """A signal handler that ends the program through SignalExit (once out of a call into llama.cpp)."""
    if not handled_after_the_c_call(signum, frame):
        raise SignalExit(signum)


def raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    """Python's default SIGINT handler (KeyboardInterrupt), but once out of a call into llama.cpp."""
    note_interrupt(signum)
    if not handled_after_the_c_call(signum, frame):
        raise KeyboardInterrupt


@contextlib.contextmanager
def exit_on_signals(signals: tuple[int, ...] = ENDING_SIGNALS) -> Iterator[None]:
    """While active, the signals raise SignalExit (finally blocks and context managers run) instead of killing.

    An ignored signal (SIGHUP under nohup) stays ignored.
    """
    previous = {sig: signal.signal(sig, raise_signal_exit) for sig in signals if not _ignored(sig)}
    try:
        yield
    finally:
        restore_handlers(previous)


def _ignored(sig: int) -> bool:
    """True when the signal is ignored (nohup's SIGHUP, SIGINT for a background job): it must stay so."""
    return signal.getsignal(sig) is signal.SIG_IGN


def restore_handlers(previous: dict[int, object]) -> None:
    """Put signal handlers back, every one of them even when a signal raises part way (SIGINT's last)."""
    if not previous:
        return
    order = sorted(previous, key=lambda sig: sig == signal.SIGINT)
    sig, rest = order[0], {s: previous[s] for s in order[1:]}
    handler = previous[sig]
    try:
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
    finally:
        restore_handlers(rest)


class DeferredSignals:
    """The signals that arrived while deferred."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def record(self, signum: int, _frame: FrameType | None) -> None:
        """A signal handler that only notes the signal."""
        note_interrupt(signum)
        if signum not in self.received:
            self.received.append(signum)

    def forget(self, signum: int) -> None:
        """Let go of signum, arrived or not: nobody gets it once the deferral ends."""
        if signum in self.received:
            self.received.remove(signum)

    def pending(self) -> bool:
        """True once a deferred signal arrived (work in progress should stop early)."""
        return bool(self.received)


@contextlib.contextmanager
def deferred_signals(*, dropped: tuple[int, ...] = ()) -> Iterator[DeferredSignals]:
    """While active, SIGINT, SIGTERM, SIGHUP and SIGQUIT are only recorded; on exit, the handlers in place before get
    them, but for those dropped (a Ctrl-C that has nothing left to stop once the work is done).

    For native allocations: a KeyboardInterrupt raised as a C call returns would lose the pointer it returned, so
    the memory behind it could never be freed. A signal ending the program is delivered before Ctrl-C. An ignored
    signal (SIGHUP under nohup) stays ignored. The news that stdout's reader has gone (READER_GONE_SIGNAL) is
    deferred too where a handler waits for it, and delivered last.
    """
    deferred = DeferredSignals()
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets Python's handlers
        yield deferred
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *ANSWER_ENDING_SIGNALS)}
    previous = {sig: handler for sig, handler in previous.items() if handler is not signal.SIG_IGN}
    if callable(reader_gone := signal.getsignal(READER_GONE_SIGNAL)):
        previous[READER_GONE_SIGNAL] = reader_gone
    for sig in previous:
        signal.signal(sig, deferred.record)
    try:
        yield deferred
    finally:
        try:
            restore_handlers(previous)
        finally:
            for sig in sorted(set(deferred.received) - set(dropped), key=_delivery_order):
                signal.raise_signal(sig)


def _delivery_order(signum: int) -> tuple[bool, bool]:
    """The order deferred signals are delivered in: those that end the program, then Ctrl-C, then the news that
    stdout's reader has gone, which a Ctrl-C at a pipeline (`localgen run ... | cat`) may have caused."""
    return signum == READER_GONE_SIGNAL, signum == signal.SIGINT


REPEAT_S = 0.05  # the first signal again this soon is the same request delivered twice: a closed terminal's SIGHUP
# comes from the shell and again from the kernel as the shell exits, 0.06-6.4 ms apart on 2 busy cores, where a
# quick double Ctrl-C is 100 ms or more


class StopOnSignal:
    """While active, SIGINT/SIGTERM/SIGHUP (or the signals given) call stop() (ignored ones stay ignored); a second
    one, another signal or the first again REPEAT_S or more after it, ends the program when escalate is set
    (KeyboardInterrupt for SIGINT, SignalExit for the others). ending: the signals that ask the program to end once
    stopped, not only to stop.

    reset, when given, runs on exit: a stop that arrived after the work had ended must not stop the next one.
    ended, when given, is called after stop() with the signal the exit code says (one that ends the program outranks
    a Ctrl-C), for the caller to bound the writes a reader keeps waiting where that signal ends the program: in run
    every signal does, in chat a Ctrl-C does not (it stops the answer alone).
    """

    def __init__(self, stop: Callable[[], None], *, signals: tuple[int, ...] = (signal.SIGINT, *ENDING_SIGNALS),
                 ending: tuple[int, ...] = ENDING_SIGNALS, escalate: bool = True,
                 reset: Callable[[], None] | None = None, ended: Callable[[int], None] | None = None) -> None:
        self._stop = stop
        self._signals = signals
        self._ending = ending
        self._escalate = escalate
        self._reset = reset
        self._ended = ended
        self.signal: int | None = None
        self._first: tuple[int, float] | None = None  # the first signal and its time.monotonic()
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopOnSignal:
        for sig in self._signals:
            if not _ignored(sig):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """Record the signal (one that ends the program outranks Ctrl-C), ask the engine to stop, and say it ends."""
        note_interrupt(signum)
        if handled_after_the_c_call(signum, frame):
            return
        if self._first is None:
            self._first = (signum, time.monotonic())
        elif self._escalate and not self._repeats_first(signum):
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SignalExit(signum)
        if self.signal is None or signum in self._ending:
            self.signal = signum
        self._stop()
        if self._ended is not None:
            self._ended(self.signal)  # last: it may raise, to cut a wait short

    def _repeats_first(self, signum: int) -> bool:
        """Whether signum is the first signal delivered again within REPEAT_S: the same request, not a second one."""
        assert self._first is not None
        first, at = self._first
        return signum == first and time.monotonic() - at < REPEAT_S

    def __exit__(self, *exc: object) -> None:
        try:
            restore_handlers(self._previous)
        finally:  # a signal landing under the restored handler must not skip the reset
            if self._reset is not None:
                self._reset()

    @property
    def exit_code(self) -> int | None:
        """The exit code the received signal calls for, if any."""
        return None if self.signal is None else signal_exit_code(self.signal)

    @property
    def ending_signal(self) -> int | None:
        """The received signal when it asks the program to end (SIGTERM, SIGHUP), not only to stop."""
        return self.signal if self.signal in self._ending else None
