"""units.py: the one way localgen prints a size (binary units, as llama.cpp prints them)."""

from __future__ import annotations

import pytest

from localgen.units import binary_size


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (400_000, "390.6 KiB"), (1_048_575, "1.0 MiB"),
    (98_362_432, "93.8 MiB"), (24_000_000, "22.9 MiB"), (5 * 2**30, "5.0 GiB"), (2**40 - 1, "1.0 TiB"),
])
def test_sizes_are_printed_in_binary_units(n: int, text: str) -> None:
    assert binary_size(n) == text

