"""How a prompt is cut into prefill chunks: aligned to the physical batch, so reuse changes no numerics."""

from __future__ import annotations

from collections.abc import Iterator

AHEAD_CHUNK = 128  # prefill_ahead's largest batch: what Enter on other text throws away, at most


def chunk_bounds(start: int, total: int, n_ubatch: int, n_batch: int, most: int | None = None
                 ) -> Iterator[tuple[int, int]]:
    """Prefill chunk bounds from start to total aligned to the physical batch size, so a position lands in the
    same ubatch wherever prefill starts (a prefix reused from the KV cache or restored from disk changes no
    numerics); chunks of up to n_batch, or with most, of about this many tokens at most, in steps that divide
    the physical batch."""
    unit = n_ubatch
    while most is not None and unit > most and unit % 2 == 0:
        unit //= 2
    step = unit if most is not None else max(unit, n_batch - n_batch % unit)
    begin = start
    while begin < total:
        end = min(total, begin + (unit - begin % unit if begin % unit else step))
        yield begin, end
        begin = end
