"""Text counted and cut by characters as a reader sees them: a letter and the marks drawn with it are one (e + the
accent U+0301, as macOS writes é; क + the vowel sign ि, कि; ❤ + the variation selector U+FE0F, ❤️), never parted."""

from __future__ import annotations

import re
import unicodedata

SPACES = re.compile(r"[^\S\x0b\x0c\x1c-\x1f\x85]+")  # white space but the controls str.split() takes for it (VT, NEL)
MARKS_COUNTED_APART = 64  # distinct marks in a text up to which each is counted by its own scan (str.count)


def _joins_previous(char: str) -> bool:
    """Whether a code point is drawn with the one before it: a mark of any kind (Unicode category M: accents, vowel
    signs, variation selectors), whatever its combining class."""
    return unicodedata.category(char)[0] == "M"


def character_count(text: str) -> int:
    """How many characters text holds, each letter counted with its marks as one (a mark that starts text counts as
    one of its own); each code point text holds is looked up once, however often it is there."""
    if text.isascii():
        return len(text)
    marks = [char for char in set(text) if _joins_previous(char)]
    if len(marks) > MARKS_COUNTED_APART:  # a scan of text for each would cost more than one pass
        joined = sum(1 for char in text if _joins_previous(char))
    else:
        joined = sum(text.count(char) for char in marks)
    return len(text) - joined + int(_joins_previous(text[0]))


def cut_characters(text: str, count: int) -> str:
    """The first count characters of text, each with its marks (text as it is where it has no more), read no further
    than the character after the cut."""
    count = max(count, 0)
    if text.isascii():
        return text[:count]
    started = 0
    for at, char in enumerate(text):
        if at == 0 or not _joins_previous(char):
            if started == count:
                return text[:at]
            started += 1
    return text


def one_line(text: str, count: int) -> str:
    """text on one line (each run of white space, line ends and tabs among it, one space; other controls kept, for a
    listing to show as ^K), cut with … past count characters."""
    line = " ".join(filter(None, SPACES.split(text)))
    return line if character_count(line) <= count else cut_characters(line, count - 1).rstrip() + "…"


def short_repr(value: object, most: int = 80) -> str:
    """A value as Python writes it, cut with … past most characters."""
    text = repr(value)
    return text if len(text) <= most else text[:most - 1] + "…"
