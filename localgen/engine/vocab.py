"""A loaded model's vocabulary: text to token ids and back, each token's bytes read from llama.cpp once."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from localgen.engine.native import lc

PIECE_BUFFER_BYTES = 256


class Vocab:
    """llama.cpp's vocabulary of one model; valid only while the model is loaded (Engine checks before each call)."""

    def __init__(self, pointer: lc.llama_vocab_p) -> None:
        self.pointer = pointer  # the sampler and the decode loop's end-of-generation check take it as it is
        self.n_tokens = int(lc.llama_vocab_n_tokens(pointer))
        self._pieces: dict[int, bytes] = {}
        self._piece_buf = ctypes.create_string_buffer(PIECE_BUFFER_BYTES)

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        """Turn text into token ids (special tokens such as <|im_start|> parsed when asked)."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        tokens = (lc.llama_token * capacity)()
        count = lc.llama_tokenize(self.pointer, data, len(data), tokens, capacity, add_special, parse_special)
        if count < 0:
            capacity = -count
            tokens = (lc.llama_token * capacity)()
            count = lc.llama_tokenize(self.pointer, data, len(data), tokens, capacity, add_special,
                                      parse_special)
        return list(tokens[:count])

    def piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token decodes to (cached per token; the decode loop calls this for each one)."""
        key = token if not special else -token - 1
        piece = self._pieces.get(key)
        if piece is None:
            n = lc.llama_token_to_piece(self.pointer, token, self._piece_buf, PIECE_BUFFER_BYTES, 0, special)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = lc.llama_token_to_piece(self.pointer, token, buf, -n, 0, special)
                piece = buf.raw[:n]
            else:
                piece = self._piece_buf.raw[:n]
            self._pieces[key] = piece
        return piece

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Turn token ids back into text."""
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """The text of a (special) token, e.g. the BOS token's '<s>'; '' for no token (a negative id)."""
        if token < 0:
            return ""
        return self.piece(token, special=True).decode("utf-8", errors="replace")

    def control_among(self, candidates: Sequence[tuple[int, str]]) -> frozenset[str]:
        """The texts of the candidate (id, text) tokens that this vocabulary treats as control tokens."""
        special = lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_UNKNOWN
        return frozenset(text for token, text in candidates
                         if 0 <= token < self.n_tokens and lc.llama_vocab_get_attr(self.pointer, token) & special)

    def special_tokens(self) -> tuple[tuple[bytes, bool], ...]:
        """Each token llama.cpp finds in text before tokenizing the rest (control, user-defined, unknown; with the
        attributes it sets at load): its text and whether it takes the whitespace before it (lstrip)."""
        special = lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_USER_DEFINED | lc.LLAMA_TOKEN_ATTR_UNKNOWN
        found = []
        for token in range(self.n_tokens):
            attributes = lc.llama_vocab_get_attr(self.pointer, token)
            if attributes & special:
                found.append((bytes(lc.llama_vocab_get_text(self.pointer, token)),
                              bool(attributes & lc.LLAMA_TOKEN_ATTR_LSTRIP)))
        return tuple(found)

    def appends_after_text(self) -> bool:
        """Whether tokenizing with add_special puts a token after the text (an EOS, WordPiece's SEP)."""
        return (lc.llama_vocab_type(self.pointer) == lc.LLAMA_VOCAB_TYPE_WPM
                or bool(lc.llama_vocab_get_add_eos(self.pointer)))
