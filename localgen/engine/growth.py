"""How large a KV cache starts: small, so a short prompt and answer need not wait for a long context's."""

from __future__ import annotations

import resource

from localgen.estimate import allocated_context
from localgen.params import LoadOptions

FIRST_TOKENS = 2048  # a KV cache starts this large unless more is expected; it takes the whole context when needed
# the limits on a process's memory that make an allocation fail (`ulimit -v`, and `ulimit -d`, which Linux holds
# private mappings to, llama.cpp's buffers among them), where growing the cache could fail part way through an answer
MEMORY_LIMITS = (resource.RLIMIT_AS, resource.RLIMIT_DATA)


def first_cells(options: LoadOptions, whole: int) -> int:
    """The cells the KV cache starts with: FIRST_TOKENS' worth, or the whole context's (whole cells) where more
    is expected.

    Allocating a KV cache writes all of it (llama.cpp clears it), in time and memory in proportion to its cells.
    Engine._make_room() moves to the whole context when a prompt or an answer needs more: one move at most, so it
    never holds more than a small cache's copy on top of the whole context's memory, which the fit planned for.
    """
    first = allocated_context(FIRST_TOKENS, flash_attn=options.flash_attention)
    if options.expected_tokens > FIRST_TOKENS or max(options.n_batch, options.n_ubatch) > first:
        return whole  # llama.cpp caps batches at the context's size
    if any(resource.getrlimit(limit)[0] != resource.RLIM_INFINITY for limit in MEMORY_LIMITS):
        return whole  # `ulimit -v` or `-d`: running short shows at load, not part way through an answer
    return min(first, whole)
