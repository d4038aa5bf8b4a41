"""Prefill while the user types: a worker thread computes the KV cache of the message being written, so that
Enter finds most of its prompt, often all of it, computed already."""

from __future__ import annotations

import _thread
import contextlib
import logging
import threading
import time
from collections.abc import Callable

from localgen.stop_flag import StopFlag

log = logging.getLogger("localgen.chat")

SETTLE_WAIT_S = 0.25  # how long Enter waits for the prefill of its text to finish before leaving the rest to ask()
TYPING_PAUSE_S = 0.1  # text is prefilled once it stays unchanged this long (typing paused)
WAIT_SLICE_S = 0.02  # settle() and close() wait in slices this long, so that signals are handled
Prefill = Callable[[str, Callable[[], bool]], None]  # (message text, should_stop), as ChatSession.prefill_ahead


class PrefillWhileTyping:
    """One worker thread that prefills the latest text typed; it touches the engine only between arm() and
    settle(), while the prompt waits for input, so the chat owns the engine the rest of the time.

    Text is prefilled once typing pauses for TYPING_PAUSE_S, after the prompt has drawn the last key: each text
    is rendered and its new pieces tokenized (2 ms at 30 KB) and the end of its prompt computed again (a pass of the
    model, tens of ms of both CPUs on 2 cores), which beside the redraw of every key slowed its echo, and keys
    that come faster (a key held down, fast typing) are computed once.

    The worker ends as soon as it has nothing to prefill, and the next text typed starts another. A thread that
    ran llama_decode keeps an OpenMP thread team for as long as it lives; with more such threads than cores,
    OpenMP spins less before sleeping at each barrier, and the answer, decoded on the main thread, ran at half
    speed (measured on 2 cores: 52 against 95 tok/s).
    """

    def __init__(self, prefill: Prefill) -> None:
        self._prefill = prefill
        self._lock = threading.Condition()
        self._armed = False  # the prompt is reading input: text typed may be prefilled
        self._pending: str | None = None  # the latest text typed, not taken up yet
        self._typed_at = 0.0  # when the text last changed (time.monotonic())
        self._working: str | None = None  # the text being prefilled now
        self._closed = False
        self._stop = StopFlag()  # the prefill in progress is not wanted (read between llama.cpp's graph nodes too)
        self._started = False  # a worker was started and has not ended (or never got to run: memory ran out)

    def arm(self, text: str = "") -> None:
        """The prompt starts reading a message: prefill text (by default what every next message begins with)."""
        with self._lock:
            self._armed = not self._closed
        self.typed(text)

    def typed(self, text: str | None) -> None:
        """The text at the prompt changed; None: it is no message (a /command), so nothing more is prefilled."""
        with self._lock:
            if not self._armed:
                return
            self._pending = None if text == self._working else text
            self._typed_at = time.monotonic()
            if self._pending is not None:
                if not self._started:
                    self._start_worker()
                self._lock.notify_all()

    def _start_worker(self) -> None:
        """Start a worker thread; none where a thread cannot start (memory or threads run short): a prefill ahead is
        only a head start. threading.Thread.start() is not used: where memory runs out in the new thread before it
        says it started, that waits for ever."""
        from localgen.memory_limits import room_for_a_thread

        if not room_for_a_thread():  # its start would fail, and Python print the MemoryError
            log.debug("no room under the memory limit for a thread to prefill while typing")
            return
        try:
            _thread.start_new_thread(self._run, ())
        except (RuntimeError, MemoryError):
            log.debug("no thread to prefill while typing", exc_info=True)
            return
        self._started = True

    def settle(self, text: str | None) -> bool:
        """The prompt returned text (None: no message): let the worker finish exactly that text if it does so
        within SETTLE_WAIT_S (after that, the answer's own prefill shows its progress and takes Ctrl-C), abandon
        anything else, and return once the worker leaves the engine alone; False when Ctrl-C came meanwhile."""
        with self._lock:
            self._armed = False
            self._pending = None
            self._lock.notify_all()  # a worker waiting for typing to pause ends
            if self._working is not None and self._working != text:
                self._stop.set()
            deadline = time.monotonic() + SETTLE_WAIT_S
            interrupted = False
            while self._working is not None:  # a stopped prefill returns within a graph node or so
                try:
                    if time.monotonic() >= deadline:
                        self._stop.set()
                    self._lock.wait(WAIT_SLICE_S)  # in slices: a signal caught by another thread is handled here
                except KeyboardInterrupt:
                    interrupted = True
                    self._stop.set()
            self._stop.set(self._closed)
        return not interrupted

    def close(self) -> None:
        """Stop the worker for good, abandoning its prefill, and wait until it leaves the engine alone (a worker yet
        to take its text up finds the prefiller closed, and ends)."""
        interrupted: BaseException | None = None
        with self._lock:
            self._closed, self._armed, self._pending = True, False, None
            self._stop.set()
            self._lock.notify_all()
            while self._working is not None:  # the engine may be freed next: a signal cannot skip this
                try:
                    self._lock.wait(WAIT_SLICE_S)
                except BaseException as exc:
                    interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted

    def _run(self) -> None:
        """The worker: prefill what is typed until none is left; where memory runs out in it, end quietly (no head
        start: the answer's own prefill does the work, and says what fails), where Python printed the error."""
        try:
            self._prefill_typed()
        except BaseException:
            with self._lock:
                self._started = False
            with contextlib.suppress(BaseException):
                log.debug("prefill while typing stopped", exc_info=True)

    def _prefill_typed(self) -> None:
        """Prefill each text taken up, the latest once typing pauses (texts typed meanwhile wait for it); end
        when none is left."""
        while True:
            with self._lock:
                while self._pending is not None and not self._closed:
                    typing_for = TYPING_PAUSE_S - (time.monotonic() - self._typed_at)
                    if typing_for <= 0:
                        break
                    self._lock.wait(typing_for)
                if self._pending is None or self._closed:
                    self._started = False  # typed() starts another for the next text
                    return
                text, self._working, self._pending = self._pending, self._pending, None
            try:
                self._prefill(text, self._stop)
            except Exception:  # a prefill ahead is only a head start: ask() does the work and reports errors
                log.debug("prefill while typing failed", exc_info=True)
            finally:
                with self._lock:
                    self._working = None
                    self._lock.notify_all()
