"""stdout text output: raw text, flushed per piece, ending with exactly one newline."""

from __future__ import annotations

import io

import pytest

from localgen.console import TextOutput


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["Hello", " world"], "Hello world\n"),
        (["Hello\n\n", "\n"], "Hello\n"),
        (["a\n", "b\n\n"], "a\nb\n"),
        (["\n", "x"], "\nx\n"),
        ([], ""),
        (["\n\n"], ""),
    ],
)
def test_output_ends_with_one_newline(pieces: list[str], expected: str) -> None:
    stream = io.StringIO()
    out = TextOutput(stream)
    for piece in pieces:
        out.write(piece)
    out.finish()
    assert stream.getvalue() == expected
