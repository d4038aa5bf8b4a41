"""Renaming and deleting saved conversations: `conversations mv` and `conversations rm`, and unsaving a chat's own
conversation that /undo left empty."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from localgen import console
from localgen.conversation import Conversation
from localgen.conversation_edits import change_by_hand, change_said
from localgen.conversation_lock import hold, lock_path, release, remove_killed_saves, remove_lock_file
from localgen.conversation_names import MAX_NAME_SUFFIX, listed_entry, numbered_name
from localgen.conversation_store import (
    conversations_dir,
    let_go,
    missing_error,
    read_conversation,
    saved_file_there,
    saved_path,
    write_conversation,
)
from localgen.errors import LocalgenError, UsageError, os_reason
from localgen.file_locks import room_for_locks
from localgen.replaceable import kept_mode
from localgen.signals import deferred_signals
from localgen.units import counted


def rename_conversation(old: str, new: str, *, force: bool = False) -> bool:
    """Rename saved conversation old to new (names as given_name reads them): refused while a chat or a run has
    either open, and where new is saved already unless force (which replaces it). The new file is written whole
    before the old one goes, so a failure at any point leaves the conversation saved under one name or both; a link
    is moved as it is (its target untouched), and one that leads to new's own file is only removed (returned False:
    the conversation is saved as new already)."""
    path = saved_paths([old])[0]
    target = saved_path(new)
    if new == old:
        raise UsageError(f"conversation '{old}' is named {new} already", hint="give it another name")
    folder, held = conversations_dir(), []
    try:
        for name in (old, new):
            if name == new and _same_entry(lock_path(folder, old), lock_path(folder, new)):
                break  # one lock file (a case-insensitive file system's two cases of one name): held already
            if hold(folder, name, hint="finish that chat or run first", by="conversations mv"):
                held.append(name)
        if path.is_symlink() and not _same_entry(path, target) and _leads_to(path, target):
            _remove_link(path)
            moved = False
        elif target.is_dir() and not target.is_symlink():  # which no --force replaces
            raise LocalgenError(f"{target} is a folder, not a saved conversation", hint="choose another name")
        elif os.path.lexists(target) and not force and not _same_entry(path, target):
            raise UsageError(f"a conversation named '{new}' already exists",
                             hint="choose another name, or add --force to replace it; `localgen conversations show "
                                  f"{new}` shows it")
        else:
            _move(path, target, new)
            moved = True
        remove_lock_file(folder, old)
    finally:
        for name in held:
            release(folder, name)
    return moved


def _leads_to(link: Path, target: Path) -> bool:
    """Whether link leads to the very file that target names (or leads to)."""
    try:
        return os.path.samefile(link, target)
    except OSError:
        return False


def _remove_link(link: Path) -> None:
    """Remove a link, never what it leads to."""
    try:
        link.unlink()
    except OSError as exc:
        raise LocalgenError(f"could not remove {link}: {os_reason(exc)}",
                            hint="check the permissions of its folder") from exc


def _move(path: Path, target: Path, new: str) -> None:
    """Move a conversation's file to target: a link as it is; a file written there under its new name (over what
    is there, whose mode and group it does not take), its updated time, the file's times, its mode and its group kept
    as a rewrite keeps them (kept_mode; the group where this process may give it: keep_group; a rename is no new
    exchange: `run --continue` still takes the newest), then removed, unless target is that same file (a
    case-insensitive file system's other case)."""
    try:
        if path.is_symlink():
            os.replace(path, target)
            return
        times = path.stat()
        conversation = read_conversation(path.stem)
        conversation.name = new
        write_conversation(target, conversation, touch=False, mode=kept_mode(times), keep_mode=False,
                           group=times.st_gid)
        os.utime(target, ns=(times.st_atime_ns, times.st_mtime_ns))
        if not _same_entry(path, target):
            path.unlink()
    except OSError as exc:
        raise LocalgenError(f"could not rename {path} to {target.name}: {os_reason(exc)}",
                            hint="check the permissions of its folder") from exc


def _same_entry(path: Path, other: Path) -> bool:
    """Whether two names are one file's (a case-insensitive file system's two cases of one name)."""
    try:
        return os.path.samestat(os.lstat(path), os.lstat(other))
    except OSError:
        return False


def saved_paths(names: list[str]) -> list[Path]:
    """The files of saved conversations (a damaged one, a dangling link or a pipe too, and one listed under a name no
    other command takes: all can be deleted), or the error for the first name that is none."""
    paths = [listed_entry(name) or saved_path(name) for name in names]
    for name, path in zip(names, paths, strict=True):
        if not saved_file_there(path):
            raise missing_error(name, True)
        if path.is_dir():
            raise LocalgenError(f"{path} is a folder, not a saved conversation", hint="remove it yourself")
    return paths


def delete_conversations(names: list[str], confirm: Callable[[], bool] = lambda: True,
                         deleted: Callable[[str], None] = lambda name: None) -> bool:
    """Delete saved conversations one by one once none is refused: ConversationBusyError, before any is deleted,
    when a chat or a run has one of them open; confirm is asked once none is (they are held meanwhile), and False
    from it (returned) deletes none. deleted is told each name as it is deleted; a Ctrl-C or SIGTERM then stops
    before the next one and is raised once the last one deleted is told, the rest kept (one after the last deletion
    stops nothing: all are deleted); a deletion that fails is raised, saying how many are kept where several were
    named."""
    folder = conversations_dir()
    paths = saved_paths(names)
    bound = room_for_locks(len(names))  # each is held until all are deleted
    if bound is not None:
        raise _too_many_open_files(len(names), *bound)
    held: list[str] = []
    try:
        for name in names:  # killed saves swept once all are held: a sweep in each hold scans the folder each time
            if hold(folder, name, hint="finish that chat or run first", by="conversations rm", sweep=False):
                held.append(name)
        remove_killed_saves(folder, held)
        if not confirm():
            return False
        with deferred_signals() as signals:  # never a deletion left untold
            for done, (name, path) in enumerate(zip(names, paths, strict=True)):
                if signals.pending():
                    break
                _delete(path, len(names) - done if len(names) > 1 else 0)
                remove_lock_file(folder, name)
                deleted(name)
            else:
                for signum in list(signals.received):  # all deleted: nothing left for it to stop
                    signals.forget(signum)
    finally:
        for name in held:
            release(folder, name)
    return True


def _too_many_open_files(count: int, limit: int, shown_by: str, fits: int) -> LocalgenError:
    """The refusal of deleting count conversations at once where only fits locks fit in the limit of open files."""
    hint = (f"delete at most {fits:,} at a time: `xargs -n {fits} localgen conversations rm -y`" if fits
            else f"run it where more files may be open than {limit:,} (`{shown_by}` prints the limit)")
    return LocalgenError(f"deleting {counted(count, 'conversation')} at once needs more open files than this process "
                         f"may have ({limit:,}, {shown_by}); nothing deleted", hint=hint)


def _delete(path: Path, kept: int) -> None:
    """Delete a conversation's file, or raise why not, saying that kept conversations (this one among them) are kept
    where that is more than none."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        said = f"; {counted(kept, 'conversation')} kept" if kept else ""
        raise LocalgenError(f"could not delete {path}: {os_reason(exc)}{said}",
                            hint="check the permissions of its folder") from exc


def unsave(conversation: Conversation, warn: Callable[[str], None] = console.warn) -> None:
    """Delete the file of a conversation this process saved, and let it go: it is unsaved again, as before its first
    save (where the file cannot be deleted, it stays saved; one another program changed since is kept, and the
    conversation, renamed to the first free NAME-2, NAME-3, ..., is saved there from its next change: both said)."""
    folder = conversations_dir()
    path = folder / f"{conversation.name}.json"
    if change_by_hand(conversation, path) == "changed":
        name = _unused_name(folder, conversation.name)
        warn(f"{change_said(conversation, path)}: it is kept as it is, and this conversation is saved as '{name}' "
             "from its next exchange")
    else:
        name = conversation.name
        try:
            path.unlink(missing_ok=True)
        except OSError:
            return
        remove_lock_file(folder, conversation.name)
    let_go(conversation)
    conversation.name, conversation.on_disk = name, False


def _unused_name(folder: Path, base: str) -> str:
    """The first NAME-2, NAME-3, ... that has no file (its first save takes the next free one where another chat
    took it meanwhile)."""
    for number in range(2, MAX_NAME_SUFFIX + 1):
        candidate = numbered_name(base, number)
        if not os.path.lexists(folder / f"{candidate}.json"):
            return candidate
    return numbered_name(base, 2)  # none free: its first save looks further
