"""Repetition penalties whose frequency and presence offsets are kept per count: float for float what the formula,
rounded at each step, and llama.cpp's own penalties sampler make of random logits and windows."""

from __future__ import annotations

import ctypes
import random
import struct

import pytest

from localgen.engine.sampling import RepetitionPenalties
from tests.test_penalties import _llama_cpp_penalized

VOCAB = 300


def _f32(value: float) -> float:
    """value rounded to the nearest float32 (infinite past its range)."""
    return ctypes.c_float(value).value


def _formula(logit: float, count: int, repeat: float, frequency: float, presence: float) -> float:
    """llama.cpp's penalty of one logit, each step rounded to float32 as its C code rounds it."""
    repeat, frequency, presence = _f32(repeat), _f32(frequency), _f32(presence)
    value = _f32(logit * repeat if logit <= 0 else logit / repeat)
    return _f32(value - _f32(_f32(count * frequency) + presence))


def _setting(rng: random.Random) -> tuple[int, float, float, float]:
    """A window and penalties: each penalty off (1 or 0) or drawn from its range, negative offsets among them."""
    repeat = rng.choice([1.0, rng.uniform(0.1, 10.0), rng.uniform(0.9, 1.5)])
    frequency = rng.choice([0.0, rng.uniform(-2.0, 2.0)])
    presence = rng.choice([0.0, rng.uniform(-2.0, 2.0)])
    return rng.randint(1, 96), repeat, frequency, presence


@pytest.mark.parametrize("seed", range(12))
def test_penalties_kept_per_count_equal_the_formula_and_llama_cpp_call_after_call(seed: int) -> None:
    """The offsets kept from earlier calls still fit as the window's counts change from token to token."""
    rng = random.Random(seed)
    last_n, repeat, frequency, presence = _setting(rng)
    penalties = RepetitionPenalties(last_n, repeat, frequency, presence)
    history: list[int] = []
    for _ in range(40):
        for _ in range(rng.randint(1, 8)):
            token = rng.randrange(10) if rng.random() < 0.7 else rng.randrange(VOCAB)
            history.append(token)
            penalties.accept(token)
        logits = [_f32(rng.gauss(0, 8)) for _ in range(VOCAB)]
        logits[:4] = [0.0, -0.0, _f32(3e38), _f32(-3e38)]
        native = (ctypes.c_float * VOCAB)(*logits)
        saved = penalties.apply(native)
        window = history[-last_n:]
        expected = [_formula(v, window.count(t), repeat, frequency, presence) if t in window else v
                    for t, v in enumerate(logits)]
        got = [struct.pack("<f", v) for v in native]
        assert got == [struct.pack("<f", v) for v in expected], (last_n, repeat, frequency, presence)
        by_llama_cpp = _llama_cpp_penalized(logits, history, last_n, repeat, frequency, presence, vocab=VOCAB)
        assert got == [struct.pack("<f", v) for v in by_llama_cpp]
        assert sorted(saved) == sorted((t, logits[t]) for t in set(window))
