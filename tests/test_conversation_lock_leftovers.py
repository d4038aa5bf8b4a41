"""The lock file a `conversations mv` killed part way leaves goes at the next listing; a held one never does."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import hold, holds, release, remove_leftovers
from localgen.conversation_store import conversations_dir, let_go, load_conversation, save_conversation
from tests.conftest import run_localgen

KILLED_ONCE_RENAMED = """
import os, signal, sys
from localgen import conversation_moves
conversation_moves.remove_lock_file = lambda folder, name: os.kill(os.getpid(), signal.SIGKILL)
conversation_moves.rename_conversation(sys.argv[1], sys.argv[2])
"""  # `conversations mv OLD NEW` killed once its file is renamed, before OLD's lock file goes

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def test_the_old_name_s_lock_file_a_killed_mv_left_goes_when_the_conversations_are_listed() -> None:
    save_conversation(Conversation(name="a", turns=[Turn("q", "r")]))
    let_go(load_conversation("a"))
    killed = subprocess.run([sys.executable, "-c", KILLED_ONCE_RENAMED, "a", "b"], capture_output=True, text=True,
                            timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    folder, locks = conversations_dir(), conversations_dir() / ".locks"
    assert sorted(p.name for p in folder.glob("*.json")) == ["b.json"]
    assert sorted(p.name for p in locks.iterdir()) == ["a.lock", "b.lock"]
    listed = run_localgen("conversations")
    assert listed.returncode == 0 and "\nb\t" in listed.out, listed.err
    assert sorted(p.name for p in locks.iterdir()) == ["b.lock"], "the old name's goes, the saved one's stays"
    assert load_conversation("b").turns == [Turn("q", "r")]


def test_the_lock_file_of_a_name_held_before_its_first_save_is_never_removed() -> None:
    """A chat holds a new conversation's name before it has a file: neither another process's listing nor this
    process's own sweep takes that lock file from it."""
    folder = conversations_dir()
    assert hold(folder, "new", hint="")
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
