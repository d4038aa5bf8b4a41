"""A grammar that applies from the </think> the answer writes, for a </think> of several tokens: its text is watched
in the last few tokens, so the work per token stays fixed however long the reasoning runs."""

from __future__ import annotations

import ctypes
from collections import deque

from localgen.engine.native import lc
from localgen.engine.vocab import Vocab
from localgen.signals import deferred_signals
from localgen.thinking import CLOSE_TAG

PIECE_BUFFER_BYTES = 256
_CLOSE = CLOSE_TAG.encode()


class ReasoningGate:
    """Holds a lazy grammar sampler (llama.cpp's, its pattern </think>) out of the chain until the last tokens spell
    </think>, then gives it just those tokens and puts it first in the chain: llama.cpp matches the pattern against
    all the text it was given after every token, which grows with the reasoning (quadratic work in all)."""

    def __init__(self, vocab: lc.llama_vocab_p, grammar: lc.llama_sampler_p, text: str) -> None:
        self.grammar: lc.llama_sampler_p | None = grammar  # owned here until it joins the chain
        self._vocab = vocab
        self._text = text  # the grammar's GBNF, its root rule `root`
        self._tail: deque[tuple[int, bytes]] = deque()  # the last tokens, enough of them to hold a </think>
        self._held = 0  # the bytes of the tokens in _tail
        self._buffer = ctypes.create_string_buffer(PIECE_BUFFER_BYTES)
        self.cut: int | None = None  # where the last token accepted ended the reasoning with text after its </think>
        # that the grammar rejects, left out of the answer: the token's bytes up to there, its only text

    def accept(self, chain: lc.llama_sampler_p, token: int) -> None:
        """Note a token the chain accepted; at the </think> it completes, start the grammar in the chain."""
        self.cut = None
        if self.grammar is None:
            return
        piece = self._piece(token)
        self._tail.append((token, piece))
        self._held += len(piece)
        if _CLOSE in b"".join(piece for _, piece in self._tail):
            self._start(chain)
            return
        while self._held - len(self._tail[0][1]) >= len(_CLOSE) - 1:  # the rest still holds all but its last byte
            self._held -= len(self._tail.popleft()[1])

    def free(self) -> None:
        """Free the grammar sampler if it never joined the chain."""
        if self.grammar is not None:
            lc.llama_sampler_free(self.grammar)
            self.grammar = None

    def _start(self, chain: lc.llama_sampler_p) -> None:
        """Give the grammar the tokens that spell </think> (it applies to their text from </think> on), then put it
        first in the chain, the chain's own samplers after it, each in its place."""
        grammar = self.grammar
        assert grammar is not None
        token, piece = self._tail[-1]
        joined = b"".join(piece for _, piece in self._tail)
        lead = len(piece) - (len(joined) - joined.find(_CLOSE) - len(_CLOSE))  # the token's bytes up to its </think>
        rejected = piece[lead:].strip(b" \t\n") and not self._starts_answer(token, piece[:lead], piece[lead:])
        if rejected:
            self.cut = lead
        else:
            for token, _ in self._tail:
                lc.llama_sampler_accept(grammar, token)
        with deferred_signals():  # each sampler removed is added back, none lost part way
            if rejected:  # llama.cpp would abort on the text it rejects: the grammar applies from the next token, and
                # that text is left out, so the answer is only what the grammar takes (llama-server fails the request)
                lc.llama_sampler_free(grammar)
                grammar = lc.llama_sampler_init_grammar(self._vocab, self._text.encode(), b"root")
            rest = [lc.llama_sampler_chain_remove(chain, 0) for _ in range(lc.llama_sampler_chain_n(chain))]
            lc.llama_sampler_chain_add(chain, grammar)
            self.grammar = None  # the chain owns it
            for sampler in rest:
                lc.llama_sampler_chain_add(chain, sampler)

    def _starts_answer(self, token: int, lead: bytes, after: bytes) -> bool:
        """Whether the grammar takes the text after </think> (after) in the token that ends it (lead: its bytes up to
        then), as llama.cpp reads it, from the </think> on: the token itself checked, with its lead spelled; where
        the lead is no UTF-8 a grammar can spell (a byte that starts no character, before the </think>), the text
        after it alone, as its own tokens; not where that is no UTF-8 either (llama.cpp would abort on it)."""
        try:
            spelled = "".join(f"\\U{ord(character):08X}" for character in lead.decode())
        except UnicodeDecodeError:
            return self._takes_text(after)
        return self._takes(f'ends-reasoning ::= "{spelled}" [ \\t\\n]* root', [token])

    def _takes_text(self, text: bytes) -> bool:
        """Whether the grammar takes text (UTF-8 whose tokens spell it back), after blank space, as an answer's
        start; not where it is none such."""
        try:
            tokens = Vocab(self._vocab).tokenize(text.decode(), add_special=False, parse_special=False)
        except UnicodeDecodeError:
            return False
        spelled = b"".join(self._piece(token) for token in tokens) == text
        return spelled and self._takes("ends-reasoning ::= [ \\t\\n]* root", tokens)

    def _takes(self, rule: str, tokens: list[int]) -> bool:
        """Whether the grammar with rule `ends-reasoning` as its root takes tokens, one after another (each checked
        before it is accepted, which llama.cpp would abort on where the grammar rejects it)."""
        check = f"{self._text}\n{rule}\n".encode()
        sampler = lc.llama_sampler_init_grammar(self._vocab, check, b"ends-reasoning")
        candidate = (lc.llama_token_data * 1)()
        array = lc.llama_token_data_array(candidate, 1, -1, False)
        try:
            for token in tokens:
                candidate[0], array.size = lc.llama_token_data(token, 0.0, 0.0), 1
                lc.llama_sampler_apply(sampler, ctypes.byref(array))
                if candidate[0].logit == float("-inf"):
                    return False
                lc.llama_sampler_accept(sampler, token)
        finally:
            lc.llama_sampler_free(sampler)
        return True

    def _piece(self, token: int) -> bytes:
        """A token's text as the grammar reads it (a control token's text spelled out)."""
        n = lc.llama_token_to_piece(self._vocab, token, self._buffer, PIECE_BUFFER_BYTES, 0, True)
        if n >= 0:
            return self._buffer.raw[:n]
        buffer = ctypes.create_string_buffer(-n)
        n = lc.llama_token_to_piece(self._vocab, token, buffer, -n, 0, True)
        return buffer.raw[:n]
