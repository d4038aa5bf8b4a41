"""How a prompt is cut into prefill chunks: aligned to the physical batch, and no token computed alone that a cold
prefill computes with others, so that a prefix reused from the KV cache changes no numerics.

llama.cpp computes a batch of one token by other kernels than a batch of several, whose logits differ in their
last bits (enough to change a greedy answer now and then). With flash attention on, its CPU kernels differ for
batches under 64 queries too: a prefix reused in memory is exact there only where the rest fills those
(prefix.restore_point makes a prefix restored from disk exact under both).
"""

from __future__ import annotations

from collections.abc import Iterator

AHEAD_CHUNK = 128  # prefill_ahead's largest batch: what Enter on other text throws away, at most


def chunk_bounds(start: int, total: int, n_ubatch: int, n_batch: int, most: int | None = None
                 ) -> Iterator[tuple[int, int]]:
    """Prefill chunk bounds from start to total aligned to the physical batch size, so a position lands in the
    same ubatch wherever prefill starts (a prefix reused from the KV cache or restored from disk changes no
    numerics); chunks of up to n_batch, or with most, of about this many tokens at most, in steps that divide
    the physical batch (a last token left alone by such a step goes with the chunk before)."""
    unit = n_ubatch
    while most is not None and unit > most and unit % 2 == 0:
        unit //= 2
    step = unit if most is not None else max(unit, n_batch - n_batch % unit)
    begin = start
    while begin < total:
        end = min(total, begin + (unit - begin % unit if begin % unit else step))
        if total - end == 1 and end % n_ubatch:  # the last token would be alone where a cold prefill has company
            end = total
        yield begin, end
        begin = end


def resume_point(held: int, total: int, n_ubatch: int, n_batch: int, most: int | None = None) -> int:
    """Where the prefill of total tokens resumes when the KV cache holds the first held: one token earlier where
    its first chunk (chunk_bounds) would be one token alone that a cold prefill computes with others."""
    if not 0 < held < total:
        return held
    begin, end = next(chunk_bounds(held, total, n_ubatch, n_batch, most))
    alone_cold = held % n_ubatch == 0 and total - held == 1
    return held - 1 if end - begin == 1 and not alone_cold else held
