"""StopOnSignal: the first signal asks for a stop; a second one escalates only where that can help."""

from __future__ import annotations

import os
import signal

import pytest

from localgen.signals import StopOnSignal


def _signal_self() -> None:
    os.kill(os.getpid(), signal.SIGUSR1)


def test_a_second_signal_raises_keyboard_interrupt_by_default() -> None:
    stops: list[str] = []
    with StopOnSignal(lambda: stops.append("stop"), signals=(signal.SIGUSR1,)) as handler:
        _signal_self()
        with pytest.raises(KeyboardInterrupt):
            _signal_self()
    assert stops == ["stop"] and handler.signal == signal.SIGUSR1


def test_without_escalation_every_signal_only_asks_again_and_exit_resets() -> None:
    calls: list[str] = []
    with StopOnSignal(lambda: calls.append("stop"), signals=(signal.SIGUSR1,), escalate=False,
                      reset=lambda: calls.append("reset")):
        _signal_self()
        _signal_self()
    assert calls == ["stop", "stop", "reset"]
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
