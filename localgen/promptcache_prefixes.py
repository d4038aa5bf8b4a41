"""Which prompt cache entries for prefixes of a newly saved prompt stay: a state is loaded whole or not at all, so a
shorter entry is all a smaller context can restore, while a conversation growing in one context needs none of them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from localgen.config import DEFAULT_CONTEXT_CAP


def redundant_prefixes(prefixes: Iterable[tuple[int, Path]], saved: int) -> list[Path]:
    """The entries, given as (tokens, path) for prefixes of a saved prompt of saved tokens, that no usual context
    needs: all but, for each usual context that the next longer entry does not fit in, the longest that it holds."""
    redundant, longer = [], saved
    for length, path in sorted(prefixes, reverse=True):  # the longest first
        if _usual_context_holding(length) < longer:
            longer = length
        else:
            redundant.append(path)
    return redundant


def _usual_context_holding(tokens: int) -> int:
    """The smallest usual context of at least this many tokens: a run's default (DEFAULT_CONTEXT_CAP), or that doubled
    (the sizes models are trained for and --ctx-size is mostly given)."""
    context = DEFAULT_CONTEXT_CAP
    while context < tokens:
        context *= 2
    return context
