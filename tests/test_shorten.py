"""shorten.py: text cut to a terminal's width, the cut marked with …."""

from __future__ import annotations

import pytest

from localgen.shorten import shorten_end, shorten_middle
from localgen.wordwrap import display_width


@pytest.mark.parametrize(("text", "width", "shown"), [
    ("hello world", 11, "hello world"),
    ("hello world", 8, "hello w…"),
    ("hello world", 7, "hello…"),  # no space before the ellipsis
    ("日本語のテキスト", 7, "日本語…"),  # wide characters take two columns
    ("hello", 1, "…"),
    ("hello", 0, ""),
])
def test_text_keeps_its_start_within_the_width(text: str, width: int, shown: str) -> None:
    assert shorten_end(text, width) == shown


@pytest.mark.parametrize(("text", "width", "shown"), [
    ("notes-draft", 11, "notes-draft"),
    ("chat-20261203-164833", 18, "chat-202…03-164833"),  # the end, which tells such names apart, gets more
    ("日本語のテキスト", 8, "日…スト"),  # wide characters take two columns
    ("hello", 1, "…"),
    ("hello", 0, ""),
])
def test_a_name_keeps_its_start_and_end_within_the_width(text: str, width: int, shown: str) -> None:
    assert shorten_middle(text, width) == shown and display_width(shown) <= width
