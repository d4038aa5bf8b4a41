"""Speculative decoding by prompt lookup: the drafter alone, then on the real model against plain decoding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.chat import Message, PromptFormat
from localgen.engine import Engine
from localgen.errors import UsageError
from localgen.events import Completion, TextChunk
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.speculative import COOLDOWN_TOKENS, DRAFT_MAX, DRAFT_START, PromptLookup

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)
# Short enough that prompt + answer stay under 256 KV cells: there llama.cpp's one-query and few-query
# flash-attention kernels round identically, so plain and speculative decoding must agree bit for bit.
COPY_TEXT = "The quick brown fox jumps over the lazy dog near the river bank, and the dog barks twice at the fox."


def test_draft_copies_what_followed_the_last_ngram() -> None:
    drafter = PromptLookup([1, 2, 3, 4, 5, 6, 7, 8, 9])
    drafter.extend([2, 3])
    assert drafter.draft(3) == [4, 5, 6]


def test_no_match_no_draft_and_limit_is_respected() -> None:
    drafter = PromptLookup([1, 2, 3, 4, 5, 6])
    drafter.extend([9, 9])
    assert drafter.draft(4) == []
    drafter.extend([3, 4])
    assert drafter.draft(1) == [5]
    assert drafter.draft(0) == []


def test_longest_ngram_wins() -> None:
    drafter = PromptLookup([7, 1, 2, 50, 8, 1, 2, 60, 9, 7, 1])
    drafter.extend([2])  # "1 2" is followed by 60 most recently, but "7 1 2" by 50
    assert drafter.draft(1) == [50]


def test_draft_length_adapts_and_backs_off() -> None:
    drafter = PromptLookup(list(range(100)) * 2)
    drafter.record(DRAFT_START, DRAFT_START)
    assert len(drafter.draft(DRAFT_MAX + 5)) == min(DRAFT_MAX, DRAFT_START * 2)
    for _ in range(6):
        drafter.record(4, 0)
    assert all(drafter.draft(8) == [] for _ in range(COOLDOWN_TOKENS))
    assert drafter.draft(8), "drafting resumes after the cool-down"
    stats = drafter.stats()
    assert stats.drafted == DRAFT_START + 24 and stats.accepted == DRAFT_START and stats.batches == 7
    assert 0 < stats.acceptance < 1


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=2, n_threads_batch=2)) as eng:
        yield eng


def _prompt(engine: Engine, text: str) -> list[int]:
    fmt = PromptFormat.for_engine(engine, override=None, raw=False, model_name="smollm2")
    return fmt.tokenize(engine, fmt.render([Message("user", text)]))


def _run(engine: Engine, prompt: list[int], sampling: SamplingParams, limits: GenerationLimits,
         draft: str) -> tuple[Completion, list[str], list[int]]:
    engine.reset()
    chunks: list[str] = []
    done = None
    for event in engine.generate(prompt, sampling, limits, draft=draft):
        if isinstance(event, TextChunk):
            chunks.append(event.text)
        elif isinstance(event, Completion):
            done = event
    assert done is not None
    return done, chunks, engine.kv_token_list


@pytest.mark.parametrize("sampling", [GREEDY, SamplingParams(temperature=0.0), SamplingParams(seed=7)],
                         ids=["greedy", "greedy-penalty", "sampled"])
def test_lookup_output_equals_plain_decoding(engine: Engine, sampling: SamplingParams) -> None:
    prompt = _prompt(engine, f"Repeat this sentence exactly, twice:\n\n{COPY_TEXT}")
    limits = GenerationLimits(max_tokens=80)
    plain, _, plain_kv = _run(engine, prompt, sampling, limits, "none")
    fast, fast_chunks, fast_kv = _run(engine, prompt, sampling, limits, "lookup")
    assert fast.text == plain.text and "".join(fast_chunks) == fast.text
    assert fast.usage.completion_tokens == plain.usage.completion_tokens
    assert fast.finish_reason == plain.finish_reason
    assert fast_kv == plain_kv, "the KV cache must hold exactly what plain decoding leaves there"
    assert plain.draft is None and fast.draft is not None
    if sampling is GREEDY:
        assert fast.draft.accepted > 10, fast.draft


def test_limits_and_stops_cut_inside_an_accepted_draft(engine: Engine) -> None:
    prompt = _prompt(engine, f"Repeat this sentence exactly, twice:\n\n{COPY_TEXT}")
    full, _, _ = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=60), "none")
    length = full.usage.completion_tokens
    assert length > 12, full.text
    for n in (3, length - 2):
        plain, _, plain_kv = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=n), "none")
        fast, _, fast_kv = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=n), "lookup")
        assert (fast.text, fast.usage.completion_tokens, fast.finish_reason) == (
            plain.text, plain.usage.completion_tokens, plain.finish_reason)
        assert fast.usage.completion_tokens == n
        assert fast_kv == plain_kv
    stop = full.text.split()[5]
    plain, _, plain_kv = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=60, stop=(stop,)), "none")
    fast, _, fast_kv = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=60, stop=(stop,)), "lookup")
    assert fast.text == plain.text and fast.finish_reason == "stop" and fast_kv == plain_kv


def test_unknown_draft_mode_is_a_usage_error(engine: Engine) -> None:
    with pytest.raises(UsageError):
        list(engine.generate(_prompt(engine, "hi"), GREEDY, draft="medusa"))
