"""Turn SIGINT/SIGTERM during generation into a clean stop instead of an exception."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

from localgen.errors import EXIT_INTERRUPTED, EXIT_TERMINATED


class StopOnSignal:
    """While active, SIGINT/SIGTERM call stop(); a second one raises KeyboardInterrupt when escalate is set.

    reset, when given, runs on exit: a stop that arrived after the work had ended must not stop the next one.
    """

    def __init__(self, stop: Callable[[], None], *, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM),
                 escalate: bool = True, reset: Callable[[], None] | None = None):
        self._stop = stop
        self._signals = signals
        self._escalate = escalate
        self._reset = reset
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopOnSignal:
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        """Record the signal and ask the engine to stop."""
        if self.signal is not None and self._escalate:
            raise KeyboardInterrupt
        self.signal = signum
        self._stop()

    def __exit__(self, *exc: object) -> None:
        try:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
        finally:  # a signal landing under the restored handler must not skip the reset
            if self._reset is not None:
                self._reset()

    @property
    def exit_code(self) -> int | None:
        """The exit code the received signal calls for, if any."""
        if self.signal is None:
            return None
        return EXIT_TERMINATED if self.signal == signal.SIGTERM else EXIT_INTERRUPTED
