"""A context that holds the prompt once the loaded model has counted it.

The plan sizes the context from a guess at the prompt's tokens (fit.prompt_context, about 3 bytes a token), which
text of numbers outgrows (many tokenizers spend a token on each digit). Where the context planned cannot hold the
tokens the model counts, but a larger one the model was trained for and memory allows can, the model is loaded
again with that one; where none can, the model stays as it was, and the prompt is refused as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from localgen.errors import LocalgenError
from localgen.fit import counted_context, fewest_tokens, guessed_tokens, text_bytes

if TYPE_CHECKING:
    from localgen.runner import LoadedModel, ModelOptions


def counted_tokens(loaded: LoadedModel, texts: Sequence[str | None], most: int | None = None) -> int:
    """The tokens the loaded model's tokenizer makes of the texts, each alone (None counts nothing); once past most
    (when given), the count so far, the texts after it left uncounted."""
    tokens = 0
    for text in texts:
        if text:
            tokens += len(loaded.engine.tokenize(text, add_special=False, parse_special=False))
            if most is not None and tokens > most:
                break
    return tokens


def wider_options(loaded: LoadedModel, options: ModelOptions, texts: Sequence[str | None],
                  answer_tokens: int | None) -> tuple[ModelOptions, int, int] | None:
    """The options to load the model again with, the tokens counted and the context planned for them, where the
    texts take more tokens than guessed and the context loaded cannot hold them with their answer but a larger one
    can; None where the context holds them, --ctx-size was given (or a resumed conversation's), or no context the
    model and memory allow would hold them."""
    from localgen.gguf_split import validate_split
    from localgen.hardware import probe_hardware
    from localgen.runner import plan_load

    n_ctx, size = loaded.engine.n_ctx, text_bytes(*texts)
    if options.ctx_size is not None or counted_context(size + len(texts), answer_tokens) <= n_ctx:
        return None  # asked for; or held however it tokenizes (no tokenizer makes more tokens than bytes, and a start)
    most = loaded.engine.n_ctx_train or None  # no context holds more: the model's own maximum is said as before
    if most is not None and fewest_tokens(size, loaded.longest_token) + 1 > most:
        return None  # by its size alone: a tokenizer spends seconds on what no context holds
    tokens = counted_tokens(loaded, texts, most)
    if most is not None and tokens + 1 > most:
        return None
    if tokens <= guessed_tokens(size) or counted_context(tokens, answer_tokens) <= n_ctx:
        return None
    wider = replace(options, min_ctx=counted_context(tokens, answer_tokens))
    hw = probe_hardware()
    if loaded.plan is not None:  # the loaded model is freed before the other loads
        hw = hw.after_freeing(loaded.plan.estimate.private_ram_bytes, loaded.plan.estimate.vram_bytes)
    try:
        header, _ = validate_split(loaded.resolved.path)
        plan = plan_load(wider, loaded.resolved, header, hw)[1]
    except LocalgenError:
        return None
    return (wider, tokens, plan.n_ctx) if plan.n_ctx > max(n_ctx, tokens) else None


def with_room_for_the_prompt(loaded: LoadedModel, options: ModelOptions, texts: Sequence[str | None],
                             answer_tokens: int | None, load: Callable[[ModelOptions], LoadedModel],
                             say: Callable[[str], None]) -> tuple[LoadedModel, ModelOptions]:
    """The model loaded again by load, with a context that holds the texts' tokens (said), where the one loaded
    cannot and another can (wider_options); else the model and options as they were."""
    wider = wider_options(loaded, options, texts, answer_tokens)
    if wider is None:
        return loaded, options
    wider_opts, tokens, n_ctx = wider
    say(f"localgen: the input takes {tokens:,} tokens, more than its size suggested and the context of "
        f"{loaded.engine.n_ctx:,} holds: loading the model again with a context of {n_ctx:,}")
    loaded.close()
    return load(wider_opts), wider_opts
