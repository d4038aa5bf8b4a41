"""run with a socket for stdout: a reader that resets it is gone as a closed pipe's is (exit 141, nothing said),
and the socket's other errors are no reader gone."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, popen_localgen, run_localgen_process

GREEDY = ("--temperature", "0", "--seed", "1")


def _spawn_run(args: tuple[str, ...], home: Path, stdout: socket.socket) -> subprocess.Popen[bytes]:
    """`localgen run ARGS` with this socket for its stdout (this process's copy closed)."""
    try:
        return popen_localgen([sys.executable, "-m", "localgen", "run", *args], stdout=stdout.fileno(),
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                              env={**os.environ, "LOCALGEN_HOME": str(home)})
    finally:
        stdout.close()


def _unread(sock: socket.socket) -> int:
    """How many bytes wait to be read from sock."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def _tcp_connection() -> tuple[socket.socket, socket.socket]:
    """A TCP connection's two ends on this machine (writer, reader), with the least buffers: some 6 KB fill it."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    writer = socket.socket()
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
    writer.connect(listener.getsockname())
    reader = listener.accept()[0]
    listener.close()
    return writer, reader


WRITE_CALLS = {"x86_64": {"1", "20"}, "aarch64": {"64", "66"}}.get(platform.machine())  # write and writev


def _filled(writer: socket.socket) -> None:
    """Fill the connection with bytes of the test's own, none read: the run's first write waits, whatever the length of
    its answer (some 5 KB fill it, and a greedy answer's length differs from CPU to CPU)."""
    writer.setblocking(False)
    for _ in range(3):  # the kernel takes a little more once its acknowledgements are through
        with contextlib.suppress(BlockingIOError):
            while True:
                writer.send(b"." * 64)
        time.sleep(0.1)
    writer.setblocking(True)


def _waits_writing_stdout(pid: int) -> bool:
    """Whether a thread of process pid is in a write to its stdout that has not returned."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            call = (task / "syscall").read_text().split()
            if call[:2] and call[0] in WRITE_CALLS and int(call[1], 16) == 1:
                return True
    return False


def _reset_once_full(proc: subprocess.Popen[bytes], reader: socket.socket) -> str:
    """Reset the connection (a SO_LINGER 0 close) once the run's writes to it wait, none read; its stderr."""
    seen, still_since = 0, time.monotonic()
    while proc.poll() is None and (seen == 0 or time.monotonic() - still_since < 1.5):
        time.sleep(0.1)
        if _unread(reader) != seen:
            seen, still_since = _unread(reader), time.monotonic()
    assert proc.poll() is None, "the run ended before it filled the connection"
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    reader.close()
    return proc.communicate(timeout=300)[1].decode()


def test_a_tcp_reader_that_resets_while_text_streams_ends_the_run_as_a_closed_pipe(tmp_path: Path) -> None:
    """`localgen run ... | nc host port` whose far end resets the connection while a write waits on it: exit 141
    and nothing said, as a closed pipe's, where the write's ECONNRESET (the reset not yet found by the watch of the
    reader) was said as cannot write to stdout: Connection reset by peer, exit 1."""
    if WRITE_CALLS is None:
        pytest.skip(f"which system calls write on {platform.machine()} is not known here")
    writer, reader = _tcp_connection()
    _filled(writer)
    proc = _spawn_run(("Write a long story about a robot.", "-n", "1000", *GREEDY), tmp_path, writer)
    waiting_since = None
    while proc.poll() is None and (waiting_since is None or time.monotonic() - waiting_since < 0.5):
        time.sleep(0.05)
        waiting_since = (waiting_since or time.monotonic()) if _waits_writing_stdout(proc.pid) else None
    assert proc.poll() is None, "the run ended before its write to the full connection waited"
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    reader.close()
    err = proc.communicate(timeout=300)[1].decode()
    assert (proc.returncode, err) == (141, "")


def test_a_write_that_meets_a_reset_is_a_reader_gone(tmp_path: Path) -> None:
    """run --print-prompt writing a long prompt (no generation, so no watch of the reader) to a TCP connection
    whose reader resets it part way: exit 141 and nothing said, where its ECONNRESET was said as cannot write to
    stdout: Connection reset by peer, exit 1."""
    (tmp_path / "long.txt").write_text("The robot walked on. " * 1000)
    writer, reader = _tcp_connection()
    proc = _spawn_run(("--print-prompt", "-f", str(tmp_path / "long.txt"), "Summarize."), tmp_path, writer)
    err = _reset_once_full(proc, reader)
    assert (proc.returncode, err) == (141, "")


def test_a_socket_error_that_is_no_reader_gone_leaves_a_json_answer_to_be_written(tmp_path: Path) -> None:
    """A UDP socket for stdout whose datagram was refused (POLLERR, ECONNREFUSED) while a --json answer is generated:
    the answer is generated whole and written, exit 0, where the refusal was taken for a reader gone (exit 141)."""
    closed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    closed.bind(("127.0.0.1", 0))
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.connect(closed.getsockname())
    closed.close()  # a port that refuses what is sent to it
    proc = _spawn_run(("--json", "-n", "8", *GREEDY, "Say hi."), tmp_path, out.dup())
    out.send(b"x")  # refused: the socket the run writes to has the error
    err = proc.communicate(timeout=300)[1].decode()
    out.close()
    assert (proc.returncode, err) == (0, "")
    answer = json.loads((tmp_path / "data" / "last-run.json").read_text())["turns"][-1]
    assert answer["finish_reason"] == "length", answer


def test_any_command_whose_socket_reader_has_reset_it_exits_as_a_closed_pipe_s(tmp_path: Path) -> None:
    """`localgen models list` and `--version` writing to a TCP connection its reader reset first: exit 141 and
    nothing said, as run's, where the ConnectionResetError no write_out met was an internal error, exit 1."""
    for args in (("models", "list"), ("--version",)):
        writer, reader = _tcp_connection()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        reader.close()
        time.sleep(0.1)  # the reset reaches the writer's end
        try:
            proc = run_localgen_process([sys.executable, "-m", "localgen", *args], stdout=writer.fileno(),
                                        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, timeout=60,
                                        env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
        finally:
            writer.close()
        assert (proc.returncode, proc.stderr.decode()) == (141, ""), args
