"""How large a KV cache starts: small, so a short prompt and answer need not wait for a long context's."""

from __future__ import annotations

import resource
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from localgen.errors import LocalgenError, MemoryMarginError, ModelLoadError
from localgen.estimate import ModelShape, allocated_context, estimate_memory, kv_cache_bytes, padded_context, read_shape
from localgen.hardware import repacked_weight_types
from localgen.memory_limits import (
    NEAR_THE_LIMIT_BYTES,
    MemoryRoom,
    data_in_use,
    data_limit,
    least_room,
    thread_stacks_bytes,
)
from localgen.params import LoadOptions

FIRST_TOKENS = 2048  # a KV cache starts this large unless more is expected; it takes the whole context when needed
DATA_MARGIN_BYTES = 128 * 1024 * 1024  # what else a chat may map under `ulimit -d` beside the context it planned
# what the process maps between making the context and its first batch (the prompt's template and tokens, the
# sampler): a context that leaves less is refused, where the first batch's bad_alloc aborted the process
FIRST_BATCH_MARGIN_BYTES = 16 * 1024 * 1024
CACHE_LINE_BYTES = 64  # ggml-cpu's work buffer holds one for each thread beside the converted activations


def shape_for_limits(path: Path) -> ModelShape | None:
    """The shape of the model at path, read as it loads for the memory checks of its contexts and batches, which then
    need no memory to read its header (a limit may leave too little later); None where it cannot be read (llama.cpp
    judges the file)."""
    try:
        return read_shape(path)
    except (OSError, ValueError, LocalgenError):
        return None


def first_cells(options: LoadOptions, whole: int, shape: ModelShape | None) -> int:
    """The cells the KV cache starts with: FIRST_TOKENS' worth, or the whole context's (whole cells) where more
    is expected, or where a memory limit may not hold its growth (the model's shape tells its size).

    Allocating a KV cache writes all of it (llama.cpp clears it), in time and memory in proportion to its cells.
    Engine._make_room() moves to the whole context when a prompt or an answer needs more: one move at most, so it
    never holds more than a small cache's copy on top of the whole context's memory, which the fit planned for.
    """
    first = allocated_context(FIRST_TOKENS, flash_attn=options.flash_attention)
    if options.expected_tokens > FIRST_TOKENS or max(options.n_batch, options.n_ubatch) > first:
        return whole  # llama.cpp caps batches at the context's size
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY or _data_limit_tight(options, shape, first):
        return whole  # `ulimit -v`, or a `-d` short of the growth: running short shows at load, not in an answer
    return min(first, whole)


def _data_limit_tight(options: LoadOptions, shape: ModelShape | None, first: int) -> bool:
    """Whether `ulimit -d` may not hold the whole context of the model of this shape on top of what this process has
    mapped, with a small cache's copy as it grows and DATA_MARGIN_BYTES more (True where that cannot be told); the
    weights llama.cpp repacks into its own buffers count, as the fit counts them."""
    limit = data_limit()
    if limit is None:
        return False
    if shape is None:  # a header the load will judge
        return True
    try:
        in_use = data_in_use()
    except (OSError, ValueError):  # no /proc
        return True
    whole = estimate_memory(shape, n_ctx=options.n_ctx, kv_type=options.kv_type, n_gpu_layers=options.n_gpu_layers,
                            n_ubatch=options.n_ubatch, flash_attn=options.flash_attention,
                            repack_types=repacked_weight_types())
    growing = kv_cache_bytes(shape, first, options.kv_type)
    return limit < in_use + whole.limited_bytes + growing + DATA_MARGIN_BYTES


def context_beyond_memory_limit(options: LoadOptions, path: Path, cells: int,
                                shape: ModelShape | None) -> ModelLoadError | None:
    """The refusal of a context of cells for the model at path, of this shape (on the CPU), where `ulimit -d` or
    `ulimit -v` leaves less than its KV cache, scheduler, compute buffer and first batch take; None where they may
    fit, or it cannot be told.

    llama.cpp fails cleanly where the KV cache or the compute buffer cannot be allocated, but aborts the process
    where the scheduler's context between them cannot (ggml_init's GGML_ASSERT), or ggml-cpu's work buffer or a
    thread's stack in the first batch (a bad_alloc, batch_bytes): its refusal must come before.
    """
    limited = _limited_cpu_context(options, shape)
    if limited is None:
        return None
    room, shape = limited
    n_ubatch = min(options.n_ubatch, options.n_batch)
    context = estimate_memory(shape, n_ctx=cells, kv_type=options.kv_type, n_ubatch=n_ubatch,
                              flash_attn=options.flash_attention)
    needed = context.context_bytes + batch_bytes(options, shape, n_ubatch, n_ubatch) + FIRST_BATCH_MARGIN_BYTES
    if needed <= room.free:
        return None
    return ModelLoadError(f"could not create a context of {options.n_ctx} tokens for {path.name}: its KV cache and "
                          f"compute buffers take {room.needs(needed)} or more, and {room.leaves()}",
                          hint=smaller_context_hint(options, room.name))


def batch_bytes(options: LoadOptions, shape: ModelShape, tokens: int, cells: int) -> int:
    """What a context's batch of tokens that sees cells KV cells maps beyond its KV cache and compute buffers: the
    stacks of the threads that compute it, and ggml-cpu's work buffer, where the activations are converted to the
    weights' type for their products (2 bytes an element, of the widest input for its tokens: the feed-forward's, or
    without flash attention the attention scores', n_head rows as long as the cells the batch sees (a multiple of
    256), for the product with V). ggml-cpu frees the work buffer before it maps a larger one."""
    threads = max(options.n_threads, options.n_threads_batch)
    widest = max(shape.n_ff, shape.n_embd)
    if not options.flash_attention:
        widest = max(widest, shape.n_head * min(padded_context(options.n_ctx), padded_context(cells)))
    work = 2 * widest * tokens + CACHE_LINE_BYTES * threads
    return thread_stacks_bytes(threads) + work


def physical_batches(chunks: Iterable[tuple[int, int]], n_ubatch: int) -> Iterator[tuple[int, int]]:
    """The batches llama.cpp computes for prompt chunks from begin to end: n_ubatch tokens from each chunk's start,
    the last one what is left."""
    for begin, end in chunks:
        yield from ((start, min(start + n_ubatch, end)) for start in range(begin, end, n_ubatch))


def largest_batch_bytes(options: LoadOptions, shape: ModelShape, batches: Iterable[tuple[int, int]]) -> int:
    """What the largest of these batches (each from begin to end, seeing the cells up to end) maps (batch_bytes);
    0 where there are none."""
    return max((batch_bytes(options, shape, end - begin, end) for begin, end in batches), default=0)


def batch_beyond_memory_limit(options: LoadOptions, shape: ModelShape | None, batches: Sequence[tuple[int, int]],
                              mapped: int) -> LocalgenError | None:
    """The refusal of a prompt's batches (each from begin to end, seeing the cells up to end) to a model of this shape
    (on the CPU) where `ulimit -d` or `ulimit -v` leaves less than NEAR_THE_LIMIT_BYTES and what the largest maps
    (batch_bytes) beyond what the batches run before in this context have mapped (0: none ran): llama.cpp aborts the
    process where its work buffer cannot be allocated (a bad_alloc); without flash attention it grows with the cells a
    batch sees, and memory taken since the context was made (a prompt read, a prompt cache restored) may leave less
    than its check saw. None where they may fit, or where no limit is set or it cannot be told."""
    limited = _limited_cpu_context(options, shape)
    if limited is None or not batches:
        return None
    room, shape = limited
    sizes = [batch_bytes(options, shape, end - begin, end) for begin, end in batches]
    largest = max(sizes)
    needed = max(largest - mapped, 0) + NEAR_THE_LIMIT_BYTES  # and what else a batch maps (its threads' heaps)
    if needed <= room.free:
        return None
    if largest <= mapped:  # the batch maps nothing new: only the margin is short
        return MemoryMarginError(f"not enough memory is left to answer: a message needs "
                                 f"{room.needs(NEAR_THE_LIMIT_BYTES)} free, and {room.leaves()}",
                                 hint=f"raise `{room.name}`")
    at = sizes.index(largest)
    which = "first" if at == 0 else "last" if at == len(sizes) - 1 else "largest"
    beyond = " beyond what the batches before it mapped" if mapped else ""
    return LocalgenError(f"not enough memory is left to evaluate the prompt: its {which} batch takes "
                         f"{room.needs(needed)} or more{beyond}, and {room.leaves()}",
                         hint=f"try a smaller --batch-size or --ubatch-size, fewer --threads/--threads-batch, or "
                              f"raise `{room.name}`")


def _limited_cpu_context(options: LoadOptions, shape: ModelShape | None) -> tuple[MemoryRoom, ModelShape] | None:
    """The least room a memory limit leaves (`ulimit -d`, `-v`) and the model's shape, for a context on the CPU; None
    where it is offloaded (its cache and buffers are the GPU's), no limit is set, or it cannot be told (no /proc, or
    no shape: a header llama.cpp judges)."""
    if options.n_gpu_layers != 0 or shape is None:
        return None
    try:
        room = least_room()
    except (OSError, ValueError):
        return None
    return None if room is None else (room, shape)


def smaller_context_hint(options: LoadOptions, limit: str | None = None) -> str:
    """What would make a context fit: a smaller one, a smaller KV cache where it is not already, or more room under
    the limit (`ulimit -d`) that stopped it."""
    ways = ["a smaller --ctx-size"]
    if options.kv_type == "f16":
        ways.append("--kv-type q8_0" + ("" if options.flash_attn != "off" else " with --flash-attn on"))
    return f"try {', or '.join(ways)}" + (f", or raise `{limit}`" if limit else "")
