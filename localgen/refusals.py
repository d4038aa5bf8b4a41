"""Errors no module foresaw that file permissions caused: said as what to check, not as a bug of localgen's."""

from __future__ import annotations

from localgen.errors import LocalgenError, os_reason


def permission_failure(exc: BaseException) -> LocalgenError | None:
    """The error to say for a file or folder its permissions kept from use that no module mapped (another user's, a
    chmod): the Hugging Face cache's as hub_errors says it, any other named; None for any other exception, a bug of
    localgen's to report."""
    from localgen.hub_errors import hub_cache_refusal

    if not isinstance(exc, PermissionError) or exc.filename is None:
        return None
    return hub_cache_refusal(exc) or LocalgenError(
        f"cannot use {exc.filename}: {os_reason(exc)}",
        hint="check the permissions of that file or folder and of the folders above it")
