"""Shared fixtures: an isolated localgen home, the bundled model, and a CLI runner."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pexpect
import pytest
from bundled_verified import bundled_verified_unless_first_use, seed_bundled_verified  # noqa: F401  (autouse)
from forked_popen import ForkedPopen, run_with
from forked_pty import ForkedPty, ForkedSpawn
from hub_server import hub_fixture, hubenv_fixture, loopback_hub_fixture  # noqa: F401  (the loopback Hub fixtures)
from rewritten_modules import pytest_collection  # noqa: F401  (the test modules' bytecode: kept, made once a run)
from worker_schedule import (  # noqa: F401  (which worker runs what, and when: the serial tests alone, last)
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
    pytest_xdist_auto_num_workers,
)

if TYPE_CHECKING:
    from localgen.engine import Engine

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile localgen's bytecode once, take Ctrl-C and SIGHUP as by default, and load weights as localgen does.

    The suite starts `python -m localgen` hundreds of times, and where PYTHONDONTWRITEBYTECODE is set (as on CI)
    none of them may cache it, so each compiled every module from source (0.2 s a start, over a minute a run).
    Compiling writes the cache whatever that variable says. A suite started as a background job of a shell without
    job control has SIGINT and SIGQUIT ignored, which every child would inherit: the Ctrl-C and Ctrl-\\ tests would
    all fail; one started under nohup has SIGHUP ignored, and the hang-up tests would fail (exit 129 never came).
    Tests that load a file with llama-cpp-python's own Llama get localgen's weight buffers, and llama.cpp's log goes
    to localgen's debug log, as in localgen itself. The suite runs with LOCALGEN_AMX=0: several
    tests check that a greedy answer comes back the same however its prompt was batched, which llama.cpp's AMX
    kernels do not keep; test_amx runs localgen in AMX buffers where they work, and checks the probe that decides it.
    Every `python -m localgen` the tests start imports this checkout's localgen (PYTHONPATH), whichever checkout pip
    installed: else the pseudo-terminal tests would check another's code, or fail with "No module named localgen".
    """
    import compileall
    import signal

    compileall.compile_dir(REPO_ROOT / "localgen", quiet=1)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    os.environ["LOCALGEN_AMX"] = "0"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH"))))
    with contextlib.suppress(ImportError):  # no llama_cpp: the tests that need it are skipped
        import llama_cpp  # noqa: F401  (its package, which some tests use, sets a logger that prints everything)

        from localgen.engine import bare_llama_prelude
        from localgen.engine.native import route_native_log

        exec(bare_llama_prelude(), {})
        route_native_log()  # llama.cpp's log goes where localgen sends it, as in a localgen process


def pytest_configure(config: pytest.Config) -> None:
    """Declare the serial and first_use marks."""
    config.addinivalue_line("markers", "serial: timing-sensitive or CPU-bound: runs while no other test runs")
    config.addinivalue_line("markers", "first_use: fresh homes hold no record of the bundled model checked")


def bundled_model_file() -> Path:
    """The bundled model's GGUF, by localgen's own lookup (imported when first asked, after the session's set-up)."""
    from localgen.catalog import builtin_bundled_file

    return builtin_bundled_file()


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point localgen and the Hugging Face cache at temporary folders for the whole session."""
    home = tmp_path_factory.mktemp("localgen-home")
    saved = {k: os.environ.get(k) for k in ("LOCALGEN_HOME", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE")}
    os.environ["LOCALGEN_HOME"] = str(home / "localgen")
    os.environ["HF_HOME"] = str(home / "hf")
    for key in ("HF_HUB_CACHE", "HF_HUB_OFFLINE"):
        os.environ.pop(key, None)
    from localgen import config

    config._settings = None
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    config._settings = None


@pytest.fixture(autouse=True)
def fresh_signal_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no Ctrl-C and no stdout reader's going noted (signals keeps their times)."""
    from localgen import signals

    monkeypatch.setattr(signals, "_interrupted_at", None)
    monkeypatch.setattr(signals, "_reader_gone_at", None)


@pytest.fixture(scope="session")
def bundled_model() -> Path:
    """Path of the real bundled model."""
    return bundled_model_file()


@pytest.fixture(scope="session")
def vocab(bundled_model: Path) -> object:
    """The bundled model's vocabulary (test_gen_hunt._Vocab), for grammar checks in milliseconds."""
    from tests.test_gen_hunt import _Vocab

    return _Vocab(bundled_model)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A localgen home of this test's own: LOCALGEN_HOME is tmp_path, the settings read again."""
    from localgen import config

    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path))
    monkeypatch.setattr(config, "_settings", None)
    seed_bundled_verified(os.environ)
    return tmp_path


def user_registry(home: Path, text: str) -> Path:
    """Write the user's models.toml under a localgen home."""
    path = home / "config" / "models.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def chat_prompt(engine: Engine, text: str) -> list[int]:
    """The tokens of one user message in the model's chat template."""
    from localgen.chat import Message, PromptFormat

    fmt = PromptFormat.for_engine(engine, override=None, raw=False, model_name="smollm2")
    return fmt.tokenize(engine, fmt.render([Message("user", text)]))


@dataclass(frozen=True)
class CliResult:
    """What a localgen subprocess did."""

    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        """stdout as text."""
        return self.stdout.decode("utf-8")

    @property
    def err(self) -> str:
        """stderr as text."""
        return self.stderr.decode("utf-8", errors="replace")


def run_localgen(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
                 timeout: float = 120, limits: dict[str, int] | None = None) -> CliResult:
    """Run `python -m localgen ARGS` in a subprocess, stdin from bytes (or /dev/null): forked by tests/zygote.py
    where the environment leaves what an interpreter reads as it starts as it was, started afresh otherwise; limits
    ({"RLIMIT_DATA": bytes}) set as `ulimit` sets them before it starts."""
    return run_localgen_in({**os.environ, **(env or {})}, *args, stdin=stdin, timeout=timeout, limits=limits)


def run_localgen_in(env: dict[str, str], *args: str, stdin: bytes | None = None, timeout: float = 120,
                    limits: dict[str, int] | None = None) -> CliResult:
    """Run `python -m localgen ARGS` as run_localgen does, with env as its whole environment."""
    seed_bundled_verified(env)
    with _free_zygote(env) as zygote:
        if zygote is not None:
            return zygote.run(args, stdin, env, timeout, limits or {})

    proc = subprocess.run(
        [sys.executable, "-m", "localgen", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=REPO_ROOT,
        preexec_fn=functools.partial(_set_limits, limits) if limits else None,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _set_limits(limits: dict[str, int]) -> None:
    """Set resource limits ({"RLIMIT_DATA": bytes}), soft and hard, as `ulimit` sets them (in a child, before its
    interpreter starts)."""
    for name, limit in limits.items():
        resource.setrlimit(getattr(resource, name), (limit, limit))


def spawn_localgen(*args: str, env: dict[str, str], cwd: Path = REPO_ROOT, limits: dict[str, int] | None = None,
                   **options: Any) -> pexpect.spawn:
    """pexpect.spawn of `python -m localgen ARGS` in a pty (options: pexpect.spawn's), its child forked by
    tests/zygote.py as run_localgen's are (in a session of its own, the pty its controlling terminal), started
    afresh otherwise; limits as run_localgen's."""
    command = [sys.executable, "-m", "localgen", *args]
    seed_bundled_verified(env)
    with _free_zygote(env) as zygote:
        if zygote is not None:
            return ForkedSpawn(functools.partial(zygote.spawn_pty, limits=limits or {}), command[0], command[1:],
                               env=env, cwd=str(cwd), **options)
    return pexpect.spawn(command[0], command[1:], env=env, cwd=str(cwd),
                         preexec_fn=functools.partial(_set_limits, limits) if limits else None, **options)


def popen_localgen(command: list[str], **options: Any) -> subprocess.Popen:
    """subprocess.Popen(command, **options), where command is `python -m localgen ARGS` and options are streams, a
    folder, an environment and their encoding, with its child forked by tests/zygote.py as run_localgen's are (a
    real pid, which signals reach, its exit status as Popen gives it), started afresh otherwise."""
    env = options.get("env")
    if command[:3] == [sys.executable, "-m", "localgen"]:
        seed_bundled_verified(os.environ if env is None else env)
    if command[:3] == [sys.executable, "-m", "localgen"] and options.keys() <= FORKED_POPEN_OPTIONS:
        with _free_zygote(dict(os.environ if env is None else env)) as zygote:
            if zygote is not None:
                return ForkedPopen(zygote.start_watched, command, **options)
    return subprocess.Popen(command, **options)


def run_localgen_process(command: list[str], **options: Any) -> subprocess.CompletedProcess:
    """subprocess.run(command, **options), its child started as popen_localgen starts it."""
    return run_with(popen_localgen, command, **options)


FORKED_POPEN_OPTIONS = {"stdin", "stdout", "stderr", "cwd", "env", "text", "encoding", "errors", "bufsize"}


@contextlib.contextmanager
def _free_zygote(env: dict[str, str]) -> Iterator[_Zygote | None]:
    """This worker's zygote (started when first needed) where it takes env and no other thread is using it, else
    None (a second run at once, another thread's, starts afresh). An exception while it is in use discards it: its
    replies may be out of step, and the next run starts another."""
    global _zygote
    if not FORK_CHILDREN or not _zygote_lock.acquire(blocking=False):
        yield None
        return
    try:
        if _zygote is None or _zygote.process.poll() is not None:
            _zygote = _Zygote()
        if not _zygote.takes(env):
            yield None
            return
        try:
            yield _zygote
        except BaseException:
            _zygote.process.kill()
            _zygote = None
            raise
    finally:
        _zygote_lock.release()


FORK_CHILDREN = os.environ.get("LOCALGEN_TEST_FORK", "1") != "0"  # LOCALGEN_TEST_FORK=0: every child afresh
_WORKER_ENV = dict(os.environ)  # as the test worker started
STARTUP_ENVS = ("PYTHON", "LC_", "LANG", "HOME", "TYPER_",  # read as an interpreter or a module it imports starts,
                "OMP_", "GOMP_", "LD_", "GLIBC_", "MALLOC_",  # or as llama.cpp's C libraries load,
                "LLAMA_CPP_")  # or as llama-cpp-python finds them


class _Zygote:
    """tests/zygote.py, started by a test worker when it first runs localgen, with the worker's environment."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = _WORKER_ENV  # not a test's: one that changed HOME would leave the zygote to it
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("zygote.py")),
                                         str(theirs.fileno())], pass_fds=[theirs.fileno()], cwd=REPO_ROOT, env=self.env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours

    def takes(self, env: dict[str, str]) -> bool:
        """True when env leaves what is read as an interpreter starts as the zygote had it."""
        return all(_as_started(key, env.get(key)) == _as_started(key, self.env.get(key))
                   for key in env.keys() | self.env.keys() if key.startswith(STARTUP_ENVS))

    def run(self, args: tuple[str, ...], stdin: bytes | None, env: dict[str, str], timeout: float,
            limits: dict[str, int]) -> CliResult:
        """Run localgen in a forked child under limits, as subprocess.run with captured output would."""
        child_in, feed = os.pipe() if stdin is not None else (os.open(os.devnull, os.O_RDONLY), -1)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        request = {"args": list(args), "env": env, "cwd": str(REPO_ROOT), "cpus": sorted(os.sched_getaffinity(0)),
                   "limits": limits}
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], [child_in, out_write, err_write])
        finally:
            for fd in (child_in, out_write, err_write):
                os.close(fd)
        self.sock.settimeout(10)
        pid = self._reply()["pid"]
        outputs: dict[int, bytes] = {}
        workers = [threading.Thread(target=_read_all, args=(fd, outputs)) for fd in (out_read, err_read)]
        if feed >= 0:
            workers.append(threading.Thread(target=_write_all, args=(feed, stdin)))
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        timed_out = any(worker.is_alive() for worker in workers)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGKILL)
            for worker in workers:
                worker.join()
        self.sock.settimeout(max(1.0, deadline - time.monotonic()) + 10)
        returncode = self._reply()["returncode"]
        if timed_out:
            raise subprocess.TimeoutExpired(["localgen", *args], timeout, outputs[out_read], outputs[err_read])
        return CliResult(returncode, outputs[out_read], outputs[err_read])

    def spawn_pty(self, args: list[str | bytes], *, env: dict[str, str], cwd: str,
                  dimensions: tuple[int, int] | None = None, echo: bool = True,
                  preexec_fn: Callable[[], None] | None = None, limits: dict[str, int] | None = None) -> ForkedPty:
        """Fork `python -m localgen ARGS` in a new pty of dimensions (rows, columns), for pexpect (ForkedSpawn):
        its pid and, once it ends, its wait status come over a socket of its own from a watcher process."""
        args = [os.fsdecode(arg) for arg in args]  # pexpect gives them as bytes
        if args[1:3] != ["-m", "localgen"] or not echo or preexec_fn is not None:
            raise ValueError(f"the zygote starts localgen alone, echoing, with nothing run before it: not {args}")
        master, slave = os.openpty()
        try:
            if dimensions is not None:
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *dimensions, 0, 0))
            pid, pidfd, status = self.start_watched(args[3:], [slave], cwd, env, pty=True, limits=limits or {})
        finally:
            os.close(slave)
        os.close(pidfd)  # pexpect signals it by its pid
        return ForkedPty(pid, master, status)

    def start_watched(self, args: list[str], fds: list[int], cwd: str, env: dict[str, str],
                      pty: bool = False, limits: dict[str, int] | None = None) -> tuple[int, int, socket.socket]:
        """Fork `python -m localgen ARGS` with fds as its standard streams (or, in a pty, the pty's end) under a
        watcher of its own, the zygote free again at once: its pid, a pidfd of it, and the socket its watcher sends
        its wait status over."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = {"args": args, "env": env, "cwd": cwd, "cpus": sorted(os.sched_getaffinity(0)), "watched": True,
                   "pty": pty, "limits": limits or {}}
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], [*fds, theirs.fileno()])
        finally:
            theirs.close()
        ours.settimeout(10)
        message, pidfds, _flags, _address = socket.recv_fds(ours, 1 << 16, 1)
        if not message:
            raise RuntimeError(f"tests/zygote.py forked no child for {args} (its exit status: {self.process.poll()})")
        return json.loads(message)["pid"], pidfds[0], ours

    def _reply(self) -> dict:
        """The zygote's next reply."""
        message = self.sock.recv(1 << 16)
        if not message:
            raise RuntimeError(f"tests/zygote.py ended (exit status {self.process.wait()})")
        return json.loads(message)


def _as_started(key: str, value: str | None) -> str | None:
    """What an interpreter takes from an environment variable as it starts, for comparing: PYTHONPATH less this
    checkout, whose localgen the zygote imported (tests/zygote.py puts the entries on a child's path as a fresh
    interpreter would), so that the loopback Hub's children, given PYTHONPATH=REPO_ROOT, are forked too."""
    if key != "PYTHONPATH" or value is None:
        return value
    return os.pathsep.join(entry for entry in value.split(os.pathsep) if entry and Path(entry) != REPO_ROOT) or None


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()  # one request at a time: the replies come in order


def _read_all(fd: int, into: dict[int, bytes]) -> None:
    """Read a pipe to its end, then close it."""
    with open(fd, "rb") as pipe:
        into[fd] = pipe.read()


def _write_all(fd: int, data: bytes) -> None:
    """Write data into a pipe and close it (a child that stops reading early is not an error)."""
    with contextlib.suppress(BrokenPipeError), open(fd, "wb") as pipe:
        pipe.write(data)
