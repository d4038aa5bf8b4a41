"""How `localgen bench` loads the model for each test, and its refusals said in bench's terms (-p N, -n N)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from localgen.config import DEFAULT_BATCH_SIZE
from localgen.errors import ContextSizeError, InsufficientMemoryError, UsageError

if TYPE_CHECKING:
    from localgen.runner import LoadedModel

CTX_SIZE_OPTION = re.compile(r"--ctx-size (\d+)")  # a context the planner's hint offers, as run would be given it


def bench_loader(*, model: str | None, threads: int | None, threads_batch: int | None, batch_size: int | None,
                 ubatch_size: int, flash_attn: str, kv_type: str, offline: bool | None, gpu_layers: int | None,
                 no_gpu: bool, progress: Callable[[str], None]) -> Callable[[int, str, int], LoadedModel]:
    """How each test loads the model: in a context of the test's size (flag and size name the test in the error
    for a context beyond the model or this machine's memory)."""
    from localgen.runner import ModelOptions, load_model

    def load(ctx: int, flag: str, size: int) -> LoadedModel:
        """The model loaded in a context of ctx tokens."""
        options = ModelOptions(model=model, ctx_size=ctx, threads=threads, threads_batch=threads_batch,
                               batch_size=DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                               ubatch_size=ubatch_size, flash_attn=flash_attn, kv_type=kv_type, offline=offline,
                               gpu_layers=gpu_layers, no_gpu=no_gpu,
                               min_ctx=ctx,  # the KV cache whole from the start, as llama-bench's
                               adapt_threads=False)  # measured at one thread count, as llama-bench measures
        try:
            return load_model(options, note=lambda text: progress(f"bench: {text}"),
                              opening=lambda resolved: progress(f"bench: loading {resolved.display_name}"))
        except ContextSizeError as exc:
            largest = exc.maximum - (ctx - size)  # the test's context is its size and room the same for each size
            raise UsageError(f"{flag} {size:,} needs a context of {ctx:,} tokens, beyond the model's maximum of "
                             f"{exc.maximum:,}", hint=f"use {flag} {largest} or less" if largest > 0 else
                             f"this model's context is too small for the {flag} test") from exc
        except InsufficientMemoryError as exc:
            raise in_test_sizes(exc, flag, room=ctx - size) from exc

    return load


def in_test_sizes(refusal: InsufficientMemoryError, flag: str, *, room: int) -> InsufficientMemoryError:
    """A refusal of a test's context for want of memory, each context its hint offers (--ctx-size N, which bench
    does not take) named as the test's size that makes it (flag N less the test's room; each such context is a
    multiple of 256, more than a test's room)."""
    if refusal.hint is None:
        return refusal
    return refusal.with_hint(CTX_SIZE_OPTION.sub(lambda found: f"{flag} {int(found[1]) - room}", refusal.hint))
