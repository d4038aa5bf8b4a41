"""Prompt prefixes kept across processes: restoring a saved KV state so the rest prefills exactly as cold."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from localgen.engine.kv import KvCache
from localgen.errors import ContextOverflowError, LocalgenError
from localgen.memory_limits import limit_short_of

log = logging.getLogger("localgen.engine")

FA_TILE_Q = 64  # ggml-cpu's GGML_FA_TILE_Q: flash attention switches kernels at this many queries


class CachedPrefix(Protocol):
    """A saved KV state and the tokens it holds (read-only, as a frozen dataclass gives them)."""

    @property
    def tokens(self) -> Sequence[int]:
        """The tokens whose KV state this is."""
        ...

    @property
    def state(self) -> bytearray:
        """The state as llama_state_seq_get_data wrote it."""
        ...


class PrefixCache(Protocol):
    """Where KV states of long prompts are kept between processes (see localgen.promptcache)."""

    min_new_tokens: int

    def find(self, prompt: Sequence[int], *, better_than: int, most: int) -> CachedPrefix | None:
        """The saved state of at most most tokens sharing the longest prefix with prompt, if it shares more than
        better_than tokens."""
        ...

    def store(self, tokens: Sequence[int], state: bytearray) -> None:
        """Save the KV state of these tokens."""
        ...

    def discard(self, entry: CachedPrefix) -> None:
        """Forget an entry find() gave that llama.cpp refused to load."""
        ...


def restore_prefix(kv: KvCache, prompt: Sequence[int], cache: PrefixCache, *, n_ctx: int, n_ubatch: int,
                   make_room: Callable[[int], None]) -> int:
    """Load the longest cached prefix of prompt when it beats what kv already holds (make_room lets the KV cache
    hold as many tokens as the saved state, which may be longer than prompt); return the tokens kept."""
    try:
        entry = cache.find(prompt, better_than=kv.common_prefix(prompt), most=n_ctx)
    except LocalgenError as exc:
        log.debug("prompt cache lookup failed: %s", exc.message)
        return 0
    if entry is None:
        return 0
    try:
        make_room(min(len(entry.tokens) + 1, n_ctx))
    except ContextOverflowError as exc:  # the context stays as it was, holding what it held
        log.debug("no room to restore a prompt cache entry of %d tokens: %s", len(entry.tokens), exc.message)
        return 0
    if not kv.load_state(entry.tokens, entry.state, n_ctx):
        cache.discard(entry)  # refused once, refused by every later run
        return 0
    keep = restore_point(min(kv.common_prefix(prompt), len(prompt) - 1), len(prompt), n_ubatch,
                         saved=len(entry.tokens))
    return kv.truncate(keep) if keep < len(kv) else keep


def restore_point(common: int, total: int, n_ubatch: int, *, saved: int) -> int:
    """Where prefill resumes after a restore so the rest is computed exactly as a cold prefill computes it.

    llama.cpp's CPU flash attention rounds differently in three kernels (_kernel): tiled for physical batches
    of FA_TILE_Q queries or more, per-row below that, and for a batch of one query a split of the cached keys
    across threads. Prefill batches are aligned to n_ubatch, so the batch holding the divergence point ran
    from its start to the end of the saved prompt (saved tokens) when the state was saved, and runs to the end
    of this prompt (total) cold. When the two took different kernels, the kept rows of that batch are computed
    again; otherwise resume early enough that the rest of it takes the cold kernel (at most FA_TILE_Q tokens).
    """
    start = common - common % n_ubatch
    end = min(start + n_ubatch, total)
    cold = _kernel(end - start)
    if cold != _kernel(min(start + n_ubatch, saved) - start):
        return start
    rows = {"tiled": FA_TILE_Q, "per-row": 2, "one query": 1}[cold]  # the least rows that take the cold kernel
    return max(start, min(common, end - rows))


def _kernel(queries: int) -> str:
    """The CPU flash-attention kernel a physical batch of this many queries takes."""
    return "tiled" if queries >= FA_TILE_Q else "per-row" if queries > 1 else "one query"


def save_prefix(kv: KvCache, cache: PrefixCache, n_prompt: int, prefilled: int) -> None:
    """Save the prompt's KV state (the answer dropped) when enough new prompt tokens were computed, and the memory
    limits set leave room for its bytes."""
    if prefilled < cache.min_new_tokens or not kv.tokens:
        return
    kv.drop_last(len(kv) - n_prompt)  # answer tokens were computed one at a time
    if len(kv) != n_prompt:  # the memory could not drop the answer alone
        return
    if limit_short_of(kv.state_size()) is not None:  # the answer is out: a MemoryError would end the run as failed
        log.debug("the prompt's KV state does not fit under the memory limit; not saved")
        return
    try:
        cache.store(kv.tokens, kv.save_state())
    except LocalgenError as exc:
        log.debug("prompt cache store failed: %s", exc.message)
    except MemoryError:  # more was mapped than /proc told of
        log.debug("no memory to save the prompt's KV state; not saved")
