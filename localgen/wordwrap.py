"""Word wrapping for streamed text on a terminal: lines break at spaces, never inside a word (display only)."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from typing import TextIO

TAB_STOP = 8


def display_width(text: str) -> int:
    """Columns text takes on a terminal: wide East Asian characters take two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def terminal_width(stream: TextIO) -> Callable[[], int]:
    """The current width of the terminal stream writes to (0: not a terminal, so no wrapping)."""
    def width() -> int:
        try:
            return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
        except (OSError, ValueError, AttributeError):
            return 0

    return width


class WordWrap:
    """Feed streamed text; get it back with a newline before any word that would cross the right edge.

    A word is held back until the space or newline after it arrives (or flush()), so it is placed whole. Spaces
    at a break are dropped; indentation at the start of a line is kept; a word wider than the terminal is left
    for the terminal to fold. width() is asked at every feed, so a resized terminal is followed.
    """

    def __init__(self, width: Callable[[], int]) -> None:
        self._width = width
        self._column = 0
        self._spaces = ""
        self._word = ""

    def feed(self, text: str) -> str:
        """The part of text (and of what was held back) that can be shown now."""
        width = self._width()
        out: list[str] = []
        for char in text:
            if char == "\n":
                out.append(self._place(width))
                out.append("\n")
                self._column, self._spaces = 0, ""
            elif char in " \t":
                out.append(self._place(width))
                self._spaces += char
            else:
                self._word += char
        return "".join(out)

    def flush(self) -> str:
        """Everything still held back (at the end of the stream)."""
        return self._place(self._width())

    def _place(self, width: int) -> str:
        """The pending spaces and word: on this line if they fit, else the word opens the next line."""
        if not self._word:
            return ""
        spaces = self._spaces_width()
        word = display_width(self._word)
        if width > 0 and self._column > 0 and self._column + spaces + word > width:
            text, self._column = "\n" + self._word, word
        else:
            text, self._column = self._spaces + self._word, self._column + spaces + word
        if width > 0 and self._column > width:  # a word wider than the line: the terminal folded it
            self._column %= width
        self._spaces = self._word = ""
        return text

    def _spaces_width(self) -> int:
        """Columns the pending spaces take from the current column (tabs go to the next tab stop)."""
        column = self._column
        for char in self._spaces:
            column += TAB_STOP - column % TAB_STOP if char == "\t" else 1
        return column - self._column
