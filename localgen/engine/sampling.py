"""llama.cpp's native sampler chain, built from SamplingParams."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import replace

from localgen.engine.native import lc, native_errors
from localgen.engine.reasoning_gate import ReasoningGate
from localgen.errors import UsageError
from localgen.grammar import AFTER_REASONING_ROOT, after_reasoning, token_id, token_references, worded_parse_error
from localgen.params import Grammar, SamplingParams
from localgen.thinking import CLOSE_TAG

LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp: draw a random seed
PENALTY_WINDOW_IN_PYTHON = 512  # RepetitionPenalties for windows up to this; llama.cpp's sampler above (its cost
# is fixed, about 230 us for 49,152 tokens, while a Python loop over a window's 1,000 distinct tokens costs as much)
SCHEMA_CONVERTER_HINT = "the grammar written for this schema is one llama.cpp rejects: simplify the schema"


class RepetitionPenalties:
    """llama.cpp's penalties sampler (repeat, frequency and presence penalties on the tokens among the last n), with
    the same float32 arithmetic, applied to the few logits it changes: llama.cpp's looks up every token of the
    vocabulary in a hash map, a fifth of a millisecond per token for a 49,152-token vocabulary."""

    def __init__(self, last_n: int, repeat: float, frequency: float, presence: float) -> None:
        self._window: deque[int] = deque(maxlen=last_n)
        self._counts: Counter[int] = Counter()
        self._repeat, self._frequency, self._presence = _f32(repeat), _f32(frequency), _f32(presence)
        offsetting = bool(self._frequency or self._presence)
        self._offsets: dict[int, float] | None = {} if offsetting else None  # by count (_offset)

    def accept(self, token: int) -> None:
        """Count a token into the window, the oldest one leaving a full window (llama.cpp's ring buffer)."""
        window, counts = self._window, self._counts
        if len(window) == window.maxlen:
            oldest = window[0]
            if counts[oldest] == 1:
                del counts[oldest]
            else:
                counts[oldest] -= 1
        window.append(token)
        counts[token] += 1

    def apply(self, logits: ctypes.Array[ctypes.c_float]) -> list[tuple[int, float]]:
        """Penalize, in place, the logits of the tokens in the window; return each one's value before, to put back."""
        repeat, offsets = self._repeat, self._offsets
        saved = []
        for token, count in self._counts.items():
            logit = logits[token]
            saved.append((token, logit))
            # float32 products and quotients of float32 values, computed in double then rounded, are exact;
            # each value is rounded to float32 as it is stored, and read back so
            logits[token] = logit * repeat if logit <= 0 else logit / repeat
            if offsets is not None:
                offset = offsets.get(count)
                logits[token] -= self._offset(count) if offset is None else offset
        return saved

    def _offset(self, count: int) -> float:
        """What frequency and presence penalties take from the logit of a token seen count times, as float32 (kept
        per count: rounding through ctypes.c_float costs more than the rest of a token's penalty)."""
        assert self._offsets is not None
        offset = self._offsets[count] = _f32(_f32(count * self._frequency) + self._presence)
        return offset


def _f32(value: float) -> float:
    """value rounded to the nearest float32."""
    return ctypes.c_float(value).value


class Sampler:
    """One generation's sampler: llama.cpp's chain, and the repetition penalties localgen applies before it."""

    def __init__(self, chain: lc.llama_sampler_p, penalties: RepetitionPenalties | None,
                 gate: ReasoningGate | None = None, *, grammar: bool = False, trigger: int | None = None) -> None:
        self.chain = chain
        self._penalties = penalties
        self._gate = gate  # a grammar held back until the answer's </think> of several tokens
        self._grammar = grammar  # a grammar applies: first in the chain, or held by the gate
        self._trigger = trigger  # the </think> token a lazy grammar in the chain waits for, until it is sampled

    @property
    def cut(self) -> int | None:
        """Where the last token sampled ended the reasoning with text after its </think> that the grammar rejects
        (left out of the answer, the grammar applying from the next token): its bytes up to there; else None."""
        return None if self._gate is None else self._gate.cut

    def sample(self, ctx: lc.llama_context_p, index: int) -> int:
        """The token sampled from the logits of the batch's output at index (-1: the last), counted as accepted.

        The penalized logits are put back afterwards. An exception part way (a signal) can leave some penalized:
        Engine.generate then takes the context's logits as stale.
        """
        penalties = self._penalties
        if penalties is None:
            token = lc.llama_sampler_sample(self.chain, ctx, index)
            self._accepted(token)
            return token
        logits = lc.llama_get_logits_ith(ctx, index)
        saved = penalties.apply(logits)
        try:
            token = lc.llama_sampler_sample(self.chain, ctx, index)
        finally:
            for position, logit in saved:
                logits[position] = logit
        penalties.accept(token)
        self._accepted(token)
        return token

    def _accepted(self, token: int) -> None:
        """Note a token the chain accepted: one that starts a lazy grammar, or the gate's."""
        if token == self._trigger:
            self._trigger = None
        if self._gate is not None:
            self._gate.accept(self.chain, token)

    def grammar_complete(self, vocab: lc.llama_vocab_p) -> bool | None:
        """Whether the grammar could end the answer after the tokens sampled so far (it allows a token that ends the
        answer only where it is complete); False where it has not started (the reasoning before it never closed);
        None without a grammar, or without a token that ends answers to ask it of."""
        end = next((token for token in (lc.llama_vocab_eos(vocab), lc.llama_vocab_eot(vocab)) if token >= 0), None)
        if not self._grammar or end is None:
            return None
        if self._trigger is not None or (self._gate is not None and self._gate.grammar is not None):
            return False
        data = (lc.llama_token_data * 1)(lc.llama_token_data(end, 0.0, 0.0))
        candidates = lc.llama_token_data_array(data, 1, -1, False)
        lc.llama_sampler_apply(lc.llama_sampler_chain_get(self.chain, 0), ctypes.byref(candidates))
        return data[0].logit != float("-inf")

    def free(self) -> None:
        """Free the native chain, and a grammar still held back."""
        lc.llama_sampler_free(self.chain)
        if self._gate is not None:
            self._gate.free()


def build_sampler(vocab: lc.llama_vocab_p, sampling: SamplingParams, prompt: Sequence[int], n_ctx: int, *,
                  reasoning_open: bool = False) -> Sampler:
    """The sampler for these settings, its repetition penalties primed with the prompt's last tokens (all of the
    context's for repeat_last_n -1, as in llama.cpp): localgen's RepetitionPenalties for a window up to
    PENALTY_WINDOW_IN_PYTHON tokens, llama.cpp's penalties sampler for a larger one (the two agree bit for bit).

    A grammar comes first in the chain: every later sampler sees only the tokens it allows (end of generation
    included only where the grammar is complete); the penalties, applied before it, change no logit it rejects.
    Each sampler joins the chain as soon as it exists, and the chain is freed if building it fails part way, so no
    native sampler is lost. reasoning_open: the prompt opened a <think> block, and a grammar applies from its end.
    """
    penalties = None
    penalized = (sampling.repeat_penalty, sampling.frequency_penalty, sampling.presence_penalty) != (1.0, 0, 0)
    last_n = n_ctx if sampling.repeat_last_n < 0 else sampling.repeat_last_n
    if penalized and 0 < last_n <= PENALTY_WINDOW_IN_PYTHON:
        penalties = RepetitionPenalties(last_n, sampling.repeat_penalty, sampling.frequency_penalty,
                                        sampling.presence_penalty)
        for token in prompt[-last_n:]:
            penalties.accept(token)
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    add = lc.llama_sampler_chain_add
    gate = trigger = None
    try:
        if sampling.grammar is not None:
            grammar = grammar_sampler(vocab, sampling.grammar, reasoning_open=reasoning_open)
            waits = _waits_for_reasoning(vocab, sampling.grammar, reasoning_open)
            trigger = _close_token(vocab) if waits else None
            if waits and trigger is None:
                gate = ReasoningGate(vocab, grammar, sampling.grammar.text)  # joins the chain at </think>
            else:
                add(chain, grammar)  # the chain owns each sampler once added
        if penalized and last_n > PENALTY_WINDOW_IN_PYTHON:  # primed alone: the prompt is no text the grammar parses
            window = replace(sampling, repeat_last_n=last_n)
            add(chain, native_penalties(lc.llama_vocab_n_tokens(vocab), window, prompt))
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
        if gate is not None:
            gate.free()
        raise
    return Sampler(chain, penalties, gate, grammar=sampling.grammar is not None, trigger=trigger)


def native_penalties(n_vocab: int, sampling: SamplingParams, primed: Sequence[int]) -> lc.llama_sampler_p:
    """llama.cpp's own penalties sampler for these settings (a window of repeat_last_n tokens, at least 1), primed
    with the last of primed: what localgen's are checked and measured against."""
    last_n = max(1, sampling.repeat_last_n)
    sampler = lc.llama_sampler_init_penalties(n_vocab, last_n, sampling.repeat_penalty, sampling.frequency_penalty,
                                              sampling.presence_penalty)
    for token in primed[-last_n:]:
        lc.llama_sampler_accept(sampler, token)
    return sampler


def grammar_sampler(vocab: lc.llama_vocab_p | None, grammar: Grammar, *,
                    reasoning_open: bool = False) -> lc.llama_sampler_p:
    """llama.cpp's grammar sampler for GBNF text with a `root` rule; a UsageError with llama.cpp's reason when it
    cannot parse it (the parser prints some reasons on stderr and logs others), or names a token it cannot give.

    Without a vocabulary (None) the grammar is only parsed, and a token named by its text cannot be. reasoning_open:
    the prompt opened a <think> block, and the grammar applies once the answer writes its </think> (a lazy sampler,
    as llama.cpp's server makes for a template whose generation prompt forces thinking open), but where the grammar
    writes </think> itself: it spells the reasoning too, and applies from the start.
    """
    if vocab is not None:
        _refuse_tokens_never_given(vocab, grammar)
    with native_errors() as logged, _captured_stderr() as printed:
        sampler = _lazy_after_reasoning(vocab, grammar) if _waits_for_reasoning(vocab, grammar, reasoning_open) else \
            lc.llama_sampler_init_grammar(vocab, grammar.text.encode("utf-8"), b"root")
    if not sampler:
        text = b"".join(printed).decode("utf-8", "replace")
        lines = [line.strip() for line in [*text.splitlines(), *logged] if line.strip()]
        reason = worded_parse_error(lines[0].removeprefix("parse: ").removeprefix("error parsing grammar: ")
                                    if lines else "")
        from_schema = grammar.is_json_schema
        what = "the grammar made from the JSON schema" if from_schema else f"{grammar.source}: the grammar"
        raise UsageError(f"{what} does not parse{': ' + reason[:200] if reason else ''}",
                         hint=SCHEMA_CONVERTER_HINT if from_schema else
                         'check its GBNF syntax; it needs a root rule, e.g. root ::= "yes" | "no"')
    return sampler


def _waits_for_reasoning(vocab: lc.llama_vocab_p | None, grammar: Grammar, reasoning_open: bool) -> bool:
    """Whether the grammar applies from the </think> that ends the reasoning the prompt opened (not where it writes
    </think> itself: it spells the reasoning too)."""
    return reasoning_open and vocab is not None and CLOSE_TAG not in grammar.text


def _lazy_after_reasoning(vocab: lc.llama_vocab_p, grammar: Grammar) -> lc.llama_sampler_p:
    """A grammar sampler that lets text through untouched until the answer writes </think>, then applies the grammar
    to what follows it. Where </think> is one token, that token triggers it; else its text does, and ReasoningGate
    gives the sampler only the last few tokens, since llama.cpp matches a pattern against all the text so far."""
    text, root = after_reasoning(grammar.text).encode("utf-8"), AFTER_REASONING_ROOT.encode()
    close = _close_token(vocab)
    if close is not None:
        tokens = (lc.llama_token * 1)(close)
        return lc.llama_sampler_init_grammar_lazy_patterns(vocab, text, root, None, 0, tokens, 1)
    patterns = (ctypes.c_char_p * 1)(rb"[\s\S]*?(" + CLOSE_TAG.encode() + rb")[\s\S]*")  # read from the group on
    return lc.llama_sampler_init_grammar_lazy_patterns(vocab, text, root, patterns, 1, None, 0)


def _close_token(vocab: lc.llama_vocab_p) -> int | None:
    """The token that is </think> (a control token, or one piece of text), or None where it takes several."""
    end = CLOSE_TAG.encode()
    ids = (lc.llama_token * len(end))()
    count = lc.llama_tokenize(vocab, end, len(end), ids, len(end), False, True)
    return ids[0] if count == 1 else None


def _refuse_tokens_never_given(vocab: lc.llama_vocab_p, grammar: Grammar) -> None:
    """Refuse a grammar that names a token the sampler can never give: one beyond the vocabulary, one that ends
    the answer, or one with no text. Where such a token is all the grammar allows, llama.cpp aborts the process."""
    n_vocab = lc.llama_vocab_n_tokens(vocab)
    for body in token_references(grammar.text):
        token = _token_named(vocab, body)
        if token is None:
            continue  # not one token: llama.cpp's parser says so
        other_token = "name a token of the model's text"
        if token >= n_vocab:
            reason, hint = f"beyond the model's {n_vocab:,} tokens", other_token
        elif lc.llama_vocab_is_eog(vocab, token):
            reason = "which ends the answer, as the grammar's end does"
            hint = "end the root rule there instead: the answer may end wherever the grammar is complete"
        elif not _gives_text(vocab, token):
            reason, hint = "which gives no text", other_token
        else:
            continue
        raise UsageError(f"{grammar.source}: the grammar names the token <{body}>, {reason}, so the answer could "
                         "not go on there", hint=hint)


def _token_named(vocab: lc.llama_vocab_p, body: str) -> int | None:
    """The id a token reference's body names, as llama.cpp reads it ([5] is id 5); None if it is not one token."""
    numbered = token_id(body)
    if numbered is not None:
        return numbered
    data = f"<{body}>".encode()
    tokens = (lc.llama_token * 2)()
    count = lc.llama_tokenize(vocab, data, len(data), tokens, 2, False, True)
    return tokens[0] if count == 1 else None


def _gives_text(vocab: lc.llama_vocab_p, token: int) -> bool:
    """Whether a token has text as the grammar sampler sees it (special tokens spelled out); a negative count is
    text longer than the buffer."""
    buffer = ctypes.create_string_buffer(8)
    return lc.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True) != 0


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
