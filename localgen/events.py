"""The small frozen events a generation streams, shared by the engine and its consumers."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class TextChunk:
    """A piece of decoded text (always whole UTF-8 characters)."""

    text: str


@dataclass(frozen=True)
class PrefillProgress:
    """Prompt tokens evaluated so far out of those that needed evaluating, and where the batch being evaluated ends
    (until; None: not said)."""

    done: int
    total: int
    until: int | None = None


@dataclass(frozen=True)
class Usage:
    """Token counts of one generation."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Timings:
    """Time to first token, prefill and decode speed of one generation (None where there was nothing to measure: no
    token came, the prompt was all in the cache, or the prompt's pass gave the only token)."""

    ttft_s: float | None
    prefill_s: float
    prefill_tokens_per_s: float | None
    decode_s: float | None
    decode_tokens_per_s: float | None


@dataclass(frozen=True)
class DraftStats:
    """How speculative decoding went: tokens drafted, drafted tokens the model accepted, verify batches."""

    drafted: int
    accepted: int
    batches: int

    @property
    def acceptance(self) -> float | None:
        """The fraction of drafted tokens the model accepted (None when none were drafted)."""
        return self.accepted / self.drafted if self.drafted else None


@dataclass(frozen=True)
class Finished:
    """The last event of a generation: the whole text, why it stopped, usage and timings."""

    text: str
    finish_reason: str
    usage: Usage
    timings: Timings
    draft: DraftStats | None = None  # set when speculative decoding was on
    restored_tokens: int = 0  # prompt tokens whose KV state came from the on-disk prompt cache
    thinking: str | None = None  # the <think> reasoning taken out of text (run --hide-thinking)
    thinking_closed: bool | None = None  # whether that reasoning's block was closed (None: the answer opened none)
    ahead_tokens: int = 0  # prompt tokens computed before the generation began (a chat message as it was typed)
    seed: int | None = None  # the sampler's seed (drawn when none was given); None for greedy sampling
    threads: int = 0  # the threads chosen at load (--threads, or the physical cores)
    decode_threads: int = 0  # the threads decoding at the end (fewer than threads: other processes were busy)
    stop_string: str | None = None  # the stop string that ended it (None: the model ended it, or another reason did)
    grammar_complete: bool | None = None  # under a grammar, whether it could end where the answer stopped (None: no
    # grammar, or a stop string cut the text)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the completion (the same usage keys every time; draft figures when drafting)."""
        usage = asdict(self.usage) | {"total_tokens": self.usage.total_tokens,
                                      "prompt_cache_tokens": self.restored_tokens}
        record: dict[str, object] = {"text": self.text, "finish_reason": self.finish_reason,
                                     "stop_string": self.stop_string, "usage": usage,
                                     "timings": asdict(self.timings), "seed": self.seed,
                                     "threads": self.threads, "decode_threads": self.decode_threads}
        if self.grammar_complete is not None:
            record["grammar_complete"] = self.grammar_complete
        if self.thinking is not None:
            record["thinking"] = self.thinking
        if self.draft is not None:
            acceptance = self.draft.acceptance
            record["draft"] = asdict(self.draft) | {"acceptance": None if acceptance is None else round(acceptance, 4)}
        return record


Event = TextChunk | PrefillProgress | Finished
