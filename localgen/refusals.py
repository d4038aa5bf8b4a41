"""Errors no module foresaw that file permissions caused: said as what to check, not as a bug of localgen's."""

from __future__ import annotations

import os

from localgen.errors import LocalgenError, os_reason

UNFORESEEN_HINT = ("check the permissions of that file or folder and of the folders above it; if it is not a file of "
                   "yours, LOCALGEN_DEBUG=1 shows where it came from")


def permission_failure(exc: BaseException) -> LocalgenError | None:
    """The error to say for a file or folder its permissions kept from use that no module mapped (another user's, a
    chmod): the Hugging Face cache's as hub_errors says it, any other named (a rename's both names); None for any
    other exception, or one that names no path (a descriptor's number, bytes), a bug of localgen's to report."""
    from localgen.hub_errors import hub_cache_refusal

    if not isinstance(exc, PermissionError):
        return None
    names = [_path_name(name) for name in (exc.filename, exc.filename2) if name is not None]
    if not names or None in names:
        return None
    return hub_cache_refusal(exc) or LocalgenError(f"cannot use {' or '.join(map(str, names))}: {os_reason(exc)}",
                                                   hint=UNFORESEEN_HINT)


def _path_name(name: object) -> str | None:
    """An OSError's file name as a path's text, where it is one (str or os.PathLike of str); else None."""
    if not isinstance(name, (str, os.PathLike)):
        return None
    text = os.fspath(name)
    return text if isinstance(text, str) else None
