"""Repetition penalties applied by localgen: llama.cpp's penalties sampler, float for float, at a cost of the window."""

from __future__ import annotations

import ctypes
import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.engine import Engine, lc
from localgen.engine.sampling import PENALTY_WINDOW_IN_PYTHON, RepetitionPenalties, build_sampler, native_penalties
from localgen.events import Finished
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from tests.conftest import chat_prompt

# The real engine in this process runs on one thread: llama.cpp's threads spin while they wait for one another,
# so two of them beside another worker's test would stall (conftest: serial); one keeps pace beside it.

VOCAB = 500
SETTINGS = [  # (repeat_last_n, repeat, frequency, presence)
    (64, 1.1, 0.0, 0.0),
    (8, 1.3, 0.4, 0.25),
    (1, 0.7, -0.3, 0.5),
    (300, 1.05, 0.05, -0.1),
]


def _bits(value: float) -> bytes:
    """A float32's bytes (tells -0.0 from 0.0)."""
    return struct.pack("<f", value)


def _logits(rng: random.Random) -> list[float]:
    """Logits of both signs, zeros of both signs and large values, as float32."""
    values = [rng.gauss(0, 8) for _ in range(VOCAB)]
    values[:4] = [0.0, -0.0, 1e30, -1e30]
    return [struct.unpack("<f", _bits(v))[0] for v in values]


def _llama_cpp_penalized(logits: list[float], history: list[int], last_n: int, repeat: float, frequency: float,
                         presence: float, *, vocab: int = VOCAB) -> list[float]:
    """What llama.cpp's own penalties sampler makes of the logits (vocab of them) after accepting history."""
    sampler = lc.llama_sampler_init_penalties(vocab, last_n, repeat, frequency, presence)
    try:
        for token in history:
            lc.llama_sampler_accept(sampler, token)
        data = (lc.llama_token_data * vocab)(*(lc.llama_token_data(i, v, 0.0) for i, v in enumerate(logits)))
        array = lc.llama_token_data_array(data, vocab, -1, False)
        lc.llama_sampler_apply(sampler, ctypes.byref(array))
        return [data[i].logit for i in range(vocab)]
    finally:
        lc.llama_sampler_free(sampler)


@pytest.mark.parametrize(("last_n", "repeat", "frequency", "presence"), SETTINGS)
def test_penalties_equal_llama_cpp_bit_for_bit_and_are_undone(last_n: int, repeat: float, frequency: float,
                                                              presence: float) -> None:
    rng = random.Random(last_n)
    logits = _logits(rng)
    history = [rng.choice(range(12)) if rng.random() < 0.6 else rng.randrange(VOCAB) for _ in range(400)]
    history[-3:] = [0, 1, 2]  # the zeros and a large logit are penalized too
    expected = _llama_cpp_penalized(logits, history, last_n, repeat, frequency, presence)
    penalties = RepetitionPenalties(last_n, repeat, frequency, presence)
    for token in history:
        penalties.accept(token)
    native = (ctypes.c_float * VOCAB)(*logits)
    saved = penalties.apply(native)
    assert [_bits(v) for v in native] == [_bits(v) for v in expected]
    assert len(saved) == len(set(history[-last_n:]))
    for token, logit in saved:
        native[token] = logit
    assert [_bits(v) for v in native] == [_bits(v) for v in logits]


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


def _reference_tokens(engine: Engine, prompt: list[int], sampling: SamplingParams, count: int) -> list[int]:
    """count tokens from llama.cpp's own chain, penalties sampler included, decoding one token at a time."""
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    lc.llama_sampler_chain_add(chain, native_penalties(engine.n_vocab, sampling, prompt))
    if sampling.temperature > 0:
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(sampling.temperature))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(sampling.seed))
    else:
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_greedy())
    engine.reset()
    try:
        list(engine._prefill(prompt, 0))
        tokens = [lc.llama_sampler_sample(chain, engine._ctx, -1)]
        one = (lc.llama_token * 1)()
        while len(tokens) < count:
            one[0] = tokens[-1]
            assert lc.llama_decode(engine._ctx, lc.llama_batch_get_one(one, 1)) == 0
            tokens.append(lc.llama_sampler_sample(chain, engine._ctx, -1))
    finally:
        lc.llama_sampler_free(chain)
        engine.reset()
    return tokens


@pytest.mark.parametrize("sampling", [
    SamplingParams(temperature=0.0, repeat_penalty=1.6, repeat_last_n=16, frequency_penalty=0.3),
    SamplingParams(temperature=1.2, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.3, repeat_last_n=32,
                   presence_penalty=0.4, seed=7),
    SamplingParams(temperature=0.0, repeat_penalty=1.6, repeat_last_n=PENALTY_WINDOW_IN_PYTHON + 1),
], ids=["greedy", "sampled", "window-for-llama.cpp"])
def test_generations_match_llama_cpps_penalties_sampler_token_for_token(engine: Engine,
                                                                        sampling: SamplingParams) -> None:
    prompt = chat_prompt(engine, "List the days of the week, then the months of the year, twice.")
    expected = _reference_tokens(engine, prompt, sampling, 48)
    engine.reset()
    done = [e for e in engine.generate(prompt, sampling, GenerationLimits(max_tokens=48), ignore_eog=True)
            if isinstance(e, Finished)][-1]
    got = engine.kv_token_list[len(prompt):]
    assert done.usage.completion_tokens == 48
    assert got == expected[:len(got)] and len(got) == 47  # the last token sampled is not decoded


def test_the_cached_logits_are_left_as_computed(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Say hello hello hello.")
    engine.reset()
    assert engine.prefill_ahead(prompt, lambda: False) == len(prompt)
    logits = lc.llama_get_logits_ith(engine._ctx, -1)
    before = [_bits(logits[t]) for t in set(prompt)]
    penalized = SamplingParams(temperature=0.0, repeat_penalty=2.0, repeat_last_n=-1, presence_penalty=1.0)
    first = [e for e in engine.generate(prompt, penalized, GenerationLimits(max_tokens=1))
             if isinstance(e, Finished)][-1]
    assert first.usage.cached_tokens == len(prompt)  # sampled from the logits prefilled ahead
    assert [_bits(logits[t]) for t in set(prompt)] == before
    again = [e for e in engine.generate(prompt, penalized, GenerationLimits(max_tokens=1))
             if isinstance(e, Finished)][-1]
    assert again.text == first.text


def test_a_large_window_is_left_to_llama_cpps_sampler(engine: Engine) -> None:
    """A Python loop over a window's distinct tokens would cost more than llama.cpp's fixed one beyond it."""
    for last_n, native in ((PENALTY_WINDOW_IN_PYTHON, False), (PENALTY_WINDOW_IN_PYTHON + 1, True), (-1, True)):
        sampling = SamplingParams(temperature=0.0, repeat_last_n=last_n)
        sampler = build_sampler(engine._vocab.pointer, sampling, [1, 2], 1024)
        try:
            assert (sampler._penalties is None) == native
            assert lc.llama_sampler_chain_n(sampler.chain) == (2 if native else 1)
        finally:
            sampler.free()
