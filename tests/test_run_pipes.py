"""`localgen run` in pipes and scripts, as shells and other programs run it: a reader that leaves before the answer,
a stderr pipe left non-blocking, with real pipes and the real bundled model."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, popen_localgen, run_localgen_process

GREEDY = ("--temperature", "0", "--seed", "1")


@pytest.mark.parametrize("waits_for", ["stdin", "fifo"])
def test_a_reader_gone_while_a_pipe_is_waited_for_ends_the_run_at_once(tmp_path: Path, waits_for: str) -> None:
    """`(sleep 100; echo hi) | localgen run q | true`, or `localgen run -f FIFO q | true` with no writer to the FIFO
    yet: exit 141 and nothing said as soon as the reader is gone, where the run waited for stdin's end (100 s), or
    for a writer to open the FIFO, and only then found no one to answer."""
    fifo = tmp_path / "notes.fifo"
    os.mkfifo(fifo)
    attached = ("-f", str(fifo)) if waits_for == "fifo" else ()
    stdout_reader, stdout_writer = os.pipe()
    os.close(stdout_reader)
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-n", "8", *GREEDY, *attached, "Summarize."],
                              stdin=subprocess.PIPE if waits_for == "stdin" else subprocess.DEVNULL,
                              stdout=stdout_writer, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                              env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    finally:
        os.close(stdout_writer)
    assert proc.stderr is not None
    try:
        code = proc.wait(timeout=30)  # stdin, held open, never ends; the FIFO never gets a writer
    finally:
        proc.kill()
        if proc.stdin is not None:
            proc.stdin.close()
    assert (code, proc.stderr.read().decode()) == (141, "")
    assert not (tmp_path / "data" / "last-run.json").exists()


def test_a_reader_gone_while_the_model_loads_stops_the_load(bundled_model: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that leaves as llama.cpp starts to load the weights: its progress callback gives up the load, which
    ends as a closed pipe does (exit 141), where the model was loaded whole and the run found no reader after."""
    from localgen.engine import Engine, loading
    from localgen.params import LoadOptions
    from localgen.signals import SignalExit
    from localgen.stdout_reader import ending_when_the_reader_goes

    stdout_reader, stdout_writer = os.pipe()
    real_load = loading.lc.llama_model_load_from_file
    loaded: list[bool] = []

    def load_once_the_reader_left(path: bytes, params: object) -> object:
        os.close(stdout_reader)
        deadline = time.monotonic() + 10
        while params.progress_callback(0.0, None) and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)  # until the watch's signal is noted
        model = real_load(path, params)
        loaded.append(bool(model))
        return model

    monkeypatch.setattr(loading.lc, "llama_model_load_from_file", load_once_the_reader_left)
    with os.fdopen(stdout_writer, "w") as stdout, pytest.raises(SignalExit) as ended, \
            ending_when_the_reader_goes(stdout):
        Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1))
    assert ended.value.code == 141
    assert loaded == [False], "the load did not reach llama.cpp, or llama.cpp loaded the weights whole"


def test_a_full_stderr_pipe_left_non_blocking_is_waited_on_and_loses_nothing(tmp_path: Path) -> None:
    """A parent that leaves its stderr pipe non-blocking (as Node.js does) and reads none of it for a while: every
    warning and note comes whole once it reads, where those written while the pipe was full were lost (Python's
    write failed with BlockingIOError, which a best-effort stderr write gave up on)."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)
    fcntl.fcntl(writer, fcntl.F_SETFL, fcntl.fcntl(writer, fcntl.F_GETFL) | os.O_NONBLOCK)
    stops = [arg for n in range(60) for arg in ("--stop", f"x\\n{n}")]  # a warning each: some 11 KB in all
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-n", "4", *GREEDY, *stops, "--stats",
                               "Say hi."], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=writer,
                              cwd=REPO_ROOT, env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    finally:
        os.close(writer)
    seen, still_since = 0, time.monotonic()
    while proc.poll() is None and (seen == 0 or time.monotonic() - still_since < 0.5):  # until the pipe is full
        time.sleep(0.05)
        if _unread(reader) != seen:
            seen, still_since = _unread(reader), time.monotonic()
    err = b""
    while chunk := os.read(reader, 65536):
        err += chunk
    os.close(reader)
    assert proc.stdout is not None and proc.wait(timeout=60) == 0, err.decode()
    assert proc.stdout.read().strip()
    text = err.decode()
    assert [line.split("'")[1] for line in text.splitlines()[:60]] == [f"x\\n{n}" for n in range(60)], text
    assert "localgen: stopped at the limit of 4 tokens" in text and "generated 4 tok" in text, text


def _unread(fd: int) -> int:
    """How many bytes wait to be read from the pipe fd."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def test_a_stdout_open_for_reading_only_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    """`localgen run "..." 1< FILE`: exit 2 at once with a one-line error that says what is wrong with stdout, where
    the model was loaded and its first token met `cannot write to stdout: Bad file descriptor (hint: free some space
    ...)`, exit 1."""
    readable = tmp_path / "notes.txt"
    readable.write_text("notes\n")
    with readable.open("rb") as stdout:
        proc = run_localgen_process([sys.executable, "-m", "localgen", "run", "-n", "8", *GREEDY, "Say hi."],
                                    stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                                    env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, timeout=60)
    assert (proc.returncode, proc.stderr.decode()) == (
        2, "localgen: error: stdout is open for reading only: there is nowhere to write the answer (hint: send it "
           "to a file with > FILE, or to a pipe)\n")
    assert not (tmp_path / "data" / "last-run.json").exists()
    assert readable.read_text() == "notes\n"


def test_output_written_to_a_stdout_open_for_reading_says_so_in_its_hint(tmp_path: Path) -> None:
    """A write of output (conversations show, the chat's answers) to a stream open for reading only: its error's hint
    says so, where it said to free some space."""
    from localgen.errors import LocalgenError
    from localgen.output_writes import write_out

    readable = tmp_path / "notes.txt"
    readable.write_text("notes\n")
    with readable.open() as stdout, pytest.raises(LocalgenError) as failed:
        write_out(stdout, "the answer\n")
    assert (failed.value.message, failed.value.hint) == (
        "cannot write to stdout: Bad file descriptor",
        "stdout is open for reading only (1< FILE): send the output to a file with > FILE")


@pytest.mark.parametrize("command", [["models", "list"], ["--version"]])
def test_any_command_whose_stdout_is_open_for_reading_says_so(tmp_path: Path, command: list[str]) -> None:
    """A command other than run meeting a stdout open for reading only (`localgen models list 1< FILE`) says it
    cannot write there and why, exit 1, where it called it an internal error and asked for a traceback."""
    readable = tmp_path / "notes.txt"
    readable.write_text("notes\n")
    with readable.open("rb") as stdout:
        proc = run_localgen_process([sys.executable, "-m", "localgen", *command], stdin=subprocess.DEVNULL,
                                    stdout=stdout, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                                    env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, timeout=60)
    assert (proc.returncode, proc.stderr.decode()) == (
        1, "localgen: error: cannot write to stdout: Bad file descriptor (hint: stdout is open for reading only "
           "(1< FILE): send the output to a file with > FILE)\n")
    assert readable.read_text() == "notes\n"


READER_GONE_AFTER_THE_LOAD = """
import signal, sys
from localgen import cli_run_flow
from localgen.engine.native import lc
from localgen.signals import SignalExit
free = lc.llama_model_free
lc.llama_model_free = lambda model: (print("[model freed]", file=sys.stderr, flush=True), free(model))
def reader_gone(*args, **kwargs):
    raise SignalExit(signal.SIGPIPE)
cli_run_flow._with_room_for_the_prompt = reader_gone
sys.argv = ["localgen", "run", "-n", "2", "hi"]
from localgen.cli import main
main()
"""


def test_a_reader_gone_just_after_the_load_still_frees_the_model(tmp_path: Path) -> None:
    """The reader's news landing once the model is loaded, before the answer (in the check that the prompt has
    room), ends the run with the model freed, where it was left loaded for an in-process caller of cli.main."""
    proc = subprocess.run([sys.executable, "-c", READER_GONE_AFTER_THE_LOAD], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                          env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    assert (proc.returncode, proc.stdout, proc.stderr) == (141, "", "[model freed]\n"), proc


@pytest.mark.parametrize(("signum", "non_blocking"), [(signal.SIGTERM, False), (signal.SIGINT, False),
                                                      (signal.SIGHUP, True), (signal.SIGQUIT, False)])
def test_one_signal_ends_a_run_whose_stdout_reader_stopped_reading(tmp_path: Path, signum: int,
                                                                   non_blocking: bool) -> None:
    """A full stdout pipe whose reader stopped reading (a paused pager): one SIGTERM, SIGINT or SIGHUP left the run
    waiting on it for ever, its write tried again once the signal was handled. It waits a bounded time, then ends
    as the signal says, its answer so far saved, what the reader has left as it was."""
    reader, writer = os.pipe()
    filler = b"." * fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)
    os.write(writer, filler)
    os.set_blocking(writer, not non_blocking)  # as a Node.js parent leaves it, or as a shell's
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", "--conversation", "paused", "-n", "200",
                               *GREEDY, "Write a long story."], stdin=subprocess.DEVNULL, stdout=writer,
                              stderr=subprocess.PIPE, cwd=REPO_ROOT, env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    finally:
        os.close(writer)
    try:
        waits_in = "poll" if non_blocking else "pipe_write"
        deadline = time.monotonic() + 60
        while waits_in not in Path(f"/proc/{proc.pid}/wchan").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the answer's first write waits on the full pipe
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with os.fdopen(reader, "rb") as pipe:
        assert pipe.read() == filler
    assert (proc.returncode, err) == (128 + signum, b""), err.decode()
    turn = json.loads((tmp_path / "data" / "conversations" / "paused.json").read_text())["turns"][0]
    assert turn["interrupted"] is True and turn["answer"], turn


def test_a_signal_ending_a_run_leaves_its_stdout_blocking_for_the_pipes_other_writers(tmp_path: Path) -> None:
    """A full stdout pipe shared with another writer (`{ localgen run ...; echo done; } | pager`, xargs -P): the
    signal ending the run bounds its wait with a timer, where it made the pipe non-blocking, a flag every writer to
    it shares, so that the other writer's write failed (EAGAIN, bash's `echo: write error`) for up to 2 s."""
    reader, writer = os.pipe()
    filler = b"." * fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)
    os.write(writer, filler)
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-n", "200", *GREEDY, "Write a long story."],
                          stdin=subprocess.DEVNULL, stdout=writer, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                          env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    sibling = None
    try:
        deadline = time.monotonic() + 60
        while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the answer's first write waits on the full pipe
        proc.send_signal(signal.SIGTERM)
        sibling = subprocess.Popen(["bash", "-c", "echo sibling-line"], stdout=writer, stderr=subprocess.PIPE)
        blocking_throughout = True
        while proc.poll() is None:  # the flag is the pipe's own, shared with the sibling: seen from here too
            blocking_throughout = blocking_throughout and os.get_blocking(writer)
            time.sleep(0.01)
        _, err = proc.communicate(timeout=30)
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            got = pipe.read()  # room at last for the sibling's line
        _, sibling_err = sibling.communicate(timeout=30)
    finally:
        for process in (proc, sibling):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert (proc.returncode, err) == (143, b""), err.decode()
    assert (blocking_throughout, sibling.returncode, sibling_err, got) == (True, 0, b"", filler + b"sibling-line\n")


SLOW_STOP = """
import signal, sys, time
from localgen.output_writes import end_writes_on, write_whole
end_writes_on(signal.SIGTERM)  # as run's handler does as the signal comes, while no write is under way
time.sleep(2.5)  # a stop slower than the bound (the answer so far saved)
write_whole(sys.stdout, '{"text": "the record"}\\n')
"""


def test_a_write_after_a_slow_stop_still_waits_on_its_reader(tmp_path: Path) -> None:
    """run --json's record, written to a full pipe more than 2 s after the signal that ended the run: the bound
    counts from when the write waits, so a reader that reads on gets the record, where it was given up at once."""
    reader, writer = os.pipe()
    filler = b"." * fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)
    os.write(writer, filler)
    try:
        proc = subprocess.Popen([sys.executable, "-c", SLOW_STOP], stdin=subprocess.DEVNULL, stdout=writer,
                                stderr=subprocess.PIPE, cwd=REPO_ROOT)
    finally:
        os.close(writer)
    try:
        deadline = time.monotonic() + 60
        while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text() and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)  # until the record's write waits on the full pipe
        with os.fdopen(reader, "rb") as pipe:
            got = pipe.read()
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err, got) == (0, b"", filler + b'{"text": "the record"}\n'), err.decode()


SPENT_BOUND = """
import signal, sys
from localgen import output_writes
output_writes.end_writes_on(signal.SIGTERM)  # the signal has ended the run, and the 2 s writes may wait are spent
output_writes._wait_left = 0.0
put = []
with open(sys.argv[1], "w", encoding="utf-8") as record:
    output_writes.write_whole(record, "x" * 20_000_000, on_written=put.append)
print(sum(put))
"""


def test_a_write_to_a_file_once_a_signal_ended_the_run_is_never_given_up(tmp_path: Path) -> None:
    """A regular file keeps no write waiting on a reader: once the bound is spent, a --json record to a file is still
    written whole and counted, where the timer cut in after the write and called it given up (the record's part
    left, uncounted, so never taken back)."""
    record = tmp_path / "record.json"
    done = subprocess.run([sys.executable, "-c", SPENT_BOUND, str(record)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "20000000\n"), done.stderr
    assert record.stat().st_size == 20_000_000


@pytest.mark.parametrize(("opened", "redirect", "name", "fd", "close"), [
    ("", "3> >(cat)", "/dev/fd/3", 3, ""),  # the pipe to another command, given to the run to write to
    ("", "4<>{fifo}", "{fifo}", 4, "drop the redirect that opens descriptor 4 on the pipe, or close it for the run "
     "(4>&- after the command), so "),  # a named pipe the run holds open both ways
    ("exec 3<>{fifo}; ", "", "{fifo}", 3, "drop the redirect that opens descriptor 3 on the pipe, or close it for the "
     "run (3>&- after the command), so "),  # a script's
    ("", "<>{fifo}", "{fifo}", 0, "read the pipe as stdin with < {fifo}, in place of -f/--file {fifo} and <>, so "),
])
def test_a_pipe_the_run_itself_holds_open_for_writing_is_refused_rather_than_read_forever(
        tmp_path: Path, opened: str, redirect: str, name: str, fd: int, close: str) -> None:
    """The hint names a descriptor the run was handed on the pipe, which closing for the run lets it read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    name, redirect, opened, close = (text.format(fifo=fifo) for text in (name, redirect, opened, close))
    command = f"{opened}exec {shlex.quote(sys.executable)} -m localgen run -n 1 -f {name} hi {redirect}"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    close = f"{close}that the pipe ends as its writers close it, or " if close else ""
    assert result.stderr == (f"localgen: error: {name} is a pipe this run holds open for writing (as descriptor {fd}), "
                             f"so reading it would never end (hint: {close}pass a file, or the pipe the text comes "
                             "from, to -f/--file)\n")


def test_a_script_s_descriptor_on_the_pipe_closed_for_the_run_as_hinted_lets_it_read_what_the_script_writes(
        tmp_path: Path) -> None:
    """`exec 3<>FIFO`, then the run with 3>&-: it reads what the script writes once the script closes its own."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    command = (f"exec 3<>fifo; {shlex.quote(sys.executable)} -m localgen run --print-prompt -f fifo hi 3>&- & "
               "echo 'A document from the script.' >&3; "
               "until ls -l /proc/$!/fd | grep -q fifo || ! kill -0 $!; do sleep 0.1; done; "  # the run has it open
               "exec 3>&-; wait $!")
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "A document from the script.\n\nhi" in result.stdout, result.stderr


def test_a_named_pipe_given_to_read_and_as_stdout_is_refused_rather_than_read_forever(tmp_path: Path) -> None:
    """`-f FIFO > FIFO`, a reader on the other end: the run itself writes the pipe it would read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    command = (f"cat fifo > read.txt & {shlex.quote(sys.executable)} -m localgen run -n 1 -f fifo hi > fifo; "
               "status=$?; wait; exit $status")
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and (tmp_path / "read.txt").read_text() == "", result.stderr
    assert result.stderr == ("localgen: error: fifo is stdout, the pipe this run writes the answer to, so reading it "
                             "would never end (hint: pass a file, or the pipe the text comes from, to -f/--file)\n")


@pytest.mark.parametrize("name", ["/dev/stderr", "/proc/self/fd/2"])
def test_stderr_given_to_read_where_stdout_is_the_same_pipe_is_named_as_stderr(name: str) -> None:
    """`-f /dev/stderr hi 2>&1 | cat`: descriptors 1 and 2 are one pipe; the name given is stderr's."""
    command = f"{shlex.quote(sys.executable)} -m localgen run -n 1 -f {name} hi 2>&1 | cat"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.stdout == (f"localgen: error: {name} is stderr, the pipe this run writes its messages to, so "
                             "reading it would never end (hint: pass a file, or the pipe the text comes from, to "
                             "-f/--file)\n"), result.stderr


def test_a_pipe_another_command_writes_is_read_beside_one_the_run_writes_to() -> None:
    command = (f"exec {shlex.quote(sys.executable)} -m localgen run --print-prompt -f <(printf 'A document.') hi "
               "3> >(cat >/dev/null)")
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 0 and "A document." in result.stdout, result.stderr
