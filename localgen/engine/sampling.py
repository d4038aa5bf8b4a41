"""llama.cpp's native sampler chain, built from SamplingParams."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence

from localgen.engine.native import lc, native_errors
from localgen.errors import UsageError
from localgen.params import Grammar, SamplingParams

LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp: draw a random seed
SCHEMA_CONVERTER_HINT = ("llama-cpp-python's converter wrote a grammar llama.cpp rejects: simplify the schema "
                         '(quotes or backslashes in enum values and property names are a known limit)')


def build_sampler(vocab: lc.llama_vocab_p, n_vocab: int, sampling: SamplingParams,
                  prompt: Sequence[int], n_ctx: int) -> lc.llama_sampler_p:
    """The sampler chain for these settings, its repetition penalty primed with the prompt's last tokens (all of the
    context's for repeat_last_n -1, as in llama.cpp).

    A grammar comes first: every later sampler sees only the tokens it allows (end of generation included only
    where the grammar is complete). Each sampler joins the chain as soon as it exists, and the chain is freed
    if building it fails part way, so no native sampler is lost.
    """
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    add = lc.llama_sampler_chain_add
    try:
        if sampling.grammar is not None:
            add(chain, _grammar_sampler(vocab, sampling.grammar))  # the chain owns each sampler once added
        penalized = (sampling.repeat_penalty, sampling.frequency_penalty, sampling.presence_penalty) != (1.0, 0, 0)
        last_n = n_ctx if sampling.repeat_last_n < 0 else sampling.repeat_last_n
        if penalized and last_n > 0:
            penalties = lc.llama_sampler_init_penalties(n_vocab, last_n, sampling.repeat_penalty,
                                                        sampling.frequency_penalty, sampling.presence_penalty)
            add(chain, penalties)
            for token in prompt[-last_n:]:
                lc.llama_sampler_accept(penalties, token)  # primed alone: the prompt is no text the grammar parses
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
    except BaseException:  # a bad grammar, or Ctrl-C / SIGTERM part way
        lc.llama_sampler_free(chain)
        raise
    return chain


def _grammar_sampler(vocab: lc.llama_vocab_p, grammar: Grammar) -> lc.llama_sampler_p:
    """llama.cpp's grammar sampler for GBNF text with a `root` rule; a UsageError with llama.cpp's reason when it
    cannot parse it (the parser prints some reasons on stderr and logs others)."""
    with native_errors() as logged, _captured_stderr() as printed:
        sampler = lc.llama_sampler_init_grammar(vocab, grammar.text.encode("utf-8"), b"root")
    if not sampler:
        text = b"".join(printed).decode("utf-8", "replace")
        lines = [line.strip() for line in [*text.splitlines(), *logged] if line.strip()]
        reason = lines[0].removeprefix("parse: ").removeprefix("error parsing grammar: ") if lines else ""
        from_schema = grammar.source == "--json-schema"
        what = "the grammar made from the JSON schema" if from_schema else f"{grammar.source}: the grammar"
        raise UsageError(f"{what} does not parse{': ' + reason[:200] if reason else ''}",
                         hint=SCHEMA_CONVERTER_HINT if from_schema else
                         'check its GBNF syntax; it needs a root rule, e.g. root ::= "yes" | "no"')
    return sampler


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[bytes]]:
    """What native code writes to file descriptor 2 meanwhile (llama.cpp prints grammar errors there), once done.

    The whole process's fd 2 is redirected, so this is only for a short native call.
    """
    sys.stderr.flush()
    written: list[bytes] = []
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            yield written
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            written.append(captured.read())
