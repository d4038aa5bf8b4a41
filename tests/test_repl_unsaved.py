"""What holds a chat that would leave changes a save missed: the guard of a chat whose saves worked, and the quiet of
one its start said cannot be saved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen import conversation_store
from localgen.errors import LocalgenError
from localgen.repl_unsaved import LeaveGuard
from localgen.session import ChatSession, UnsavedChangeError
from tests.test_session import _answer, _session


def _read_only(path: Path, text: str, **_: object) -> None:
    raise LocalgenError(f"could not write {path}: Permission denied")


@pytest.fixture
def session(bundled_model: Path, home: Path) -> Iterator[ChatSession]:
    chat = _session(bundled_model, 1024)
    chat.autosave = True
    yield chat
    chat.loaded.close()


def test_a_chat_its_start_said_cannot_be_saved_is_quiet_and_quits_at_once_until_a_save_works(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    written = conversation_store.atomic_write_text
    monkeypatch.setattr(conversation_store, "atomic_write_text", _read_only)
    with pytest.raises(UnsavedChangeError) as missed:
        _answer(session.ask("Say yes.")[1])
    guard = LeaveGuard(session, unsaveable=True)
    guard.say_unsaved(missed.value)
    assert guard.may_leave("Ctrl-D") and guard.may_leave("/reset"), "nothing it could save holds it"
    guard.last_save()
    assert capsys.readouterr().err == "", "its start said it cannot be saved: no save is said again"
    monkeypatch.setattr(conversation_store, "atomic_write_text", written)  # fixed: saves work from now on
    session.set_value("top_k", "5")
    monkeypatch.setattr(conversation_store, "atomic_write_text", _read_only)  # and fail again: something to lose
    session.set_value("top_k", "6")
    assert session.unsaved and not guard.may_leave("Ctrl-D"), "warned first, as any chat whose saves worked"
    assert "Ctrl-D again leaves without them" in capsys.readouterr().err


def test_ctrl_d_then_exit_leaves_unsaved_changes_as_ctrl_d_twice_does(session: ChatSession,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _answer(session.ask("Say yes.")[1])
    monkeypatch.setattr(conversation_store, "atomic_write_text", _read_only)
    session.set_value("top_k", "5")
    guard = LeaveGuard(session)
    assert not guard.may_leave("Ctrl-D"), "warned first"
    guard.next_input("/bye")  # /exit by any name: the repeat
    assert guard.may_leave("/exit", "/bye")
    guard = LeaveGuard(session)
    assert not guard.may_leave("/exit")
    guard.next_input("/reset")  # another command between: warned again
    assert not guard.may_leave("Ctrl-D")
