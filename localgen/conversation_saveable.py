"""Whether a conversation can be saved, asked as a chat or a run --conversation starts, before the model loads, so
that neither answers what it then cannot keep unsaid."""

from __future__ import annotations

import os
from pathlib import Path

from localgen.conversation_store import conversations_dir, saved_path
from localgen.errors import LocalgenError
from localgen.replaceable import check_replaceable
from localgen.storage import check_writable, file_in_the_way, in_the_way, make_folder


def check_saveable(name: str | None) -> None:
    """Raise a LocalgenError where conversation name (None: one not named yet) cannot be saved: the conversations
    folder cannot be made (a file in its way, a read-only or virtual file system) or written to (another user's), or
    the conversation's file cannot be replaced (made read-only, immutable, another user's in a sticky folder). One
    saved through a link of its name is saved where that leads: there alone are its file and folder checked."""
    path = None if name is None else saved_path(name)
    if path is not None and path.is_symlink():
        folder = Path(os.path.realpath(path)).parent  # the save's temp file is made beside the file the link leads to
    else:
        folder = conversations_dir()
        blocker = file_in_the_way(folder)
        if blocker is not None:
            what, hint = in_the_way(blocker)
            raise LocalgenError(what, hint=hint)
        make_folder(folder, mode=0o700)  # made now, private, as the first answer would make it
    if folder.is_dir():  # (none where a link leads nowhere: its read says so)
        check_writable(folder)  # another user's, or on a file system mounted read-only
    if path is not None:
        check_replaceable(Path(os.path.realpath(path)))
