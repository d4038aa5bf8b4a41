"""The decode loop: sample, emit text, feed tokens back one at a time or as drafts verified in one batch."""

from __future__ import annotations

import codecs
import ctypes
import time
from collections.abc import Iterator, Sequence
from functools import partial

from localgen.engine.kv import KvCache
from localgen.engine.model_view import ModelView
from localgen.engine.native import lc
from localgen.engine.results import DecodeResult
from localgen.engine.sampling import Sampler
from localgen.engine.threads import ThreadGovernor
from localgen.engine.vocab import Vocab
from localgen.events import TextChunk
from localgen.params import GenerationLimits
from localgen.speculative import DRAFT_MAX, PromptLookup
from localgen.stopping import StopMatcher, TrailingBlank
from localgen.thinking import AnswerStops, prompt_opens_thinking

PROMPT_TAIL_TOKENS = 8  # enough of a prompt's end to tell whether its template opened a <think> block


class Decoding(ModelView):
    """Engine's base: the decode loop over the context, KV cache and batches Engine loads."""

    _kv: KvCache
    _vocab: Vocab
    _governor: ThreadGovernor | None
    _stop_requested: bool
    _cells: int
    _one_token: ctypes.Array[ctypes.c_int32]  # llama_token
    _one_batch: lc.llama_batch
    _draft_batch: lc.llama_batch | None

    def _make_room(self, tokens: int) -> None:
        """Let the KV cache hold this many tokens (Engine grows a context started small)."""
        raise NotImplementedError

    def _opens_thinking(self, prompt: Sequence[int]) -> bool:
        """Whether the prompt's template opened a <think> block at its end (a control token's text included)."""
        tail = b"".join(self._vocab.piece(token, special=True) for token in prompt[-PROMPT_TAIL_TOKENS:])
        return prompt_opens_thinking(tail.decode("utf-8", errors="replace"))

    def _decode(self, sampler: Sampler, limits: GenerationLimits, ignore_eog: bool, drafter: PromptLookup | None,
                *, spelled: bool = False, json_value: bool = False) -> Iterator[TextChunk | DecodeResult]:
        """The decode loop: sample, emit text, feed tokens back (drafts verified in one batch), until a stop; spelled:
        a control token (<|im_start|>) is its text, as llama.cpp's grammar sampler reads it (the answer it allowed);
        json_value: the grammar is a JSON schema's, and the blank space it allows after the value ends no answer."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        max_tokens = limits.max_tokens if limits.max_tokens is not None else -1
        n_ctx = self.n_ctx
        vocab, kv, is_eog = self._vocab.pointer, self._kv.tokens, lc.llama_vocab_is_eog
        piece = partial(self._vocab.piece, special=True) if spelled else self._vocab.piece
        stops = AnswerStops(limits.stop, inside=self._opens_thinking(kv)) \
            if limits.stops_in_answer_only and limits.stop else StopMatcher(limits.stop)
        blank = TrailingBlank(on=json_value)
        parts: list[str] = []
        generated = 0
        finish = ""
        out = [sampler.sample(self._ctx, -1)]
        if self._governor is not None:
            self._governor.start()
        first_token_at = last_token_at = time.perf_counter()
        while True:
            for index, token in enumerate(out):
                generated += 1
                if not ignore_eog and is_eog(vocab, token):
                    finish = "stop"
                else:
                    data = piece(token)
                    if index == len(out) - 1 and sampler.cut is not None:  # text after </think> the grammar rejects
                        data = data[:sampler.cut]
                    text = blank.feed(stops.feed(decoder.decode(data)))
                    if text:
                        parts.append(text)
                        yield TextChunk(text)
                    if stops.matched is not None:
                        finish = "stop"
                    elif generated == max_tokens:
                        finish = "length"
                if finish:
                    self._kv.drop_last(len(out) - 1 - index)
                    break
            if finish:
                break
            if self._stop_requested:
                finish = "interrupted"
                break
            if len(kv) >= n_ctx:
                finish = "context"
                break
            if len(kv) + DRAFT_MAX + 1 > self._cells:  # room for a verify batch, drafting or not
                self._make_room(len(kv) + DRAFT_MAX + 1)
            if drafter is None:
                out = self._step(sampler, out[-1])
            else:
                remaining = max_tokens - generated if max_tokens > 0 else DRAFT_MAX + 1
                out = self._speculative_step(sampler, out, drafter, min(remaining, n_ctx - len(kv)) - 1)
            last_token_at = time.perf_counter()
        tail = ""
        if stops.matched is None and finish == "stop":  # the model ended inside a character: U+FFFD, as bad bytes
            tail = stops.feed(decoder.decode(b"", final=True))  # (one a limit or Ctrl-C cut short is dropped)
        tail += stops.flush() if stops.matched is None else ""  # held back: no stop string came, or one does now
        finish = "stop" if stops.matched is not None and finish != "interrupted" else finish  # Ctrl-C stays said
        stop_string = stops.matched if finish == "stop" else None  # a Ctrl-C's answer names none
        complete = sampler.grammar_complete(vocab) if stop_string is None else None  # a stop string cut its text
        tail = blank.feed(tail) + ("" if complete and stops.matched is None else blank.flush())  # a value's end
        if tail:
            parts.append(tail)
            yield TextChunk(tail)
        yield DecodeResult("".join(parts), finish, generated, first_token_at, last_token_at, stop_string, complete)

    def _step(self, sampler: Sampler, token: int) -> list[int]:
        """Feed one token to the model and sample the next."""
        self._one_token[0] = token
        if self._governor is None:
            self._kv.decode(self._one_batch)
        else:
            self._governor.one_token_at(len(self._kv))
            began = time.perf_counter()
            self._kv.decode(self._one_batch)
            self._governor.step_done(time.perf_counter() - began)
        self._kv.tokens.append(token)
        return [sampler.sample(self._ctx, -1)]

    def _speculative_step(self, sampler: Sampler, out: list[int], drafter: PromptLookup,
                          limit: int) -> list[int]:
        """Feed the last token plus drafted guesses in one batch; return the sampled tokens the model agrees on."""
        drafter.extend(out)
        token = out[-1]
        drafts = drafter.draft(min(limit, DRAFT_MAX)) if limit > 0 else []
        started = time.perf_counter()
        if not drafts:
            out = self._step(sampler, token)
            drafter.observe(1, time.perf_counter() - started)
            return out
        sampled = self._kv.verify(self._draft_batch, sampler, token, drafts)
        drafter.observe(len(drafts) + 1, time.perf_counter() - started)
        drafter.record(len(drafts), len(sampled) - 1)
        return sampled

