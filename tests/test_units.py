"""units.py: the one way localgen prints a size (binary units, as llama.cpp prints them)."""

from __future__ import annotations

import pytest

from localgen.units import binary_size, binary_size_up


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (400_000, "390.6 KiB"), (1_048_575, "1.0 MiB"),
    (98_362_432, "93.8 MiB"), (24_000_000, "22.9 MiB"), (5 * 2**30, "5.0 GiB"), (2**40 - 1, "1.0 TiB"),
])
def test_sizes_are_printed_in_binary_units(n: int, text: str) -> None:
    assert binary_size(n) == text



def test_a_size_rounded_up_to_the_next_unit_reads_in_that_unit() -> None:
    """1,048,516 bytes (1023.9 KiB and more) rounded up is 1.0 MiB, as binary_size writes 1,048,576, not 1024.0 KiB;
    where the room short of it reads the same, it reads one step more."""
    assert binary_size_up(1048516) == "1.0 MiB"
    assert binary_size_up(1048516, above=1048400) == "1.0 MiB"
    assert binary_size_up(1048576, above=1048575) == "1.1 MiB"
    assert binary_size_up(1023 * 1024 + 1) == "1023.1 KiB"
