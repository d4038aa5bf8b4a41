"""What holds a chat that would leave changes a save missed: the guard of a chat whose saves worked, and the quiet of
one its start said cannot be saved; and a save that a key pressed during it never cuts short."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from localgen import conversation_store
from localgen.errors import LocalgenError
from localgen.repl_unsaved import LeaveGuard
from localgen.session import ChatSession
from localgen.session_turns import UnsavedChangeError
from tests.conftest import spawn_localgen
from tests.test_repl import TIMEOUT, Chat, _env
from tests.test_session import _answer, _session

BIG_EXCHANGES = 40_000  # some 15 MB saved: a change's save takes long enough to press a key while it is written


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


def _big_conversation(home: Path) -> Path:
    """A saved conversation 'big' of BIG_EXCHANGES exchanges in home; its file."""
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    turns = [{"user": f"{i} tell me about whales " + "w" * 100, "answer": "whales are big " + "x" * 150}
             for i in range(BIG_EXCHANGES)]
    path = folder / "big.json"
    path.write_text(json.dumps({"format": 1, "name": "big", "system": "old system prompt", "model": None,
                                "settings": {}, "context_start": BIG_EXCHANGES - 10, "turns": turns}))
    return path


def _key_during_save(chat: Chat, line: str, key: str) -> None:
    """Send a command, and press key while the save of its change is being written."""
    chat.child.sendline(line)
    _wait_for_the_save(chat.home)
    chat.child.send(key)


def _wait_for_the_save(home: Path) -> None:
    """Wait until conversation 'big' is being saved (its temp file is there)."""
    folder = home / "data" / "conversations"
    deadline = time.monotonic() + TIMEOUT
    while not any(folder.glob(".big.json.*.tmp")):
        assert time.monotonic() < deadline, "the save was never seen"
        time.sleep(0.001)


@pytest.mark.serial  # timed against a save (conftest: serial)
def test_ctrl_c_then_ctrl_backslash_during_a_command_s_save_let_the_save_finish(tmp_path: Path) -> None:
    """Ctrl-C during a command's save lets the save finish and the command say what it did, the chat going on; then,
    in the same chat (its big conversation loaded once), Ctrl-\\ during the next command's save ends the chat 131
    with that change saved too."""
    path = _big_conversation(tmp_path)
    chat = Chat(tmp_path, "--resume", "big", "-n", "4", "-c", "1024")
    _key_during_save(chat, "/system new system prompt", "\x03")
    chat.sync()
    said = chat.transcript.getvalue().rpartition("/system new system prompt")[2]
    assert "system prompt set" in said and "[interrupted]" not in said
    assert json.loads(path.read_text())["system"] == "new system prompt", "the change is on disk"
    assert chat.child.isalive(), "the chat goes on after the Ctrl-C"
    _key_during_save(chat, "/set temperature 0.3", "\x1c")
    chat.child.expect(pexpect.EOF)
    chat.child.close()
    assert chat.child.exitstatus == 131
    saved = json.loads(path.read_text())
    assert (saved["settings"]["temperature"], saved["system"]) == (0.3, "new system prompt")


@pytest.mark.serial  # timed against a save (conftest: serial)
def test_ctrl_c_during_the_save_of_run_s_answer_lets_the_save_finish_and_run_exit_130(tmp_path: Path) -> None:
    path = _big_conversation(tmp_path)
    run = spawn_localgen("run", "--conversation", "big", "-n", "1", "-c", "1024", "Say yes.", env=_env(tmp_path),
                         encoding="utf-8", timeout=TIMEOUT)
    _wait_for_the_save(tmp_path)
    run.sendcontrol("c")
    run.expect(pexpect.EOF)
    run.close()
    assert run.exitstatus == 130, "the Ctrl-C is not lost"
    assert len(json.loads(path.read_text())["turns"]) == BIG_EXCHANGES + 1



def _load_after_a_missed_save(session: ChatSession, monkeypatch: pytest.MonkeyPatch,
                              then: Callable[..., object]) -> Callable[[], None]:
    """A chat with a change its save missed and a saved conversation `other`: the /load of it, whose first save
    sends the terminal's Ctrl-C as it writes, then goes on as then (a real write, or a failed one) does."""
    from localgen.chat_commands_conversation import load_command
    from localgen.conversation import Conversation, Turn
    from localgen.repl_state import ChatState

    conversation_store.save_conversation(other := Conversation(name="other", turns=[Turn("a", "b")]))
    conversation_store.let_go(other)
    _answer(session.ask("Say yes.")[1])
    monkeypatch.setattr(conversation_store, "atomic_write_text", _read_only)
    session.set_value("top_k", "5")  # a change the save missed: /load saves it first

    def ctrl_c_while_written(path: Path, text: str, **options: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)  # the terminal's Ctrl-C, as the save is under way
        return then(path, text, **options)

    monkeypatch.setattr(conversation_store, "atomic_write_text", ctrl_c_while_written)
    state = ChatState(session, LeaveGuard(session), show_answer=lambda *_: None, escapes=False, markdown=False,
                      show_thinking=False)
    return lambda: load_command(state, "other")


def test_ctrl_c_during_the_save_before_a_load_lets_the_save_finish_and_stops_the_load(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.conversation_lock import holds
    from tests.test_conversation_lock import HOLDER

    load = _load_after_a_missed_save(session, monkeypatch, conversation_store.atomic_write_text)
    name = session.conversation.name
    load()  # the /load takes the Ctrl-C itself and says which conversation is open
    said = capsys.readouterr()
    assert f"[interrupted: {name} is still the conversation open]" in said.out + said.err, said
    assert session.conversation.name == name and not session.unsaved, "the /load stopped, the save done"
    assert conversation_store.read_conversation(name).settings["top_k"] == 5
    folder = conversation_store.conversations_dir()
    assert not holds(folder, "other")
    held = subprocess.run([sys.executable, "-c", HOLDER, str(folder), "other"], input="", capture_output=True,
                          text=True, timeout=60)
    assert held.stdout == "held\n", "the conversation /load opened is let go again"


def test_a_save_that_fails_under_a_ctrl_c_before_a_load_says_why_it_failed(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    load = _load_after_a_missed_save(session, monkeypatch, _read_only)
    name = session.conversation.name
    try:
        load()
    except KeyboardInterrupt:
        pytest.fail("a KeyboardInterrupt hid the failed save's error")
    err = capsys.readouterr().err
    assert "Permission denied" in err and "are not saved" in err, err
    assert session.conversation.name == name and session.unsaved
