"""Renaming saved conversations: /save NAME of one still under its automatic name, and `localgen conversations mv`,
over real files in a private home."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import hold, lock_path, release
from localgen.conversation_names import is_automatic_name
from localgen.conversation_store import conversations_dir, let_go, load_conversation, save_conversation
from localgen.last_run import last_run_path, newest_last_run
from tests.conftest import run_localgen

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _saved(name: str, question: str = "q") -> Conversation:
    conversation = Conversation(name=name, turns=[Turn(question, "a")], model="smollm2-135m")
    save_conversation(conversation)
    return conversation


def _names() -> list[str]:
    return sorted(path.stem for path in conversations_dir().glob("*.json"))


@pytest.mark.parametrize(("name", "automatic"), [("chat-20261206-025201", True), ("chat-20261206-025201-2", True),
                                                 ("mytalk", False), ("chat-notes", False),
                                                 ("chat-20261206-025201.json", False)])
def test_a_name_is_automatic_only_as_a_new_chat_gets_it(name: str, automatic: bool) -> None:
    assert is_automatic_name(name) is automatic
    assert is_automatic_name(Conversation.new(system=None, model=None).name)


def test_save_as_renames_a_conversation_still_under_its_automatic_name() -> None:
    conversation = _saved("chat-20261206-025201")
    save_conversation(conversation, "mytalk")
    assert _names() == ["mytalk"], "the automatic name's file went"
    assert not lock_path(conversations_dir(), "chat-20261206-025201").exists(), "and its lock file"
    assert json.loads((conversations_dir() / "mytalk.json").read_text())["name"] == "mytalk"
    save_conversation(conversation, "copy")  # a name the user gave: copied
    assert _names() == ["copy", "mytalk"]
    assert load_conversation("mytalk").turns == load_conversation("copy").turns


def test_save_as_keeps_an_automatic_file_another_program_changed_and_says_so() -> None:
    conversation = _saved("chat-20261206-025201")
    path = conversations_dir() / "chat-20261206-025201.json"
    path.write_text(path.read_text().replace('"q"', '"edited by hand"'))
    said: list[str] = []
    save_conversation(conversation, "mytalk", warn=said.append)
    assert _names() == ["chat-20261206-025201", "mytalk"] and "edited by hand" in path.read_text()
    assert said == [f"{path} changed since localgen last read or saved it: it is kept as it is, beside the copy "
                    "saved as 'mytalk'"]


def test_mv_renames_a_conversation_and_its_recorded_name() -> None:
    let_go(_saved("first", "hello there"))
    moved = run_localgen("conversations", "mv", "first", "second.json")  # a file's name means the conversation
    assert moved.returncode == 0 and moved.err == "localgen: renamed first to second\n", moved.err
    assert _names() == ["second"]
    record = json.loads((conversations_dir() / "second.json").read_text())
    assert record["name"] == "second" and record["turns"][0]["user"] == "hello there"
    assert run_localgen("conversations", "rename", "second", "third").returncode == 0, "rename is mv too"
    assert _names() == ["third"]


def test_mv_over_a_saved_name_needs_force_and_then_replaces_it() -> None:
    let_go(_saved("first", "from first"))
    let_go(_saved("second", "from second"))
    refused = run_localgen("conversations", "mv", "first", "second")
    assert refused.returncode == 2 and refused.err.startswith(
        "localgen: error: a conversation named 'second' already exists (hint: choose another name, or add --force to "
        "replace it"), refused.err
    assert _names() == ["first", "second"] and load_conversation("second").turns[0].user == "from second"
    let_go(load_conversation("second"))
    forced = run_localgen("conversations", "mv", "first", "second", "--force")
    assert forced.returncode == 0, forced.err
    assert _names() == ["second"] and load_conversation("second").turns[0].user == "from first"


@pytest.mark.parametrize("held", ["first", "second"])
def test_mv_refuses_a_conversation_a_chat_has_open_and_changes_nothing(held: str) -> None:
    let_go(_saved("first"))
    assert hold(conversations_dir(), held, hint="")  # a chat of this process, another to the command's
    try:
        busy = run_localgen("conversations", "mv", "first", "second")
    finally:
        release(conversations_dir(), held)
    assert busy.returncode == 1 and f"conversation '{held}' is in use by another localgen chat or run" in busy.err
    assert _names() == ["first"]


def test_mv_of_what_is_no_conversation_is_refused_in_one_line(home: Path) -> None:
    let_go(_saved("first"))
    missing = run_localgen("conversations", "mv", "nope", "other")
    assert missing.returncode == 1 and missing.err.startswith("localgen: error: no saved conversation named 'nope'")
    bad = run_localgen("conversations", "mv", "first", "my notes")
    assert bad.returncode == 2 and "'my notes' is not a valid conversation name" in bad.err
    same = run_localgen("conversations", "mv", "first", "first")
    assert same.returncode == 2 and "is named first already" in same.err
    (conversations_dir() / "broken.json").write_text("{not json")
    damaged = run_localgen("conversations", "mv", "broken", "fixed")
    assert damaged.returncode == 1 and "broken.json is not a valid saved conversation" in damaged.err
    assert "Traceback" not in missing.err + bad.err + same.err + damaged.err
    assert _names() == ["broken", "first"]


def test_mv_of_a_link_moves_the_link_and_leaves_its_target(tmp_path: Path) -> None:
    let_go(_saved("first"))
    target = tmp_path / "elsewhere.json"
    os.replace(conversations_dir() / "first.json", target)
    (conversations_dir() / "linked.json").symlink_to(target)
    assert run_localgen("conversations", "mv", "linked", "moved").returncode == 0
    moved = conversations_dir() / "moved.json"
    assert moved.is_symlink() and moved.resolve() == target and target.is_file()


@pytest.mark.parametrize("force", [False, True])
def test_mv_of_a_link_to_the_new_names_own_file_removes_the_link_alone(force: bool) -> None:
    let_go(_saved("bbb", "kept"))
    (conversations_dir() / "old.json").symlink_to("bbb.json")
    moved = run_localgen("conversations", "mv", "old", "bbb", *(["--force"] if force else []))
    assert moved.returncode == 0, moved.err
    assert moved.err == "localgen: removed old, a link to bbb's own file (the conversation is saved as bbb)\n"
    kept = conversations_dir() / "bbb.json"
    assert _names() == ["bbb"] and not kept.is_symlink() and load_conversation("bbb").turns[0].user == "kept"


def test_mv_keeps_the_conversation_s_times_so_run_continue_still_takes_a_newer_plain_run() -> None:
    for name, when in (("aaa", 1_000_000), ("bbb", 2_000_000)):
        let_go(_saved(name))
        path = conversations_dir() / f"{name}.json"
        path.write_text(path.read_text().replace(json.loads(path.read_text())["updated"], "2001-01-01T00:00:00+00:00"))
        os.utime(path, (when, when))
    last_run = Conversation.new(system=None, model="smollm2-135m")
    last_run.turns.append(Turn("Name a fruit.", "Apple."))
    last_run_path().parent.mkdir(parents=True, exist_ok=True)
    last_run_path().write_text(last_run.to_json())
    assert newest_last_run() is not None, "the plain run is the newest"
    assert run_localgen("conversations", "mv", "aaa", "ccc").returncode == 0
    moved = conversations_dir() / "ccc.json"
    assert moved.stat().st_mtime == 1_000_000
    assert json.loads(moved.read_text())["updated"] == "2001-01-01T00:00:00+00:00"
    assert newest_last_run() is not None, "and still is once aaa is renamed"


def test_mv_to_another_case_of_the_same_name_takes_its_one_lock_once() -> None:
    """A case-insensitive file system's two cases of one name, as hard links show them: the second lock of the one
    lock file clashed with the first, and the rename was refused as in use by itself."""
    let_go(_saved("aaa", "kept"))
    folder = conversations_dir()
    assert hold(folder, "aaa", hint="")  # makes its lock file
    release(folder, "aaa")
    os.link(folder / "aaa.json", folder / "AAA.json")
    os.link(lock_path(folder, "aaa"), lock_path(folder, "AAA"))
    moved = run_localgen("conversations", "mv", "aaa", "AAA")
    assert moved.returncode == 0 and moved.err == "localgen: renamed aaa to AAA\n", moved.err
    assert _names() == ["AAA"] and load_conversation("AAA").turns[0].user == "kept"
