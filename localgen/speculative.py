"""Prompt-lookup drafting for speculative decoding: guess the next tokens from n-grams already seen."""

from __future__ import annotations

from collections.abc import Sequence

from localgen.errors import UsageError
from localgen.events import DraftStats

DRAFT_MODES = ("lookup", "none")
NGRAM_MAX = 4
NGRAM_MIN = 2
DRAFT_MAX = 16
PRIOR_EXTRA_COST = 0.5  # an extra token in a verify batch costs this fraction of a one-token decode (until measured)
PRIORS = {True: (6.0, 1.0), False: (3.0, 1.0)}  # pseudo-counts (accepted, rejected) after a full / partial accept
DECAY = 0.97  # older verify outcomes count less, so the estimate follows the text
EWMA = 0.2
MIN_GAIN = 1.03  # draft only when the expected tokens per unit of decode cost beat plain decoding by 3%
PROBE_EVERY = 32  # while drafting does not pay, still verify a short draft this often to notice a change
PROBE_LENGTH = 2


def check_draft_mode(mode: str) -> None:
    """Raise a UsageError for an unknown --draft mode."""
    if mode not in DRAFT_MODES:
        raise UsageError(f"unknown draft mode '{mode}'", hint=f"use --draft {' or '.join(DRAFT_MODES)}")


def expected_gain(p: float, extra_cost: float, k: int) -> float:
    """Tokens per unit of decode cost when verifying k drafts that are each accepted with probability p.

    A verify batch yields 1 + p + p^2 + ... + p^k tokens on average (the model's own token after the last
    accepted draft included) and costs 1 + extra_cost * k one-token decodes; plain decoding scores 1.
    """
    tokens = float(k + 1) if p >= 1.0 else (1.0 - p ** (k + 1)) / (1.0 - p)
    return tokens / (1.0 + extra_cost * k)


def best_length(p: float, extra_cost: float, limit: int) -> tuple[int, float]:
    """The draft length (0..limit) with the best expected gain, and that gain."""
    best = (0, 1.0)
    for k in range(1, limit + 1):
        gain = expected_gain(p, extra_cost, k)
        if gain > best[1]:
            best = (k, gain)
    return best


class PromptLookup:
    """Drafts tokens by finding the latest earlier occurrence of the last n tokens and copying what followed.

    How many to draft comes from a cost model: the acceptance rate seen so far (kept apart after a fully and
    a partly accepted draft, since copying comes in runs) and the measured cost of a verify batch relative to
    a one-token decode. When drafting cannot pay on this hardware it stops, probing now and then.
    """

    def __init__(self, tokens: Sequence[int], *, ngram_max: int = NGRAM_MAX, ngram_min: int = NGRAM_MIN,
                 draft_max: int = DRAFT_MAX, fixed_length: int | None = None) -> None:
        self._history: list[int] = []
        self._fixed_length = fixed_length  # draft this many whenever something matches (no cost model)
        self._index: dict[tuple[int, ...], int] = {}
        self._ngram_max = ngram_max
        self._ngram_min = ngram_min
        self._draft_max = draft_max
        self._counts = {streak: list(prior) for streak, prior in PRIORS.items()}
        self._streak = False
        self._one_token_s = 0.0
        self.extra_cost = PRIOR_EXTRA_COST
        self._since_probe = 0
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

    def _match(self, limit: int) -> list[int]:
        """What followed the latest earlier occurrence of the longest matching suffix n-gram."""
        history = self._history
        for n in range(self._ngram_max, self._ngram_min - 1, -1):
            start = self._index.get(tuple(history[-n:])) if len(history) >= n else None
            if start is not None:
                return history[start:start + limit]
        return []

    @property
    def acceptance_estimate(self) -> float:
        """The current estimate of the chance that a drafted token is accepted."""
        accepted, rejected = self._counts[self._streak]
        return accepted / (accepted + rejected)

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that may come next (empty when nothing matches or drafting would not pay)."""
        match = self._match(min(limit, self._draft_max)) if limit > 0 else []
        if not match:
            return []
        if self._fixed_length is not None:
            return match[:self._fixed_length]
        k, gain = best_length(self.acceptance_estimate, self.extra_cost, len(match))
        if gain < MIN_GAIN:
            self._since_probe += 1
            if self._since_probe < PROBE_EVERY:
                return []
            k = min(PROBE_LENGTH, len(match))
        self._since_probe = 0
        return match[:k]

    def record(self, drafted: int, accepted: int) -> None:
        """Learn from a verify batch: how many of the drafted tokens the model accepted."""
        if drafted == 0:
            return
        self.drafted += drafted
        self.accepted += accepted
        self.batches += 1
        counts = self._counts[self._streak]
        counts[0] = counts[0] * DECAY + accepted
        counts[1] = counts[1] * DECAY + (1 if accepted < drafted else 0)
        self._streak = accepted == drafted

    def observe(self, batch_tokens: int, seconds: float) -> None:
        """Learn the decode cost: seconds for one llama_decode (and its sampling) of batch_tokens tokens."""
        if batch_tokens <= 1:
            old = self._one_token_s
            self._one_token_s = seconds if not old else (1 - EWMA) * old + EWMA * seconds
        elif self._one_token_s > 0:
            extra = (seconds / self._one_token_s - 1.0) / (batch_tokens - 1)
            self.extra_cost = min(2.0, max(0.02, (1 - EWMA) * self.extra_cost + EWMA * extra))

    def stats(self) -> DraftStats:
        """Totals so far."""
        return DraftStats(drafted=self.drafted, accepted=self.accepted, batches=self.batches)
