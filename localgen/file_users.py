"""The processes that have a file mapped into memory (a run or chat with the model loaded: llama.cpp maps its weights),
as Linux's /proc tells it: deleting such a file frees its space only once they end, and they run on until then."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def processes_mapping(files: Iterable[Path]) -> tuple[int, ...]:
    """The ids of the other processes that have any of files mapped, in order; none where no /proc tells it (another
    system), and none of the processes /proc does not show this one (another user's)."""
    wanted = set()
    for path in files:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            wanted.add((f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}", str(info.st_ino)))
    if not wanted:
        return ()
    try:
        pids = sorted(int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit())
    except OSError:
        return ()
    return tuple(pid for pid in pids if pid != os.getpid() and _maps_any(pid, wanted))


def _maps_any(pid: int, wanted: set[tuple[str, str]]) -> bool:
    """Whether process pid maps a file of wanted ((device as major:minor in hex, inode) pairs, as /proc/PID/maps
    writes them)."""
    try:
        with open(PROC / str(pid) / "maps", encoding="utf-8", errors="replace") as maps:
            return any(tuple(fields[3:5]) in wanted for fields in (line.split(maxsplit=5) for line in maps)
                       if len(fields) > 5)
    except OSError:  # ended, or another user's
        return False
