"""llama.cpp's native sampler chain, built from SamplingParams."""

from __future__ import annotations

from collections.abc import Sequence

from localgen.engine.native import lc
from localgen.params import SamplingParams

LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp: draw a random seed


def build_sampler(n_vocab: int, sampling: SamplingParams, prompt: Sequence[int]) -> lc.llama_sampler_p:
    """The sampler chain for these settings, its repetition penalty primed with the prompt's last tokens."""
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    add = lc.llama_sampler_chain_add
    if sampling.repeat_penalty != 1.0 and sampling.repeat_last_n != 0:
        add(chain, lc.llama_sampler_init_penalties(n_vocab, sampling.repeat_last_n, sampling.repeat_penalty, 0.0, 0.0))
    if sampling.temperature <= 0:
        add(chain, lc.llama_sampler_init_greedy())
    else:
        if sampling.top_k > 0:
            add(chain, lc.llama_sampler_init_top_k(sampling.top_k))
        add(chain, lc.llama_sampler_init_top_p(sampling.top_p, 1))
        add(chain, lc.llama_sampler_init_min_p(sampling.min_p, 1))
        add(chain, lc.llama_sampler_init_temp(sampling.temperature))
        seed = LLAMA_DEFAULT_SEED if sampling.seed is None else sampling.seed & 0xFFFFFFFF
        add(chain, lc.llama_sampler_init_dist(seed))
    for token in prompt[-sampling.repeat_last_n:] if sampling.repeat_last_n > 0 else ():
        lc.llama_sampler_accept(chain, token)
    return chain
