"""Which prompt cache entries for prefixes of a newly saved prompt stay: a state is loaded whole or not at all, so a
shorter entry is all a smaller context can restore, while a conversation growing in one context needs none of them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from localgen.estimate import padded_context
from localgen.fit import counted_context


def redundant_prefixes(prefixes: Iterable[tuple[int, Path]], saved: int, default_context: int) -> list[Path]:
    """The entries, given as (tokens, path) for prefixes of a saved prompt of saved tokens, that no run needs: those
    the next longer entry kept fits in the context a run of their own prompt gets (run_context), and so every run of a
    prompt they begin."""
    redundant, longer = [], saved
    for length, path in sorted(prefixes, reverse=True):  # the longest first
        if longer <= run_context(length, default_context):
            redundant.append(path)
        else:
            longer = length
    return redundant


def run_context(tokens: int, default_context: int) -> int:
    """The context a run of a prompt of this many tokens gets without --ctx-size: the model's default
    (default_context), or past it one sized to the prompt and an answer, as run sizes it (fit.target_context)."""
    return max(default_context, padded_context(counted_context(tokens)))
