"""A context that holds the prompt once the loaded model has counted it.

The plan sizes the context from a guess at the prompt's tokens (fit.prompt_context, about 3 bytes a token), which
text of numbers outgrows (many tokenizers spend a token on each digit). Where the context planned cannot hold the
tokens the model counts, but a larger one the model was trained for and memory allows can, the model is loaded
again with that one; where none can, the model stays as it was, and the prompt is refused as before. Where a token
limit was given and the context loaded cannot hold the prompt with that many tokens of answer, that is said before
the prompt is computed, with the --ctx-size that holds both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from localgen.errors import ContextOverflowError, LocalgenError
from localgen.fit import counted_context, fewest_tokens, guessed_tokens, text_bytes
from localgen.units import counted

if TYPE_CHECKING:
    from localgen.engine import Engine
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


def answer_context(prompt_tokens: int, answer_tokens: int) -> int:
    """The context a prompt of prompt_tokens needs for an answer of answer_tokens: the last token is sampled, never
    computed in it."""
    return prompt_tokens + answer_tokens - 1


def check_answer_room(loaded: LoadedModel, tokens: int, answer_tokens: int | None, *, limit_source: str,
                      made_of: str = "") -> None:
    """Refuse a prompt of tokens that leaves the loaded context no room for an answer, as the answer would be (naming
    made_of), its hint giving the --ctx-size that holds the prompt and the answer_tokens asked for (limit_source:
    where that limit came from), where a limit was given and a context this model takes holds more than the loaded
    one: run's refusal and --print-prompt's are one."""
    engine = loaded.engine
    try:
        engine.check_fits(tokens, made_of)
    except ContextOverflowError as exc:
        if answer_tokens is None:
            raise
        size, room = _larger_context(tokens, answer_tokens, engine.n_ctx_train)
        if tokens + 1 > size or engine.n_ctx >= size:
            raise  # no context this model takes holds the prompt: its hint says to shorten it
        asked = f"the {counted(answer_tokens, 'token')} asked for ({limit_source})"
        larger = f"to {size} or more, which holds the prompt and {asked}" if room == answer_tokens else \
            f"to {size}, the most this model takes, which leaves room for {room:,} of {asked}"
        raise exc.with_hint(f"raise --ctx-size {larger}, or shorten the input") from None


def answer_room_warning(loaded: LoadedModel, tokens: int, answer_tokens: int | None, *, limit_source: str,
                        made_of: str = "", restart: Callable[[int], str] | None = None) -> str | None:
    """The warning for a prompt of tokens that leaves the loaded context room for fewer than the answer_tokens asked
    for (limit_source: where that limit came from): the tokens it has room for, and the --ctx-size that holds them
    all (restart, in a chat: the context of that size, and how the chat is started again with it); None where they
    fit, or no limit was given. A prompt that leaves no room at all is refused, as the answer would be
    (check_answer_room)."""
    if answer_tokens is None:
        return None
    check_answer_room(loaded, tokens, answer_tokens, limit_source=limit_source, made_of=made_of)
    engine = loaded.engine
    if answer_context(tokens, answer_tokens) <= engine.n_ctx:
        return None
    asked = f"the {counted(answer_tokens, 'token')} asked for ({limit_source})"
    size, room = _larger_context(tokens, answer_tokens, engine.n_ctx_train)
    context = f"--ctx-size {size}" if restart is None else f"a context of {size:,}"
    larger = "this model takes no larger context" if engine.n_ctx >= size else \
        f"{context}, the most this model takes, leaves room for {room:,}" if room < answer_tokens else \
        f"{context} or more" if restart is not None else f"{context} or more holds them all"  # a chat: as its hints
    if restart is not None and engine.n_ctx < size:
        larger += f": {restart(size)}"
    return f"the prompt takes {tokens:,} of the context's {engine.n_ctx:,} tokens, which leaves room for " \
           f"{engine.n_ctx - tokens + 1:,} of {asked}, so the answer may end early: {larger}"


def larger_context_words(engine: Engine) -> str:
    """The larger context the model takes than the one loaded, in words: up to 8,192 for this model; it is 2,048
    now."""
    return f"up to {engine.n_ctx_train:,} for this model; it is {engine.n_ctx:,} now"


def context_end_help(engine: Engine, larger: Callable[[], str], *, unknown: str) -> str:
    """What an answer stopped at the end of the context window is told of a larger context: larger() where the model
    takes one (how it is had, in run's or the chat's words), else that this context is the most the model takes;
    unknown where the model does not say its most."""
    if engine.n_ctx_train <= 0:
        return unknown
    if engine.n_ctx >= engine.n_ctx_train:
        return f"{engine.n_ctx:,} tokens, the most this model takes"
    return larger()


def _larger_context(prompt_tokens: int, answer_tokens: int, trained: int) -> tuple[int, int]:
    """The --ctx-size that holds a prompt of prompt_tokens and an answer of answer_tokens (the most the model takes,
    trained, where that is less), and the tokens of answer it leaves room for."""
    size = answer_context(prompt_tokens, answer_tokens)
    if trained:
        size = min(size, trained)
    return size, min(answer_tokens, size - prompt_tokens + 1)


def warn_of_answer_room(loaded: LoadedModel, tokens: int, answer_tokens: int | None, *, limit_source: str,
                        made_of: str = "") -> None:
    """Warn on stderr, before the prompt is computed, where a prompt of tokens leaves too little room for the
    answer_tokens asked for (answer_room_warning: what run does with and without a conversation)."""
    from localgen import console

    warning = answer_room_warning(loaded, tokens, answer_tokens, limit_source=limit_source, made_of=made_of)
    if warning is not None:
        console.warn(warning)
