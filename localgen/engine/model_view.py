"""What Engine shows of its loaded model: the fixed figures read at load, and the vocabulary as text and ids."""

from __future__ import annotations

from collections.abc import Sequence

from localgen.engine.facts import ModelFacts
from localgen.engine.native import lc, llama_cpp_version
from localgen.engine.sampling import grammar_sampler
from localgen.engine.vocab import Vocab
from localgen.errors import LocalgenError
from localgen.params import Grammar


def _not_loaded() -> LocalgenError:
    """The error of a call that needs what close() freed."""
    return LocalgenError("no model is loaded", hint="load one again (/model NAME in chat)")


class ModelView:
    """The base of Engine (through Decoding): its model's figures and tokens, read through the facts and vocabulary
    Engine loads."""

    _model: lc.llama_model_p | None
    _ctx: lc.llama_context_p | None
    _facts: ModelFacts
    _vocab: Vocab

    def _check_open(self) -> None:
        """Refuse to touch native memory after close() (the vocabulary needs the model alone: a context being
        replaced by a larger one on another thread is no reason to refuse it)."""
        if not self.is_open:
            raise _not_loaded()

    def _check_context(self) -> None:
        """Refuse to touch the llama.cpp context where there is none: after close(), and while Engine replaces it
        with a larger one (the KV cache still holds the freed one until the new one is made)."""
        self._check_open()
        if self._ctx is None:
            raise LocalgenError("the model's context is being replaced by a larger one",
                                hint="try again once the new one is made")

    @property
    def n_ctx(self) -> int:
        """The usable context size: what was asked for, within what llama.cpp allocated."""
        return self._facts.n_ctx

    @property
    def n_batch(self) -> int:
        """The prefill chunk size llama.cpp accepts (it caps n_batch at the context size)."""
        return self._facts.n_batch

    @property
    def n_ubatch(self) -> int:
        """The physical batch size: how many tokens one graph evaluation takes."""
        return self._facts.n_ubatch

    @property
    def n_vocab(self) -> int:
        """The number of tokens in the vocabulary."""
        return self._facts.n_vocab

    @property
    def n_ctx_train(self) -> int:
        """The context length the model was trained with."""
        return self._facts.n_ctx_train

    def chat_template(self) -> str | None:
        """The model's own Jinja chat template, if it has one."""
        return self._facts.chat_template

    @property
    def bos_token(self) -> int:
        """The BOS token id (-1 when the model has none)."""
        return self._facts.bos_token

    @property
    def backend_version(self) -> str:
        """The llama.cpp binding's name and version."""
        return f"llama-cpp-python {llama_cpp_version()}"

    @property
    def bos_text(self) -> str:
        """The BOS token as text ('' when the model has none)."""
        return self._facts.bos_text

    @property
    def eos_text(self) -> str:
        """The EOS token as text ('' when the model has none)."""
        return self._facts.eos_text

    @property
    def adds_bos(self) -> bool:
        """True when the model expects a BOS token at the start of a prompt."""
        return self._facts.adds_bos

    @property
    def is_open(self) -> bool:
        """False once close() has freed the model; true while Engine replaces its context with a larger one."""
        return self._model is not None

    # --- tokens --------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        """Turn text into token ids (special tokens such as <|im_start|> parsed when asked)."""
        self._check_open()
        return self._vocab.tokenize(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Turn token ids back into text (not used per token while decoding)."""
        self._check_open()
        return self._vocab.detokenize(tokens)

    def token_text(self, token: int) -> str:
        """The text of a (special) token, e.g. the BOS token's '<s>' ('' for no token, even after close())."""
        if token >= 0:
            self._check_open()
        return self._vocab.token_text(token)

    def control_among(self, candidates: Sequence[tuple[int, str]]) -> frozenset[str]:
        """The texts of the candidate (id, text) tokens that the loaded vocabulary treats as control tokens."""
        self._check_open()
        return self._vocab.control_among(candidates)

    def special_tokens(self) -> tuple[tuple[bytes, bool], ...]:
        """The texts of the tokens the tokenizer finds in text first, and whether each takes the whitespace before it
        (see Vocab.special_tokens)."""
        self._check_open()
        return self._vocab.special_tokens()

    def appends_after_text(self) -> bool:
        """Whether tokenizing with add_special puts a token after the text (an EOS), not only a BOS before it."""
        self._check_open()
        return self._vocab.appends_after_text()

    def check_grammar(self, grammar: Grammar) -> None:
        """Refuse a grammar as generate() refuses it for this vocabulary (a UsageError), without generating."""
        self._check_open()
        lc.llama_sampler_free(grammar_sampler(self._vocab.pointer, grammar))
