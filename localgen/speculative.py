"""Prompt-lookup drafting for speculative decoding: guess the next tokens from n-grams already seen."""

from __future__ import annotations

from collections.abc import Sequence

from localgen.errors import UsageError
from localgen.events import DraftStats

DRAFT_MODES = ("lookup", "none")
NGRAM_MAX = 4
NGRAM_MIN = 2
DRAFT_START = 4
DRAFT_MIN = 1
DRAFT_MAX = 16
COOLDOWN_TOKENS = 8


def check_draft_mode(mode: str) -> None:
    """Raise a UsageError for an unknown --draft mode."""
    if mode not in DRAFT_MODES:
        raise UsageError(f"unknown draft mode '{mode}'", hint=f"use --draft {' or '.join(DRAFT_MODES)}")


class PromptLookup:
    """Drafts tokens by finding the latest earlier occurrence of the last n tokens and copying what followed."""

    def __init__(self, tokens: Sequence[int], *, ngram_max: int = NGRAM_MAX, ngram_min: int = NGRAM_MIN,
                 draft_max: int = DRAFT_MAX) -> None:
        self._history: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}
        self._ngram_max = ngram_max
        self._ngram_min = ngram_min
        self._draft_max = draft_max
        self._length = DRAFT_START
        self._cooldown = 0
        self.drafted = 0
        self.accepted = 0
        self.batches = 0
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append known tokens (prompt or output) and index the n-grams they complete."""
        history, index = self._history, self._index
        for token in tokens:
            end = len(history)
            for n in range(self._ngram_min, self._ngram_max + 1):
                if end >= n:
                    index[tuple(history[end - n:end])] = end  # this n-gram is followed by position `end`
            history.append(token)

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that may come next (empty when no n-gram matches or while backing off)."""
        if self._cooldown > 0:
            self._cooldown -= 1
            return []
        count = min(limit, self._length)
        if count <= 0:
            return []
        history = self._history
        for n in range(self._ngram_max, self._ngram_min - 1, -1):
            start = self._index.get(tuple(history[-n:])) if len(history) >= n else None
            if start is not None:
                return history[start:start + count]
        return []

    def record(self, drafted: int, accepted: int) -> None:
        """Adapt the draft length to how many drafted tokens the model accepted."""
        if drafted == 0:
            return
        self.drafted += drafted
        self.accepted += accepted
        self.batches += 1
        if accepted == drafted:
            self._length = min(self._draft_max, self._length * 2)
        elif accepted == 0:
            self._length = max(DRAFT_MIN, self._length // 2)
            if self._length == DRAFT_MIN:
                self._cooldown = COOLDOWN_TOKENS
        else:
            self._length = max(DRAFT_MIN, accepted + 1)

    def stats(self) -> DraftStats:
        """Totals so far."""
        return DraftStats(drafted=self.drafted, accepted=self.accepted, batches=self.batches)
