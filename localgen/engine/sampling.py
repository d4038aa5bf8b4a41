"""llama.cpp's native sampler chain, built from SamplingParams."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence

from localgen.engine.native import lc
from localgen.errors import UsageError
from localgen.params import SamplingParams

LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp: draw a random seed


def build_sampler(vocab: lc.llama_vocab_p, n_vocab: int, sampling: SamplingParams,
                  prompt: Sequence[int]) -> lc.llama_sampler_p:
    """The sampler chain for these settings, its repetition penalty primed with the prompt's last tokens.

    A grammar comes first: every later sampler sees only the tokens it allows (end of generation included only
    where the grammar is complete).
    """
    grammar = _grammar_sampler(vocab, sampling.grammar) if sampling.grammar is not None else None
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    add = lc.llama_sampler_chain_add
    if grammar is not None:
        add(chain, grammar)  # the chain owns it from here
    if sampling.repeat_penalty != 1.0 and sampling.repeat_last_n != 0:
        penalties = lc.llama_sampler_init_penalties(n_vocab, sampling.repeat_last_n, sampling.repeat_penalty, 0.0, 0.0)
        for token in prompt[-sampling.repeat_last_n:] if sampling.repeat_last_n > 0 else ():
            lc.llama_sampler_accept(penalties, token)  # primed alone: the prompt is no text the grammar parses
        add(chain, penalties)
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
    return chain


def _grammar_sampler(vocab: lc.llama_vocab_p, grammar: str) -> lc.llama_sampler_p:
    """llama.cpp's grammar sampler for GBNF text with a `root` rule; a UsageError when llama.cpp cannot parse it."""
    with _captured_stderr() as captured:
        sampler = lc.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    if not sampler:
        lines = [line.strip() for line in b"".join(captured).decode("utf-8", "replace").splitlines() if line.strip()]
        reason = lines[0].removeprefix("parse: ").removeprefix("error parsing grammar: ") if lines else ""
        raise UsageError(f"the grammar does not parse{': ' + reason if reason else ''}",
                         hint='check its GBNF syntax; it needs a root rule, e.g. root ::= "yes" | "no"')
    return sampler


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[bytes]]:
    """What native code writes to file descriptor 2 meanwhile (llama.cpp prints grammar errors there), once done."""
    sys.stderr.flush()
    written: list[bytes] = []
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield written
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            written.append(captured.read())
