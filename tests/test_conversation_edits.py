"""A saved conversation's file changed by another program (an editor) while a chat or a run has it open: the change
is never written over."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import lock_path
from localgen.conversation_store import let_go, load_conversation, read_conversation, save_conversation, unsave
from localgen.errors import LocalgenError

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _users(name: str) -> list[str]:
    return [turn.user for turn in read_conversation(name).turns]


def _free(path: Path) -> bool:
    """Whether no chat holds the conversation of path (a lock taken here, by another open file, would wait)."""
    import fcntl

    fd = os.open(lock_path(path.parent, path.stem), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_file_edited_since_the_last_save_is_kept_and_the_chat_goes_on_beside_it() -> None:
    notes: list[str] = []
    mine = Conversation(name="notes", turns=[Turn("first", "a")])
    path = save_conversation(mine, warn=notes.append)
    edited = path.read_text().replace('"first"', '"first, as I meant it"')
    path.write_text(edited)
    mine.turns.append(Turn("second", "b"))
    aside = save_conversation(mine, warn=notes.append)
    assert path.read_text() == edited and _users("notes") == ["first, as I meant it"]
    assert aside == path.with_name("notes-2.json") and mine.name == "notes-2" and _users("notes-2") == ["first",
                                                                                                         "second"]
    assert json.loads(aside.read_text())["name"] == "notes-2", "the new file records its own name"
    assert notes == [f"{path} changed since localgen last read or saved it: it is kept as it is, and this "
                     f"conversation is saved as 'notes-2' instead ({aside})"]
    assert _free(path) and not _free(aside), "the edited one is let go: another chat may take it up"
    mine.turns.append(Turn("third", "c"))
    save_conversation(mine, warn=notes.append)  # its own file from now on, said once
    assert _users("notes-2") == ["first", "second", "third"] and len(notes) == 1 and path.read_text() == edited
    let_go(mine)


def test_a_file_edited_since_it_was_loaded_is_kept_too() -> None:
    path = save_conversation(done := Conversation(name="loaded", turns=[Turn("q", "a")]))
    let_go(done)
    notes: list[str] = []
    mine = load_conversation("loaded")
    replacement = path.with_name("loaded.json.new")  # an editor that writes a new file and renames it over
    replacement.write_text(path.read_text().replace('"a"', '"A better answer."'))
    os.replace(replacement, path)
    mine.turns.append(Turn("q2", "a2"))
    save_conversation(mine, warn=notes.append)
    assert read_conversation("loaded").turns[0].answer == "A better answer." and _users("loaded-2") == ["q", "q2"]
    assert len(notes) == 1 and mine.name == "loaded-2"
    let_go(mine)


def test_a_file_written_again_as_it_was_or_loaded_again_is_no_change() -> None:
    notes: list[str] = []
    mine = Conversation(name="same", turns=[Turn("q", "a")])
    path = save_conversation(mine, warn=notes.append)
    path.write_bytes(path.read_bytes())  # a backup restored, a sync tool: a new time, the same text
    mine.turns.append(Turn("q2", "a2"))
    save_conversation(mine, warn=notes.append)
    path.write_text(path.read_text().replace('"a2"', '"edited"'))
    again = load_conversation("same")  # /load of the edited file takes the edit up: its saves go there
    again.turns.append(Turn("q3", "a3"))
    save_conversation(again, warn=notes.append)
    assert notes == [] and [t.answer for t in read_conversation("same").turns] == ["a", "edited", "a3"]
    let_go(again)


def test_a_file_deleted_while_open_is_written_again_and_said_to_be() -> None:
    notes: list[str] = []
    mine = Conversation(name="gone", turns=[Turn("q", "a")])
    path = save_conversation(mine, warn=notes.append)
    path.unlink()
    mine.turns.append(Turn("q2", "a2"))
    assert save_conversation(mine, warn=notes.append) == path and _users("gone") == ["q", "q2"]
    assert notes == [f"{path} was deleted since localgen last read or saved it: this conversation is saved there "
                     "again"]
    let_go(mine)


@pytest.mark.parametrize("replaced_by", ["dangling link", "link elsewhere", "pipe"])
def test_a_file_replaced_by_something_else_is_left_there(replaced_by: str) -> None:
    notes: list[str] = []
    mine = Conversation(name="odd", turns=[Turn("q", "a")])
    path = save_conversation(mine, warn=notes.append)
    path.unlink()
    elsewhere = path.parent.parent / "elsewhere.json"
    elsewhere.write_text("{}")
    {"dangling link": lambda: path.symlink_to("nowhere.json"), "link elsewhere": lambda: path.symlink_to(elsewhere),
     "pipe": lambda: os.mkfifo(path)}[replaced_by]()
    mine.turns.append(Turn("q2", "a2"))
    assert save_conversation(mine, warn=notes.append).name == "odd-2.json" and _users("odd-2") == ["q", "q2"]
    assert len(notes) == 1 and os.path.lexists(path) and elsewhere.read_text() == "{}"
    let_go(mine)


def test_undo_to_nothing_keeps_a_file_edited_meanwhile() -> None:
    """A chat's own conversation left empty by /undo is deleted, unless another program changed its file."""
    notes: list[str] = []
    mine = Conversation(name="undone", turns=[Turn("q", "a")])
    path = save_conversation(mine)
    path.write_text(edited := path.read_text().replace('"a"', '"mine now"'))
    mine.turns.pop()
    unsave(mine, notes.append)
    assert path.read_text() == edited and not mine.on_disk and _free(path)
    assert notes == [f"{path} changed since localgen last read or saved it: it is kept as it is"]
    ours = Conversation(name="undone-too", turns=[Turn("q", "a")])
    path = save_conversation(ours)
    unsave(ours, notes.append)
    assert not path.exists() and len(notes) == 1


def test_a_save_aside_that_fails_keeps_the_name_and_the_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import conversation_store

    mine = Conversation(name="stuck", turns=[Turn("q", "a")])
    path = save_conversation(mine)
    path.write_text(path.read_text().replace('"a"', '"edited"'))
    written = conversation_store.atomic_write_text

    def full_disk(*args: object, **kwargs: object) -> None:
        raise LocalgenError("could not write: No space left on device")

    monkeypatch.setattr(conversation_store, "atomic_write_text", full_disk)
    mine.turns.append(Turn("q2", "a2"))
    with pytest.raises(LocalgenError, match="No space left"):
        save_conversation(mine)
    assert mine.name == "stuck" and not _free(path), "still its own, to save aside at the next change"
    monkeypatch.setattr(conversation_store, "atomic_write_text", written)
    assert save_conversation(mine).name == "stuck-2.json" and read_conversation("stuck").turns[0].answer == "edited"
    let_go(mine)


def test_a_chat_keeps_an_edit_made_between_two_turns_and_says_where_it_goes_on(home: Path) -> None:
    """In a real chat: the file edited by hand between two questions keeps the edit; the chat says, after the
    answer, that it goes on as NAME-2, where both exchanges are saved."""
    from tests.test_repl import Chat

    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "3")
    try:
        chat.ask("Hi")
        (path,) = (home / "data" / "conversations").glob("*.json")
        record = json.loads(path.read_text())
        record["turns"][0]["answer"] = "Hello, edited by hand."
        path.write_text(json.dumps(record))
        chat.child.sendline("Bye")
        chat.expect_words(f"localgen: warning: {path} changed since localgen last read or saved it: it is kept as it "
                          f"is, and this conversation is saved as '{path.stem}-2' instead")
        chat.sync()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    assert json.loads(path.read_text()) == record
    aside = json.loads(path.with_name(f"{path.stem}-2.json").read_text())
    assert [turn["user"] for turn in aside["turns"]] == ["Hi", "Bye"] and aside["turns"][1]["answer"] is not None


def test_a_load_of_the_chat_s_own_conversation_turned_down_keeps_an_edit_made_before_it(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/load of the chat's own name, turned down while a change is unsaved, reads the file but does not take it up:
    a hand edit made just before is still kept at the next save."""
    from localgen import conversation_store
    from localgen.chat_commands_conversation import load_command
    from localgen.repl_state import ChatState
    from localgen.repl_unsaved import LeaveGuard
    from tests.test_session import _session

    session = _session(bundled_model, 1024)
    try:
        session.autosave = True
        session.conversation.turns.append(Turn("q", "a"))
        path = session.save()
        written = conversation_store.atomic_write_text

        def read_only(path: Path, text: str, **_: object) -> None:
            raise LocalgenError(f"could not write {path}: Permission denied")

        monkeypatch.setattr(conversation_store, "atomic_write_text", read_only)
        session.set_value("top_k", "5")  # a change the save missed
        path.write_text(edited := path.read_text().replace('"a"', '"edited by hand"'))
        state = ChatState(session, LeaveGuard(session), show_answer=lambda *_: None, escapes=False, markdown=False,
                          show_thinking=False)
        load_command(state, path.stem)
        assert session.unsaved and session.conversation.turns[0].answer == "a", "turned down: the chat goes on"
        monkeypatch.setattr(conversation_store, "atomic_write_text", written)
        session.save()
        assert path.read_text() == edited and session.conversation.name == f"{path.stem}-2"
        assert read_conversation(f"{path.stem}-2").settings["top_k"] == 5
    finally:
        let_go(session.conversation)
        session.loaded.close()
