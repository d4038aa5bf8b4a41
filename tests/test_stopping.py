"""Incremental stop-string matching."""

from __future__ import annotations

import pytest

from localgen.stopping import StopMatcher


def _stream(stops: tuple[str, ...], pieces: list[str]) -> tuple[str, str | None]:
    matcher = StopMatcher(stops)
    out = []
    for piece in pieces:
        out.append(matcher.feed(piece))
        if matcher.matched:
            return "".join(out), matcher.matched
    out.append(matcher.flush())
    return "".join(out), None


@pytest.mark.parametrize(
    ("pieces", "stops", "expected", "matched"),
    [
        (["Hello", " wor", "ld"], ("world",), "Hello ", "world"),
        (["ab", "c<", "/s", "> tail"], ("</s>",), "abc", "</s>"),
        (["no stop here"], ("xyz",), "no stop here", None),
        (["x", "y"], ("yz",), "xy", None),  # a partial match at the end is released
        (["aaa", "ab"], ("aab",), "aa", "aab"),
        (["one", "two"], ("two", "ne"), "o", "ne"),
    ],
)
def test_stop_matching(pieces: list[str], stops: tuple[str, ...], expected: str, matched: str | None) -> None:
    assert _stream(stops, pieces) == (expected, matched)


def test_held_text_is_not_emitted_early() -> None:
    matcher = StopMatcher(("STOP",))
    assert matcher.feed("abc ST") == "abc "
    assert matcher.feed("O") == ""
    assert matcher.feed("x") == "STOx"
