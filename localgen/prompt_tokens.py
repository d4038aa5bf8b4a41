"""A long chat prompt's tokens that reuse those of the prompts before it: the text is tokenized in pieces, each from
a special token at whose every occurrence llama.cpp's tokenizer starts over, and a piece seen in a recent prompt keeps
its tokens; the result is, token for token, what tokenizing the whole text gives."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from localgen.chat import PromptFormat
    from localgen.engine import Engine

KEPT_CONTEXTS = 2  # the pieces kept add up to at most twice the context: the chat's and what it is edited to
_C_SPACE = b" \t\n\v\f\r"  # what llama.cpp's lstrip and rstrip take (C's isspace)
Piece = tuple[bool, str]  # a piece of a text, and whether it is the first and adds the special tokens


class Tokenizer(Protocol):
    """What turns text into tokens: an Engine, or a ReusingTokenizer in front of one."""

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        """Token ids of text, as Engine.tokenize."""
        ...


def split_tokens(specials: Sequence[tuple[bytes, bool]], candidates: frozenset[str]) -> frozenset[str]:
    """The candidates that llama.cpp's tokenizer, given specials (each special token's text and lstrip), reads as
    their token at every occurrence and tokenizes apart from the text before and after, whatever it is."""
    return frozenset(text for text in candidates
                     if any(special == text.encode() and not lstrip for special, lstrip in specials)
                     and _starts_over_at(text.encode(), specials))


def _starts_over_at(token: bytes, specials: Sequence[tuple[bytes, bool]]) -> bool:
    """Whether a special token's start is a fragment boundary wherever it occurs: no whitespace at its edges (that
    the strips around it could take), no two of its occurrences overlapping, no special token found before it (one
    as long or longer) running into its start, none starting with it that takes the whitespace before it."""
    if not token or token[0] in _C_SPACE or token[-1] in _C_SPACE:
        return False
    if any(token[shift:] == token[:-shift] for shift in range(1, len(token))):
        return False
    for other, lstrip in specials:
        if other == token or len(other) < len(token):
            continue
        if lstrip and other.startswith(token):
            return False
        if token[:1] in other[1:] and any(other[shift:].startswith(token) or token.startswith(other[shift:])
                                          for shift in range(1, len(other))):
            return False
    return True


class ReusingTokenizer:
    """Tokenizes one model's rendered prompts (PromptFormat.prompt's tokenizer), keeping the latest pieces' tokens,
    up to KEPT_CONTEXTS contexts of them. Safe to call from two threads (the chat's, and its prefill while typing)."""

    def __init__(self, engine: Engine, prompt_format: PromptFormat) -> None:
        self.engine = engine
        self.prompt_format = prompt_format
        self._split: re.Pattern[str] | None = None
        self._splits_known = False
        self._chars_whole = 0  # characters tokenized whole so far, while the split tokens are not known
        self._appends_after = True
        self._pieces: OrderedDict[Piece, tuple[int, ...]] = OrderedDict()  # the least recently used first
        self._kept_tokens = 0
        self._lock = threading.Lock()

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        """Token ids of text, exactly as engine.tokenize gives them."""
        split = self._split_pattern(len(text)) if parse_special else None
        if split is None or (add_special and self._appends_after):
            return self.engine.tokenize(text, add_special=add_special, parse_special=parse_special)
        starts = [0, *(found.start() for found in split.finditer(text) if found.start())]
        pieces = [(add_special and not start, text[start:end])
                  for start, end in zip(starts, [*starts[1:], len(text)], strict=True)]
        with self._lock:
            known = {piece: self._pieces[piece] for piece in pieces if piece in self._pieces}
        for piece in pieces:
            if piece not in known:
                known[piece] = tuple(self.engine.tokenize(piece[1], add_special=piece[0], parse_special=True))
        self._keep(known)
        return [token for piece in pieces for token in known[piece]]

    def _keep(self, used: dict[Piece, tuple[int, ...]]) -> None:
        """Keep the pieces just used as the latest, letting go of the least recently used beyond the limit."""
        with self._lock:
            for piece, tokens in used.items():
                if piece in self._pieces:
                    self._pieces.move_to_end(piece)
                else:
                    self._pieces[piece] = tokens
                    self._kept_tokens += len(tokens)
            while self._kept_tokens > KEPT_CONTEXTS * self.engine.n_ctx and len(self._pieces) > len(used):
                self._kept_tokens -= len(self._pieces.popitem(last=False)[1])

    def _split_pattern(self, chars: int) -> re.Pattern[str] | None:
        """The pattern of the tokens a text of chars characters is split at: those the chat template writes (its BOS
        and EOS included) that start a fragment wherever they occur; None where there are none, or while they are
        not worth finding. Finding them reads every token of the vocabulary (0.35 us each), about what tokenizing as
        many characters takes: a chat finds them once its texts add up to that many, never where they stay short."""
        with self._lock:  # the chat's thread and the typing's: one of them reads the vocabulary
            return self._split_pattern_held(chars)

    def _split_pattern_held(self, chars: int) -> re.Pattern[str] | None:
        """_split_pattern's work, with the lock held."""
        if not self._splits_known:
            self._chars_whole += chars
            if self._chars_whole < self.engine.n_vocab:
                return None
            template = self.prompt_format.template or ""
            candidates = frozenset(text for text in self.prompt_format.control_tokens if text in template)
            written = candidates | ({self.prompt_format.bos_token, self.prompt_format.eos_token} - {""})
            texts = split_tokens(self.engine.special_tokens(), written)
            self._appends_after = self.engine.appends_after_text()
            self._split = re.compile("|".join(map(re.escape, sorted(texts, key=len, reverse=True)))) if texts else None
            self._splits_known = True
        return self._split


def reusing_tokenizer(current: ReusingTokenizer | None, engine: Engine,
                      prompt_format: PromptFormat) -> ReusingTokenizer:
    """current where it tokenizes for engine and prompt_format, else a new one that does."""
    if current is not None and current.engine is engine and current.prompt_format is prompt_format:
        return current
    return ReusingTokenizer(engine, prompt_format)
