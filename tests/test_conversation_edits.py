"""A saved conversation's file changed by another program (an editor) while a chat or a run has it open: the change
is never written over."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import lock_path
from localgen.conversation_moves import unsave
from localgen.conversation_store import (
    let_go,
    list_conversations,
    load_conversation,
    load_or_start,
    read_conversation,
    save_conversation,
    saved_path,
)
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


def test_an_edit_saved_while_the_new_text_is_being_written_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is checked once the new text is written beside it and synced, as it is about to replace the file:
    an editor's save that lands while the new text is written (here, as it is synced) is kept, where it was checked
    before the write began and the rename then put the chat's text over that edit."""
    notes: list[str] = []
    mine = Conversation(name="racing", turns=[Turn("q", "a")])
    path = save_conversation(mine, warn=notes.append)
    edited, real_fsync = path.read_text().replace('"a"', '"theirs"'), os.fsync

    def fsync_as_an_editor_saves(fd: int) -> None:  # another program saves while the chat's text is synced
        real_fsync(fd)
        if path.read_text() != edited:
            path.write_text(edited)

    mine.turns.append(Turn("q2", "a2"))
    monkeypatch.setattr(os, "fsync", fsync_as_an_editor_saves)
    aside = save_conversation(mine, warn=notes.append)
    assert path.read_text() == edited and aside.name == "racing-2.json" and _users("racing-2") == ["q", "q2"]
    assert notes == [f"{path} changed since localgen last read or saved it: it is kept as it is, and this "
                     f"conversation is saved as 'racing-2' instead ({aside})"]
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == [], "no temp file is left"
    let_go(mine)


@pytest.mark.parametrize("replaced_by", ["dangling link", "link elsewhere", "link to the same text",
                                         "link to a folder", "pipe"])
def test_a_file_replaced_by_something_else_is_left_there(replaced_by: str) -> None:
    notes: list[str] = []
    mine = Conversation(name="odd", turns=[Turn("q", "a")])
    path = save_conversation(mine, warn=notes.append)
    elsewhere = path.parent.parent / "elsewhere.json"
    elsewhere.write_text("{}")
    if replaced_by == "link to the same text":  # a file moved to a synced folder, linked back: still someone's
        path.replace(elsewhere)
    else:
        path.unlink()
    (folder := path.parent.parent / "folder").mkdir()
    {"pipe": lambda: os.mkfifo(path), "dangling link": lambda: path.symlink_to("nowhere.json"),
     "link to a folder": lambda: path.symlink_to(folder)}.get(replaced_by, lambda: path.symlink_to(elsewhere))()
    there = elsewhere.read_text()
    mine.turns.append(Turn("q2", "a2"))
    assert save_conversation(mine, warn=notes.append).name == "odd-2.json" and _users("odd-2") == ["q", "q2"]
    assert len(notes) == 1 and os.path.lexists(path) and elsewhere.read_text() == there
    assert path.is_symlink() == ("link" in replaced_by) and list(folder.iterdir()) == []
    if "link" in replaced_by:
        assert notes[0].startswith(f"{path} was replaced by a link since localgen last read or saved it: it is kept "
                                   "as it is")
    let_go(mine)


def test_a_conversation_read_through_a_link_is_saved_through_it_while_it_points_there() -> None:
    """A conversation file kept elsewhere (a synced folder) and linked into the conversations folder is saved to the
    file the link points to, as long as it does and no other program changed that file, where each save went to a
    new NAME-2 beside the link; its mode is kept."""
    notes: list[str] = []
    first = Conversation(name="synced", turns=[Turn("q", "a")])
    path = save_conversation(first)
    let_go(first)
    (kept := path.parent.parent / "sync" / "synced.json").parent.mkdir()
    path.replace(kept)
    kept.chmod(0o640)
    path.symlink_to(kept)
    mine = load_conversation("synced")
    mine.turns.append(Turn("q2", "a2"))
    assert save_conversation(mine, warn=notes.append) == path and notes == []
    assert path.is_symlink() and _users("synced") == ["q", "q2"] and oct(kept.stat().st_mode & 0o777) == "0o640"
    assert sorted(p.name for p in path.parent.glob("*.json")) == ["synced.json"]
    kept.unlink()  # its file deleted: written there again, said
    mine.turns.append(Turn("q3", "a3"))
    save_conversation(mine, warn=notes.append)
    assert path.is_symlink() and _users("synced") == ["q", "q2", "q3"]
    assert notes == [f"{kept} was deleted since localgen last read or saved it: this conversation is saved there "
                     "again"]
    kept.write_text(edited := kept.read_text().replace('"a3"', '"theirs"'))  # edited by hand: kept, saved aside
    mine.turns.append(Turn("q4", "a4"))
    save_conversation(mine, warn=notes.append)
    assert kept.read_text() == edited and mine.name == "synced-2" and _users("synced-2")[-1] == "q4"
    assert notes[1].startswith(f"{kept} (which {path} links to) changed since localgen last read or saved it: it "
                               "is kept as it is, and this conversation is saved as 'synced-2' instead")
    let_go(mine)
    other = load_conversation("synced")  # the link pointed elsewhere since: that file is left alone too
    path.unlink()
    path.symlink_to(elsewhere := kept.with_name("elsewhere.json"))
    elsewhere.write_text(theirs := kept.read_text())
    other.turns.append(Turn("q5", "a5"))
    save_conversation(other, warn=notes.append)
    assert elsewhere.read_text() == theirs == kept.read_text() == edited and other.name == "synced-3"
    assert notes[2].startswith(f"{path} links to another file since localgen last read or saved it: it is kept")
    let_go(other)


def test_undo_to_nothing_keeps_a_file_edited_meanwhile() -> None:
    """A chat's own conversation left empty by /undo is deleted, unless another program changed its file."""
    notes: list[str] = []
    mine = Conversation(name="undone", turns=[Turn("q", "a")])
    path = save_conversation(mine)
    path.write_text(edited := path.read_text().replace('"a"', '"mine now"'))
    mine.turns.pop()
    path.with_name("undone-2.json").write_text("{}")  # taken (by a conversation of another localgen version)
    unsave(mine, notes.append)
    assert path.read_text() == edited and not mine.on_disk and _free(path) and mine.name == "undone-3"
    assert notes == [f"{path} changed since localgen last read or saved it: it is kept as it is, and this "
                     "conversation is saved as 'undone-3' from its next exchange"]
    mine.turns.append(Turn("q2", "a2"))
    assert save_conversation(mine, warn=notes.append).name == "undone-3.json" and len(notes) == 1
    assert path.read_text() == edited
    let_go(mine)
    ours = Conversation(name="undone-too", turns=[Turn("q", "a")])
    path = save_conversation(ours)
    unsave(ours, notes.append)
    assert not path.exists() and len(notes) == 1 and ours.name == "undone-too"


def test_undo_of_the_only_exchange_says_where_the_chat_goes_on_when_its_file_was_edited(
        bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """/undo that leaves the chat's own conversation empty says it is no longer saved only where its file was
    deleted; one edited by hand is kept, and the note says where the chat is saved from its next exchange."""
    from localgen.chat_commands_conversation import undo_command
    from localgen.repl_state import ChatState
    from localgen.repl_unsaved import LeaveGuard
    from tests.test_session import _session

    session = _session(bundled_model, 1024)
    try:
        session.autosave = True
        state = ChatState(session, LeaveGuard(session), show_answer=lambda *_: None, escapes=False, markdown=False,
                          show_thinking=False)
        for edited in (False, True):
            session.conversation.turns.append(Turn("q", "a"))
            session.set_value("top_k", "5")  # autosaved: the chat's own file
            name = session.conversation.name
            path = saved_path(name)
            if edited:
                path.write_text(path.read_text().replace('"a"', '"edited"'))
            undo_command(state, "")
            said = capsys.readouterr().err
            assert ("no longer saved" in said) != edited and path.exists() == edited
        assert session.save_notes == [f"{path} changed since localgen last read or saved it: it is kept as it is, "
                                      f"and this conversation is saved as '{name}-2' from its next exchange"]
        assert session.conversation.name == f"{name}-2" and not session.conversation.on_disk
    finally:
        let_go(session.conversation)
        session.loaded.close()


def test_undo_of_a_saved_conversation_s_only_exchange_says_it_stays_saved_and_how_to_delete_it(
        bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A conversation the user saved (run --conversation, /save, /load) keeps its file, its system prompt and
    settings when /undo leaves it no exchange, and /undo says so, as it says a new chat's is no longer saved."""
    from localgen.chat_commands_conversation import undo_command
    from localgen.conversation_store import load_conversation
    from localgen.repl_state import ChatState
    from localgen.repl_unsaved import LeaveGuard
    from tests.test_session import _session

    session = _session(bundled_model, 1024)
    try:
        session.autosave = True
        save_conversation(Conversation(name="exist", system="Be brief.", turns=[Turn("hi", "Hello!")]))
        session.replace_conversation(load_conversation("exist"))
        state = ChatState(session, LeaveGuard(session), show_answer=lambda *_: None, escapes=False, markdown=False,
                          show_thinking=False)
        undo_command(state, "")
        said = " ".join(capsys.readouterr().err.split())
        assert said == "dropped: 'hi' (exist has no exchange left and stays saved; `localgen conversations rm exist` " \
                       "deletes it)"
        kept = json.loads(saved_path("exist").read_text())
        assert kept["turns"] == [] and kept["system"] == "Be brief."
    finally:
        let_go(session.conversation)
        session.loaded.close()


def test_a_name_of_100_characters_goes_on_under_a_shortened_one_that_can_be_loaded() -> None:
    notes: list[str] = []
    mine = Conversation(name="a" * 100, turns=[Turn("q", "a")])
    path = save_conversation(mine)
    for number in (2, 3):  # NAME-2, then that one edited too: a shorter NAME-3 (the first 98 characters + "-2" is it)
        path.write_text(path.read_text().replace('"q"', '"edited"'))
        mine.turns.append(Turn("q", "a"))
        path = save_conversation(mine, warn=notes.append)
        assert mine.name == "a" * 98 + f"-{number}" and path.name == f"{mine.name}.json"
    let_go(mine)
    assert len(load_conversation(mine.name).turns) == 3 and mine.name in dict(list_conversations())
    assert len(notes) == 2
    let_go(mine)


def test_a_file_another_program_makes_before_a_run_s_first_save_is_kept_and_said() -> None:
    """`run --conversation NAME` of a new NAME holds it from the start; a NAME.json another program writes before
    its first save is kept, the run's exchange saved as NAME-2, and that said."""
    notes: list[str] = []
    mine = load_or_start("fresh")
    path = saved_path("fresh")
    path.write_text(theirs := '{"not": "mine"}')
    mine.turns.append(Turn("q", "a"))
    aside = save_conversation(mine, warn=notes.append)
    assert path.read_text() == theirs and aside == path.with_name("fresh-2.json") and _users("fresh-2") == ["q"]
    assert notes == [f"{path} was made by another program after this conversation began: it is kept as it is, and "
                     f"this conversation is saved as 'fresh-2' instead ({aside})"]
    assert _free(path), "the other program's file is let go"
    let_go(mine)
    two = Conversation(name="fresh", turns=[Turn("q", "a")])  # a chat started the same second as another: silent
    assert save_conversation(two, warn=notes.append).name == "fresh-3.json" and len(notes) == 1
    let_go(two)


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
