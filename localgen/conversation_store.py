"""Saved conversations on disk: where they live, saving, loading (held for this process), listing and deleting."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from localgen import console
from localgen.config import settings
from localgen.conversation import (
    FORMAT_VERSION,
    Conversation,
    DamagedConversationError,
    ForeignFormatError,
    parsed_json,
)
from localgen.conversation_edits import SavedInPlaceNote, change_by_hand, change_said, remember
from localgen.conversation_lock import ConversationBusyError, hold, holds, lock_path, release, remove_leftovers
from localgen.conversation_names import (
    MAX_NAME_SUFFIX,
    NAME_PATTERN,
    check_name,
    empty_name,
    is_automatic_name,
    listed_entry,
    numbered_name,
)
from localgen.errors import LocalgenError, UsageError, read_failure
from localgen.links import broken_link
from localgen.slips import NAME_SUGGESTIONS, close_names
from localgen.storage import atomic_write_text, check_folder, file_in_the_way, in_the_way, make_folder
from localgen.units import alternatives


def conversations_dir() -> Path:
    """Where saved conversations live."""
    return settings().data_dir / "conversations"


class MissingConversationError(LocalgenError):
    """No saved conversation has the name asked for."""


def save_conversation(conversation: Conversation, name: str | None = None, *,
                      warn: Callable[[str], None] = console.warn) -> Path:
    """Write the conversation atomically (mode 0600); return its path.

    A conversation overwrites only its own file, which this process holds (see conversation_lock) from its first
    save or its load until the process ends or the chat moves to another conversation, and only as this process
    left it: a file changed since by another program (an editor, a link put there) is kept, and the conversation is
    saved under the first free NAME-2, NAME-3, ... instead; a file deleted meanwhile is written again; either is
    said (warn). Its first save takes the first free name among NAME, NAME-2, NAME-3, ... (two chats started in the
    same second get different files; one held by its name since load_or_start says so); a new name ("save as", as
    typed: see given_name) must not belong to another conversation, and the old name is let go (its file removed
    where it was still named automatically: see _leave_file).
    """
    name = None if name is None else given_name(name)
    folder = conversations_dir()
    make_folder(folder, mode=0o700)
    if name is not None and name != conversation.name:
        newly = hold(folder, name, hint="choose another name")
        renamed = replace(conversation, name=name)
        try:
            write_conversation(folder / f"{name}.json", renamed, replace=False)
        except BaseException as exc:
            if newly:
                release(folder, name)
            if isinstance(exc, FileExistsError):
                raise taken_error(folder / f"{name}.json", name) from None
            raise
        if conversation.on_disk:
            _leave_file(folder, conversation, name, warn)
        conversation.name, conversation.on_disk = name, True
        conversation.as_left, conversation.link_target = renamed.as_left, renamed.link_target
    elif conversation.on_disk:
        hold(folder, conversation.name, hint="finish that chat first, or /save NAME to go on under another name")
        path = folder / f"{conversation.name}.json"
        change = _write_unless_changed(path, conversation)
        if change == "changed":
            _save_aside(folder, conversation, warn)
        elif change == "deleted":
            warn(SavedInPlaceNote(f"{conversation.link_target or path} was deleted since localgen last read or saved "
                                  "it: this conversation is saved there again"))
    else:
        asked, held = conversation.name, holds(folder, conversation.name)
        conversation.name = _write_under_free_name(folder, conversation)
        conversation.on_disk = True
        if held and conversation.name != asked:  # its file was made by another program since load_or_start
            warn(f"{folder / f'{asked}.json'} was made by another program after this conversation began: it is kept "
                 f"as it is, and this conversation is saved as '{conversation.name}' instead "
                 f"({folder / f'{conversation.name}.json'})")
    return folder / f"{conversation.name}.json"


def _leave_file(folder: Path, conversation: Conversation, new_name: str, warn: Callable[[str], None]) -> None:
    """Let go of the file a save as new_name leaves: one still under its automatic name (chat-YYYYMMDD-HHMMSS) goes,
    under its lock, once the new file is written whole (the save renames it), unless another program changed it
    since (kept, said) or it is a link (kept); one the user named stays (the save copies it)."""
    path = folder / f"{conversation.name}.json"
    if is_automatic_name(conversation.name) and conversation.link_target is None:
        if change_by_hand(conversation, path) == "changed":
            warn(f"{change_said(conversation, path)}: it is kept as it is, beside the copy saved as '{new_name}'")
        else:
            with contextlib.suppress(OSError):  # one that stays (a folder) leaves a copy, as the command says
                path.unlink(missing_ok=True)
                lock_path(folder, conversation.name).unlink()  # as conversations rm removes it, while held
    let_go(conversation)


def write_conversation(path: Path, conversation: Conversation, *, replace: bool = True,
           replace_if: Callable[[], bool] | None = None, through_link: bool = False, touch: bool = True,
           mode: int = 0o600, keep_mode: bool = True, group: int | None = None) -> None:
    """Write a conversation's file (replace=False: never over one there; replace_if: see atomic_write_bytes;
    through_link: path is the file a link in the conversation's place points to; touch=False: its updated time
    kept), and remember what it holds; a file there keeps its mode and group (unless not keep_mode), a new one gets
    mode and group (where this process may give it)."""
    data = conversation.json_bytes(touch=touch)
    if atomic_write_text(path, data.decode("utf-8"), mode=mode, replace=replace, replace_if=replace_if,
                         keep_mode=keep_mode, group=group):
        remember(conversation, data, path if through_link else None)


def _write_unless_changed(path: Path, conversation: Conversation) -> str | None:
    """Write a conversation over its file (where it was read through a link, over the file the link points to),
    unless another program changed that file since (change_by_hand): asked once the new text is written beside it
    and synced, as it is about to take the file's place (the conversation lock keeps other localgen processes out;
    this leaves another program the least time to write in between). How the file was changed: "changed" (nothing
    written), "deleted" (written again), or None."""
    change: list[str | None] = []

    def unchanged() -> bool:
        change.append(change_by_hand(conversation, path))
        return change[0] != "changed"

    target = conversation.link_target
    write_conversation(target or path, conversation, replace_if=unchanged, through_link=target is not None)
    return change[0]


def _save_aside(folder: Path, conversation: Conversation, warn: Callable[[str], None]) -> None:
    """Save a conversation whose file another program changed under the first free NAME-2, NAME-3, ..., which it
    goes on with, leaving that file as it is (and its name to be loaded again)."""
    said, old = change_said(conversation, folder / f"{conversation.name}.json"), replace(conversation)
    conversation.name = _write_under_free_name(folder, conversation, first=2)
    let_go(old)
    warn(f"{said}: it is kept as it is, and this conversation is saved as '{conversation.name}' instead "
         f"({folder / f'{conversation.name}.json'})")


def holds_as_is(conversation: Conversation) -> bool:
    """Whether the conversation's own file already holds it as it is, its time of update aside (a change undone
    after a save failed: nothing is left to save)."""
    path = conversations_dir() / f"{conversation.name}.json"
    if not conversation.on_disk or not path.is_file():
        return False
    try:
        saved = parsed_json(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return False
    now = json.loads(conversation.to_json(touch=False))
    return isinstance(saved, dict) and saved | {"updated": None} == now | {"updated": None}


def taken_error(path: Path, name: str) -> UsageError:
    """The error for a save as NAME where something is saved already: a conversation to /load, another version's
    to leave as it is, or a file that is none (damaged, not a file) to move away or delete."""
    if not path.is_file():
        return UsageError(f"{path} is in the way of a conversation named '{name}' (not a file)",
                          hint="choose another name, or move it away")
    try:
        Conversation.from_json(_text(_read_saved(path, False), path), path, name=name)
    except ForeignFormatError as exc:
        newer = "a newer" if exc.format_version > FORMAT_VERSION else "another"
        return UsageError(f"a conversation named '{name}' already exists, saved by {newer} localgen version (format "
                          f"{exc.format_version})", hint="it is left as it is for that version; choose another name")
    except LocalgenError:
        return UsageError(f"a conversation named '{name}' already exists, and cannot be read",
                          hint=f"choose another name (/list says what is wrong with it; `localgen conversations rm "
                               f"{name}` deletes it)")
    return UsageError(f"a conversation named '{name}' already exists",
                      hint=f"choose another name, or /load {name} to continue it")


def _write_under_free_name(folder: Path, conversation: Conversation, *, first: int = 1) -> str:
    """Write a new conversation under its name (first 1), or the first free NAME-2, NAME-3, ...; return the name
    used (on failure, the conversation keeps its name).

    A name is held before its file is written, so no other chat can open the new file before this one holds it.
    """
    base = conversation.name
    try:
        for number in range(first, MAX_NAME_SUFFIX + 1):
            candidate = base if number == 1 else numbered_name(base, number)
            conversation.name = candidate  # the file records its own name
            try:
                hold(folder, candidate, hint="")
            except ConversationBusyError:
                continue
            try:
                write_conversation(folder / f"{candidate}.json", conversation, replace=False)
                return candidate
            except FileExistsError:
                release(folder, candidate)
                continue
            except BaseException:
                release(folder, candidate)
                raise
    except BaseException:
        conversation.name = base
        raise
    conversation.name = base
    raise LocalgenError(f"could not find a free name for conversation '{base}' in {folder}",
                        hint="use /save NAME with a new name")


def load_conversation(name: str, *, shell: bool = False) -> Conversation:
    """Read a saved conversation by name and hold it for this process (shell: for `chat --resume NAME`, where
    /list is not at hand); ConversationBusyError when another chat has it open."""
    name = looked_up_name(name, shell=shell)
    folder, path = conversations_dir(), saved_path(name)
    _refuse_other_than_a_file(path, name, shell)
    newly = hold(folder, name, hint="finish that chat first, or " + (
        "run `localgen chat` for a new conversation" if shell else "/load another (/list shows them)"))
    try:  # a Ctrl-C anywhere here leaves it free
        data = _read_saved(path, shell)
        conversation = Conversation.from_json(_text(data, path), path, name=name)  # saves go back there
        conversation.on_disk = True
        remember(conversation, data, path.resolve() if path.is_symlink() else None)  # saves write through a link
    except BaseException:
        if newly:
            release(folder, name)
        raise
    return conversation


def _read_saved(path: Path, shell: bool) -> bytes:
    """What a saved conversation file holds."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise missing_error(path.stem, shell) from None
    except OSError as exc:
        raise read_failure(path, exc) from exc


def _text(data: bytes, path: Path) -> str:
    """A saved conversation file's text (a BOM from a Windows editor is no damage)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DamagedConversationError(f"{path} is not a valid saved conversation (not UTF-8 text)",
                                       hint="it was left untouched; start a new chat or load another",
                                       name=path.stem) from None


def load_or_start(name: str) -> Conversation:
    """The saved conversation NAME or a new one by that name when none is saved, held for this process either way
    (two runs starting the same new conversation: the second is told it is busy, rather than saving elsewhere)."""
    name = given_name(name)
    folder, path = conversations_dir(), saved_path(name)
    if not saved_file_there(path):  # a dangling link is there too: never saved over under another name
        hold(folder, name, hint="wait for it to finish, or use another name")
        if not os.path.lexists(path):  # (unless the holder before us finished and saved it meanwhile)
            return Conversation(name=name)
    return load_conversation(name, shell=True)


def let_go(conversation: Conversation) -> None:
    """Release this process's hold on a conversation it no longer works on (another chat may open it)."""
    if conversation.on_disk:
        folder = conversations_dir()
        release(folder, conversation.name)


def given_name(name: str) -> str:
    """The conversation a name typed by the user means: its file's name, NAME.json, means NAME (as new names too),
    unless a conversation is itself named NAME.json (saved by an earlier localgen); a name that cannot be one is
    refused (UsageError)."""
    stem = name[:-len(".json")] if name.lower().endswith(".json") else ""
    if not NAME_PATTERN.fullmatch(stem):
        return check_name(name)
    with contextlib.suppress(OSError, LocalgenError):
        if NAME_PATTERN.fullmatch(name) and os.path.lexists(saved_path(name)):
            return name
    return stem


def looked_up_name(name: str, *, shell: bool) -> str:
    """given_name for a saved conversation asked for (show, rm, /load), an empty one refused as such ("$NAME" with
    NAME not set), with where the saved ones' names are."""
    if not name:
        raise empty_name(f"give a saved one's name: {_missing_hint(shell)}")
    return given_name(name)


def listed_name(name: str) -> str:
    """looked_up_name for the commands that take too the name a listing gives a file no chat or run opens (a pipe,
    or a file copied in as my notes.json: "my notes", or "my notes.json"): conversations show, mv and rm."""
    try:
        return looked_up_name(name, shell=True)
    except UsageError:
        stem = name[:-len(".json")] if name.lower().endswith(".json") else name
        listed = next((entry for entry in (name, stem) if listed_entry(entry) is not None), None)
        if listed is None:
            raise
        return listed


def saved_path(name: str) -> Path:
    """The file of the saved conversation NAME (a ConfigError or UsageError for a name that cannot be one)."""
    return conversations_dir() / f"{check_name(name)}.json"


def saved_file_there(path: Path) -> bool:
    """Whether anything (a dangling link too) is at a saved conversation's path; where the conversations folder may
    not be entered, an error that says so, not that nothing is saved there."""
    try:
        os.lstat(path)
    except OSError as exc:
        if isinstance(exc, PermissionError):
            raise read_failure(path, exc, hint="check the permissions of its folder and those above it") from exc
        return False
    return True


def missing_error(name: str, shell: bool) -> MissingConversationError:
    """The error for a conversation name with nothing saved under it (and why, where a file or a link to something
    not there stands in the place of the conversations folder)."""
    blocker = file_in_the_way(conversations_dir())
    if blocker is not None:
        what, hint = in_the_way(blocker, "the conversations folder")
        return MissingConversationError(f"no saved conversation named '{name}': {what}", hint=hint)
    close = _close_names(name)
    hint = f"did you mean {alternatives(close)}?" if close else _missing_hint(shell)
    return MissingConversationError(f"no saved conversation named '{name}'", hint=hint)


def _close_names(name: str) -> list[str]:
    """Saved conversations named like name (another case first, then those it begins, then a slip or two), at most
    three."""
    with contextlib.suppress(OSError, LocalgenError):  # no list to look in: no suggestion
        names = [saved for saved, _ in list_conversations()]
        same = [saved for saved in names if saved.lower() == name.lower()]
        return list(dict.fromkeys(same + close_names(name, names, cutoff=0.75)))[:NAME_SUGGESTIONS]
    return []


def _refuse_other_than_a_file(path: Path, name: str, shell: bool) -> None:
    """Refuse a saved conversation's path that holds no file: nothing at all, or a folder, a dangling link, a pipe
    (named the same way wherever a conversation is read)."""
    if not saved_file_there(path):
        raise missing_error(name, shell)
    if not path.is_file():
        reason = broken_link(path) or "not a file"  # a link to a file not there, or into a loop of links
        raise DamagedConversationError(f"{path} is not a saved conversation ({reason})",
                                       hint="move it away, or use another name", name=name,
                                       removable=not path.is_dir())


def _missing_hint(shell: bool) -> str:
    """Where to find the saved conversations' names, from the shell or inside a chat."""
    if shell:
        return "`localgen conversations` lists the saved ones; `localgen chat --resume` reopens the latest"
    return "/list shows the saved conversations"


def read_conversation(name: str) -> Conversation:
    """A saved conversation as it is on disk, without holding it (to list, show or rename it; a chat may have it
    open), by any name a listing gives it."""
    name = listed_name(name)
    path = listed_entry(name) or saved_path(name)
    _refuse_other_than_a_file(path, name, True)
    return Conversation.from_json(_text(_read_saved(path, True), path), path, name=name)


def list_conversations(*, unusable: bool = False) -> list[tuple[str, float]]:
    """Saved conversation names with their modification times, newest first (those of one time by name, case aside,
    then as written), once what processes killed part way left is removed (remove_leftovers; unusable: with the files
    that cannot be opened, for listings that say why: links to a file not there, by the link's own time, pipes and
    other files that are not regular ones, and files copied in by hand whose names break the naming rule, but for
    hidden ones)."""
    folder = conversations_dir()
    check_folder(folder, "saved conversations")
    if not folder.is_dir():
        return []
    remove_leftovers(folder)
    entries = []
    for path in folder.glob("*.json"):
        if NAME_PATTERN.fullmatch(path.stem) or (unusable and not path.name.startswith(".")):
            with contextlib.suppress(FileNotFoundError):  # deleted since the listing: not there any more
                info = path.lstat() if unusable and not path.exists() else path.stat()
                if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode) or (
                        unusable and not stat.S_ISDIR(info.st_mode)):  # a pipe: listed as not a file, never read
                    entries.append((path.stem, info.st_mtime))
    return sorted(entries, key=lambda e: (-e[1], e[0].casefold(), e[0]))  # one time's by name: the same order each time


def latest_conversation(warn: Callable[[str], None], *, newest_only: bool = False,
                        held: bool = True) -> Conversation:
    """The most recently saved conversation that no other chat has open, those skipped (damaged, in use) each with
    a warning (for `chat --resume`); with newest_only, the newest one or the error that keeps it from being
    continued; without held, the newest readable one, read as it is on disk and not held (for `conversations show`:
    a chat may have it open)."""
    entries = list_conversations()
    if not entries:
        raise LocalgenError("there is no saved conversation to continue" if held else
                            "there are no saved conversations",
                            hint='start one with `localgen chat`, or `localgen run --conversation NAME "..."`')
    if newest_only:
        return load_conversation(entries[0][0], shell=True)
    busy: list[ConversationBusyError] = []
    for name, _ in entries:
        try:
            found = load_conversation(name, shell=True) if held else read_conversation(name)
        except ConversationBusyError as exc:  # a running chat saves often, so its conversation is the newest
            busy.append(exc)
        except DamagedConversationError as exc:
            warn(f"skipped a damaged conversation: {exc.message}")
        except ForeignFormatError as exc:
            warn(f"skipped a conversation: {exc.message}")
        else:
            for skipped in busy:  # said once an older one is taken instead (none taken: the first is the error)
                warn(f"skipped a conversation in use: {skipped.message}")
            return found
    if busy:
        raise busy[0]
    if not held:
        raise LocalgenError("no saved conversation can be read", hint="`localgen conversations` lists them, "
                                                                      "damaged ones marked")
    raise LocalgenError("no saved conversation can be resumed", hint="start a new one with `localgen chat`")
