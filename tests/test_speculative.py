"""Speculative decoding by prompt lookup: the drafter alone, then on the real model against plain decoding."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.chat import Message, PromptFormat
from localgen.engine import Engine
from localgen.engine import core as engine_core
from localgen.errors import UsageError
from localgen.events import Finished, TextChunk
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.speculative import DRAFT_MAX, PROBE_EVERY, PROBE_LENGTH, PromptLookup, best_length, expected_gain

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)
# Short enough that prompt + answer stay under 256 KV cells: there llama.cpp's one-query and few-query
# flash-attention kernels round identically, so plain and speculative decoding must agree bit for bit.
COPY_TEXT = "The quick brown fox jumps over the lazy dog near the river bank, and the dog barks twice at the fox."


def _eager(tokens: list[int]) -> PromptLookup:
    """A drafter that believes drafting pays (cheap batches, good acceptance so far)."""
    drafter = PromptLookup(tokens)
    drafter.extra_cost = 0.05
    return drafter


def test_draft_copies_what_followed_the_last_ngram() -> None:
    drafter = _eager([1, 2, 3, 4, 5, 6, 7, 8, 9])
    drafter.extend([2, 3])
    assert drafter.draft(3) == [4, 5, 6]


def test_no_match_no_draft_and_limit_is_respected() -> None:
    drafter = _eager([1, 2, 3, 4, 5, 6])
    drafter.extend([9, 9])
    assert drafter.draft(4) == []
    drafter.extend([3, 4])
    assert drafter.draft(1) == [5]
    assert drafter.draft(0) == []


def test_longest_ngram_wins() -> None:
    drafter = _eager([7, 1, 2, 50, 8, 1, 2, 60, 9, 7, 1])
    drafter.extend([2])  # "1 2" is followed by 60 most recently, but "7 1 2" by 50
    assert drafter.draft(1) == [50]


def test_cost_model() -> None:
    assert best_length(0.0, 0.5, 8) == (0, 1.0), "drafts that always fail never pay"
    assert best_length(0.95, 1.0, 8)[0] == 0, "nor do drafts that cost a full decode each"
    k, gain = best_length(0.95, 0.1, DRAFT_MAX)
    assert k >= 8 and gain > 2
    assert expected_gain(1.0, 0.0, 4) == 5.0
    assert best_length(0.7, 0.3, 16)[0] < best_length(0.9, 0.3, 16)[0]


def test_drafting_stops_when_it_does_not_pay_and_probes() -> None:
    drafter = PromptLookup(list(range(50)) * 2)
    drafter.extend([10, 11])
    assert drafter.draft(8), "the priors allow a first try"
    for _ in range(20):
        drafter.record(4, 0)
        drafter.observe(1, 0.010)
        drafter.observe(5, 0.040)
    assert drafter.acceptance_estimate < 0.1 and drafter.extra_cost > 0.5
    drafts = [drafter.draft(8) for _ in range(PROBE_EVERY)]
    assert all(d == [] for d in drafts[:-1]) and len(drafts[-1]) == PROBE_LENGTH
    for _ in range(30):
        drafter.record(4, 4)
        drafter.observe(5, 0.011)
    assert drafter.acceptance_estimate > 0.9 and drafter.extra_cost < 0.1
    assert len(drafter.draft(16)) > 4
    stats = drafter.stats()
    assert stats.batches == 50 and stats.drafted == 200 and stats.accepted == 120
    assert stats.acceptance == 0.6


@pytest.fixture(autouse=True)
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine tests draft whenever the prompt matches, whatever the measured costs (timing-independent)."""
    monkeypatch.setattr(engine_core, "PromptLookup", functools.partial(PromptLookup, fixed_length=6))


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=2, n_threads_batch=2)) as eng:
        yield eng


def _prompt(engine: Engine, text: str) -> list[int]:
    fmt = PromptFormat.for_engine(engine, override=None, raw=False, model_name="smollm2")
    return fmt.tokenize(engine, fmt.render([Message("user", text)]))


def _run(engine: Engine, prompt: list[int], sampling: SamplingParams, limits: GenerationLimits,
         draft: str) -> tuple[Finished, list[str], list[int]]:
    engine.reset()
    chunks: list[str] = []
    done = None
    for event in engine.generate(prompt, sampling, limits, draft=draft):
        if isinstance(event, TextChunk):
            chunks.append(event.text)
        elif isinstance(event, Finished):
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


def test_lookup_is_exact_past_256_cells_with_a_quantized_kv_cache(bundled_model: Path) -> None:
    # Past 256 KV cells, llama.cpp's CPU attention splits a one-query batch's f16 KV across threads and rounds
    # differently from a verified batch, so f16 output may (not must) diverge at a near-tie; a q8_0 cache has
    # one kernel for every batch size, so greedy lookup is exact by construction (as README states).
    long_text = " ".join([COPY_TEXT] * 11)
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=2, n_threads_batch=2, kv_type="q8_0")) as eng:
        prompt = _prompt(eng, f"Repeat this text exactly:\n\n{long_text}")
        assert len(prompt) > 256
        limits = GenerationLimits(max_tokens=160)
        plain, _, plain_kv = _run(eng, prompt, GREEDY, limits, "none")
        fast, _, fast_kv = _run(eng, prompt, GREEDY, limits, "lookup")
    assert fast.text == plain.text and fast_kv == plain_kv
    assert fast.draft is not None and fast.draft.accepted > 20, fast.draft


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
