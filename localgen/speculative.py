"""Prompt-lookup drafting for speculative decoding: guess the next tokens from n-grams already seen."""

from __future__ import annotations

from collections.abc import Sequence

from localgen.errors import UsageError
from localgen.events import DraftStats
from localgen.tokens import common_prefix

DRAFT_MODES = ("lookup", "none")
NGRAM_MAX = 4
NGRAM_MIN = 2
DRAFT_MAX = 16
MIN_GAIN = 1.03  # draft only when the expected tokens per unit of decode cost beat plain decoding by 3%
DECAY = 0.98  # older outcomes and timings count less, so the estimates follow the text and the machine
RUN_BUCKETS = (0, 1, 4, 12)  # how many tokens in a row the lookup has guessed: none, 1-3, 4-11, 12 or more
PRIOR_GUESSES = ((1.0, 1.0), (2.0, 1.0), (4.0, 1.0), (8.0, 1.0))  # pseudo-counts (right, wrong) per bucket
PRIOR_COSTS = ((2, 1.5), (DRAFT_MAX + 1, 1.0 + 0.5 * DRAFT_MAX))  # (batch size, cost in one-token decodes)
PRIOR_COST_WEIGHT = 0.1  # the prior line counts as a tenth of one measured batch
ONE_TOKEN_EWMA = 0.1


def check_draft_mode(mode: str) -> None:
    """Raise a UsageError for an unknown --draft mode."""
    if mode not in DRAFT_MODES:
        raise UsageError(f"unknown draft mode '{mode}'", hint=f"use --draft {' or '.join(DRAFT_MODES)}")


def flash_attn_for(flash_attn: str, draft: str) -> str:
    """The --flash-attn mode to load with for this --draft mode: auto is on for lookup, whose verified batches round
    as one-token steps do only in flash attention's kernels (README, Performance)."""
    return "on" if flash_attn == "auto" and draft == "lookup" else flash_attn


def expected_tokens(p: float, k: int) -> float:
    """Tokens one verify batch yields on average when each of its k drafts is right with probability p.

    1 + p + p^2 + ... + p^k: the accepted run of drafts plus the model's own token after it.
    """
    return float(k + 1) if p >= 1.0 else (1.0 - p ** (k + 1)) / (1.0 - p)


class BatchCost:
    """What a llama_decode of b tokens costs, in one-token decodes, learned from timings as it goes.

    A one-token decode is the unit. Batches of two or more follow a line, cost(b) = a + m*b, fitted by
    decaying least squares over the measured batches and a weak prior. The line matters: on a CPU the
    first extra token can cost far more than the later ones (measured: 0.9 of a decode, then about 0.5
    each), so a cost per extra token measured on short drafts would forbid the long drafts that pay.
    """

    def __init__(self) -> None:
        self.one_token_s = 0.0
        self._batch_before = 0  # the size of the batch the last decode was, 0 after a one-token decode
        self._sums = [0.0] * 5  # weight, w*b, w*b^2, w*cost, w*b*cost
        for size, cost in PRIOR_COSTS:
            self._add(size, cost, PRIOR_COST_WEIGHT)

    def _add(self, size: int, cost: float, weight: float) -> None:
        """Add one (batch size, cost) point to the least-squares sums."""
        for i, value in enumerate((1.0, size, size * size, cost, size * cost)):
            self._sums[i] += weight * value

    def observe(self, size: int, seconds: float) -> None:
        """Learn from one timed llama_decode (with its sampling) of `size` tokens."""
        batch_before, self._batch_before = self._batch_before, 0
        if size <= 1:
            old = self.one_token_s
            seconds = min(seconds, 2.0 * old) if old else seconds  # a stall elsewhere is not the model's speed
            if batch_before:  # llama.cpp builds its one-token graph again after a batch: that time is the batch's
                extra = seconds / old - 1.0
                self._sums[3] += extra
                self._sums[4] += batch_before * extra
                return
            self.one_token_s = (1 - ONE_TOKEN_EWMA) * old + ONE_TOKEN_EWMA * seconds if old else seconds
            return
        if self.one_token_s <= 0.0:
            return
        self._sums = [value * DECAY for value in self._sums]
        self._add(size, min(max(seconds / self.one_token_s, 1.0), 1.5 * size), 1.0)
        self._batch_before = size

    def __call__(self, size: int) -> float:
        """The expected cost of a batch of `size` tokens, in one-token decodes."""
        if size <= 1:
            return 1.0
        w, wb, wbb, wc, wbc = self._sums
        spread = w * wbb - wb * wb
        slope = max(0.0, (w * wbc - wb * wc) / spread) if spread > 1e-9 else 0.5
        return max(1.0, (wc - slope * wb) / w + slope * size)


class PromptLookup:
    """Drafts tokens by finding the latest earlier occurrence of the last n tokens and copying what followed.

    Every step the lookup makes a guess, drafted or not, and the tokens that come next score it. Guesses
    are right far more often in a run of copied text, so their success rate is kept per length of the
    current run of right guesses. The draft length maximises the expected tokens per unit of cost
    (BatchCost); where no length beats plain decoding, nothing is drafted, and the guesses still score.
    """

    def __init__(self, tokens: Sequence[int], *, fixed_length: int | None = None) -> None:
        self._history: list[int] = []
        self._fixed_length = fixed_length  # draft this many whenever something matches (no cost model)
        self._index: dict[tuple[int, ...], int] = {}
        self._guesses = [list(prior) for prior in PRIOR_GUESSES]  # decayed (right, wrong) per run bucket
        self._run = 0  # tokens in a row the lookup guessed
        self._guess: list[int] = []
        self._guess_bucket = 0
        self.cost = BatchCost()
        self.drafted = 0
        self.accepted = 0
        self.batches = 0
        self._index_tokens(tokens)

    def _index_tokens(self, tokens: Sequence[int]) -> None:
        """Append tokens to the history and index the n-grams they complete."""
        history, index = self._history, self._index
        for token in tokens:
            end = len(history)
            for n in range(NGRAM_MIN, NGRAM_MAX + 1):
                if end >= n:
                    index[tuple(history[end - n:end])] = end  # this n-gram is followed by position `end`
            history.append(token)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append the tokens that came next (accepted drafts and the model's own), scoring the last guess."""
        guess = self._guess
        right = common_prefix(guess, tokens)
        missed = right < min(len(guess), len(tokens))
        if guess:
            counts = self._guesses[self._guess_bucket]
            counts[0] = counts[0] * DECAY + right
            counts[1] = counts[1] * DECAY + missed
        self._run = self._run + right if guess and not missed else 0
        self._guess = []
        self._index_tokens(tokens)

    def _match(self, limit: int) -> list[int]:
        """What followed the latest earlier occurrence of the longest matching suffix n-gram."""
        history = self._history
        for n in range(NGRAM_MAX, NGRAM_MIN - 1, -1):
            start = self._index.get(tuple(history[-n:])) if len(history) >= n else None
            if start is not None:
                return history[start:start + limit]
        return []

    def _bucket(self) -> int:
        """The index of the current run of right guesses in RUN_BUCKETS."""
        return sum(1 for start in RUN_BUCKETS[1:] if self._run >= start)

    @property
    def acceptance_estimate(self) -> float:
        """The current estimate of the chance that the next guessed token is right."""
        right, wrong = self._guesses[self._bucket()]
        return right / (right + wrong)

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that may come next (empty when nothing matches or drafting would not pay)."""
        match = self._match(min(limit, DRAFT_MAX)) if limit > 0 else []
        self._guess = match
        self._guess_bucket = self._bucket()
        if not match:
            return []
        if self._fixed_length is not None:
            return match[:self._fixed_length]
        p = self.acceptance_estimate
        best, best_gain = 0, MIN_GAIN
        for k in range(1, len(match) + 1):
            gain = expected_tokens(p, k) / self.cost(k + 1)
            if gain > best_gain:
                best, best_gain = k, gain
        return match[:best]

    def record(self, drafted: int, accepted: int) -> None:
        """Count a verify batch: how many of the drafted tokens the model accepted."""
        if drafted:
            self.drafted += drafted
            self.accepted += accepted
            self.batches += 1

    def observe(self, batch_tokens: int, seconds: float) -> None:
        """Learn the decode cost: seconds for one llama_decode (and its sampling) of batch_tokens tokens."""
        self.cost.observe(batch_tokens, seconds)

    def stats(self) -> DraftStats:
        """Totals so far."""
        return DraftStats(drafted=self.drafted, accepted=self.accepted, batches=self.batches)
