"""The lock file a `conversations mv` killed part way leaves goes at the next listing, once a minute old; a held one
never does, and a hold meeting a sweep testing one is not turned away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localgen import conversation_lock, file_locks
from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import LEFTOVER_LOCK_S, ConversationBusyError, hold, holds, release, remove_leftovers
from localgen.conversation_store import conversations_dir, let_go, load_conversation, save_conversation
from tests.conftest import run_localgen

KILLED_ONCE_RENAMED = """
import os, signal, sys
from localgen import conversation_moves
conversation_moves.remove_lock_file = lambda folder, name: os.kill(os.getpid(), signal.SIGKILL)
conversation_moves.rename_conversation(sys.argv[1], sys.argv[2])
"""  # `conversations mv OLD NEW` killed once its file is renamed, before OLD's lock file goes

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _aged(path: Path) -> None:
    """Make path look untouched for longer than a leftover lock file is kept."""
    then = time.time() - LEFTOVER_LOCK_S - 5
    os.utime(path, (then, then))


def test_the_old_name_s_lock_file_a_killed_mv_left_goes_when_the_conversations_are_listed() -> None:
    save_conversation(Conversation(name="a", turns=[Turn("q", "r")]))
    let_go(load_conversation("a"))
    killed = subprocess.run([sys.executable, "-c", KILLED_ONCE_RENAMED, "a", "b"], capture_output=True, text=True,
                            timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    folder, locks = conversations_dir(), conversations_dir() / ".locks"
    assert sorted(p.name for p in folder.glob("*.json")) == ["b.json"]
    assert sorted(p.name for p in locks.iterdir()) == ["a.lock", "b.lock"]
    _aged(locks / "a.lock")
    listed = run_localgen("conversations")
    assert listed.returncode == 0 and "\nb\t" in listed.out, listed.err
    assert sorted(p.name for p in locks.iterdir()) == ["b.lock"], "the old name's goes, the saved one's stays"
    assert load_conversation("b").turns == [Turn("q", "r")]


def test_the_lock_file_of_a_name_held_before_its_first_save_is_never_removed() -> None:
    """A chat holds a new conversation's name before it has a file: neither another process's listing nor this
    process's own sweep takes that lock file from it."""
    folder = conversations_dir()
    assert hold(folder, "new", hint="")
    _aged(folder / ".locks" / "new.lock")  # held a while
    try:
        listed = run_localgen("conversations")
        assert listed.returncode == 0, listed.err
        remove_leftovers(folder)
        assert (folder / ".locks" / "new.lock").exists() and holds(folder, "new")
        taken = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from localgen."
                                "conversation_lock import hold; hold(Path(sys.argv[1]), 'new', hint='')",
                                str(folder)], capture_output=True, text=True, timeout=60)
        assert "ConversationBusyError: conversation 'new' is in use" in taken.stderr, "still held, by the same file"
    finally:
        release(folder, "new")


def test_a_leftover_lock_file_goes_once_untouched_for_a_minute() -> None:
    """One let go a moment ago (a new chat left before its first save) stays, as a hold may be opening it; an old one
    goes."""
    folder = conversations_dir()
    for name in ("fresh", "old"):
        assert hold(folder, name, hint="")
        release(folder, name)
    _aged(folder / ".locks" / "old.lock")
    remove_leftovers(folder)
    assert sorted(p.name for p in (folder / ".locks").iterdir()) == ["fresh.lock"]


def test_a_hold_meeting_a_lock_held_with_no_holder_recorded_tries_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock file a sweep is testing records no process: the hold takes it once the sweep lets go, where it said the
    conversation was in use by another chat; one held for good that way still turns it away."""
    import fcntl

    folder = conversations_dir()
    assert hold(folder, "x", hint="")
    release(folder, "x")  # its lock file is left, empty
    real, busy = file_locks.try_flock, [False]  # the sweep's lock, once
    monkeypatch.setattr(file_locks, "try_flock", lambda fd, exclusive=True: busy.pop() if busy and exclusive
                        else real(fd, exclusive=exclusive))  # a shared lock is the folder's probe: left as it is
    monkeypatch.setattr(conversation_lock, "PIDLESS_PAUSE_S", 0)
    assert hold(folder, "x", hint="") and holds(folder, "x")
    release(folder, "x")
    with open(folder / ".locks" / "x.lock", "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another open file's lock, recording no process
        with pytest.raises(ConversationBusyError, match=r"in use by another localgen chat or run$"):
            hold(folder, "x", hint="")


def test_a_hold_whose_file_goes_after_waits_for_a_holder_recorded_still_takes_the_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The waits for a lock that records no process and the tries after a lock file deleted under the hold are
    counted apart: four waits then one file lost still end with the name held, where the hold gave up and the chat
    went on unguarded."""  # (unit: the lock's answers are stand-ins)
    folder = conversations_dir()
    answers = [False, False, False, False, True, True]  # four pidless waits, then taken twice
    identities = [False, True]  # the first file taken was deleted under the hold; the second is the path's
    real = file_locks.try_flock
    monkeypatch.setattr(file_locks, "try_flock", lambda fd, exclusive=True: answers.pop(0) if exclusive
                        else real(fd, exclusive=False))  # a shared lock is the folder's probe: left as it is
    monkeypatch.setattr(file_locks, "still_names", lambda fd, path: identities.pop(0))
    monkeypatch.setattr(conversation_lock, "PIDLESS_PAUSE_S", 0)
    assert hold(folder, "y", hint="") and holds(folder, "y")
    release(folder, "y")
