"""A loaded model's and context's fixed figures, read once at load and readable after the model is freed."""

from __future__ import annotations

from dataclasses import dataclass

from localgen.engine.native import lc
from localgen.engine.vocab import Vocab
from localgen.errors import ContextOverflowError, beyond_the_model


@dataclass(frozen=True)
class ModelFacts:
    """The loaded model's and context's fixed figures (see Engine's properties)."""

    n_ctx: int
    n_batch: int
    n_ubatch: int
    n_vocab: int
    n_ctx_train: int
    bos_token: int
    bos_text: str
    eos_text: str
    adds_bos: bool
    chat_template: str | None
    rolls_back: bool  # the KV memory can drop a tail of tokens (not so for recurrent and hybrid models)

    def check_fits(self, n_prompt: int, made_of: str = "") -> None:
        """Raise ContextOverflowError when a prompt leaves no room to generate (made_of: what it holds, named after its
        tokens where given: 'with -f a.txt and the prompt')."""
        if n_prompt + 1 > self.n_ctx:
            if self.n_ctx_train > 0 and (self.n_ctx >= self.n_ctx_train or n_prompt + 1 > self.n_ctx_train):
                raise beyond_the_model(n_prompt, self.n_ctx_train, made_of)
            raise ContextOverflowError(
                f"the prompt is {n_prompt:,} tokens{f' {made_of},' if made_of else ''} but the context holds "
                f"{self.n_ctx:,}"
                + (", which leaves no room for an answer" if n_prompt <= self.n_ctx else ""),
                hint=f"raise --ctx-size past {n_prompt:,} (the model was trained for {self.n_ctx_train:,}) or shorten "
                "the input",
            )


def read_facts(model: lc.llama_model_p, ctx: lc.llama_context_p, vocab: Vocab, n_ctx: int, *,
               whole: bool) -> ModelFacts:
    """What the loaded model and its context are; n_ctx is the context asked for, whole whether ctx has it all
    (a KV cache started small is not read for the context's size)."""
    template = lc.llama_model_chat_template(model, None)
    allocated = int(lc.llama_n_ctx(ctx)) if whole else n_ctx
    return ModelFacts(
        n_ctx=min(n_ctx, allocated),
        n_batch=int(lc.llama_n_batch(ctx)),
        n_ubatch=int(lc.llama_n_ubatch(ctx)),
        n_vocab=vocab.n_tokens,
        n_ctx_train=int(lc.llama_model_n_ctx_train(model)),
        bos_token=int(lc.llama_vocab_bos(vocab.pointer)),
        bos_text=vocab.token_text(lc.llama_vocab_bos(vocab.pointer)),
        eos_text=vocab.token_text(lc.llama_vocab_eos(vocab.pointer)),
        adds_bos=bool(lc.llama_vocab_get_add_bos(vocab.pointer)),
        chat_template=template.decode("utf-8", errors="replace") if template else None,
        rolls_back=not (lc.llama_model_is_recurrent(model) or lc.llama_model_is_hybrid(model)),
    )
