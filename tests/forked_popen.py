"""subprocess.Popen children that tests/zygote.py forks: a test has their real pid, their pipes, wait(), poll(),
communicate() and signals as Popen gives them; their exit status, which only their parent (the zygote's watcher) can
wait for, comes from it over a socket, and a signal goes through a pidfd, which reaches the child or none."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import Any

Start = Callable[[list[str], list[int], str, dict[str, str]], tuple[int, int, socket.socket]]


class ForkedPopen(subprocess.Popen):
    """subprocess.Popen of `python -m localgen ARGS` whose child comes from start (the zygote's) instead of a fork and
    exec of its own: start(ARGS, its three streams, its folder, its environment) gives its pid, a pidfd of it and the
    socket its wait status comes over."""

    def __init__(self, start: Start, args: list[str], **options: Any) -> None:
        self._start = start
        self._pidfd = -1
        self._status: socket.socket | None = None
        super().__init__(args, **options)

    def _execute_child(self, args: list[str], executable: Any, preexec_fn: Any, close_fds: bool, pass_fds: Any,
                       cwd: Any, env: Any, startupinfo: Any, creationflags: int, shell: bool,
                       p2cread: int, p2cwrite: int, c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       *_rest: Any) -> None:
        """Have the child forked with the streams Popen made for it (the test's own where it made none)."""
        streams = [p2cread, c2pwrite, errwrite]
        streams = [own if fd == -1 else fd for own, fd in enumerate(streams)]
        folder = os.getcwd() if cwd is None else os.fsdecode(cwd)
        environment = {os.fsdecode(key): os.fsdecode(value) for key, value in (os.environ if env is None
                                                                                 else env).items()}
        try:
            self.pid, self._pidfd, self._status = self._start(list(args[3:]), streams, folder, environment)
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def send_signal(self, sig: int) -> None:
        """Send a signal to the child, unless it is known to have ended."""
        self.poll()
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                signal.pidfd_send_signal(self._pidfd, sig)

    def _internal_poll(self, _deadstate: int | None = None, **_unused: Any) -> int | None:
        """The exit status if the child's watcher has sent it (None while it runs), as Popen.poll gives it."""
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    self._take_status(0.0)
            except OSError:
                if _deadstate is None:
                    raise
                self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        """Wait for the child's exit status (subprocess.TimeoutExpired after timeout seconds)."""
        if self.returncode is None:
            lock: threading.Lock = self._waitpid_lock
            if not lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
                raise subprocess.TimeoutExpired(self.args, timeout)
            try:
                if self.returncode is None and not self._take_status(timeout):
                    raise subprocess.TimeoutExpired(self.args, timeout)
            finally:
                lock.release()
        return self.returncode

    def _take_status(self, timeout: float | None) -> bool:
        """Read the child's wait status from its watcher, waiting up to timeout seconds; True once read."""
        assert self._status is not None
        self._status.settimeout(timeout if timeout is None or timeout > 0 else 0.0)
        try:
            message = self._status.recv(1 << 16)
        except (BlockingIOError, TimeoutError):
            return False
        if not message:
            raise subprocess.SubprocessError(f"the watcher of child {self.pid} ended without its status")
        self._handle_exitstatus(json.loads(message)["status"])
        self._status.close()
        os.close(self._pidfd)
        return True


def run_with(popen: Callable[..., subprocess.Popen], command: list[str], *, input: bytes | str | None = None,
             capture_output: bool = False, timeout: float | None = None, check: bool = False,
             **options: Any) -> subprocess.CompletedProcess:
    """subprocess.run(command, ...), its process started by popen(command, **options) in place of subprocess.Popen."""
    if input is not None:
        options["stdin"] = subprocess.PIPE
    if capture_output:
        options["stdout"] = options["stderr"] = subprocess.PIPE
    with popen(command, **options) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as timed_out:
            process.kill()
            timed_out.stdout, timed_out.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        returncode = process.poll()
        assert returncode is not None
    if check and returncode:
        raise subprocess.CalledProcessError(returncode, process.args, stdout, stderr)
    return subprocess.CompletedProcess(process.args, returncode, stdout, stderr)
