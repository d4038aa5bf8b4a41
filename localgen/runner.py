"""The generation service: load a model for a reference and stream answers to messages."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from localgen.chat import Message, PromptFormat
from localgen.config import DEFAULT_BATCH_SIZE, DEFAULT_CONTEXT_CAP, DEFAULT_UBATCH_SIZE
from localgen.engine import Engine
from localgen.errors import UsageError
from localgen.events import Event
from localgen.fit import physical_cores
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.resolve import ResolvedModel, resolve_model

if TYPE_CHECKING:
    from localgen.promptcache import PromptCache


@dataclass(frozen=True)
class ModelOptions:
    """What the user asked for about the model and how to load it (None = choose for me)."""

    model: str | None = None
    ctx_size: int | None = None
    threads: int | None = None
    threads_batch: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    ubatch_size: int = DEFAULT_UBATCH_SIZE
    gpu_layers: int = 0
    flash_attn: str = "auto"
    kv_type: str = "f16"
    offline: bool | None = None
    raw: bool = False


@dataclass
class LoadedModel:
    """A resolved model with its engine and prompt format."""

    resolved: ResolvedModel
    engine: Engine
    prompt_format: PromptFormat

    def close(self) -> None:
        """Free the engine."""
        self.engine.close()


def plan_load(options: ModelOptions, resolved: ResolvedModel, trained_context: int) -> LoadOptions:
    """Choose the context size and thread counts for a model on this machine."""
    if options.ctx_size is not None and trained_context and options.ctx_size > trained_context:
        raise UsageError(f"--ctx-size {options.ctx_size:,} is beyond the model's maximum of {trained_context:,}",
                         hint=f"use --ctx-size {trained_context} or less")
    default_ctx = min(c for c in (resolved.context, trained_context or None, DEFAULT_CONTEXT_CAP) if c)
    threads = options.threads or physical_cores()
    return LoadOptions(
        n_ctx=default_ctx if options.ctx_size is None else options.ctx_size,
        n_threads=threads,
        n_threads_batch=options.threads_batch or threads,
        n_batch=options.batch_size,
        n_ubatch=options.ubatch_size,
        n_gpu_layers=options.gpu_layers,
        flash_attn=options.flash_attn,
        kv_type=options.kv_type,
    )


def load_model(options: ModelOptions) -> LoadedModel:
    """Resolve, check and load a model; the one way every command gets an engine."""
    from localgen.catalog import touch_last_used
    from localgen.gguf_file import read_gguf

    resolved = resolve_model(options.model, offline=options.offline)
    header = read_gguf(resolved.path)  # validated in Python before llama.cpp opens the file
    touch_last_used(resolved.path)
    load_options = plan_load(options, resolved, header.context_length or 0)
    engine = Engine(resolved.path, load_options)
    prompt_format = PromptFormat.for_engine(engine, override=resolved.template_override, raw=options.raw,
                                            model_name=resolved.display_name)
    return LoadedModel(resolved=resolved, engine=engine, prompt_format=prompt_format)


def prompt_tokens(loaded: LoadedModel, messages: Sequence[Message]) -> list[int]:
    """Render and tokenize messages for the loaded model, refusing prompts that cannot fit."""
    text = loaded.prompt_format.render(messages)
    tokens = loaded.prompt_format.tokenize(loaded.engine, text)
    loaded.engine.check_fits(len(tokens))
    return tokens


def stream_answer(loaded: LoadedModel, messages: Sequence[Message], sampling: SamplingParams,
                  limits: GenerationLimits, *, draft: str = "none", prompt_cache: bool = False) -> Iterator[Event]:
    """Stream the model's answer to a conversation (optionally drafting by prompt lookup, using the prompt cache)."""
    cache = _prompt_cache(loaded) if prompt_cache else None
    return loaded.engine.generate(prompt_tokens(loaded, messages), sampling, limits, draft=draft, prefix_cache=cache)


def _prompt_cache(loaded: LoadedModel) -> PromptCache | None:
    """The on-disk prompt cache for this model (None when its size bound is 0)."""
    from localgen.promptcache import prompt_cache_for

    cache = prompt_cache_for(loaded.resolved.path, loaded.engine.state_signature)
    return cache if cache.max_bytes > 0 else None
