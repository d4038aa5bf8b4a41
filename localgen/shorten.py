"""Text shortened to a terminal's width, the cut marked with an ellipsis: a row's last column, a name's or path's
middle."""

from __future__ import annotations

import os
from collections.abc import Iterable

from localgen.wordwrap import display_width

ELLIPSIS = "…"
SHOWN_NAME_CHARS = 40  # a name refused is cut in its middle to this many columns
SHOWN_PATH_CHARS = 120  # longer paths are cut in error messages


def shorten_end(text: str, width: int) -> str:
    """text in at most width columns: as it is when it fits, else its start and an ellipsis ('' below 1 column)."""
    if display_width(text) <= width:
        return text
    if width < 1:
        return ""
    return "".join(_fitting(text, width - 1)).rstrip() + ELLIPSIS


def shorten_middle(text: str, width: int) -> str:
    """text in at most width columns: as it is when it fits, else its start, an ellipsis and its end, the end given
    the larger half (names alike but for their ends stay told apart; '' below 1 column)."""
    if display_width(text) <= width:
        return text
    if width < 1:
        return ""
    end = _fitting(reversed(text), width // 2)
    return "".join(_fitting(text, width - 1 - sum(map(display_width, end)))) + ELLIPSIS + "".join(reversed(end))


def shown_name(name: str) -> str:
    """A name (a model's, a reference, a conversation's) as an error shows it: cut in its middle where it is longer
    than SHOWN_NAME_CHARS columns."""
    return shorten_middle(name, SHOWN_NAME_CHARS)


def short_path(path: os.PathLike[str] | str) -> str:
    """A path for an error message, cut in the middle when very long."""
    text = str(path)
    if len(text) <= SHOWN_PATH_CHARS:
        return text
    half = SHOWN_PATH_CHARS // 2
    return f"{text[:half]}...{text[-half:]}"


def _fitting(chars: Iterable[str], room: int) -> list[str]:
    """The leading chars that fit in room columns."""
    kept, used = [], 0
    for char in chars:
        used += display_width(char)
        if used > room:
            break
        kept.append(char)
    return kept
