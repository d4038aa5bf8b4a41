"""One chat per saved conversation: an advisory lock file held while a process works on it."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from localgen.conversation_names import NAME_RULE
from localgen.errors import LocalgenError, os_reason
from localgen.file_locks import (
    HAS_FLOCK,
    holders_told_in,
    lock_holders,
    locked_descriptor,
    process_running,
    still_names,
    try_flock,
)
from localgen.links import broken_link_behind
from localgen.storage import make_folder, remove_leftover_temp_files, unwritable_hint, write_hint

LOCKS_FOLDER = ".locks"
PIDLESS_TRIES = 5  # a lock held with no holder recorded is tried this many times at most before it is said busy
LEFTOVER_LOCK_S = 60  # a lock file of no saved conversation goes once untouched this long (a hold or release writes it)
PIDLESS_PAUSE_S = 0.01  # a lock held with no holder recorded is tried again after this (a sweep takes it a moment)
_COMMAND = re.compile(r"[a-z][a-z -]{0,39}")  # a holder's command as its lock file records it (conversations rm)

log = logging.getLogger("localgen.conversation")

_held: dict[Path, int] = {}  # lock file -> open descriptor, for the conversations this process holds


class ConversationBusyError(LocalgenError):
    """Another process (a chat, a run continuing it, or `conversations rm` asking before it deletes it) holds this
    conversation."""


def lock_path(folder: Path, name: str) -> Path:
    """The lock file of conversation name in folder."""
    return folder / LOCKS_FOLDER / f"{name}.lock"


def hold(folder: Path, name: str, hint: str, *, by: str | None = None, sweep: bool = True) -> bool:
    """Hold conversation name for this process; return False when it already did (or the file system has no locks).

    ConversationBusyError when another process holds it: with hint where that is a chat or a run, named where it
    recorded its command (by: this one's, where it is neither, as `conversations rm`, whose question may wait). One
    that records no holder is tried again a moment later (remove_leftovers may be testing it).

    The lock is released by release(), or by the system when the process ends, however it ends. The temp files a
    process killed part way through a save left beside the conversation's file are removed as the hold is taken
    (sweep=False: by the caller, remove_killed_saves, once it holds all it takes); a save under way (through a link, by
    the holder of another conversation) holds its temp file's lock and is left be.
    """
    path = lock_path(folder, name)
    if not HAS_FLOCK or path in _held:  # Windows: no advisory locks, conversations are not guarded
        return False
    pidless_waits = 0  # counted apart from the files lost under the hold (locked_descriptor's), so neither's tries
    # use up the other's

    def held_by_another() -> None:
        """Wait a moment for a holder that recorded no process (PIDLESS_PAUSE_S, PIDLESS_TRIES times at most), else
        refuse the hold naming the holder."""
        nonlocal pidless_waits
        owner, command = _recorded_owner(path)
        if _holder_unseen(folder, path):  # in another pid namespace (a container): alive, whatever its pid is here
            owner = ""
        elif owner and not process_running(int(owner)):  # left by a holder killed (kill -9): not the one holding it
            owner, command = "", None
        if not owner and pidless_waits < PIDLESS_TRIES - 1:  # remove_leftovers testing it, or a holder before its pid
            pidless_waits += 1
            return
        raise _busy(name, owner, command, hint)

    fd = locked_descriptor(path, lambda: _open_lock_file(folder, path), wait_s=math.inf, poll_s=PIDLESS_PAUSE_S,
                           on_held=held_by_another)
    if fd is None:  # no locks on this file system (ENOLCK, EOPNOTSUPP), or no stable lock file (some FUSE mounts)
        log.debug("no lock for conversation %s", name)
        return False  # chats go unguarded there
    _held[path] = fd
    try:  # a Ctrl-C from here on leaves nothing held
        with contextlib.suppress(OSError):  # the owner's pid only makes the busy message nicer (a full disk may
            os.ftruncate(fd, 0)  # refuse it)
            os.write(fd, f"{os.getpid()}{f' {by}' if by else ''}\n".encode())
        if sweep:
            remove_killed_saves(folder, [name])
    except BaseException:
        release(folder, name)
        raise
    return True


def _holder_unseen(folder: Path, path: Path) -> bool:
    """Whether the lock file at path, found held, is held by a process /proc/locks leaves out (one of another pid
    namespace, a container sharing the folder), where it tells the holders of folder's lock files (else not)."""
    return holders_told_in(folder / LOCKS_FOLDER) and path not in lock_holders([path])


def remove_killed_saves(folder: Path, names: list[str]) -> None:
    """Remove the temp files that saves of the conversations names, held by this process, left where they were
    killed part way, in one pass over the folder however many names there are."""
    if names:
        remove_leftover_temp_files(folder, "|".join(re.escape(f"{name}.json") for name in names))


def remove_leftovers(folder: Path) -> None:
    """Remove what processes killed part way left in the conversations folder: the temp files of saves (of
    NAME.json, never a file of another name), of any conversation, once untouched for storage.STALE_TEMP_S with their
    lock free: a new one's first save leaves no file, so no hold of its name would come to remove its own; a save
    under way holds its temp file's lock, which on another machine sharing the folder (over NFS) this one may not
    see, but no save is written for that long. Then the lock files that name no saved conversation, untouched for
    LEFTOVER_LOCK_S, that no process holds: a `conversations mv` or `rm` killed once the file went but before its lock
    file did leaves one, as does a new chat left before its first save, and a refused `mv` of a file copied in under a
    name against the rule (my notes.json) one that stays once that file is deleted by hand."""
    remove_leftover_temp_files(folder, rf"{NAME_RULE}\.json", by_lock=False)
    if HAS_FLOCK:
        with contextlib.suppress(OSError):  # no locks folder: no lock files left
            for entry in os.scandir(folder / LOCKS_FOLDER):
                name = entry.name.removesuffix(".lock")
                if name != entry.name and not name.startswith(".") and not _saved(folder, name):
                    with contextlib.suppress(OSError):
                        _remove_if_unheld(folder, name)


def _saved(folder: Path, name: str) -> bool:
    """Whether conversation name has a file (or a link, a folder: anything by its name) in folder."""
    return os.path.lexists(folder / f"{name}.json")


def _remove_if_unheld(folder: Path, name: str) -> None:
    """Remove the lock file of conversation name where no process holds it and none took or let it go for
    LEFTOVER_LOCK_S, taken first as hold() takes it, while it is still the file its path names and the conversation
    has no file: a process opening it meanwhile finds the path no longer names it once it takes its lock, and makes
    another (LOST_FILE_TRIES times at most). One taken or let go lately is left be: a hold may be opening it, and over
    NFS this machine's view of it may be out of date."""
    path = lock_path(folder, name)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if (stat.S_ISREG(info.st_mode) and time.time() - info.st_mtime >= LEFTOVER_LOCK_S and try_flock(fd)
                and still_names(fd, path) and not _saved(folder, name)):
            path.unlink()
    finally:
        os.close(fd)  # the lock taken here goes with it


def _open_lock_file(folder: Path, path: Path) -> int:
    """A descriptor of the lock file at path, made (with its private folders) when missing."""
    make_folder(folder, mode=0o700)  # the conversations' own folder is private too
    make_folder(path.parent, mode=0o700)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        broken = broken_link_behind(path, exc)  # a link into a loop of links, say
        if broken is not None:  # localgen's own file: nothing to point it at
            raise LocalgenError(f"could not open {path}: it is {broken}", hint="remove it") from exc
        there = os.path.lexists(path)  # another user's, left by a run under sudo, say
        raise LocalgenError(f"could not {'open' if there else 'create'} {path}: {os_reason(exc)}",
                            hint=unwritable_hint(exc, path.parent, "check its permissions" if there else
                                                 write_hint(exc, path.parent))) from exc


def held_names(folder: Path) -> set[str]:
    """The names of the conversations in folder this process holds."""
    locks = folder / LOCKS_FOLDER
    return {path.name.removesuffix(".lock") for path in _held if path.parent == locks}


def held_by_others(folder: Path, names: Iterable[str]) -> set[str]:
    """Those of names in folder another process holds now (a chat open on one, a run continuing it), whose hold would
    be refused (this process's own left out): as /proc/locks tells, which takes no lock, or where it tells nothing,
    each lock tried without waiting and let go at once. /proc/locks leaves out a holder of another pid namespace (a
    container sharing the folder): a lock it does not list whose file records a holder is tried too (a hold finding
    it busy meanwhile sees that holder gone, or none recorded, and tries again)."""
    asked = set(names) - held_names(folder) if HAS_FLOCK else set()
    if not holders_told_in(folder / LOCKS_FOLDER):
        return {name for name in asked if _tried_busy(lock_path(folder, name))}
    holders = lock_holders(lock_path(folder, name) for name in asked)  # takes no lock: a hold beside it never waits

    def busy(path: Path) -> bool:
        """Whether another process holds the lock file at path: as /proc/locks lists it, else tried where it records
        a holder."""
        if path in holders:
            return holders[path] != os.getpid()
        return bool(_recorded_owner(path)[0]) and _tried_busy(path)

    return {name for name in asked if busy(lock_path(folder, name))}


def _tried_busy(path: Path) -> bool:
    """Whether another process holds the lock file at path, its lock tried without waiting and let go at once."""
    with contextlib.suppress(OSError):  # no lock file: none holds it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            return try_flock(fd, exclusive=False) is False
        finally:
            os.close(fd)  # the lock taken here goes with it
    return False


def holds(folder: Path, name: str) -> bool:
    """Whether this process holds conversation name."""
    return lock_path(folder, name) in _held


def remove_lock_file(folder: Path, name: str) -> None:
    """Remove the lock file of conversation name, gone or moved, while this process holds it (release follows)."""
    with contextlib.suppress(OSError):
        lock_path(folder, name).unlink()


def release(folder: Path, name: str) -> None:
    """Let other processes open conversation name (a no-op when this process does not hold it)."""
    fd = _held.pop(lock_path(folder, name), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the lock


def _busy(name: str, owner: str, command: str | None, hint: str) -> ConversationBusyError:
    """The refusal of a hold of conversation name that another process has (its pid owner, '' where unrecorded), with
    hint where that is a chat or a run, or naming the command it recorded."""
    who = f" (process {owner})" if owner else ""
    if command:
        return ConversationBusyError(f"conversation '{name}' is in use by `localgen {command}`{who}",
                                     hint=f"answer that `localgen {command}`'s question (or press Ctrl-C there) "
                                          "first, then try again")
    return ConversationBusyError(f"conversation '{name}' is in use by another localgen chat or run{who}", hint=hint)


def _recorded_owner(path: Path) -> tuple[str, str | None]:
    """The process id the holder wrote into the lock file at path ('' when unreadable, or not written yet), and its
    command where it wrote one (None for a chat or a run)."""
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            pid, _, command = os.pread(fd, 80, 0).decode("ascii").strip().partition(" ")
        finally:
            os.close(fd)
        return str(int(pid)), command if _COMMAND.fullmatch(command) else None
    return "", None
