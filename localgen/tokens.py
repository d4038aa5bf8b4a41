"""Token sequences: a compact int32 form and the length of a shared prefix, at C speed."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from localgen.errors import LocalgenError


def tokens_array(tokens: Sequence[int]) -> array:
    """Tokens as an int32 array in native byte order (what the prompt cache stores)."""
    values = array("i", tokens)
    if values.itemsize != 4:  # pragma: no cover - every platform we run on has 4-byte ints
        raise LocalgenError("this platform's C int is not 32 bits; the prompt cache is unavailable")
    return values


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading tokens a and b share."""
    x = a if isinstance(a, array) else tokens_array(a)
    y = b if isinstance(b, array) else tokens_array(b)
    lo, hi = 0, min(len(x), len(y))
    if x[:hi] == y[:hi]:
        return hi
    while lo < hi:  # binary search on slice equality: C-speed comparisons instead of a Python loop
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
