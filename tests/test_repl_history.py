"""The chat's input history as prompt-toolkit loads it: a file it cannot read, or a signal as it loads, ends in at
most one line of localgen's, never a traceback nor a chat that hangs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from localgen import repl_input
from localgen.repl_input import SafeFileHistory, history_path, open_history
from localgen.repl_terminal import signals_end_the_prompt
from localgen.signals import SignalExit, exit_on_signals


def _read_a_line(history: History, typed: str = "hi\n") -> str:
    """One line read by a prompt with this history, as the chat reads it (signals handled as at its prompt)."""
    with create_pipe_input() as keys:
        session: PromptSession[str] = PromptSession(history=history, input=keys, output=DummyOutput())
        keys.send_text(typed)
        with signals_end_the_prompt(session.app):
            return session.prompt("> ")


class _SignalledWhileLoading(SafeFileHistory):
    """A SIGTERM that lands while prompt-toolkit's task reads the history file (it does so at each prompt)."""

    def load_history_strings(self) -> Iterable[str]:
        signal.raise_signal(signal.SIGTERM)
        return super().load_history_strings()


def test_a_signal_as_the_history_loads_ends_the_prompt_without_a_traceback(
        home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Raised inside prompt-toolkit's task, SignalExit ended only the task: 'Loading history failed' and 'Unhandled
    exception in event loop', each with a traceback, on the screen."""
    path = history_path()
    path.parent.mkdir(parents=True)
    path.write_text("\n# 2024-01-01 10:00:00\n+first\n")
    with exit_on_signals(), pytest.raises(SignalExit) as ended:
        _read_a_line(_SignalledWhileLoading(path))
    assert ended.value.code == 143
    out, err = capfd.readouterr()
    for said in ("Traceback", "Loading history failed", "Unhandled exception"):
        assert said not in out + err, out + err


class _SignalledTwiceWhileLoading(SafeFileHistory):
    """The same signal sent again while the first waits for the prompt to end (a task stuck would never let it)."""

    second_raised = False

    def load_history_strings(self) -> Iterable[str]:
        signal.raise_signal(signal.SIGTERM)
        try:
            signal.raise_signal(signal.SIGTERM)
        except SignalExit:
            self.second_raised = True
        return []


def test_the_same_signal_again_ends_the_chat_where_it_lands(home: Path) -> None:
    history = _SignalledTwiceWhileLoading(history_path())
    with exit_on_signals(), pytest.raises(SignalExit) as ended:
        _read_a_line(history)
    assert ended.value.code == 143 and history.second_raised


def test_a_signal_outside_the_prompt_still_ends_the_chat_at_once() -> None:
    with create_pipe_input() as keys:
        session: PromptSession[str] = PromptSession(input=keys, output=DummyOutput())
        with exit_on_signals(), pytest.raises(SignalExit) as ended, signals_end_the_prompt(session.app):
            signal.raise_signal(signal.SIGHUP)
            pytest.fail("went on past the signal")
    assert ended.value.code == 129


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_history_that_is_no_file_is_not_read(kind: str, home: Path) -> None:
    """A FIFO (or a link to /dev/zero) in its place: reading it never ended, and the chat hung at its first prompt."""
    path = history_path()
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    history, warning = open_history()
    assert not isinstance(history, FileHistory)
    assert warning == f"{path} is not a regular file; input history is not saved this session"
    assert _read_a_line(history) == "hi"


def test_a_file_where_the_data_folder_goes_is_named_as_such_by_the_history_warning(home: Path) -> None:
    """The chat's start says the data folder is a file; the history's warning said mkdir's 'File exists'."""
    data = history_path().parent
    data.parent.mkdir(parents=True, exist_ok=True)
    data.touch()
    history, warning = open_history()
    assert not isinstance(history, FileHistory)
    assert warning == (f"cannot use the input history {data}/history: {data} is a file, where a folder should be; "
                       "not saving it")


def test_a_link_to_dev_null_still_keeps_no_history(home: Path) -> None:
    """`ln -sf /dev/null history`, as /set nohistory says: read and written as a file, silently."""
    path = history_path()
    path.parent.mkdir(parents=True)
    path.symlink_to(os.devnull)
    history, warning = open_history()
    assert isinstance(history, SafeFileHistory) and warning is None
    assert _read_a_line(history) == "hi" and history.problem is None


def test_a_history_that_fails_to_load_is_one_warning(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """Any failure of prompt-toolkit's read, not only OSError, is noted for the chat to say once."""
    path = history_path()
    path.parent.mkdir(parents=True)
    path.write_text("")

    def too_big(_path: Path) -> list[str]:
        raise MemoryError

    monkeypatch.setattr(repl_input, "recalled_entries", too_big)
    history = SafeFileHistory(path)
    assert _read_a_line(history) == "hi"
    assert history.problem == f"cannot read the input history {path}: MemoryError()"
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Loading history failed" not in out + err


@pytest.mark.parametrize("cleared", [["A"], ["A", "B"]])
def test_a_cleared_line_sent_as_up_brings_it_back_is_saved_once(tmp_path: Path, cleared: list[str]) -> None:
    """Sent as the newest entry, prompt-toolkit adds nothing, so the line is saved then; sent from further back, it
    adds the line itself, so it is not saved again."""
    from prompt_toolkit.buffer import Buffer

    from localgen.repl_input import keep_cleared

    path = tmp_path / "history"
    history = SafeFileHistory(path)
    history.load_history_strings()
    for text in cleared:
        keep_cleared(history, text)
    buffer = Buffer(history=history)
    buffer.text = "A"
    buffer.append_to_history()  # as prompt-toolkit does on Enter
    history.sent("A")
    assert path.read_text().count("\n+A\n") == 1, path.read_text()
