"""A Ctrl-C as `localgen run` starts that meets its handler where Python cannot raise (a weakref's callback, as
importlib's when an import's module lock goes), or as the launcher gives the handler back, still ends the run with 130
and nothing on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

CTRL_C_IN_A_MODULE_LOCK_S_CALLBACK = """
import signal, sys

def ctrl_c_in_the_callback(frame, event, _arg):
    # importlib's callback for a module lock let go, once Ctrl-C raises: Python prints, and drops, what it raises
    if event == "call" and frame.f_code.co_name == "cb" and "importlib._bootstrap" in frame.f_code.co_filename \\
            and signal.getsignal(signal.SIGINT) is not signal.default_int_handler \\
            and getattr(signal.getsignal(signal.SIGINT), "__module__", "") == "localgen.signals":
        sys.setprofile(None)
        signal.raise_signal(signal.SIGINT)

sys.setprofile(ctrl_c_in_the_callback)
from localgen.launcher import main
main()
"""


def test_ctrl_c_in_a_weakref_callback_exits_130_with_nothing_on_stderr(tmp_path: Path) -> None:
    """The same moment every time, where 1 in some 500 Ctrl-Cs sent at random as the run starts met it."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CTRL_C_IN_A_MODULE_LOCK_S_CALLBACK, "run", "-n", "1", "hi"],
                          env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (130, "", "")


CTRL_C_AS_ITS_HANDLER_IS_RESTORED = """
import signal

set_handler = signal.signal

def set_then_ctrl_c(signum, handler):
    # the moment the launcher gives SIGINT its raising handler back, before the CLI runs: a Ctrl-C arrives
    previous = set_handler(signum, handler)
    if signum == signal.SIGINT and getattr(handler, "__module__", "") == "localgen.signals":
        signal.signal = set_handler
        signal.raise_signal(signal.SIGINT)
    return previous

signal.signal = set_then_ctrl_c
from localgen.launcher import main
main()
"""


def test_ctrl_c_as_the_launcher_restores_its_handler_exits_130_with_nothing_on_stderr(tmp_path: Path) -> None:
    """A Ctrl-C in the moment between the launcher restoring the handler that raises and the CLI starting ends the
    run with 130, where its KeyboardInterrupt went uncaught (a traceback, 1 in some hundreds of Ctrl-Cs at start)."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CTRL_C_AS_ITS_HANDLER_IS_RESTORED, "run", "-n", "1", "hi"],
                          env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (130, "", "")
