"""The file a chat's system prompt was read from (--system-file), so that a command starting the chat again can name
it rather than write the prompt inline, for as long as the file and the prompt are as they were."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SystemFile:
    """A regular file a system prompt was read from: its absolute path, its identity then, and the prompt read."""

    path: Path
    identity: tuple[int, int, int, int]  # device, inode, size and time of last change, before it was read
    text: str

    @classmethod
    def before_reading(cls, path: Path | None) -> tuple[int, int, int, int] | None:
        """The identity of the regular file at path, taken before it is read; None for stdin, a pipe, or none."""
        try:
            found = os.stat(path) if path is not None else None
        except OSError:
            return None
        if found is None or not stat.S_ISREG(found.st_mode):
            return None
        return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns

    def gives(self, system: str | None) -> bool:
        """Whether the file gives this system prompt still: the one read from it, the file unchanged since."""
        return system == self.text and self.before_reading(self.path) == self.identity
