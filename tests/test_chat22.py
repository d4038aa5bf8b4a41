"""The chat in a real terminal where it still fell short: a line and a Ctrl-D typed before it starts, memory running
out in an answer."""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import sys
from pathlib import Path

import pexpect
import pytest

from tests.chat_terminal import ESCAPE
from tests.conftest import REPO_ROOT, bundled_model_file


def _chat_env(home: Path) -> dict[str, str]:
    """The environment of a chat on the bundled model, its data in home, on an xterm that answers no cursor request."""
    return {**os.environ, "LOCALGEN_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "PROMPT_TOOLKIT_NO_CPR": "1",
            "TERM": "xterm", "LOCALGEN_OFFLINE": "1"}


def _chat_command(*args: str) -> str:
    """`localgen chat` on the bundled model with args, as a shell line."""
    return shlex.join([sys.executable, "-m", "localgen", "chat", "-m", str(bundled_model_file()), *args])


def _saved_turns(home: Path) -> list[dict]:
    """The turns of the conversations saved in home."""
    files = sorted((home / "data" / "conversations").glob("*.json"))
    return [turn for file in files for turn in json.loads(file.read_text())["turns"]]


def chat_ended_by_keys_typed_ahead(home: Path, keys: str) -> int | None:
    """Type keys (\x04: Ctrl-D) while the terminal is still in line mode (bash sleeps before it starts `localgen
    chat`), and wait for the chat to end of them: its exit status (an AssertionError where it waits on)."""
    child = pexpect.spawn("bash", ["-c", f"sleep 0.5 && exec {_chat_command('-n', '4', '--temp', '0')}"],
                          env=_chat_env(home), cwd=str(REPO_ROOT), encoding="utf-8", codec_errors="replace",
                          timeout=90, dimensions=(30, 100))
    try:
        child.send(keys)  # into the terminal's line mode: bash has not started localgen yet
        child.expect_exact("localgen chat with")
        ended = child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=60) == 0
        child.close()
        assert ended, child.before
        return child.exitstatus
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_a_line_and_a_ctrl_d_typed_before_the_chat_starts_send_the_line_then_end_the_chat(tmp_path: Path) -> None:
    """A line with Enter, then Ctrl-D, typed while the terminal is still in line mode (bash sleeps before it starts
    localgen): the line is sent and answered, then the chat ends, exit 0, as Ctrl-D on an empty line ends it (the
    Ctrl-D, which Linux held as an end of input after the line, was read as Ctrl-@, and the chat waited on)."""
    home = tmp_path / "home"
    assert chat_ended_by_keys_typed_ahead(home, "hello\r\x04") == 0
    turns = _saved_turns(home)
    assert [turn["user"] for turn in turns] == ["hello"] and turns[0]["answer"], turns


def _data_in_use(pid: int) -> int:
    """The bytes `ulimit -d` counts as mapped by process pid (Linux's VmData)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmData:\s+(\d+) kB", status, re.MULTILINE)[1]) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists() or not hasattr(resource, "prlimit"),
                    reason="needs Linux's /proc and prlimit")
@pytest.mark.parametrize("answered_first", [False, True])
def test_a_message_under_a_data_limit_its_first_batch_cannot_pass_is_refused_in_one_line_and_the_chat_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answered_first: bool) -> None:
    """Under a data limit set once the chat is at its prompt to what it maps then (prlimit, as `ulimit -d` would
    be), a message is refused before its first batch, in one line naming the limit, and the chat waits at its prompt
    (nothing was allocated, so nothing is left half done) and quits cleanly: where the answer ran out of memory
    inside llama.cpp and the chat had to end. The chat starts afresh, as a user's does: one forked by the test
    zygote has imported ahead what its first answer imports. Where an answer before it is saved, the hint names the
    command that goes on with the conversation once the limit is raised; where none is, it does not."""
    import tests.conftest
    from tests.test_repl import Chat

    monkeypatch.setattr(tests.conftest, "FORK_CHILDREN", False)

    chat = Chat(tmp_path / "home", "-m", str(bundled_model_file()), "--offline", "-n", "4", "--temp", "0")
    try:
        if answered_first:
            chat.ask("hi")
        chat.wait_until_idle()  # the prefill of the prompt's start, done
        resource.prlimit(chat.child.pid, resource.RLIMIT_DATA, (_data_in_use(chat.child.pid), resource.RLIM_INFINITY))
        start = len(chat.transcript.getvalue())
        chat.child.send("Tell me about dragons\r")
        chat.child.expect("raise `ulimit -d`", timeout=60)
        chat.child.expect(">>>", timeout=30)
        chat.child.sendcontrol("d")
        chat.child.expect(pexpect.EOF, timeout=60)
        chat.child.close()
        said = ESCAPE.sub("", chat.transcript.getvalue()[start:])
        assert chat.child.exitstatus == 0, (chat.child.exitstatus, said)
        assert "localgen: error: not enough memory is left to answer: a message needs 8.0 MiB free" in said, said
        assert said.count("localgen: error:") == 1 and "internal error" not in said, said
        resume = re.search(r"raise `ulimit -d`, then `localgen chat --resume \S+`: the conversation is saved",
                           " ".join(said.split()))
        assert bool(resume) == answered_first, said
        assert "Traceback" not in said and "Exception ignored" not in said, said
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_only_the_errors_failing_allocations_raise_count_as_memory_running_out_near_a_limit() -> None:
    """With under 8 MiB left below a data limit, a TypeError (what Python raises where its own allocations fail)
    counts as memory running out; a PermissionError, a full disk or a KeyError stays what it is, where any error
    there was said as out of memory."""
    import subprocess

    script = ("import errno, resource\n"
              "from localgen.memory_limits import data_in_use, ran_out_of_memory\n"
              "errors = [TypeError('frame'), PermissionError(errno.EACCES, 'denied', '/x'),\n"
              "          OSError(errno.ENOSPC, 'full'), KeyError('k'), MemoryError()]\n"
              "resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + 6 * 1024 * 1024, resource.RLIM_INFINITY))\n"
              "print([ran_out_of_memory(error) for error in errors])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.stdout == "[True, False, False, False, True]\n", (done.stdout, done.stderr)
