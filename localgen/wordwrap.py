"""Word wrapping for streamed text on a terminal: lines break at spaces, never inside a word (display only)."""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections.abc import Callable
from typing import TextIO

TAB_STOP = 8
# What feed takes at once: from a line's start, a whole line without tabs; else a newline, spaces and tabs, or a word.
_LINE = re.compile(r"([^\t\n]*)\n")
_RUNS = re.compile(r"(?P<newline>\n)|(?P<blanks>[ \t]+)|(?P<word>[^ \t\n]+)")
_NOT_ASCII = re.compile(r"[^\x00-\x7f]")


def display_width(text: str) -> int:
    """Columns text takes on a terminal: wide East Asian characters take two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if is_wide(c) else 1 for c in text)


def terminal_width(stream: TextIO) -> Callable[[], int]:
    """The current width of the terminal stream writes to (0: not a terminal, so no wrapping)."""
    def width() -> int:
        try:
            return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
        except (OSError, ValueError, AttributeError):
            return 0

    return width


ZERO_WIDTH_JOINER = "\u200d"


def is_wide(char: str) -> bool:
    """Whether a character takes two columns (East Asian wide or full-width)."""
    return unicodedata.east_asian_width(char) in "WF"


def joins_previous(char: str) -> bool:
    """Whether a character belongs with the one before it on screen: a combining mark, a zero-width joiner, a
    variation selector or an emoji skin-tone modifier (no line may break before it)."""
    return (unicodedata.combining(char) > 0 or char == ZERO_WIDTH_JOINER or "\ufe00" <= char <= "\ufe0f"
            or "\U0001f3fb" <= char <= "\U0001f3ff")


class WordWrap:
    """Feed streamed text; get it back with a newline before any word that would cross the right edge.

    A word is held back until the space or newline after it arrives (or flush()), so it is placed whole. With
    wide_breaks (streamed answers), East Asian wide characters are words of their own (such text breaks between
    any two characters), so they stream as they come; a message shown at once keeps them in their word (a path).
    A word that grows wider than the line is placed at once and then streams as it comes, left for the terminal
    to fold (a URL, minified code). No break comes before a character that joins the previous one (an accent, an
    emoji's modifier). Spaces at a break are dropped; indentation at the start of a line is kept. width() is
    asked at every feed, so a resized terminal is followed. With keep_whole (messages, fed whole), each span
    whole_spans finds in the text fed is one word: a command they name is never broken across lines, unless it is
    wider than a line (then it breaks at its spaces, as other text does, rather than inside a word).
    """

    def __init__(self, width: Callable[[], int], *, wide_breaks: bool = True, keep_whole: bool = False) -> None:
        self._width = width
        self._wide_breaks = wide_breaks
        self._keep_whole = keep_whole
        self._column = 0
        self._spaces = ""
        self._word = ""
        self._word_width = 0  # display_width(self._word), kept as it grows
        self._folding = False  # inside a word wider than the line: its characters go out as they come
        self._joined = False  # the last character was a zero-width joiner: the next one joins it

    def feed(self, text: str) -> str:
        """The part of text (and of what was held back) that can be shown now."""
        width = self._width()
        out: list[str] = []
        spans = whole_spans(text) if self._keep_whole else []  # one wider than the line breaks at its spaces
        glued = _spaces_within(text, [(start, end) for start, end in spans
                                      if width <= 0 or display_width(text[start:end]) <= width])
        at, line_start = 0, not (self._column or self._spaces or self._word or self._folding or self._joined)
        while at < len(text):
            line = _LINE.match(text, at) if line_start else None
            if line and _one_column_each(line[1]) and (not glued or glued.isdisjoint(range(at, line.end()))):
                shown = _broken_line(line[1], width)
                if shown is not None:  # a whole line at once, as the runs below would have shown it
                    out.append(shown + "\n")
                    at = line.end()
                    continue
            run = _RUNS.match(text, at)
            self._take(text, run.start(), run.end(), run.lastgroup, glued, width, out)
            at, line_start = run.end(), run.lastgroup == "newline"
        return "".join(out)

    def _take(self, text: str, start: int, end: int, kind: str | None, glued: set[int], width: int,
              out: list[str]) -> None:
        """Take text[start:end], a run of one kind (_RUNS): at once where its kind allows, else a character at a
        time."""
        while self._joined and start < end:  # the character after a zero-width joiner joins it, whatever it is
            self._step(text[start], start in glued, width, out)
            start += 1
        if start == end:
            return
        if kind == "word" and _one_column_each(text[start:end]):
            self._grow_plain(text[start:end], width, out)
        elif kind == "blanks" and (not glued or glued.isdisjoint(range(start, end))):
            out.append(self._place(width))
            self._spaces += text[start:end]
            self._folding = False
        else:
            for index in range(start, end):
                self._step(text[index], index in glued, width, out)

    def _step(self, char: str, glued: bool, width: int, out: list[str]) -> None:
        """Take one character (glued: a space inside a span kept whole)."""
        joined, self._joined = self._joined or joins_previous(char), char == ZERO_WIDTH_JOINER
        if glued and self._folding:
            out.append(char)
            self._advance(display_width(char), width)
        elif glued:
            self._grow(char, width, out)
        elif joined and not (self._word or self._spaces) and char != "\n":
            out.append(char)  # onto the character already placed
        elif char == "\n":
            out.append(self._place(width))
            out.append("\n")
            self._column, self._spaces, self._folding = 0, "", False
        elif char in " \t":
            out.append(self._place(width))
            self._spaces += char
            self._folding = False
        elif self._folding:
            out.append(char)
            self._advance(display_width(char), width)
        elif is_wide(char) and self._wide_breaks and not joined:
            out.append(self._place(width))
            self._word, self._word_width = char, 2
            out.append(self._place(width))
        else:
            self._grow(char, width, out)

    def _grow_plain(self, run: str, width: int, out: list[str]) -> None:
        """Take a run of characters of one column each that join no other, and no space, tab or newline, as _grow
        would one at a time."""
        if not self._folding and width > 0 and self._word_width + len(run) > width:
            cut = max(1, width - self._word_width + 1)  # the character that makes the word wider than the line
            self._grow(run[:cut], width, out)
            run = run[cut:]
        if self._folding:
            out.append(run)
            self._advance_ones(len(run), width)
        else:
            self._word += run
            self._word_width += len(run)

    def _grow(self, text: str, width: int, out: list[str]) -> None:
        """Add text to the word held back; once the word is wider than the line, place it (it then streams)."""
        self._word += text
        self._word_width += display_width(text)
        if width > 0 and self._word_width > width:
            out.append(self._place(width))
            self._folding = True

    def flush(self) -> str:
        """Everything still held back (at the end of the stream)."""
        return self._place(self._width())

    def _place(self, width: int) -> str:
        """The pending spaces and word: on this line if they fit, else the word opens the next line."""
        if not self._word:
            return ""
        spaces = self._spaces_width()
        word = self._word_width
        if width > 0 and self._column > 0 and self._column + spaces + word > width:
            text, self._column = "\n" + self._word, 0
        else:
            text, self._column = self._spaces + self._word, self._column + spaces
        self._advance(word, width)
        self._spaces, self._word, self._word_width = "", "", 0
        return text

    def _advance(self, columns: int, width: int) -> None:
        """Move the column on by what was written; past the right edge, the terminal folded it."""
        self._column += columns
        if width > 0 and self._column > width:
            self._column %= width

    def _advance_ones(self, count: int, width: int) -> None:
        """Advance over count one-column characters, as count calls of _advance(1, width) would."""
        if count and width > 0 and self._column + count > width:
            self._advance(1, width)  # on the line now, if a narrower terminal had left the column past its edge
            count -= 1
            if width == 1:  # the column goes 0, 1, 0...
                self._column = (self._column + count) % 2
                return
            if self._column + count > width:  # it runs to the edge, then 1, 2... width again
                self._column = (self._column + count - 1) % width + 1
                return
        self._column += count

    def _spaces_width(self) -> int:
        """Columns the pending spaces take from the current column (tabs go to the next tab stop)."""
        column = self._column
        for char in self._spaces:
            column += TAB_STOP - column % TAB_STOP if char == "\t" else 1
        return column - self._column


def _one_column_each(text: str) -> bool:
    """Whether every character of text takes one column and joins no other (ASCII does: an escape's characters are
    counted a column each too)."""
    return text.isascii() or all(map(_takes_one_column, set(_NOT_ASCII.findall(text))))


@functools.lru_cache(maxsize=1024)
def _takes_one_column(char: str) -> bool:
    """Whether a character takes one column and joins no other."""
    return display_width(char) == 1 and not joins_previous(char)


def _broken_line(line: str, width: int) -> str | None:
    """A line of one-column characters (_one_column_each) without tabs broken as WordWrap breaks it from a line's
    start, the spaces at each break and at its end dropped; None where a word, or the first with the indentation before
    it, is wider than the line."""
    if width <= 0:
        return line.rstrip(" ")
    pieces, end = [], 0
    for piece in _line_piece(width).finditer(line):
        if piece.start() != end:
            return None
        pieces.append(piece[1])
        end = piece.end()
    return "\n".join(pieces)  # what is left after the last piece is spaces


@functools.lru_cache(maxsize=4)
def _line_piece(width: int) -> re.Pattern[str]:
    """The longest piece of a line, up to width columns of one-column characters, that ends a word, and the spaces
    after it."""
    return re.compile(rf"(.{{0,{width - 1}}}[^ ])(?: +|\Z)", re.DOTALL)


COMMANDS = ("run", "chat", "bench", "pull", "fit", "cache", "models", "conversations")  # localgen's commands
_QUOTES = "'\"`"
_CLAUSE_ENDS = (", ", "; ", ": ", ")", " (", " or ", " and ", "\n")


def whole_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) stretches of a message that no line may break inside: a `backticked` command, and one named
    bare (localgen run "Why?") up to the end of its clause (quoted prose, a name or a system prompt, may break)."""
    spans: list[tuple[int, int]] = []
    end = 0
    for candidate in _SPAN_STARTS.finditer(text):  # where a span may open; each span from where the last ended
        index = candidate.start()
        if index < end:
            continue
        found = (_quoted_end(text, index) if text[index] == "`" else 0) or _command_end(text, index)
        if found:
            spans.append((index, found))
            end = found
    return spans


_SPAN_STARTS = re.compile("`|localgen ")


def _starts_word(text: str, index: int) -> bool:
    """Whether text[index] begins a word (the text's start, or after a space or an opening bracket)."""
    return index == 0 or text[index - 1] in " \t([{=`"


def _quoted_end(text: str, index: int) -> int:
    """The end of the quoted span opening at index: past its closing quote, which ends a word (0: none opens)."""
    quote = text[index]
    if quote not in _QUOTES or not (quote == "`" or _starts_word(text, index)):
        return 0
    close = index
    while True:
        close = text.find(quote, close + 1)
        if close < 0 or "\n" in text[index:close]:
            return 0
        if quote == "`" or close + 1 == len(text) or not text[close + 1].isalnum():
            return close + 1


def _command_end(text: str, index: int) -> int:
    """The end of the localgen command named bare at index (its clause's end: a comma, a bracket, 'or'), or 0."""
    first, _, rest = text[index:index + 40].partition(" ")
    if first != "localgen" or not _starts_word(text, index) or rest.split(" ", 1)[0] not in COMMANDS:
        return 0
    at = index + len("localgen ")
    while at < len(text):
        if text.startswith(_CLAUSE_ENDS, at):
            return at
        at = max(at + 1, _quoted_end(text, at))
    return at


def _spaces_within(text: str, spans: list[tuple[int, int]]) -> set[int]:
    """The positions of the spaces inside spans."""
    return {i for start, end in spans for i in range(start, end) if text[i] in " \t"}
