"""The line a terminal shows while a long prompt is read ("reading the prompt: 1,024/2,676 tokens (38%)"), moving
between the engine's batches at the speed measured so far."""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

from localgen.console import is_terminal, shows_escapes_as_text
from localgen.descriptors import in_background
from localgen.dim_style import dim_escapes
from localgen.events import Event, PrefillProgress
from localgen.output_writes import write_whole
from localgen.wordwrap import terminal_width

REDRAW_S = 0.25  # between two redraws of the figure while a batch is read


class PrefillStatus:
    """A transient line on a terminal while a long prompt is read ("reading the prompt: 1,024/2,676 tokens").

    It appears while some of the prompt is still to be read (the engine says 0/N at once for a prompt of
    several chunks; one chunk shows nothing), and is erased before the answer's first text (erased: it has been).
    The engine says how far it has come only as each batch ends (512 tokens: seconds apart on a slow or busy CPU):
    in between, a thread redraws it REDRAW_S apart with the tokens the time since would have read at the speed
    measured so far (the last prompt's, before this one's first batch ends), short of the batch's end, never back.
    A run sent to the background (Ctrl-Z, `bg`) draws nothing there: the shell's prompt is the terminal's.
    A terminal that cannot erase a line (TERM=dumb: Emacs' shell) gets a plain line once, kept ("reading the prompt:
    2,676 tokens"), as its status lines are; pipes and files get nothing.
    """

    tokens_per_s: float | None = None  # the speed the last prompt of this process was read at

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream: TextIO | None = stream if is_terminal(stream) else None
        self._plain = shows_escapes_as_text(stream)  # TERM=dumb: no cursor moves, no style
        self._style = dim_escapes()  # NO_COLOR puts italics for the dim style
        self._width = terminal_width(stream)
        self._shown = False
        self.erased = False
        self._lock = threading.RLock()  # a signal's handler (Ctrl-Z) may clear the line as the main thread draws it
        self._progress: PrefillProgress | None = None
        self._began = self._at = 0.0  # when the first progress came, and the last
        self._figure = 0  # the tokens shown last
        self._redraws: threading.Event | None = None  # set to end the redraws under way
        self._clock = clock

    def update(self, progress: PrefillProgress) -> None:
        """Show how far prefill has come (or erase the line once it is done)."""
        if self._stream is None or progress.done >= progress.total:
            self.clear()
            return
        if self._plain:  # said once, as a line of its own that nothing erases
            self._write(f"reading the prompt: {progress.total:,} tokens\n")
            self._stream = None
            return
        with self._lock:
            now = self._clock()
            if self._progress is None:
                self._began = now
            elif progress.done > 0 and now > self._began:
                PrefillStatus.tokens_per_s = progress.done / (now - self._began)
            self._progress, self._at = progress, now
            self._figure = max(progress.done, self._figure)
            if not in_background_of(self._stream):
                self._draw(self._figure, progress.total)
            self._redraw_meanwhile()

    def _draw(self, done: int, total: int) -> None:
        """Draw the line for done of total tokens."""
        percent = 100 * done // max(1, total)
        counts = f"{done:,}/{total:,}"
        width = self._width() or 80
        # one row at most: a wrapped line could not be erased, so narrower terminals get shorter forms
        text = next((t for t in (f"reading the prompt: {counts} tokens ({percent}%)", f"reading: {counts} ({percent}%)",
                                 f"{percent}%") if len(t) < width), "")
        dim, plain = self._style if text else ("", "")  # no escapes around nothing
        self._shown = True  # first: Ctrl-Z's handler, run between these lines, must erase what is being written
        self._write(f"\r\x1b[2K{dim}{text}{plain}")

    def _redraw_meanwhile(self) -> None:
        """Start the thread that moves the figure while the batch is read, where a speed is known to move it by."""
        progress = self._progress
        if self._redraws is not None or progress is None or progress.until is None or not self.tokens_per_s:
            return
        self._redraws = threading.Event()
        threading.Thread(target=self._redraw, args=(self._redraws,), name="prompt progress", daemon=True).start()

    def _redraw(self, ended: threading.Event) -> None:
        """Redraw the line REDRAW_S apart until ended (the line cleared)."""
        while not ended.wait(REDRAW_S):
            with self._lock:
                if not ended.is_set():
                    self.redraw()

    def redraw(self) -> None:
        """Redraw the line at the tokens the time since the last progress would have read, short of the end of the
        batch being read, never back; not where it is cleared, nor from the background."""
        with self._lock:
            progress, rate, stream = self._progress, self.tokens_per_s, self._stream
            if not self._shown or stream is None or progress is None or not rate:
                return
            until = progress.done if progress.until is None else min(progress.until, progress.total) - 1
            guessed = min(until, progress.done + int(rate * (self._clock() - self._at)))  # short of its end
            if guessed > self._figure and not in_background_of(stream) and _takes_more_now(stream):
                self._figure = guessed
                self._draw(guessed, progress.total)

    def clear(self) -> None:
        """Erase the line if it is shown, and stop its redraws."""
        with self._lock:
            if self._redraws is not None:
                self._redraws.set()
            self._redraws = None
            if self._shown:
                self._write("\r\x1b[2K")
                self._shown = False
                self.erased = True

    def _write(self, text: str) -> None:
        """Write to the terminal; a status line that cannot be written is not worth an error."""
        stream = self._stream
        if stream is None:
            return
        try:
            write_whole(stream, text)  # a full terminal left non-blocking is waited on, as stdout is
            stream.flush()
        except (OSError, ValueError):  # a terminal gone, or closed
            self._stream = None


def in_background_of(stream: TextIO) -> bool:
    """Whether stream is a terminal this process's group is in the background of (a test's stream: it is not)."""
    try:
        return in_background(stream.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor behind it
        return False


def _takes_more_now(stream: TextIO) -> bool:
    """Whether a write to stream would not wait (a terminal held with Ctrl-S takes nothing): the redraws' thread
    then never holds the line's lock through a write that waits, which a signal's cut could not end."""
    try:
        return bool(select.select([], [stream.fileno()], [], 0)[1])
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's stream): written as it is
        return True


def without_prefill_progress(events: Iterable[Event], status: PrefillStatus) -> Iterator[Event]:
    """The events less the prefill progress, which meanwhile shows on the status line (its caller may clear it
    meanwhile)."""
    try:
        for event in events:
            if isinstance(event, PrefillProgress):
                status.update(event)
            else:
                status.clear()
                yield event
    finally:
        status.clear()
