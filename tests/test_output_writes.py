"""output_writes' writes once a signal ends the program, each run in a process of its own (the module's state is
the process's), to real pipes."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT


def run_script(script: str) -> str:
    """Run a Python script in a fresh process; what it printed (it must exit 0 with nothing on stderr)."""
    done = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


GIVEN_UP_THEN_PRINTED = """
import os, signal
from rich.console import Console
from localgen.output_writes import WholeWrites, end_writes_on
from localgen.signals import SignalExit

reader, writer = os.pipe()  # a reader that reads nothing until the answer's write is given up (a held terminal)
os.set_blocking(reader, False)
view = Console(file=WholeWrites(open(writer, "w", closefd=False)), force_terminal=True, color_system=None, width=80)


def read_all() -> bytes:
    got = b""
    while True:
        try:
            got += os.read(reader, 65536)
        except BlockingIOError:
            return got


end_writes_on(signal.SIGTERM)  # a signal has ended the chat: the answer's write waits the bound at most
try:
    view.print("".join(f"line {i:05d}\\n" for i in range(20_000)), end="")  # more than the pipe holds
except SignalExit as exc:
    print("given up", exc.code)
got = read_all()  # the reader reads on
try:
    view.print("after")  # as the view's close prints once the answer's write was given up
    print("taken")
except SignalExit as exc:
    print("given up", exc.code)
got += read_all()
print(got.count(b"line 00000"), got.count(b"after"))
"""


def test_output_given_up_is_not_sent_again_by_a_later_print() -> None:
    """Once rich's write of an answer to a held terminal is given up (SIGTERM), later prints write nothing: a
    terminal read on shows the answer once, where each print sent rich's unwritten buffer again (the answer twice
    and more)."""
    assert run_script(GIVEN_UP_THEN_PRINTED).splitlines() == ["given up 143", "taken", "1 0"]
