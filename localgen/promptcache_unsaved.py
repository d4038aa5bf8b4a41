"""The prompt cache's warnings that it cannot be saved (its folder's permissions, a read-only mount) or listed (its
permissions, a file or a broken link in its place), held until the answer is out: said amid it, they would break the
answer's text."""

from __future__ import annotations

import os
from pathlib import Path

from localgen.errors import UNWRITABLE_ERRNOS, os_reason

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
