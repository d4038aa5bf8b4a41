"""Header errors met in a copy of a Hub model that localgen has not verified (a download damaged since its pull,
another tool's, one a pull refused), hinted with the pull that checks it against the Hub."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.config import settings
from localgen.errors import GGUFError, GGUFUnreadableError, ModelNotFoundError
from localgen.offline_words import checking_pull_hint

if TYPE_CHECKING:
    from localgen.resolve import ResolvedModel


@contextlib.contextmanager
def hinted_with_pull(pull: str) -> Iterator[None]:
    """A header error raised inside hinted with pull (the pull that checks the copy) to check it against the Hub; a
    file that could not be read (its permissions, an I/O error) keeps its own hint, which a pull would not mend."""
    try:
        yield
    except GGUFUnreadableError:
        raise
    except GGUFError as exc:
        raise type(exc)(exc.message, hint=f"{pull} to check it against the Hub", exit_code=exc.exit_code) from None


def checked_by_pull(resolved: ResolvedModel, reference: str) -> contextlib.AbstractContextManager[None]:
    """hinted_with_pull for a copy of a Hub model that localgen has not verified, with the pull of reference (nothing
    for any other file)."""
    if not resolved.source.startswith("hub ("):
        return contextlib.nullcontext()
    return hinted_with_pull(checking_pull_hint(reference, offline=settings().offline))


def refuse_broken_header(path: Path, pull: str) -> None:
    """Offline, an unverified cached file that is no usable GGUF gets its header's error, as `-m PATH` would, hinted
    with pull (the pull that checks it)."""
    from localgen.gguf_reader import read_gguf

    try:
        with hinted_with_pull(pull):
            read_gguf(path)
    except GGUFError as exc:
        raise ModelNotFoundError(exc.message, hint=exc.hint) from None
