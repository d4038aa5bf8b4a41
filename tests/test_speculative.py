"""Speculative decoding by prompt lookup: the drafter alone, then on the real model against plain decoding."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.engine import Engine
from localgen.engine import core as engine_core
from localgen.errors import UsageError
from localgen.events import Finished, TextChunk
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.speculative import DRAFT_MAX, BatchCost, PromptLookup, expected_tokens, flash_attn_for
from tests.conftest import chat_prompt
from tests.script_modules import bench_module

# The real engine in this process runs on one thread: llama.cpp's threads spin while they wait for one another,
# so two of them beside another worker's test would stall (conftest: serial); one keeps pace beside it.

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)
# Short enough that prompt + answer stay under 256 KV cells: there llama.cpp's one-query and few-query
# flash-attention kernels round identically, so plain and speculative decoding must agree bit for bit.
COPY_TEXT = "The quick brown fox jumps over the lazy dog near the river bank, and the dog barks twice at the fox."


def _eager(tokens: list[int]) -> PromptLookup:
    """A drafter that drafts whatever matches (no cost model)."""
    return PromptLookup(tokens, fixed_length=DRAFT_MAX)


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


def test_expected_tokens() -> None:
    assert expected_tokens(1.0, 4) == 5.0, "every draft right: the drafts and the model's own token"
    assert expected_tokens(0.0, 8) == 1.0, "every draft wrong: only the model's own token"
    assert expected_tokens(0.5, 2) == 1.75
    assert expected_tokens(0.9, 8) > expected_tokens(0.9, 4) > expected_tokens(0.7, 4)


def test_batch_cost_learns_a_line_from_short_batches_and_ignores_stalls() -> None:
    cost = BatchCost()
    assert cost(1) == 1.0 and cost(2) == pytest.approx(1.5) and cost(DRAFT_MAX + 1) == pytest.approx(9.0)
    cost.observe(1, 0.010)
    for _ in range(40):
        for size in (2, 3, 4, 5):
            cost.observe(size, 0.010 * (0.8 + 0.5 * size))  # this machine: a = 0.8, m = 0.5
    assert abs(cost(2) - 1.8) < 0.05 and abs(cost(17) - 9.3) < 0.3, "extrapolated from batches of 2 to 5"
    cost.observe(1, 3.0)
    assert cost.one_token_s < 0.0115, "a 3-second stall elsewhere does not make batches look cheap"
    cost.observe(7, 30.0)
    assert cost(7) < 6.0, "nor does a stalled batch make them look dear"


def test_the_slower_step_after_a_batch_counts_against_the_batch() -> None:
    cost = BatchCost()
    cost.observe(1, 0.010)
    for _ in range(40):
        for size in (4, 8):
            cost.observe(size, 0.010 * (0.8 + 0.5 * size))
            cost.observe(1, 0.015)  # llama.cpp builds its one-token graph again after a batch: half a step more
    assert cost.one_token_s == pytest.approx(0.010), "the step after a batch is not plain decoding's speed"
    assert cost(4) == pytest.approx(3.3, abs=0.1) and cost(8) == pytest.approx(5.3, abs=0.1), "the batch pays it"
    cost.observe(1, 0.010)
    cost.observe(1, 0.012)
    assert cost.one_token_s == pytest.approx(0.0102), "steps after a one-token step are plain decoding's speed"


def _copying(drafter: PromptLookup, source: list[int], start: int, steps: int) -> list[list[int]]:
    """Feed the model's tokens one step at a time as it copies `source` from `start`; the drafts offered."""
    drafts, at = [], start
    for _ in range(steps):
        draft = drafter.draft(DRAFT_MAX)
        drafts.append(draft)
        taken = source[at:at + len(draft) + 1]  # the model agrees with every draft and adds its own token
        drafter.record(len(draft), len(draft))
        drafter.extend(taken)
        at += len(taken)
    return drafts


def test_drafts_grow_in_a_run_of_copied_text_and_stop_when_the_text_departs() -> None:
    source = list(range(100, 300))
    drafter = PromptLookup(source)
    drafter.extend(source[:3])
    assert drafter.draft(DRAFT_MAX) == [], "no evidence yet that the answer copies: plain decoding"
    drafter.extend(source[3:4])
    drafts = _copying(drafter, source, 4, 12)
    lengths = [len(d) for d in drafts]
    assert lengths[0] <= 1 and max(lengths) >= 4, "guesses score even when not drafted, and runs earn drafts"
    assert lengths == sorted(lengths), "longer runs of right guesses earn longer drafts"
    for at in range(20, 180, 8):  # the answer skips about: each step's guess is wrong
        drafter.draft(DRAFT_MAX)
        drafter.extend(source[at:at + 2])
    assert drafter.acceptance_estimate < 0.3 and drafter.draft(DRAFT_MAX) == [], "guesses fail: no drafts"
    stats = drafter.stats()
    assert stats.drafted == stats.accepted == sum(lengths) and stats.batches == sum(1 for n in lengths if n)


def test_cheap_batches_earn_longer_drafts() -> None:
    source = list(range(100, 300))
    dear, cheap = PromptLookup(source), PromptLookup(source)
    for drafter, per_token in ((dear, 0.9), (cheap, 0.1)):
        drafter.observe(1, 0.010)
        for _ in range(30):
            for size in (2, 6, 12):
                drafter.observe(size, 0.010 * (1 + per_token * (size - 1)))
        drafter.extend(source[:4])
        _copying(drafter, source, 4, 6)
    assert len(cheap.draft(DRAFT_MAX)) > len(dear.draft(DRAFT_MAX))


@pytest.fixture(autouse=True)
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine tests draft whenever the prompt matches, whatever the measured costs (timing-independent)."""
    monkeypatch.setattr(engine_core, "PromptLookup", functools.partial(PromptLookup, fixed_length=6))


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    # flash attention on, as `run --draft lookup` loads it: only its kernels round a verified batch as one-token
    # steps do
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1, flash_attn="on")) as eng:
        yield eng


Prefilled = tuple[list[int], bytearray]  # a prompt's tokens and its KV cache state


def _prefilled(engine: Engine, prompt: list[int]) -> Prefilled:
    """The prompt prefilled once (one token generated, which the KV cache never takes), to restore for each answer."""
    engine.reset()
    next(event for event in engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=1))
         if isinstance(event, Finished))
    return engine.kv_token_list, engine.save_state()


def _run(engine: Engine, prompt: list[int], sampling: SamplingParams, limits: GenerationLimits,
         draft: str, start: Prefilled) -> tuple[Finished, list[str], list[int]]:
    """One generation from the prompt's state restored (its last tokens computed again, alike for each answer, as
    chunks.resume_point has it)."""
    assert engine.load_state(*start)
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
    prompt = chat_prompt(engine, f"Repeat this sentence exactly, twice:\n\n{COPY_TEXT}")
    limits, prefilled = GenerationLimits(max_tokens=80), _prefilled(engine, prompt)
    plain, _, plain_kv = _run(engine, prompt, sampling, limits, "none", prefilled)
    fast, fast_chunks, fast_kv = _run(engine, prompt, sampling, limits, "lookup", prefilled)
    assert fast.text == plain.text and "".join(fast_chunks) == fast.text
    assert fast.usage.completion_tokens == plain.usage.completion_tokens
    assert fast.finish_reason == plain.finish_reason
    assert fast_kv == plain_kv, "the KV cache must hold exactly what plain decoding leaves there"
    assert plain.draft is None and fast.draft is not None
    if sampling is GREEDY:
        assert fast.draft.accepted > 10, fast.draft


TYPO_TEXT = bench_module("common").TYPO_TEXT  # about 300 words, with typos for the model to fix and the rest to copy


@pytest.mark.parametrize(("load", "message", "answer", "accepted"), [
    pytest.param(LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1, kv_type="q8_0"),
                 "Repeat this text exactly:\n\n" + " ".join([COPY_TEXT] * 10), 32, 20, id="q8_0-cache"),
    pytest.param(LoadOptions(n_ctx=1024, n_threads=2, n_threads_batch=2, flash_attn="on", keys_for_drafts=True),
                 f"{TYPO_TEXT}\n\nFix the typos in this text:", 240, 100, id="f16-cache-two-threads",
                 marks=pytest.mark.serial)])  # two threads spin while they wait for each other
def test_lookup_is_exact_past_256_cells(bundled_model: Path, load: LoadOptions, message: str, answer: int,
                                        accepted: int) -> None:
    """Past 256 KV cells llama.cpp's CPU flash attention splits a one-token step's f16 keys among the threads and
    sums them in another order than a verified batch's, so greedy lookup parted from plain decoding at a near-tie
    (the f16 case failed so). Quantized keys have one kernel for every batch size: a q8_0 cache, and an f16 one
    loaded for lookup (q8_0 keys, f16 values), keep lookup's text plain decoding's (as README states)."""
    assert load.key_type == "q8_0"
    with Engine(bundled_model, load) as eng:
        prompt = chat_prompt(eng, message)
        assert len(prompt) > 256  # every answer's token is past 256 cells
        limits = GenerationLimits(max_tokens=answer)
        prefilled = _prefilled(eng, prompt)
        plain, _, plain_kv = _run(eng, prompt, GREEDY, limits, "none", prefilled)
        fast, _, fast_kv = _run(eng, prompt, GREEDY, limits, "lookup", prefilled)
        assert plain.usage.cached_tokens == fast.usage.cached_tokens >= len(prompt) - 2, (plain.usage, fast.usage)
    assert fast.text == plain.text and fast_kv == plain_kv
    assert fast.draft is not None and fast.draft.accepted > accepted, fast.draft


def test_lookup_keeps_an_f16_caches_keys_at_q8_0_where_flash_attention_would_split_them(bundled_model: Path) -> None:
    """The key type reaches llama.cpp (a q8_0 key takes 34 bytes per 32 values, f16 64: the saved state shrinks);
    plain decoding, a quantized cache, no flash attention and a GPU's layers keep --kv-type's."""

    def load(**given: object) -> LoadOptions:
        return LoadOptions(n_ctx=512, n_threads=1, n_threads_batch=1, **given)  # type: ignore[arg-type]

    lookup = load(flash_attn="on", keys_for_drafts=True)
    assert (lookup.key_type, lookup.kv_layout) == ("q8_0", "f16 (q8_0 keys)")
    assert [(o.key_type, o.kv_layout) for o in (load(flash_attn="on"), load(flash_attn="off", keys_for_drafts=True),
                                                 load(flash_attn="on", keys_for_drafts=True, n_gpu_layers=1))] == [
        ("f16", "f16")] * 3
    assert load(kv_type="q4_0", keys_for_drafts=True).key_type == "q4_0"
    sizes, signatures = {}, {}
    for options in (lookup, load(flash_attn="on")):
        with Engine(bundled_model, options) as eng:
            _prefilled(eng, chat_prompt(eng, COPY_TEXT))
            sizes[options.key_type] = len(eng.save_state())
            signatures[options.key_type] = eng.state_signature
    assert sizes["q8_0"] < 0.8 * sizes["f16"], sizes
    assert "kv f16 (q8_0 keys);" in signatures["q8_0"] and "kv f16;" in signatures["f16"], "a prompt cache keeps apart"


def test_limits_and_stops_cut_inside_an_accepted_draft(engine: Engine) -> None:
    prompt = chat_prompt(engine, f"Repeat this sentence exactly, twice:\n\n{COPY_TEXT}")
    prefilled = _prefilled(engine, prompt)
    full, _, _ = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=60), "none", prefilled)
    length = full.usage.completion_tokens
    assert length > 12, full.text
    for n in (3, length - 2):
        plain, _, plain_kv = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=n), "none", prefilled)
        fast, _, fast_kv = _run(engine, prompt, GREEDY, GenerationLimits(max_tokens=n), "lookup", prefilled)
        assert (fast.text, fast.usage.completion_tokens, fast.finish_reason) == (
            plain.text, plain.usage.completion_tokens, plain.finish_reason)
        assert fast.usage.completion_tokens == n
        assert fast_kv == plain_kv
    stop = full.text.split()[5]
    stopped = GenerationLimits(max_tokens=60, stop=(stop,))
    plain, _, plain_kv = _run(engine, prompt, GREEDY, stopped, "none", prefilled)
    fast, _, fast_kv = _run(engine, prompt, GREEDY, stopped, "lookup", prefilled)
    assert fast.text == plain.text and fast.finish_reason == "stop" and fast_kv == plain_kv


def test_unknown_draft_mode_is_a_usage_error(engine: Engine) -> None:
    with pytest.raises(UsageError):
        list(engine.generate(chat_prompt(engine, "hi"), GREEDY, draft="medusa"))


def test_lookup_loads_with_flash_attention_where_auto_leaves_the_choice() -> None:
    assert flash_attn_for("auto", "lookup") == "on"
    assert [flash_attn_for(mode, "lookup") for mode in ("on", "off")] == ["on", "off"], "as asked"
    assert [flash_attn_for(mode, "none") for mode in ("auto", "on", "off")] == ["auto", "on", "off"]
