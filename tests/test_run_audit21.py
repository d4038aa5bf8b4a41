"""`localgen run` as a demanding user drives it from a shell: Ctrl-C on a pipeline, option slips, stdin from
/dev/null; with real processes, real pipes and the real bundled model."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from localgen.cli_exit import without_traceback
from localgen.errors import EXIT_INTERRUPTED
from localgen.signals import READER_GONE_SIGNAL, SignalExit
from tests.conftest import REPO_ROOT, popen_localgen, run_localgen

SERIAL = pytest.mark.serial  # Ctrl-Cs timed against a run's progress and a pipeline's reader (conftest: serial)

LONG_ANSWER = ("--temperature", "0", "-n", "2000", "Write a long essay about the history of Rome.")
QUICK_NOTE = Path(__file__).with_name("quick_stdin_note.py")  # localgen blocking on a quiet stdin after 0.2 s, not 2 s
QUICK_LOCALGEN = f"{shlex.quote(sys.executable)} {shlex.quote(str(QUICK_NOTE))}"


@SERIAL
def test_ctrl_c_on_a_pipeline_exits_130_where_the_reader_died_of_it_too(tmp_path: Path) -> None:
    """`localgen run ... | cat` and Ctrl-C, which the terminal sends to both: cat dies of it, so the run's last
    writes find no reader, yet the run was interrupted (exit 130, as without the pipe), where it exited 141 as if
    the reader had left on its own."""
    assert ctrl_c_into_cat(tmp_path) == (130, "")


def ctrl_c_into_cat(home: Path, gap: float = 0.0) -> tuple[int, str]:
    """`localgen run` of a long answer into `cat` through a pipe, SIGINT sent to cat once 40 bytes came, then, gap
    seconds later, to the run (the terminal's Ctrl-C reaches the whole pipeline at once: gap 0): the run's exit
    status and what it wrote on stderr."""
    read_end, write_end = os.pipe()
    reader = subprocess.Popen(["cat"], stdin=read_end, stdout=subprocess.PIPE)
    os.close(read_end)
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", *LONG_ANSWER], stdin=subprocess.DEVNULL,
                              stdout=write_end, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                              env={**os.environ, "LOCALGEN_HOME": str(home)})
    finally:
        os.close(write_end)
    assert reader.stdout is not None and proc.stderr is not None
    try:
        assert reader.stdout.read(40), "no answer came"
        reader.send_signal(signal.SIGINT)
        time.sleep(gap)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        reader.kill()
        reader.wait()
    return code, proc.stderr.read().decode()


@SERIAL
def test_ctrl_c_on_a_pipeline_waiting_for_stdin_exits_130(tmp_path: Path) -> None:
    """`sleep 100 | localgen run x | cat` and Ctrl-C while the run waits for stdin, sent to the whole pipeline as a
    terminal sends it: cat dies of it too, and the run, told of its reader's going as the Ctrl-C ends it, exits 130,
    where it mostly exited 141 as if the reader had left on its own."""
    pipeline = f"trap : INT; {QUICK_LOCALGEN} run Summarize. | cat; echo \"$PIPESTATUS\" >&2"
    shell = subprocess.Popen(["bash", "-c", pipeline], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, cwd=REPO_ROOT, start_new_session=True,
                             env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    assert shell.stdin is not None and shell.stderr is not None
    try:
        _wait_reading_stdin(_localgen_under(shell.pid))
        os.killpg(shell.pid, signal.SIGINT)  # the terminal's Ctrl-C
        shell.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.stdin.close()
    err = shell.stderr.read().decode()
    assert err.splitlines()[-1:] == ["130"], err
    assert "Traceback" not in err, err


def test_threads_spelt_out_with_a_word_is_hinted_a_number_not_llm_s_template_option(tmp_path: Path) -> None:
    """`localgen run --threads x hi` (or --threads=x): the hint says --threads takes a whole number, with the command
    that gives one, where it said -t is --threads and spoke of llm's templates, which the -t typed alone may mean."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    for typed in (["--threads", "x"], ["--threads=x"]):
        result = run_localgen("run", *typed, "hi", env=env)
        assert result.returncode == 2, result.err
        assert "templates" not in result.err and "--threads takes a whole number: `localgen run --threads " \
            in result.err, result.err
    result = run_localgen("run", "-t", "x", "hi", env=env)  # llm's -t NAME still told what -t is here
    assert "-t is --threads N; llm's templates" in result.err, result.err


def test_an_empty_prompt_with_stdin_from_dev_null_is_not_said_to_have_read_stdin(tmp_path: Path) -> None:
    """`localgen run "$q" </dev/null`, as README tells a `while read` loop, with an empty $q: the prompt is empty,
    and the hint says to give one, where it said stdin was empty too and to check what feeds it, which nothing
    does; an empty pipe is still said to be empty."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    result = run_localgen("run", "", env=env)  # stdin: /dev/null
    assert result.returncode == 2
    assert result.err == ('localgen: error: nothing to send: the prompt is empty (hint: give a prompt, e.g. localgen '
                          'run "Why is the sky blue?", or pipe text in)\n')
    result = run_localgen("run", "", stdin=b"", env=env)
    assert (result.returncode, "the prompt is empty, and so is stdin" in result.err) == (2, True), result.err


@SERIAL
def test_ctrl_c_on_a_pipeline_as_the_model_loads_is_a_ctrl_c(bundled_model: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C at `localgen run ... | cat` as llama.cpp loads the model: the load notes both the Ctrl-C and the news
    that cat, dying of it, has gone, and ends as a Ctrl-C (KeyboardInterrupt, exit 130), where the closed pipe was
    raised first (exit 141) and the Ctrl-C never."""
    from localgen.engine import Engine, loading
    from localgen.params import LoadOptions
    from localgen.stdout_reader import ending_when_the_reader_goes

    stdout_reader, stdout_writer = os.pipe()
    real_load = loading.lc.llama_model_load_from_file

    def load_as_ctrl_c_ends_the_pipeline(path: bytes, params: object) -> object:
        signal.raise_signal(signal.SIGINT)
        os.close(stdout_reader)
        deadline = time.monotonic() + 10
        while params.progress_callback(0.0, None) and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
        news = signal.getsignal(READER_GONE_SIGNAL).__self__.received  # type: ignore[union-attr]
        while READER_GONE_SIGNAL not in news and time.monotonic() < deadline:
            time.sleep(0.01)
        assert READER_GONE_SIGNAL in news, "the watch's news of the reader's going never came"
        return real_load(path, params)

    monkeypatch.setattr(loading.lc, "llama_model_load_from_file", load_as_ctrl_c_ends_the_pipeline)
    with os.fdopen(stdout_writer, "w") as stdout, pytest.raises(KeyboardInterrupt), \
            ending_when_the_reader_goes(stdout):
        Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1))


def test_a_closed_pipe_raised_as_a_ctrl_c_is_handled_is_a_ctrl_c() -> None:
    """The news of stdout's reader gone (SIGPIPE's exit) raised while a Ctrl-C is handled ends as the Ctrl-C (130),
    where it exited 141."""
    def work() -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SignalExit(signal.SIGPIPE)  # noqa: B904 (as the reader's going is raised: its context kept)

    assert without_traceback(work) == EXIT_INTERRUPTED


PROMPT = b"PROMPT$ "


@SERIAL
@pytest.mark.parametrize("pipeline", ['$L run -q --temperature 0 -n 2000 "$Q" | cat',
                                      "sleep 100 | $L run -q Summarize. | cat"])
def test_ctrl_c_on_a_pipeline_at_an_interactive_bash_ends_the_line_once(pipeline: str, tmp_path: Path) -> None:
    """Ctrl-C at an interactive bash's `localgen run ... | cat`: cat dies of it and bash ends the ^C's line, so the
    run adds no line end of its own, where the prompt came after a blank line."""
    after = _ctrl_c_at_bash(pipeline, tmp_path)
    assert re.sub(rb"\x1b\[\?2004[hl]", b"", after) == b"\r\n", after


def _ctrl_c_at_bash(pipeline: str, home: Path, ready: Callable[[bytearray, int], bool] | None = None,
                    cwd: Path = REPO_ROOT) -> bytes:
    """Run pipeline ($L: localgen, its quiet stdin read after 0.2 s; $Q: a long answer's prompt) at an interactive bash
    in a pseudo-terminal, in cwd, Ctrl-C once ready(what the terminal showed, the run's pid) holds (by default: once
    the run streams its answer or waits for stdin); what the terminal showed from the ^C to the next prompt."""
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PS1": PROMPT.decode(), "TERM": "xterm",
           "L": QUICK_LOCALGEN, "Q": LONG_ANSWER[-1]}
    pid, fd = pty.fork()
    if pid == 0:  # the child: bash, as at a terminal
        os.chdir(cwd)
        os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "-i"], env)
    shown = bytearray()
    ready = ready or (lambda shown, run: _answered(shown, pipeline) or _reads_a_pipe(run))
    try:
        _read_until(fd, shown, lambda: PROMPT in shown)
        os.write(fd, pipeline.encode() + b"\n")
        run = _localgen_under(pid)
        _read_until(fd, shown, lambda: ready(shown, run))
        os.write(fd, b"\x03")
        _read_until(fd, shown, lambda: b"^C" in shown and shown.rstrip().endswith(PROMPT.rstrip()))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    return bytes(shown[shown.rindex(b"^C") + 2:shown.rindex(PROMPT)])


def _answered(shown: bytearray, pipeline: str) -> bool:
    """Whether 100 bytes of the answer followed the pipeline's echo."""
    echoed = shown.rfind(pipeline.encode())
    return echoed >= 0 and len(shown) - echoed > 120


def _read_until(fd: int, shown: bytearray, done: Callable[[], bool], timeout: float = 60) -> None:
    """Add what the terminal shows to shown until done(); fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, bytes(shown[-400:])
        if select.select([fd], [], [], 0.05)[0]:
            shown += os.read(fd, 65536)


def _localgen_under(ancestor: int, timeout: float = 30) -> int:
    """The pid of the localgen process started under ancestor (a shell), by -m or by QUICK_NOTE."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and _is_localgen((entry / "cmdline").read_bytes().split(b"\0")) \
                        and _descends(int(entry.name), ancestor):
                    return int(entry.name)
        time.sleep(0.05)
    raise AssertionError("no localgen process started")


def _is_localgen(command: list[bytes]) -> bool:
    """Whether a process's command line (/proc's cmdline, split) runs localgen: `-m localgen` or QUICK_NOTE."""
    return command[1:3] == [b"-m", b"localgen"] or command[1:2] == [bytes(QUICK_NOTE)]


def _descends(pid: int, ancestor: int) -> bool:
    """Whether pid is ancestor or runs under it."""
    while pid > 1:
        if pid == ancestor:
            return True
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return False


def _reads_a_pipe(pid: int) -> bool:
    """Whether pid's main thread is blocked reading a pipe (localgen waiting for stdin)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().endswith("pipe_read")
    except OSError:
        return False


def _wait_reading_stdin(pid: int, timeout: float = 60) -> None:
    """Wait until localgen (pid) is blocked reading its stdin, a pipe."""
    deadline = time.monotonic() + timeout
    while not _reads_a_pipe(pid):
        assert time.monotonic() < deadline, "localgen never waited for stdin"
        time.sleep(0.05)


def test_a_reader_gone_before_the_ctrl_c_still_has_its_line_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout's reader gone on its own before a Ctrl-C (`| head -1`, exited 0: the shell ends no line) leaves the ^C
    line to the run to end; one gone with the Ctrl-C (`| cat`, dying of it) leaves it to the shell."""
    from localgen import signals

    now = time.monotonic()
    monkeypatch.setattr(signals, "_interrupted_at", now)
    monkeypatch.setattr(signals, "_reader_gone_at", now - 5)
    assert not signals.reader_went_with_the_interrupt()
    monkeypatch.setattr(signals, "_reader_gone_at", now + 0.01)
    assert signals.reader_went_with_the_interrupt()
