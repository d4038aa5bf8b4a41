"""A signal that meets llama.cpp's log callback (Python code llama.cpp calls from C) ends the program once the C call
returns, where ctypes printed the SignalExit raised there as an ignored exception and the program went on."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path

import pytest

from localgen.engine import native
from localgen.signals import SignalExit, exit_on_signals


class _SignalOnFirstLine(logging.Handler):
    """Sends the process SIGTERM as llama.cpp's first log line reaches Python, inside its log callback."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.sent:
            self.sent = True
            signal.raise_signal(signal.SIGTERM)


def test_a_signal_met_inside_llama_cpp_s_log_callback_ends_the_program_once_the_call_returns(
        bundled_model: Path, capfd: pytest.CaptureFixture[str]) -> None:
    sender = _SignalOnFirstLine()
    level = native.native_log.level
    native.native_log.addHandler(sender)
    native.native_log.setLevel(logging.DEBUG)
    params = native.lc.llama_model_default_params()
    params.vocab_only = True
    loaded, returned = [], []
    try:
        with exit_on_signals(), pytest.raises(SignalExit) as ended:
            loaded.append(native.lc.llama_model_load_from_file(str(bundled_model).encode(), params))
            returned.append(time.monotonic())  # however slow the load, the signal met in it ends the program soon
            time.sleep(10)  # after it returns: within this sleep, not after it
    finally:
        native.native_log.removeHandler(sender)
        native.native_log.setLevel(level)
        for model in loaded:
            native.lc.llama_model_free(model)
    assert sender.sent and ended.value.code == 143 and (not returned or time.monotonic() - returned[0] < 5)
    assert "Exception ignored" not in capfd.readouterr().err
