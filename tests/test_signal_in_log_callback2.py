"""A Ctrl-C met inside llama.cpp's log callback where Python's default SIGINT handler would be in force (bench's
context creation) ends the command once the C call returns, where ctypes printed the KeyboardInterrupt raised there
as an ignored exception and the command went on to its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# the real entry point, with a log handler that sends SIGINT once, at llama.cpp's first log line while SIGINT raises
# KeyboardInterrupt (no handler of localgen's holding it)
_SCRIPT = """
import logging, signal, sys
from localgen.engine import native

class SendOnce(logging.Handler):
    sent = False

    def emit(self, record):
        handler = getattr(signal.getsignal(signal.SIGINT), "__name__", "")
        if not SendOnce.sent and handler in ("default_int_handler", "raise_keyboard_interrupt"):
            SendOnce.sent = True
            print("SENT", file=sys.stderr, flush=True)
            signal.raise_signal(signal.SIGINT)

native.native_log.addHandler(SendOnce())
native.native_log.setLevel(logging.DEBUG)
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""


def test_a_ctrl_c_met_inside_llama_cpp_s_log_callback_as_bench_loads_ends_it(bundled_model: Path, home: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, "bench", "-m", str(bundled_model), "-r", "1"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LOCALGEN_OFFLINE": "1"})
    assert "SENT" in done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
    assert done.returncode == 130 and "tok/s" not in done.stdout
