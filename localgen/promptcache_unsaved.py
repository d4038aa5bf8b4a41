"""The prompt cache's warnings that it cannot be saved (its folder's permissions, a read-only mount) or listed (its
permissions, a file or a broken link in its place), held until the answer is out: said amid it, they would break the
answer's text; and its note that a cached prompt does not fit in memory, said before the prompt is read without it."""

from __future__ import annotations

import os
from pathlib import Path

from localgen.errors import UNWRITABLE_ERRNOS, os_reason
from localgen.memory_limits import MemoryRoom, limit_short_of, memory_limit_words
from localgen.units import binary_size

_UNSAID: list[str] = []  # the warnings held until the answer is out


def warn_if_unwritable(directory: Path, exc: OSError) -> None:
    """Hold a warning (once a process) where a write failed as the prompt cache folder cannot be written to (its
    permissions, a read-only mount), so that no run saves a prompt there, to say once the answer is out
    (unsaid_warnings); a full disk may have room next time: it goes unsaid."""
    if exc.errno in UNWRITABLE_ERRNOS:
        _hold(f"the prompt cache is not saved: {directory} cannot be written to", directory, exc)


def warn_if_unlisted(directory: Path, exc: OSError) -> None:
    """Hold a warning (once a process) where the prompt cache folder cannot be listed (its permissions: mode 300), so
    that no run finds a prompt there, nor an entry to evict, to say once the answer is out (unsaid_warnings)."""
    if isinstance(exc, PermissionError):
        _hold(f"the prompt cache is not used: {directory} cannot be listed", directory, exc)
    else:
        _warned_not_a_folder(directory)


def listable(directory: Path) -> bool:
    """Whether the prompt cache folder may be listed, or is not there yet (a write makes it): an entry saved in a
    folder that may not be listed, or that is no folder, is never found, nor evicted (warned of, once)."""
    try:
        os.scandir(directory).close()
    except PermissionError as exc:
        warn_if_unlisted(directory, exc)
        return False
    except OSError:
        return not _warned_not_a_folder(directory)
    return True


def _warned_not_a_folder(directory: Path) -> bool:
    """Whether a file, or a link to nothing or into a loop of links, stands where the prompt cache folder (or one above
    it) should be; where one does, a warning is held (once a process) that the prompt cache is not used."""
    from localgen.storage import file_in_the_way, in_the_way

    blocker = file_in_the_way(directory)
    if blocker is None:  # a folder, or none yet: a save makes it, and a failed one is logged
        return False
    what, hint = in_the_way(blocker, "its folder" if blocker == directory else "a folder")
    _hold_said(f"the prompt cache is not used: {what}", hint)
    return True


def _hold(what: str, directory: Path, exc: OSError) -> None:
    """Hold the warning what (once a process), with why (exc) and what to do about it."""
    from localgen.storage import unwritable_hint, write_hint

    _hold_said(f"{what} ({os_reason(exc)})", unwritable_hint(exc, directory, write_hint(exc, directory)))


def _hold_said(what: str, hint: str | None) -> None:
    """Hold the warning what (once a process), with hint and the switch that turns the prompt cache off."""
    from localgen.config import PROMPT_CACHE_BYTES_ENV
    from localgen.once import first_time

    off = f"{PROMPT_CACHE_BYTES_ENV}=0 turns the prompt cache off, and warns no more"
    message = first_time(f"{what} ({hint}; {off})" if hint else f"{what} ({off})")
    if message is not None:
        _UNSAID.append(message)


def unsaid_warnings() -> list[str]:
    """The warnings warn_if_unwritable held since the last call, to say now that the answer is out."""
    held = list(_UNSAID)
    _UNSAID.clear()
    return held


def room_to_restore(size: int) -> bool:
    """Whether the memory limits set (`ulimit -d`, `-v`) leave room for a cached prompt's state of size bytes; where
    they do not, the note that it is read without it is said (say_unrestored)."""
    short = limit_short_of(size)
    if short is not None:
        say_unrestored(size, short)
    return short is None


def say_unrestored(size: int, room: MemoryRoom | None = None) -> None:
    """Say on stderr that a cached prompt's state of size bytes did not fit in memory (room: the limit that leaves too
    little, where it is known), so the prompt is read as if none were cached: the answer is the same, only slower."""
    from localgen import console

    if room is not None:
        under = f"`{room.name}` of {binary_size(room.limit)} leaves {binary_size(max(room.free, 0))}"
    else:
        under = memory_limit_words() or "the memory left"
    console.say(f"localgen: the cached prompt ({binary_size(size)}) did not fit in memory ({under}): reading the "
                "prompt without it")
