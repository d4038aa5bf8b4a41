"""How `localgen bench` loads the model for each test, and its refusals said in bench's terms (-p N, -n N)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from localgen.config import DEFAULT_BATCH_SIZE
from localgen.errors import ContextSizeError, ModelLoadError, UsageError

if TYPE_CHECKING:
    from localgen.runner import LoadedModel

CTX_SIZE_OPTION = re.compile(r"--ctx-size(?: (\d+))?")  # a context a hint offers, as run would be given it


class BenchTest(NamedTuple):
    """One test of a benchmark: the context it runs in, its name, and its option and size (-p 512)."""

    ctx: int
    name: str
    flag: str
    size: int

    @property
    def room(self) -> int:
        """The context's tokens beyond the test's size (the same for each size)."""
        return self.ctx - self.size


def bench_loader(tests: Sequence[BenchTest], *, model: str | None, threads: int | None, threads_batch: int | None,
                 batch_size: int | None, ubatch_size: int, flash_attn: str, kv_type: str,
                 gpu_layers: int | None, no_gpu: bool,
                 progress: Callable[[str], None]) -> Callable[[BenchTest], LoadedModel]:
    """How each of the tests loads the model: in a context of the test's size (a context beyond the model or this
    machine's memory refused naming each test's size that fits, as -p N -n N)."""
    from localgen.runner import ModelOptions, load_model

    def load(test: BenchTest) -> LoadedModel:
        """The model loaded in the test's context."""
        options = ModelOptions(model=model, ctx_size=test.ctx, threads=threads, threads_batch=threads_batch,
                               batch_size=DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                               ubatch_size=ubatch_size, flash_attn=flash_attn, kv_type=kv_type,
                               gpu_layers=gpu_layers, no_gpu=no_gpu,
                               min_ctx=test.ctx,  # the KV cache whole from the start, as llama-bench's
                               adapt_threads=False)  # measured at one thread count, as llama-bench measures
        try:
            return load_model(options, note=lambda text: progress(f"bench: {text}"),
                              opening=lambda resolved: progress(f"bench: loading {resolved.display_name}"))
        except ContextSizeError as exc:
            too_small = [over for over in tests if over.room >= exc.maximum]  # no size of it fits
            raise UsageError(f"{test.flag} {test.size:,} needs a context of {test.ctx:,} tokens, beyond the model's "
                             f"maximum of {exc.maximum:,}", hint=f"this model's context is too small for the "
                             f"{too_small[0].flag} test" if too_small else
                             f"use {sizes_within(tests, exc.maximum, test)} or less") from exc
        except ModelLoadError as exc:  # for want of memory, or llama.cpp's own failure to make the context
            raise in_test_sizes(exc, tests, test) from exc

    return load


def sizes_within(tests: Sequence[BenchTest], ctx: int, refused: BenchTest) -> str:
    """Each test whose context is over ctx at the size that makes it ctx ("-p 576 -n 702"; the refused test's
    where none is over)."""
    over = [test for test in tests if test.ctx > ctx] or [refused]
    return " ".join(f"{test.flag} {ctx - test.room}" for test in over)


def in_test_sizes(refusal: ModelLoadError, tests: Sequence[BenchTest], refused: BenchTest) -> ModelLoadError:
    """A refusal of a test's context, each context its hint offers (--ctx-size N, which bench does not take) named as
    the sizes of the tests over it that make it (each such context is a multiple of 256, more than a test's room),
    and a smaller --ctx-size as a smaller size of the refused test."""
    if refusal.hint is None:
        return refusal

    def in_sizes(found: re.Match[str]) -> str:
        """One context of the hint in bench's terms."""
        return refused.flag if found[1] is None else sizes_within(tests, int(found[1]), refused)

    return refusal.with_hint(CTX_SIZE_OPTION.sub(in_sizes, refusal.hint))
