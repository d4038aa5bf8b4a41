"""pexpect children that tests/zygote.py forks in a pty: a test talks to them as to any pexpect.spawn, and their
exit status, which only their parent can wait for, comes from the zygote's watcher over a socket."""

from __future__ import annotations

import json
import os
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
        return not self.terminated and not self._take_status(block=self.flag_eof)

    def close(self, force: bool = True) -> None:
        """Close the pty; where its end was read (the child is ending), without PtyProcess's fixed 0.1 s wait for the
        kernel to update the child's status: isalive() then waits for the watcher's word itself."""
        if self.flag_eof:
            self.delayafterclose = 0.0
        super().close(force)

    def wait(self) -> int | None:
        """Wait until the child ends; its exit status (None when a signal ended it)."""
        if not self.terminated:
            self._take_status(block=True)
        return self.exitstatus

    def _take_status(self, *, block: bool) -> bool:
        """Read the child's wait status from its watcher if it has come (or until it comes); True once read."""
        self._status.settimeout(None if block else 0.0)
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
