"""/list tells which conversations another process holds without taking their locks (so a hold beside it is never
turned away), and a hold finding a lock file that names a killed holder waits a moment rather than refusing."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localgen import conversation_lock, file_locks
from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import (
    LOCKS_FOLDER,
    ConversationBusyError,
    held_by_others,
    hold,
    lock_path,
    release,
)
from localgen.conversation_store import conversations_dir, let_go, load_conversation, save_conversation
from tests.conftest import REPO_ROOT
from tests.test_conversation_lock import another_process

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _saved(*names: str) -> Path:
    """Save conversations of names, let go; their folder."""
    for name in names:
        save_conversation(Conversation(name=name, turns=[Turn("q", "r")]))
        let_go(load_conversation(name))
    return conversations_dir()


def _gone_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait(timeout=30)
    return child.pid


def test_listing_tells_the_conversations_another_process_holds_taking_no_lock(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    """Where /proc/locks tells a lock's holder (as a probe, once, finds), the listing reads it once for every name and
    tries no lock."""
    folder = _saved("busy", "free")
    assert file_locks.holders_told_in(folder / LOCKS_FOLDER), "Linux: /proc/locks tells a lock's holder"
    with another_process("busy") as got:
        assert got == "held"
        taken: list[int] = []
        real_flock = fcntl.flock
        monkeypatch.setattr(fcntl, "flock", lambda fd, how: (taken.append(fd), real_flock(fd, how))[1])
        reads: list[str] = []
        real_open = open
        monkeypatch.setattr("builtins.open",
                            lambda path, *args, **kw: (reads.append(str(path)), real_open(path, *args, **kw))[1])
        others = held_by_others(folder, ["busy", "free", "never-saved"])
        monkeypatch.setattr("builtins.open", real_open)
        monkeypatch.setattr(fcntl, "flock", real_flock)
        assert others == {"busy"}
        assert taken == [], "no lock tried: a hold beside the listing would find it busy"
        assert reads.count("/proc/locks") == 1, "read once for every name"


def test_listing_tries_each_lock_where_the_system_tells_no_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the system tells no lock's holder, the listing tries each lock without waiting."""
    folder = _saved("busy", "free")
    monkeypatch.setattr(conversation_lock, "holders_told_in", lambda folder: False)
    with another_process("busy") as got:
        assert got == "held"
        assert held_by_others(folder, ["busy", "free"]) == {"busy"}
    assert held_by_others(folder, ["busy", "free"]) == set()


def test_a_conversation_this_process_holds_is_not_listed_as_another_s() -> None:
    """A conversation this process holds is not marked as another's."""
    folder = _saved("mine")
    assert hold(folder, "mine", "")
    try:
        assert held_by_others(folder, ["mine"]) == set()
    finally:
        release(folder, "mine")


def test_a_hold_waits_out_a_moment_s_test_of_a_lock_a_killed_holder_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock file naming a process killed with kill -9, tested (a shared lock a moment) by another process as the
    hold comes: the hold waits, as for one that names none, rather than refusing naming a process long gone."""
    folder = _saved("left")
    path = lock_path(folder, "left")
    path.write_text(f"{_gone_pid()}\n")
    tester = os.open(path, os.O_RDONLY)  # another open file: its lock holds this process's hold off as another's
    fcntl.flock(tester, fcntl.LOCK_SH | fcntl.LOCK_NB)
    real_sleep = file_locks.time.sleep

    def test_ends(seconds: float) -> None:
        """The test lets go as the hold first waits."""
        os.close(tester)
        monkeypatch.setattr(file_locks.time, "sleep", real_sleep)
        real_sleep(seconds)

    monkeypatch.setattr(file_locks.time, "sleep", test_ends)
    assert hold(folder, "left", "")
    release(folder, "left")


def test_a_lock_held_on_past_a_killed_holder_s_record_is_refused_naming_no_process(monkeypatch: pytest.MonkeyPatch
                                                                                   ) -> None:
    """A lock held on past the death of the process its file names is refused without naming that process."""
    folder = _saved("left")
    path = lock_path(folder, "left")
    path.write_text(f"{_gone_pid()}\n")
    tester = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(tester, fcntl.LOCK_SH | fcntl.LOCK_NB)
        with pytest.raises(ConversationBusyError) as caught:
            hold(folder, "left", "")
        assert "process" not in str(caught.value), "the killed holder is not named"
    finally:
        os.close(tester)


def _lock_id(path: Path) -> str:
    """The id /proc/locks gives the file at path: its device's major:minor (hex) and its inode."""
    info = path.stat()
    return f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"


def test_listing_tries_each_lock_where_proc_locks_shows_none_under_its_file_s_id(monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    """On btrfs (a subvolume's device), NFS (a flock shown as POSIX) or some overlayfs, /proc/locks shows no lock
    under the id stat gives its file, and the listing marked nothing: a probe finds that, and each lock is tried."""
    folder = _saved("busy", "free")
    monkeypatch.setattr(file_locks, "_told_in", {})
    real = file_locks.proc_locks_lines
    monkeypatch.setattr(file_locks, "proc_locks_lines",
                        lambda: [line.replace(" FLOCK ", " POSIX ") for line in real() or []])
    with another_process("busy") as got:
        assert got == "held"
        assert held_by_others(folder, ["busy", "free"]) == {"busy"}
    assert not file_locks.holders_told_in(folder / LOCKS_FOLDER)


_SEEN_FROM_A_PID_NAMESPACE = """
import sys
from pathlib import Path
from localgen.conversation_lock import ConversationBusyError, held_by_others, hold
folder = Path(sys.argv[1])
print(sorted(held_by_others(folder, ["boxed", "left"])))
try:
    hold(folder, "boxed", "")
except ConversationBusyError as exc:
    print(exc.message)
"""


def test_a_holder_in_another_pid_namespace_is_seen_in_use_and_refused_naming_its_command() -> None:
    """/proc/locks leaves out a holder of another pid namespace (here this process, seen from a namespace of its own,
    as a container sharing the folder sees it), whose recorded pid names no process there: the listing marks its
    conversation in use (not one a killed holder's record names, that none holds), and a hold is refused naming the
    holder's recorded command."""
    folder = _saved("boxed", "left")
    path = lock_path(folder, "boxed")
    path.write_text(f"{os.getpid()} conversations rm\n")
    lock_path(folder, "left").write_text(f"{_gone_pid()}\n")
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here")
    holder = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        looked = subprocess.run(["unshare", "-Urpf", "--mount-proc", sys.executable, "-c", _SEEN_FROM_A_PID_NAMESPACE,
                                 str(folder)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    finally:
        os.close(holder)
    if looked.returncode and "unshare" in looked.stderr:
        pytest.skip(f"unshare cannot make a pid namespace here: {looked.stderr.strip()}")
    assert looked.stdout == "['boxed']\nconversation 'boxed' is in use by `localgen conversations rm`\n", looked


def test_the_probe_of_a_locks_folder_is_opened_read_only_once_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe file that tells whether /proc/locks shows a folder's locks is made where missing, then opened
    read-only, never to be written: another user's probe, or one in a read-only folder, still tells."""
    folder = _saved("kept") / LOCKS_FOLDER
    monkeypatch.setattr(file_locks, "_told_in", {})
    assert file_locks.holders_told_in(folder)
    probe = folder / file_locks.PROBE_NAME
    assert probe.stat().st_size == 0
    monkeypatch.setattr(file_locks, "_told_in", {})
    opened: list[int] = []
    real_open = os.open
    monkeypatch.setattr(file_locks.os, "open", lambda path, flags, *mode: (opened.append(flags),
                                                                           real_open(path, flags, *mode))[1])
    assert file_locks.holders_told_in(folder)
    assert len(opened) == 1 and opened[0] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) == 0, "read-only, made before"


def test_a_probe_that_cannot_be_opened_is_tried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe file that cannot be opened (another user's, a read-only folder) tells no holders, tried once per
    folder, where every listing tried it again."""
    folder = _saved("kept") / LOCKS_FOLDER
    monkeypatch.setattr(file_locks, "_told_in", {})
    tries: list[str] = []

    def refused(path: object, flags: int, *mode: int) -> int:
        """No probe may be opened."""
        tries.append(str(path))
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(file_locks.os, "open", refused)
    assert not file_locks.holders_told_in(folder)
    assert not file_locks.holders_told_in(folder)
    assert len(tries) == 1
