"""output_writes' writes once a signal ends the program, each run in a process of its own (the module's state is
the process's), to real pipes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def run_script(script: str, *args: str) -> str:
    """Run a Python script with args in a fresh process; what it printed (it must exit 0 with nothing on stderr)."""
    done = subprocess.run([sys.executable, "-c", script, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=120)
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


WRITE_CUT_IN_ON = """
import fcntl, os, signal, sys, threading, time
from pathlib import Path
from localgen.output_writes import WriteGivenUp, end_writes_on, write_whole

reader, writer = os.pipe()  # the answer's: full, its reader reading nothing (a held terminal)
os.write(writer, b"." * fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096))
answer = open(writer, "w", closefd=False)
side = open(os.pipe()[1], "w", closefd=False)  # another stream's, that takes what is written
main = threading.main_thread().ident
cut_in = threading.Event()


def write_cut_in() -> None:
    write_whole(side, "\\x1b[?2004l")  # as Ctrl-Z's handler turns bracketed paste off, or a status line is written
    cut_in.set()


def waiting_on_the_answer() -> None:
    wchan = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/wchan")
    while "pipe_write" not in wchan.read_text():  # (anon_pipe_write on newer kernels)
        time.sleep(0.01)


def cut_in_then_end() -> None:
    waiting_on_the_answer()
    if sys.argv[1] == "handler":
        signal.pthread_kill(main, signal.SIGUSR1)
    else:
        write_cut_in()
    cut_in.wait()
    waiting_on_the_answer()
    signal.pthread_kill(main, signal.SIGUSR2)  # the signal that ends the program
    time.sleep(20)  # the answer's write still waits: the reader reads on at last, for the script to end
    while os.read(reader, 65536):
        pass


signal.signal(signal.SIGUSR1, lambda *_: write_cut_in())
signal.signal(signal.SIGUSR2, lambda *_: end_writes_on(signal.SIGTERM))
threading.Thread(target=cut_in_then_end, daemon=True).start()
try:
    write_whole(answer, "the answer")
    print("written")
except WriteGivenUp as exc:
    print("given up", exc.signum)
"""


@pytest.mark.parametrize("writer", ["handler", "thread"])
def test_a_write_cut_in_on_a_waiting_one_leaves_it_bounded_once_a_signal_ends_the_program(writer: str) -> None:
    """A write made while the answer's waits on a held terminal, by a signal handler (Ctrl-Z's) or another thread,
    leaves the answer's write bounded: a signal that ends the program after it gives that write up, where the end
    of the write cut in marked the answer's as over and it waited on its reader for ever."""
    assert run_script(WRITE_CUT_IN_ON, writer).splitlines() == ["given up 15"]


def test_a_record_s_room_refuses_the_text_that_outgrows_it_at_once(tmp_path: Path) -> None:
    """RecordRoom looked at its file every half second: text that came faster outgrew the room unseen until then.
    Under `ulimit -f` of 512 bytes, 500 bytes fit, and the 13 that follow at once are refused."""
    import resource

    from localgen.errors import LocalgenError
    from localgen.output_writes import RecordRoom

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    with (tmp_path / "out.json").open("wb") as out:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, hard))
        try:
            room = RecordRoom(out.fileno())
            for _ in range(5):
                room.add("x" * 100)
            with pytest.raises(LocalgenError, match=r"has no room for the answer \(513 bytes so far\)"):
                room.add("y" * 13)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
