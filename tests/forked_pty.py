"""pexpect children that tests/zygote.py forks in a pty: a test talks to them as to any pexpect.spawn, and their
exit status, which only their parent can wait for, comes from the zygote's watcher over a socket."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from collections.abc import Callable
from typing import Any

import pexpect
import ptyprocess


class ForkedPty(ptyprocess.PtyProcess):
    """A child in a pty that is not this process's own: isalive() and wait() read the status its watcher sends."""

    def __init__(self, pid: int, fd: int, status: socket.socket) -> None:
        super().__init__(pid, fd)
        self._status = status

    def isalive(self) -> bool:
        """False once the watcher has said the child ended (waiting for it after the pty's end, as waitpid does)."""
        return not self._take_status(None if self.flag_eof else 0.0)

    def close(self, force: bool = True) -> None:
        """Close the pty and see the child end (terminate() where it goes on), as PtyProcess.close does; going on as
        soon as the watcher says it ended, where PtyProcess slept a fixed 0.1 s for the kernel to update its status
        (where its end was read, until the watcher says so)."""
        if not self.closed:
            self.flush()
            self.fileobj.close()
            self._take_status(None if self.flag_eof else self.delayafterclose)
            if self.isalive() and not self.terminate(force):
                raise ptyprocess.PtyProcessError("Could not terminate the child.")
            self.fd = -1
            self.closed = True

    def terminate(self, force: bool = False) -> bool:
        """SIGHUP, SIGCONT, SIGINT and, if forced, SIGKILL, as PtyProcess.terminate sends them until the child ends;
        True once it has. After each, it goes on as soon as the watcher says the child ended, where PtyProcess slept
        a fixed delay (0.1 s)."""
        for signum in (signal.SIGHUP, signal.SIGCONT, signal.SIGINT, *([signal.SIGKILL] if force else [])):
            if not self.isalive():
                return True
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(self.pid, signum)
            if self._take_status(self.delayafterterminate):
                return True
        return False

    def wait(self) -> int | None:
        """Wait until the child ends; its exit status (None when a signal ended it)."""
        self._take_status(None)
        return self.exitstatus

    def _take_status(self, timeout: float | None) -> bool:
        """Read the child's wait status from its watcher if it has come, waiting up to timeout seconds for it (None:
        until it comes); True once read."""
        if self.terminated:
            return True
        self._status.settimeout(timeout)
        try:
            message = self._status.recv(1 << 16)
        except (BlockingIOError, TimeoutError):
            return False
        if not message:
            raise ptyprocess.PtyProcessError(f"the watcher of child {self.pid} ended without its status")
        status = json.loads(message)["status"]
        self.status = status
        self.exitstatus = os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None
        self.signalstatus = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        self.terminated = True
        self._status.close()
        return True


class ForkedSpawn(pexpect.spawn):
    """pexpect.spawn whose pty and child come from spawn_pty (the zygote's) instead of a fork and exec of its own."""

    def __init__(self, spawn_pty: Callable[..., ForkedPty], *args: Any, **options: Any) -> None:
        self._spawn_pty = spawn_pty
        super().__init__(*args, **options)

    def _spawnpty(self, args: list[str], **options: Any) -> ForkedPty:
        """The child of args in a new pty (pexpect's own forks and execs it)."""
        return self._spawn_pty(args, **options)
