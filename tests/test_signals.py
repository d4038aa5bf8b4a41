"""StopOnSignal: the first signal asks for a stop; a second one (not the same delivered again at once) ends the
program where that can help, with the exit code of the signal that ended it."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from hub_server import (
    HubServer,
    child_env,
    make_gguf_bytes,
)

from localgen.cli_exit import run_app
from localgen.signals import REPEAT_S, SignalExit, StopOnSignal, exit_on_signals
from tests.conftest import REPO_ROOT, popen_localgen
from tests.test_run_audit21 import QUICK_NOTE

SERIAL = pytest.mark.serial  # signals timed against each other or against start-up (conftest: serial)
# A signal this process sends itself is delivered before os.kill returns: the handlers' tests that time no two signals
# against each other run beside the others.


def _signal_self(signum: int = signal.SIGUSR1) -> None:
    os.kill(os.getpid(), signum)


@SERIAL
def test_a_second_signal_ends_the_program_by_default() -> None:
    stops: list[str] = []
    with StopOnSignal(lambda: stops.append("stop"), signals=(signal.SIGUSR1, signal.SIGINT)) as handler:
        _signal_self()
        time.sleep(REPEAT_S)
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGINT)
    with StopOnSignal(lambda: stops.append("stop"), signals=(signal.SIGUSR1,)):
        _signal_self()
        _signal_self()  # at once: the same request delivered again
        time.sleep(REPEAT_S)
        with pytest.raises(SignalExit) as info:
            _signal_self()
    assert stops == ["stop", "stop", "stop"] and handler.signal == signal.SIGUSR1
    assert info.value.code == 128 + signal.SIGUSR1


def test_without_escalation_every_signal_only_asks_again_and_exit_resets() -> None:
    calls: list[str] = []
    with StopOnSignal(lambda: calls.append("stop"), signals=(signal.SIGUSR1,), escalate=False,
                      reset=lambda: calls.append("reset")):
        _signal_self()
        _signal_self()
    assert calls == ["stop", "stop", "reset"]
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


def test_a_signal_that_ends_the_program_outranks_ctrl_c() -> None:
    with StopOnSignal(lambda: None, signals=(signal.SIGINT, signal.SIGTERM), escalate=False) as handler:
        _signal_self(signal.SIGTERM)
        _signal_self(signal.SIGINT)
    assert handler.ending_signal == signal.SIGTERM and handler.exit_code == 143


def _signalled_app(*signals: int) -> typer.Typer:
    """A one-command app that gets the signals while a StopOnSignal with escalation is active, as `run` does."""
    app = typer.Typer()

    @app.command()
    def work() -> None:
        with StopOnSignal(lambda: None):
            for signum in signals:
                _signal_self(signum)
                time.sleep(REPEAT_S)

    return app


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_same_signal_twice_exits_with_its_own_code(signum: int, code: int) -> None:
    assert run_app(_signalled_app(signum, signum), []) == code
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize(("interrupt", "code"), [(KeyboardInterrupt, 130), (lambda: SignalExit(signal.SIGTERM), 143)])
def test_a_signal_that_lands_as_a_class_is_made_exits_as_the_signal_not_as_an_internal_error(
        interrupt: Callable[[], BaseException], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Python 3.11 wraps an exception from a descriptor's __set_name__ (a dataclass field's) in a RuntimeError."""
    app = typer.Typer()

    class Landing:
        def __set_name__(self, owner: type, name: str) -> None:
            raise interrupt()

    @app.command()
    def work() -> None:
        type("Made", (), {"field": Landing()})  # as a lazily imported module's dataclass is made

    assert run_app(app, []) == code
    assert "internal error" not in capsys.readouterr().err


def test_exit_on_signals_raises_signal_exit_and_restores_the_handlers() -> None:
    with pytest.raises(SignalExit) as info, exit_on_signals((signal.SIGUSR1,)):
        _signal_self()
    assert info.value.code == 128 + signal.SIGUSR1 and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


PIPE_FILLED = 3900  # of a 4096-byte pipe: the answer's first 200 bytes fill it, where 2900 left it 1,200 to write


@SERIAL
def test_run_exits_143_on_a_second_sigterm() -> None:
    """The second SIGTERM lands while `run` is blocked writing to a full pipe, so its stop cannot take effect."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)
    os.write(write_end, b"." * PIPE_FILLED)  # nearly full: the answer's first words fill it
    with os.fdopen(read_end, "rb") as output:
        proc = popen_localgen(
            [sys.executable, "-m", "localgen", "run", "--raw", "hello world hello world hello world hello world",
             "-n", "3000", "--temperature", "0", "--repeat-penalty", "1.0", "--no-cache"],
            stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
        os.close(write_end)
        try:
            _wait_until_blocked(proc, read_end, PIPE_FILLED)
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert proc.poll() is None, "the first SIGTERM only asks for a stop"
            proc.send_signal(signal.SIGTERM)
            output.read()
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 143, err.decode()
    assert b"Traceback" not in err


def _wait_until_blocked(proc: subprocess.Popen[bytes], read_end: int, filled: int, timeout: float = 90) -> None:
    """Wait until the process has written past the filled bytes into the pipe and stays blocked writing to it (as
    the kernel says, where it does: a generation slowed down by a busy machine also leaves the pipe's fill unchanged
    a while)."""
    deadline, last = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the generation ended before the pipe was full"
        pending = int.from_bytes(fcntl.ioctl(read_end, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
        if pending > filled and pending == last and _blocked_writing_a_pipe(proc.pid):
            return
        last = pending
        time.sleep(0.1)
    raise AssertionError("the pipe never filled")


def _blocked_writing_a_pipe(pid: int) -> bool:
    """True when the process's main thread waits in the kernel to write to a pipe (or /proc cannot say)."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return True
    return "pipe_write" in wchan


def test_deferred_signals_are_only_noted_then_delivered_on_exit_ending_signals_first() -> None:
    from localgen.signals import SignalExit, deferred_signals, exit_on_signals

    with exit_on_signals(), pytest.raises(SignalExit) as ended, deferred_signals() as deferred:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert deferred.received == [signal.SIGINT, signal.SIGTERM] and deferred.pending()
    assert ended.value.code == 143
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_dropped_signal_is_let_go_on_exit_and_the_others_are_delivered() -> None:
    """A Ctrl-C during a save has nothing left to stop once it is done; a signal that ends the program still ends it."""
    from localgen.signals import SignalExit, deferred_signals, exit_on_signals

    with deferred_signals(dropped=(signal.SIGINT,)) as deferred:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert deferred.received == [signal.SIGINT]
    with exit_on_signals(), pytest.raises(SignalExit) as ended, deferred_signals(dropped=(signal.SIGINT,)):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
    assert ended.value.code == 143


def test_ctrl_backslash_is_deferred_as_sigterm_is_then_ends_with_131() -> None:
    from localgen.signals import QUIT_SIGNALS, SignalExit, deferred_signals, exit_on_signals

    noted: list[int] = []
    with exit_on_signals(QUIT_SIGNALS), pytest.raises(SignalExit) as ended, deferred_signals() as deferred:
        os.kill(os.getpid(), signal.SIGQUIT)  # raised in a native callback (a model loading), it would be swallowed
        time.sleep(0.01)
        noted.extend(deferred.received)
    assert noted == [signal.SIGQUIT] and ended.value.code == 131


def test_an_ignored_signal_stays_ignored_while_deferred() -> None:
    from localgen.signals import deferred_signals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with deferred_signals() as deferred:
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.01)
        assert not deferred.pending() and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_every_handler_is_restored_even_when_a_signal_raises_part_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.signals import restore_handlers

    real = signal.signal
    restored: list[int] = []

    def interrupted(sig: int, handler: object) -> object:
        restored.append(sig)
        result = real(sig, handler)  # type: ignore[arg-type]
        if len(restored) == 1:
            raise KeyboardInterrupt  # a Ctrl-C landing as the first handler is put back
        return result

    monkeypatch.setattr(signal, "signal", interrupted)
    with pytest.raises(KeyboardInterrupt):
        restore_handlers({signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL})
    assert restored == [signal.SIGTERM, signal.SIGINT], "SIGINT last, and restored after the interruption"


@SERIAL
def test_ctrl_c_while_the_cli_starts_exits_130_without_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    outcomes = []
    for attempt in range(24):
        child = subprocess.Popen([sys.executable, "-m", "localgen", "run", "-n", "1", "hi"], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.03 + 0.0025 * attempt)  # while Python imports typer, rich and the CLI (~0.035-0.07 s here)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        outcomes.append((child.returncode, err))
    # Python's own start-up (site, runpy, the entry module importing `signal`) can still be interrupted
    ours = [(code, err) for code, err in outcomes if "Traceback" not in err
            or re.search(r"[/\\]localgen[/\\](?!__main__\.py|launcher\.py|__init__\.py)\w+\.py", err)]
    told = [(code, err) for code, err in ours if "Traceback" in err or "Exception ignored" in err]
    assert not told, told  # (each in full, which the whole list's repr would cut)
    odd = [(code, err) for code, err in ours if code not in (130, -signal.SIGINT)]
    assert not odd, odd  # (its stderr in full, which the whole list's repr would cut)


CTRL_C_WHILE_THE_CLI_LOADS = """
import importlib.abc, signal, sys

class CtrlCOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "localgen.console":  # the launcher's first import of the CLI
            signal.raise_signal(signal.SIGINT)

sys.meta_path.insert(0, CtrlCOnImport())
if sys.argv.pop(1) == "ignored":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
from localgen.launcher import main
main()
"""


@pytest.mark.parametrize(("disposition", "code"), [("default", 130), ("ignored", 0)])
def test_ctrl_c_while_the_cli_loads_exits_130_unless_ignored(tmp_path: Path, disposition: str, code: int) -> None:
    """The same moment every time: a Ctrl-C as the launcher imports the CLI; a background job's stays ignored. stderr,
    a pipe that saw no ^C echo, gets nothing, where it got the newline that ends a terminal's line after one."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_THE_CLI_LOADS, disposition, "--version"], env=env,
                          cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (code, "")
    assert ("localgen" in done.stdout) == (code == 0)


def test_ctrl_c_while_the_cli_loads_ends_the_terminal_s_line(tmp_path: Path) -> None:
    """At a terminal the line of the ^C echo is ended, so that the shell's prompt starts a line of its own."""
    import pexpect

    child = pexpect.spawn(sys.executable, ["-c", CTRL_C_WHILE_THE_CLI_LOADS, "default", "--version"],
                          env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, cwd=str(REPO_ROOT), timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert (child.exitstatus, child.before) == (130, b"\r\n")


CTRL_BACKSLASH_ON_IMPORT = """
import importlib.abc, resource, signal, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a core dumped is told by the exit status, and leaves no file
module, disposition = sys.argv.pop(1), sys.argv.pop(1)

class CtrlBackslashOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == module:
            signal.raise_signal(signal.SIGQUIT)

sys.meta_path.insert(0, CtrlBackslashOnImport())
if disposition == "ignored":
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
from localgen.launcher import main
main()
"""


@pytest.mark.parametrize("module", ["localgen.console", "localgen.cli_run_flow"])  # the CLI's first import; run's
@pytest.mark.parametrize(("disposition", "code"), [("default", 131), ("ignored", 0)])
def test_ctrl_backslash_as_a_run_starts_exits_131_without_a_core_dump(tmp_path: Path, module: str, disposition: str,
                                                                       code: int) -> None:
    """Ctrl-\\ while the launcher imported the CLI, or before run set its own handler (the first 0.45 s), dumped
    core (a core file in the current folder where core dumps are allowed); it ends the run with 131, as it does
    later. An ignored one (a background job's) stays ignored."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CTRL_BACKSLASH_ON_IMPORT, module, disposition, "run", "--print-prompt",
                           "hi"], env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert ("<|im_start|>user\nhi" in done.stdout) == (code == 0), done.stdout


SIGNAL_AS_THE_COMMAND_ENDS = """
import atexit, signal, sys
sig = getattr(signal, sys.argv.pop(1))
atexit.register(lambda: signal.raise_signal(sig))  # the signal comes as the finished command's atexit work runs
from localgen.launcher import main
main()
"""


@pytest.mark.parametrize("name", ["SIGQUIT", "SIGTERM", "SIGINT"])
def test_a_signal_once_the_command_is_over_changes_nothing(tmp_path: Path, name: str) -> None:
    """Ctrl-\\ (or SIGTERM, Ctrl-C) landing as the finished command's atexit work runs: it exits 0, its output
    whole, where Ctrl-\\ said `Exception ignored in atexit callback ... SignalExit: 131`."""
    done = subprocess.run([sys.executable, "-c", SIGNAL_AS_THE_COMMAND_ENDS, name, "run", "--print-prompt", "hi"],
                          env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, cwd=REPO_ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), done.stdout


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_mid_download_keeps_the_part_received_for_the_next_pull(loopback_hub: HubServer, tmp_path: Path,
                                                                          signum: int, code: int) -> None:
    """huggingface_hub keeps its .incomplete file for a resume; a signal ends the pull with its code, no traceback."""
    name = "big-Q4_K_M.gguf"
    repo = loopback_hub.add_repo("org/big-GGUF", {name: make_gguf_bytes("big", 6_000_000)})
    loopback_hub.hold_body_at[("org/big-GGUF", name)] = 5_500_000  # past the header pull reads first; a download
    part = tmp_path / "hf" / "hub" / "models--org--big-GGUF" / "blobs" / f"{repo.sha256(name)}.incomplete"
    proc = popen_localgen([sys.executable, "-m", "localgen", "pull", f"org/big-GGUF/{name}"], cwd=REPO_ROOT,
                          env=child_env(loopback_hub, tmp_path), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30                  # writes in 1 MiB pieces: the signal once five are on disk
    while (not part.exists() or part.stat().st_size < 5 * 2**20) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        loopback_hub.body_released.set()
    assert proc.returncode == code, err.decode()
    assert b"Traceback" not in err
    assert (f"the download of org/big-GGUF/{name} stopped; 5.0 MiB of 5.7 MiB are on disk, which `localgen pull "
            "org/big-GGUF:Q4_K_M` resumes").encode() in err, err.decode()
    assert part.stat().st_size == 5 * 2**20


def test_run_stops_on_sighup_like_sigterm() -> None:
    """The answer so far is printed and ends with a newline; the exit code says SIGHUP (129)."""
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "Write a very long story about a castle.",
                           "-n", "4000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          cwd=REPO_ROOT)
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    proc.send_signal(signal.SIGHUP)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err.decode()
    assert (first + rest).endswith(b"\n") and not (first + rest).endswith(b"\n\n") and b"Traceback" not in err


@SERIAL
def test_sighup_ignored_by_nohup_stays_ignored() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with exit_on_signals(), StopOnSignal(lambda: None):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


@SERIAL
def test_the_chat_puts_the_terminal_modes_back_however_it_ends() -> None:
    import tty

    from localgen.repl_terminal import terminal_modes_kept

    main, secondary = os.openpty()
    try:
        assert termios.tcgetattr(secondary)[3] & termios.ECHO
        with pytest.raises(SignalExit), exit_on_signals((signal.SIGUSR1,)), terminal_modes_kept(secondary):
            tty.setraw(secondary)  # a prompt reading keys, whose own clean-up the signal cuts short
            _signal_self()
        assert termios.tcgetattr(secondary)[3] & termios.ECHO
    finally:
        os.close(main)
        os.close(secondary)


def test_ctrl_backslash_mid_run_keeps_its_answer_saved_and_exits_131(tmp_path: Path) -> None:
    """Ctrl-\\ (SIGQUIT) at a run's terminal killed it: the answer printed was not saved in its conversation, and its
    line was left unended. It ends the run as SIGTERM does."""
    import io
    import json

    import pexpect

    from tests.conftest import spawn_localgen

    child = spawn_localgen("run", "--conversation", "qq", "-n", "400", "Write a very long story about a castle.",
                           env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, timeout=60)
    child.logfile_read = transcript = io.BytesIO()
    child.expect(rb"\w+ \w+ \w+")  # the answer streams
    child.sendcontrol("\\")
    child.expect(pexpect.EOF)
    child.close()
    screen = transcript.getvalue().decode()
    assert (child.exitstatus, child.signalstatus) == (131, None), screen
    assert screen.endswith("\r\n") and "Traceback" not in screen, screen
    turn = json.loads((tmp_path / "data" / "conversations" / "qq.json").read_text())["turns"][0]
    assert turn["interrupted"] is True and turn["answer"].split()[0] in screen, turn


@pytest.mark.parametrize(("key", "echo", "code"), [("c", "^C", 130), ("\\", "^\\", 131)])
def test_a_key_that_stops_a_run_is_echoed_after_the_text_shown_which_is_the_answer_saved(
        tmp_path: Path, key: str, echo: str, code: int) -> None:
    """The terminal echoed ^C as the key was pressed, and the word the line wrapper held back (and the model's last
    tokens) came after it: `numerous^C services`. The echo comes after the text, which is the answer saved."""
    import io
    import json

    import pexpect

    from tests.conftest import spawn_localgen

    child = spawn_localgen("run", "--conversation", "kk", "-n", "400", "--temperature", "0",
                           "Write a very long story about a castle.",
                           env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, timeout=60, dimensions=(24, 30))
    child.logfile_read = transcript = io.BytesIO()
    child.expect(rb"\w+ \w+ \w+ \w+ \w+")  # the answer streams, its line wrapper holding a word back
    child.sendcontrol(key)
    child.expect(pexpect.EOF)
    echoes_keys = termios.tcgetattr(child.child_fd)[3] & termios.ECHOCTL
    child.close()
    assert echoes_keys, "the terminal echoes ^C again once the run is over"
    screen = transcript.getvalue().decode().replace("\x03", "").replace("\x1c", "")  # the keys, echoed as they are
    assert (child.exitstatus, child.signalstatus) == (code, None), screen
    assert screen.endswith(f"{echo}\r\n") and screen.count(echo) == 1, repr(screen)
    turn = json.loads((tmp_path / "data" / "conversations" / "kk.json").read_text())["turns"][0]
    assert turn["interrupted"] is True
    assert screen.removesuffix(f"{echo}\r\n").split() == turn["answer"].split(), "what was shown is what is saved"


def test_ctrl_backslash_before_the_answer_ends_the_line_of_its_echo(tmp_path: Path) -> None:
    """Ctrl-\\ at a run waiting for its prompt from the terminal: the shell's prompt came after the ^\\ echo."""
    import io

    import pexpect

    from tests.conftest import spawn_localgen

    child = spawn_localgen("run", "-", env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, timeout=60)
    child.logfile_read = transcript = io.BytesIO()
    child.expect("ends it\r\n")  # the whole note that the prompt is read from the terminal: the run waits on it now
    child.sendcontrol("\\")
    child.expect(pexpect.EOF)
    child.close()
    screen = transcript.getvalue().decode()
    assert (child.exitstatus, child.signalstatus) == (131, None), screen
    assert screen.endswith("^\\\r\n"), repr(screen[-40:])


def test_ctrl_backslash_while_run_waits_for_its_input_exits_131() -> None:
    """Before the answer (a pipe waited for, the model loading) SIGQUIT ends the run as SIGTERM does, where its
    default killed it."""
    proc = subprocess.Popen([sys.executable, str(QUICK_NOTE), "run", "-f", "-", "-n", "1", "hi"], cwd=REPO_ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while "pipe_read" not in Path(f"/proc/{proc.pid}/wchan").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)  # until it reads stdin, which stays open and empty
        proc.send_signal(signal.SIGQUIT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (131, b"", b"")
