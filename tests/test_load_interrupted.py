"""A Ctrl-C at any step of the chat's /load leaves held only the conversation open after it: in the hold as it is
taken, in the reading of the file, as the reading returns, and as the conversation left is let go."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localgen import chat_commands_conversation, conversation_lock, conversation_store
from localgen import session as session_module
from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import hold, holds
from localgen.repl_state import ChatState
from localgen.repl_unsaved import LeaveGuard
from localgen.session import ChatSession
from tests.test_session import _answer, _session


def _ctrl_c_then(real: Callable[..., object] | None = None) -> Callable[..., object]:
    """A stand-in that sends the terminal's Ctrl-C, then does what real does (after the Ctrl-C: never, as it lands
    before)."""

    def pressed(*args: object, **options: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **options) if real is not None else None

    return pressed


def _ctrl_c_after(real: Callable[..., object]) -> Callable[..., object]:
    """A stand-in that does what real does, then sends the terminal's Ctrl-C as it returns."""

    def pressed(*args: object, **options: object) -> object:
        result = real(*args, **options)
        os.kill(os.getpid(), signal.SIGINT)
        return result

    return pressed


@pytest.fixture
def session(bundled_model: Path, home: Path) -> Iterator[ChatSession]:
    chat = _session(bundled_model, 1024)
    chat.autosave = True
    _answer(chat.ask("Say yes.")[1])  # saved: a conversation held by this chat
    conversation_store.save_conversation(other := Conversation(name="other", turns=[Turn("a", "b")]))
    conversation_store.let_go(other)
    yield chat
    chat.loaded.close()


def _load_other(session: ChatSession, capsys: pytest.CaptureFixture[str]) -> str:
    """What /load other says."""
    state = ChatState(session, LeaveGuard(session), show_answer=lambda *_: None, escapes=False, markdown=False,
                      show_thinking=False)
    chat_commands_conversation.load_command(state, "other")
    said = capsys.readouterr()
    return said.out + said.err


def test_a_ctrl_c_as_a_hold_is_taken_leaves_it_free(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversation_lock, "remove_killed_saves", _ctrl_c_then())
    with pytest.raises(KeyboardInterrupt):
        hold(home, "other", hint="")
    assert not holds(home, "other")


def test_a_ctrl_c_amid_the_hold_of_load_says_the_open_one_is_open_and_holds_only_it(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    name, folder = session.conversation.name, conversation_store.conversations_dir()
    monkeypatch.setattr(conversation_lock, "remove_killed_saves", _ctrl_c_then())
    assert f"[interrupted: {name} is still the conversation open]" in _load_other(session, capsys)
    assert not holds(folder, "other") and holds(folder, name)


def test_a_ctrl_c_as_the_file_read_is_noted_leaves_the_conversation_free(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversation_store, "remember", _ctrl_c_then(conversation_store.remember))
    with pytest.raises(KeyboardInterrupt):
        conversation_store.load_conversation("other")
    assert not holds(conversation_store.conversations_dir(), "other")


def test_a_ctrl_c_as_the_reading_for_load_returns_lets_the_conversation_go(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    name, folder = session.conversation.name, conversation_store.conversations_dir()
    monkeypatch.setattr(chat_commands_conversation, "load_conversation",
                        _ctrl_c_after(conversation_store.load_conversation))
    assert f"[interrupted: {name} is still the conversation open]" in _load_other(session, capsys)
    assert not holds(folder, "other") and holds(folder, name)


def test_a_ctrl_c_as_load_lets_the_conversation_left_go_lets_it_go(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    name, folder = session.conversation.name, conversation_store.conversations_dir()
    monkeypatch.setattr(session_module, "let_go", _ctrl_c_then(conversation_store.let_go))
    assert "[interrupted: other is loaded (/show tells of it)]" in _load_other(session, capsys)
    assert holds(folder, "other") and not holds(folder, name)
