"""One chat per saved conversation: another process holding it is refused, and let go it can be opened."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import ConversationBusyError
from localgen.conversation_store import (
    conversations_dir,
    latest_conversation,
    let_go,
    load_conversation,
    save_conversation,
)
from localgen.errors import LocalgenError
from localgen.storage import STALE_TEMP_S, temp_name
from tests.conftest import run_localgen

HOLDER = """
import sys
from pathlib import Path
from localgen.conversation_lock import hold
try:
    hold(Path(sys.argv[1]), sys.argv[2], hint="")
    print("held", flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
sys.stdin.read()
"""


@contextmanager
def another_process(name: str) -> Iterator[str]:
    """A second process that tries to hold conversation name until the block ends; yields what it got."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(conversations_dir()), name],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    try:
        yield child.stdout.readline().strip()
    finally:
        child.stdin.close()
        child.wait(timeout=30)


HELD_AT_SYNC = """
import sys
import time
from localgen import storage


def held(handle):
    print("writing", flush=True)  # the temp file is written, not yet synced nor renamed: the test kills it now
    time.sleep(600)


storage.fsync_file = held
"""
SAVER = HELD_AT_SYNC + """
from localgen.conversation_store import load_conversation, save_conversation
conversation = load_conversation("big")
conversation.system = "new"
save_conversation(conversation)
"""
FIRST_SAVER = HELD_AT_SYNC + """
from localgen.conversation import Conversation, Turn
from localgen.conversation_store import save_conversation
save_conversation(Conversation(name="big", turns=[Turn("tell me about whales", "whales are big")]))
"""  # the first save of a new conversation 'big'


def _big_conversation() -> Path:
    """A saved conversation 'big' of one exchange; its file."""
    path = conversations_dir() / "big.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "name": "big", "system": "old", "model": None, "settings": {},
                                "turns": [{"user": "tell me about whales", "answer": "whales are big"}]}))
    return path


def _killed_saving(saver: str = SAVER) -> list[Path]:
    """Save conversation 'big' in another process (saver: the code that does), killed (SIGKILL) once its temp file
    is written, before it is synced and renamed; the temp files left behind."""
    child = subprocess.Popen([sys.executable, "-c", saver], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "writing\n"
    child.kill()
    child.wait(timeout=30)
    child.stdout.close()
    left = list(conversations_dir().glob(".big.json.*.tmp"))
    assert left, "the killed save left its temp file"
    return left


def _untouched_an_hour(*paths: Path) -> None:
    """Date files back past STALE_TEMP_S, as a killed save's temp file gets to be."""
    for path in paths:
        os.utime(path, (time.time() - STALE_TEMP_S - 60,) * 2)


pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def test_a_conversation_open_in_another_process_is_refused_with_its_process_id() -> None:
    save_conversation(Conversation(name="shared", turns=[Turn("a", "b")]))
    let_go(load_conversation("shared"))
    with another_process("shared") as got:
        assert got == "held"
        busy = r"'shared' is in use by another localgen chat or run \(process \d+\)"
        with pytest.raises(ConversationBusyError, match=busy) as caught:
            load_conversation("shared", shell=True)
        assert "`localgen chat`" in (caught.value.hint or "")
    assert load_conversation("shared").turns == [Turn("a", "b")], "free again once the other process ended"


def test_a_lock_file_that_is_a_link_into_a_loop_of_links_is_named_so(home: Path) -> None:
    """A conversation's lock file that is a link to itself was refused with the OS's words and a hint to check its
    permissions."""
    lock = conversations_dir() / ".locks" / "notes.lock"
    lock.parent.mkdir(parents=True)
    lock.symlink_to(lock)
    done = run_localgen("run", "--conversation", "notes", "-n", "1", "Hi")
    assert done.returncode == 1 and done.err == f"localgen: error: could not open {lock}: it is a link to {lock}, " \
        "which leads into a loop of links (hint: remove it)\n", done.err


def test_a_lock_file_that_is_a_link_that_may_not_be_followed_is_refused_for_its_permissions(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock file linked into a folder that may not be entered is said to be refused, with the hint to check its
    permissions, not said to be a link that leads to nothing."""
    from localgen.conversation_lock import hold

    lock = conversations_dir() / ".locks" / "notes.lock"
    lock.parent.mkdir(parents=True)
    lock.symlink_to(home / "locked" / "notes.lock")
    real_open, real_stat = os.open, os.stat

    def refused(real: Any) -> Any:  # as for a user other than root, the target's folder mode 000
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if Path(os.fsdecode(path)) == lock:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "open", refused(real_open))
    monkeypatch.setattr(os, "stat", refused(real_stat))
    with pytest.raises(LocalgenError) as info:
        hold(conversations_dir(), "notes", hint="")
    assert (info.value.message, info.value.hint) == (f"could not open {lock}: Permission denied",
                                                     "check its permissions")


def test_a_conversation_this_process_holds_cannot_be_opened_elsewhere_until_let_go() -> None:
    conversation = Conversation(name="mine")
    save_conversation(conversation)
    with another_process("mine") as got:
        assert got == "ConversationBusyError"
    let_go(conversation)
    with another_process("mine") as got:
        assert got == "held"


def test_a_first_save_skips_a_name_another_process_holds() -> None:
    with another_process("chat-1") as got:
        assert got == "held"
        path = save_conversation(Conversation(name="chat-1"))
    assert path.name == "chat-1-2.json"


def test_save_as_refuses_a_name_held_elsewhere_and_lets_the_old_name_go() -> None:
    conversation = Conversation(name="first")
    save_conversation(conversation)
    with another_process("taken") as got:
        assert got == "held"
        with pytest.raises(ConversationBusyError, match="'taken' is in use by another localgen chat or run") as busy:
            save_conversation(conversation, "taken")
        assert busy.value.hint == "choose another name", "not /load, which would be refused too"
    save_conversation(conversation, "second")
    with another_process("first") as got:
        assert got == "held", "the chat went on under the new name"
    with another_process("second") as got:
        assert got == "ConversationBusyError"


def test_a_file_system_without_locks_leaves_chats_unguarded_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import fcntl

    def no_locks(*_: object) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    path = save_conversation(Conversation(name="plain", turns=[Turn("a", "b")]))
    assert path.name == "plain.json", "the first name is taken, not skipped as busy"
    assert load_conversation("plain").turns == [Turn("a", "b")]


def test_resume_without_a_name_skips_the_conversations_other_chats_have_open() -> None:
    import os

    for number, name in enumerate(["older", "newer"]):
        conversation = Conversation(name=name, turns=[Turn(name, "x")])
        os.utime(save_conversation(conversation), (1000 + number, 1000 + number))
        let_go(conversation)
    with another_process("newer") as got:
        assert got == "held"
        warnings: list[str] = []
        assert latest_conversation(warnings.append).name == "older"
        assert len(warnings) == 1 and warnings[0].startswith(
            "skipped a conversation in use: conversation 'newer' is in use by another localgen chat or run (process "
        ), warnings
        with another_process("older") as also:
            assert also == "ConversationBusyError", "this process holds it now"
    let_go(load_conversation("older"))
    with another_process("older") as first, another_process("newer") as second:
        assert first == second == "held"
        warnings = []
        with pytest.raises(ConversationBusyError, match="'newer' is in use"):
            latest_conversation(warnings.append)
        assert warnings == [], "the error says it: no warning besides"


def test_resume_without_a_name_skips_damaged_files_with_a_warning() -> None:
    import os

    older = Conversation(name="older", turns=[Turn("q", "a")])
    os.utime(save_conversation(older), (1000, 1000))
    let_go(older)
    (conversations_dir() / "broken.json").write_text('{"turns": [')
    warnings: list[str] = []
    assert latest_conversation(warnings.append).name == "older"
    assert len(warnings) == 1 and warnings[0].startswith("skipped a damaged conversation: ")
    assert "broken.json is not a valid saved conversation" in warnings[0]
    let_go(load_conversation("older"))
    (conversations_dir() / "older.json").write_text("[]")
    with pytest.raises(LocalgenError, match="no saved conversation can be resumed"):
        latest_conversation(warnings.append)
    assert (conversations_dir() / "broken.json").read_text() == '{"turns": [', "left untouched"


def test_a_lock_file_deleted_between_open_and_lock_is_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from localgen.conversation_lock import hold, release

    real_open = os.open
    deleted: list[str] = []

    def open_then_removed(path: str, *args: object) -> int:
        """Open, then delete the file as `conversations rm` does while holding it, before this process locks it."""
        fd = real_open(path, *args)
        if str(path).endswith(".lock") and not deleted:
            deleted.append(str(path))
            os.unlink(path)
        return fd

    monkeypatch.setattr(os, "open", open_then_removed)
    assert hold(conversations_dir(), "raced", hint="")
    monkeypatch.setattr(os, "open", real_open)
    try:
        assert deleted, "the race was staged"
        with another_process("raced") as got:
            assert got == "ConversationBusyError", "the lock held is the one on the file named now"
    finally:
        release(conversations_dir(), "raced")


def test_lock_files_whose_identity_never_settles_leave_chats_unguarded_not_hung(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    from localgen import conversation_lock, file_locks

    monkeypatch.setattr(file_locks, "still_names", lambda fd, path: False)  # some FUSE mounts
    assert conversation_lock.hold(conversations_dir(), "fuse", hint="") is False


def test_the_temp_file_of_a_save_killed_part_way_goes_once_the_conversation_is_held_again() -> None:
    path = _big_conversation()
    _killed_saving()
    conversation = load_conversation("big")
    assert not list(conversations_dir().glob(".big.json.*.tmp")), "nothing else would ever remove it"
    assert conversation.system == "old" and json.loads(path.read_text())["system"] == "old"


def test_conversations_rm_deletes_a_killed_save_s_temp_file_with_the_conversation() -> None:
    _big_conversation()
    _killed_saving()
    deleted = run_localgen("conversations", "rm", "big", "-y")
    assert deleted.returncode == 0, deleted.err
    assert [p.name for p in conversations_dir().iterdir()] == [".locks"], "a hidden copy of what was deleted"


def test_a_temp_file_of_a_save_another_process_may_be_writing_is_never_touched() -> None:
    save_conversation(Conversation(name="big", turns=[Turn("a", "b")]))
    let_go(load_conversation("big"))
    with another_process("big") as got:
        assert got == "held"
        written = conversations_dir() / temp_name(conversations_dir() / "big.json")  # as its save's
        written.write_text("{")
        with pytest.raises(ConversationBusyError):
            load_conversation("big")
        assert run_localgen("conversations", "rm", "big", "-y").returncode != 0
        assert Path(written).exists()


PAUSED_SAVER = """
import sys
from localgen import storage
from localgen.conversation_store import load_conversation, save_conversation

synced = storage.fsync_file


def paused(handle):
    print("writing", flush=True)  # the temp file is written, not yet renamed: the test acts, then lets it go on
    sys.stdin.readline()
    synced(handle)


storage.fsync_file = paused
if "--lock-unseen" in sys.argv:  # another machine's save, whose lock this one cannot see (a home shared over NFS)
    storage.try_flock = lambda fd, exclusive=True: None
conversation = load_conversation(sys.argv[1])
conversation.system = "new"
save_conversation(conversation)
print("saved", flush=True)
"""


def test_the_save_of_a_link_to_another_conversation_is_never_cut_short_as_that_one_is_held() -> None:
    """a.json -> b.json: a's save writes .b.json.*.tmp, with a held, not b; b's holder must leave it be."""
    from localgen.conversation_lock import hold, release

    save_conversation(Conversation(name="b", turns=[Turn("a", "b")]))
    let_go(load_conversation("b"))
    (conversations_dir() / "a.json").symlink_to("b.json")
    saver = subprocess.Popen([sys.executable, "-c", PAUSED_SAVER, "a"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert saver.stdout is not None and saver.stdout.readline() == "writing\n", saver.stderr
        written = list(conversations_dir().glob(".b.json.*.tmp"))
        assert len(written) == 1
        assert hold(conversations_dir(), "b", hint="")  # as a chat, a run or conversations rm of b does
        release(conversations_dir(), "b")
        assert written[0].exists(), "a save under way was taken for a killed one's leftover"
    finally:
        out, err = saver.communicate("\n", timeout=60)
    assert (saver.returncode, out, err) == (0, "saved\n", "")
    assert json.loads((conversations_dir() / "b.json").read_text())["system"] == "new"
    assert not list(conversations_dir().glob(".b.json.*.tmp"))


def test_a_killed_first_save_s_temp_file_goes_when_the_conversations_are_listed() -> None:
    """A new conversation's first save leaves no file: no hold of its name would ever come to sweep it."""
    _untouched_an_hour(*_killed_saving(FIRST_SAVER))
    assert not (conversations_dir() / "big.json").exists()
    listed = run_localgen("conversations")
    assert listed.returncode == 0, listed.err
    assert [p.name for p in conversations_dir().iterdir()] == [".locks"], "a hidden copy of a chat nobody can open"


def test_listing_the_conversations_never_touches_the_temp_file_of_a_save_under_way() -> None:
    save_conversation(Conversation(name="b", turns=[Turn("a", "b")]))
    let_go(load_conversation("b"))
    saver = subprocess.Popen([sys.executable, "-c", PAUSED_SAVER, "b"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert saver.stdout is not None and saver.stdout.readline() == "writing\n", saver.stderr
        (written,) = conversations_dir().glob(".b.json.*.tmp")
        killed = conversations_dir() / temp_name(conversations_dir() / "c.json")  # no writer holds its lock
        killed.write_text("{")
        _untouched_an_hour(killed)
        listed = run_localgen("conversations")
        assert listed.returncode == 0 and "\nb\t" in listed.out, listed.err
        assert written.exists(), "a save under way was taken for a killed one's leftover"
        assert not killed.exists()
    finally:
        out, err = saver.communicate("\n", timeout=60)
    assert (saver.returncode, out, err) == (0, "saved\n", "")
    assert json.loads((conversations_dir() / "b.json").read_text())["system"] == "new"


def test_listing_the_conversations_leaves_a_recent_temp_file_whose_lock_it_cannot_see() -> None:
    """Another machine sharing the folder over NFS saves with a lock this one may not see: its temp file looks free,
    yet must stay until it is an hour old, when no save can still be writing it."""
    save_conversation(Conversation(name="remote", turns=[Turn("a", "b")]))
    let_go(load_conversation("remote"))
    saver = subprocess.Popen([sys.executable, "-c", PAUSED_SAVER, "remote", "--lock-unseen"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert saver.stdout is not None and saver.stdout.readline() == "writing\n", saver.stderr
        (written,) = conversations_dir().glob(".remote.json.*.tmp")
        listed = run_localgen("conversations")
        assert listed.returncode == 0 and "\nremote\t" in listed.out, listed.err
        assert written.exists(), "another machine's save under way was taken for a killed one's leftover"
    finally:
        out, err = saver.communicate("\n", timeout=60)
    assert (saver.returncode, out, err) == (0, "saved\n", "")
    assert json.loads((conversations_dir() / "remote.json").read_text())["system"] == "new"


def test_listing_the_conversations_leaves_your_own_files_that_look_like_temp_files() -> None:
    """Saves write NAME.json alone: a hidden file of another name is the user's, however old or shaped."""
    folder = conversations_dir()
    folder.mkdir(parents=True)
    yours = [folder / name for name in (".todo.txt.deadbeef.tmp", ".todo.txt.backup01.tmp", ".x y.json.deadbeef.tmp")]
    killed = [folder / temp_name(folder / "c.json"), folder / ".c.json.k3_x9zq0.tmp"]  # of today's and older saves
    for path in [*yours, *killed]:
        path.write_text("{")
    _untouched_an_hour(*yours, *killed)
    listed = run_localgen("conversations")
    assert listed.returncode == 0, listed.err
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == sorted(p.name for p in yours)


def test_a_chat_removes_killed_saves_temp_files_as_it_starts_and_at_each_list(tmp_path: Path) -> None:
    from tests.test_repl import Chat

    folder = tmp_path / "home" / "data" / "conversations"
    folder.mkdir(parents=True)
    killed = [folder / temp_name(folder / f"{name}.json") for name in ("first", "second")]  # no writer holds them
    killed[0].write_text("{")
    _untouched_an_hour(killed[0])
    chat = Chat(tmp_path / "home", "-n", "2")
    try:
        assert not killed[0].exists(), "gone as the chat started"
        killed[1].write_text("{")
        _untouched_an_hour(killed[1])
        chat.command("/list", "no saved conversations")
        assert not killed[1].exists()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
