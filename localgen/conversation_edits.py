"""Changes another program (an editor) makes to the file of a conversation this process holds: what the file held
when the conversation, as this process has it, was last read from it or written to it, and how it differs now (a
second reading that the chat does not take up, a /load turned down, leaves the chat's own conversation as it was)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from localgen.conversation import Conversation


def remember(conversation: Conversation, data: bytes, link_target: Path | None = None) -> None:
    """Note what a conversation's file holds as the conversation has just been read from it or written to it, and
    where that file is when a link stands in the conversation's place (link_target, resolved: saves write through
    the link while it points there)."""
    conversation.as_left, conversation.link_target = bytes(data), link_target


def change_by_hand(conversation: Conversation, path: Path) -> str | None:
    """How another program changed the file (path) of a conversation this process holds since the conversation was
    last read from it or written to it: "changed" (edited, replaced, unreadable, a link put in its place or pointed
    elsewhere, a pipe), "deleted", or None (as left, not known, or a folder, which no write replaces). A link the
    conversation was read through stands for the file it points to."""
    known = conversation.as_left
    if known is None:
        return None
    try:
        mode = os.lstat(path).st_mode  # a link put there since is someone's, whatever it points to: never replaced
        if conversation.link_target is not None:
            if not stat.S_ISLNK(mode) or path.resolve() != conversation.link_target:
                return "changed"
            path = conversation.link_target
            mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # a pipe is never read (it would wait); a folder fails the write, as before
            return None if stat.S_ISDIR(mode) else "changed"
        data = path.read_bytes()
    except FileNotFoundError:
        return "changed" if os.path.lexists(path) else "deleted"  # (or replaced by a dangling link since)
    except (OSError, RuntimeError):  # (a loop of links)
        return "changed"
    return None if data == known else "changed"  # (a compare of what was kept: no checksum of both to take)


def change_said(conversation: Conversation, path: Path) -> str:
    """How the change another program made to a conversation's file (path) is said."""
    target = conversation.link_target
    if not path.is_symlink():
        return f"{path} changed since localgen last read or saved it"
    if target is None:
        return f"{path} was replaced by a link since localgen last read or saved it"
    try:
        pointed = path.resolve()
    except (OSError, RuntimeError):
        pointed = None
    if pointed != target:
        return f"{path} links to another file since localgen last read or saved it"
    return f"{target} (which {path} links to) changed since localgen last read or saved it"


class SavedInPlaceNote(str):
    """A save's note on a conversation saved where it was asked all the same (run -q says it not: one of an exchange
    saved elsewhere than asked, or of an answer not saved, is said past -q)."""
