"""Changes another program (an editor) makes to the file of a conversation this process holds: what the file held
when the conversation, as this process has it, was last read from it or written to it, and how it differs now (a
second reading that the chat does not take up, a /load turned down, leaves the chat's own conversation as it was)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from localgen.conversation import Conversation


def remember(conversation: Conversation, data: bytes) -> None:
    """Note what a conversation's file holds as the conversation has just been read from it or written to it."""
    conversation.as_left = _digest(data)


def _digest(data: bytes) -> str:
    """What tells one version of a file from another."""
    return hashlib.sha256(data).hexdigest()


def change_by_hand(conversation: Conversation, path: Path) -> str | None:
    """How another program changed the file (path) of a conversation this process holds since the conversation was
    last read from it or written to it: "changed" (edited, replaced, unreadable, a link or a pipe), "deleted", or
    None (as left, not known, or a folder, which no write replaces)."""
    known = conversation.as_left
    if known is None:
        return None
    try:
        mode = os.lstat(path).st_mode  # a link is someone's, whatever it points to: never replaced by a write
        if not stat.S_ISREG(mode):  # a pipe is never read (it would wait); a folder fails the write, as before
            return None if stat.S_ISDIR(mode) else "changed"
        data = path.read_bytes()
    except FileNotFoundError:
        return "changed" if os.path.lexists(path) else "deleted"  # (or replaced by a dangling link since)
    except OSError:
        return "changed"
    return None if _digest(data) == known else "changed"
