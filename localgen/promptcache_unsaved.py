"""The prompt cache's warning that it cannot be saved (its folder's permissions, a read-only mount), held until the
answer is out: said amid it, it would break the answer's text."""

from __future__ import annotations

from pathlib import Path

from localgen.errors import UNWRITABLE_ERRNOS, os_reason

_UNSAID: list[str] = []  # the warnings held until the answer is out


def warn_if_unwritable(directory: Path, exc: OSError) -> None:
    """Hold a warning (once a process) where a write failed as the prompt cache folder cannot be written to (its
    permissions, a read-only mount), so that no run saves a prompt there, to say once the answer is out
    (unsaid_warnings); a full disk may have room next time: it goes unsaid."""
    from localgen.config import PROMPT_CACHE_BYTES_ENV
    from localgen.once import first_time
    from localgen.storage import unwritable_hint, write_hint

    if exc.errno not in UNWRITABLE_ERRNOS:
        return
    hint = unwritable_hint(exc, directory, write_hint(exc, directory))
    message = first_time(f"the prompt cache is not saved: {directory} cannot be written to ({os_reason(exc)}) "
                         f"({hint}; {PROMPT_CACHE_BYTES_ENV}=0 turns the prompt cache off, and warns no more)")
    if message is not None:
        _UNSAID.append(message)


def unsaid_warnings() -> list[str]:
    """The warnings warn_if_unwritable held since the last call, to say now that the answer is out."""
    held = list(_UNSAID)
    _UNSAID.clear()
    return held
