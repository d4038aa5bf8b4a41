"""How large a KV cache starts: small, so a short prompt and answer need not wait for a long context's."""

from __future__ import annotations

import resource
from pathlib import Path

from localgen.errors import LocalgenError
from localgen.estimate import allocated_context, estimate_memory, kv_cache_bytes, read_shape
from localgen.hardware import repacked_weight_types
from localgen.params import LoadOptions

FIRST_TOKENS = 2048  # a KV cache starts this large unless more is expected; it takes the whole context when needed
# the limits on a process's memory that make an allocation fail (`ulimit -v`, and `ulimit -d`, which Linux holds
# private mappings to, llama.cpp's buffers among them), where growing the cache could fail part way through an answer
MEMORY_LIMITS = (resource.RLIMIT_AS, resource.RLIMIT_DATA)
DATA_MARGIN_BYTES = 128 * 1024 * 1024  # what else a chat may map under `ulimit -d` beside the context it planned


def first_cells(options: LoadOptions, whole: int, path: Path) -> int:
    """The cells the KV cache starts with: FIRST_TOKENS' worth, or the whole context's (whole cells) where more
    is expected, or where a memory limit may not hold its growth (the model's file at path tells its size).

    Allocating a KV cache writes all of it (llama.cpp clears it), in time and memory in proportion to its cells.
    Engine._make_room() moves to the whole context when a prompt or an answer needs more: one move at most, so it
    never holds more than a small cache's copy on top of the whole context's memory, which the fit planned for.
    """
    first = allocated_context(FIRST_TOKENS, flash_attn=options.flash_attention)
    if options.expected_tokens > FIRST_TOKENS or max(options.n_batch, options.n_ubatch) > first:
        return whole  # llama.cpp caps batches at the context's size
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY or _data_limit_tight(options, path, first):
        return whole  # `ulimit -v`, or a `-d` short of the growth: running short shows at load, not in an answer
    return min(first, whole)


def _data_limit_tight(options: LoadOptions, path: Path, first: int) -> bool:
    """Whether `ulimit -d` may not hold the whole context of the model at path on top of what this process has
    mapped, with a small cache's copy as it grows and DATA_MARGIN_BYTES more (True where that cannot be told); the
    weights llama.cpp repacks into its own buffers count, as the fit counts them."""
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    try:
        status = Path("/proc/self/status").read_text()  # Linux's count of what the limit holds: VmData
        in_use = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmData:"))) * 1024
        shape = read_shape(path)
    except (OSError, ValueError, StopIteration, LocalgenError):  # no /proc, or a header the load will judge
        return True
    whole = estimate_memory(shape, n_ctx=options.n_ctx, kv_type=options.kv_type, n_gpu_layers=options.n_gpu_layers,
                            n_ubatch=options.n_ubatch, flash_attn=options.flash_attention,
                            repack_types=repacked_weight_types())
    growing = kv_cache_bytes(shape, first, options.kv_type)
    return limit < in_use + whole.private_ram_bytes + growing + DATA_MARGIN_BYTES
