"""Word wrapping a text a run of characters at a time gives the very bytes it gave a character at a time."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from hypothesis import example, given, settings
from hypothesis import strategies as st

from localgen.wordwrap import WordWrap, whole_spans

# --- The character-at-a-time wrapping these runs replace, kept as it was, for comparison ---

TAB_STOP = 8
ZERO_WIDTH_JOINER = "\u200d"
COMMANDS = ("run", "chat", "bench", "pull", "fit", "cache", "models", "conversations")
QUOTES = "'\"`"
CLAUSE_ENDS = (", ", "; ", ": ", ")", " (", " or ", " and ", "\n")


def display_width(text: str) -> int:
    return sum(0 if unicodedata.combining(c) else 2 if is_wide(c) else 1 for c in text)


def is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"


def joins_previous(char: str) -> bool:
    return (unicodedata.combining(char) > 0 or char == ZERO_WIDTH_JOINER or "\ufe00" <= char <= "\ufe0f"
            or "\U0001f3fb" <= char <= "\U0001f3ff")


class CharacterWrap:
    """WordWrap as it was: every character through one loop."""

    def __init__(self, width: Callable[[], int], *, wide_breaks: bool = True, keep_whole: bool = False) -> None:
        self._width, self._wide_breaks, self._keep_whole = width, wide_breaks, keep_whole
        self._column, self._spaces, self._word, self._word_width = 0, "", "", 0
        self._folding = self._joined = False

    def feed(self, text: str) -> str:
        width = self._width()
        out: list[str] = []
        spans = old_whole_spans(text) if self._keep_whole else []
        glued = {i for start, end in spans if width <= 0 or display_width(text[start:end]) <= width
                 for i in range(start, end) if text[i] in " \t"}
        for index, char in enumerate(text):
            joined, self._joined = self._joined or joins_previous(char), char == ZERO_WIDTH_JOINER
            if index in glued and self._folding:
                out.append(char)
                self._advance(display_width(char), width)
            elif index in glued:
                self._grow(char, width, out)
            elif joined and not (self._word or self._spaces) and char != "\n":
                out.append(char)
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
        return "".join(out)

    def _grow(self, char: str, width: int, out: list[str]) -> None:
        self._word += char
        self._word_width += display_width(char)
        if width > 0 and self._word_width > width:
            out.append(self._place(width))
            self._folding = True

    def flush(self) -> str:
        return self._place(self._width())

    def _place(self, width: int) -> str:
        if not self._word:
            return ""
        column = self._column
        for char in self._spaces:
            column += TAB_STOP - column % TAB_STOP if char == "\t" else 1
        spaces, word = column - self._column, self._word_width
        if width > 0 and self._column > 0 and self._column + spaces + word > width:
            text, self._column = "\n" + self._word, 0
        else:
            text, self._column = self._spaces + self._word, self._column + spaces
        self._advance(word, width)
        self._spaces, self._word, self._word_width = "", "", 0
        return text

    def _advance(self, columns: int, width: int) -> None:
        self._column += columns
        if width > 0 and self._column > width:
            self._column %= width


def old_whole_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(text):
        end = (quoted_end(text, index) if text[index] == "`" else 0) or command_end(text, index)
        if end:
            spans.append((index, end))
            index = end
        else:
            index += 1
    return spans


def starts_word(text: str, index: int) -> bool:
    return index == 0 or text[index - 1] in " \t([{=`"


def quoted_end(text: str, index: int) -> int:
    quote = text[index]
    if quote not in QUOTES or not (quote == "`" or starts_word(text, index)):
        return 0
    close = index
    while True:
        close = text.find(quote, close + 1)
        if close < 0 or "\n" in text[index:close]:
            return 0
        if quote == "`" or close + 1 == len(text) or not text[close + 1].isalnum():
            return close + 1


def command_end(text: str, index: int) -> int:
    first, _, rest = text[index:index + 40].partition(" ")
    if first != "localgen" or not starts_word(text, index) or rest.split(" ", 1)[0] not in COMMANDS:
        return 0
    at = index + len("localgen ")
    while at < len(text):
        if text.startswith(CLAUSE_ENDS, at):
            return at
        at = max(at + 1, quoted_end(text, at))
    return at


# --- The comparison ---

ASCII_PIECES = ["a", "bc", "word", "supercalifragilistic", "x" * 13, " ", " ", "  ", "\t", "\n", "\n", "\n\n", "\r",
                "\x1b[2m", "\x1b[0m", "\x07", "\x7f", "`", "'", '"', ",", ", ", ";", ": ", "(", ")", " (", " or ",
                " and ", "=", "[", "localgen", "localgen ", "localgen run ", "localgen chat", "localgen models rm x",
                "`cache clear`", "'a, b'"]
OTHER_PIECES = ["日", "本語", "ドキュメント", "é", "e\u0301", "\u0301", "\u0301\u0302", "\u200d", "\ufe0f",
                "\U0001f44d", "\U0001f3fd", "\U0001f468\u200d\U0001f469", "\uff21", "\u00a0", "\u2028", "\ud800"]
texts = (st.lists(st.sampled_from(ASCII_PIECES), max_size=40).map("".join)
         | st.lists(st.sampled_from(ASCII_PIECES + OTHER_PIECES), max_size=40).map("".join) | st.text(max_size=60))


def wrapped(make: Callable[..., object], chunks: list[str], widths: list[int], wide_breaks: bool,
            keep_whole: bool) -> str:
    """What a wrapper made by make shows of chunks fed in turn, each feed asking the next width (a resized terminal)."""
    asked = iter(widths * (len(chunks) + 1))
    wrap = make(lambda: next(asked), wide_breaks=wide_breaks, keep_whole=keep_whole)
    return "".join(wrap.feed(chunk) for chunk in chunks) + wrap.flush()


@st.composite
def fed(draw: st.DrawFn) -> tuple[list[str], list[int]]:
    """A text cut into chunks, and the widths the terminal has as they come."""
    text = draw(texts)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return chunks, draw(st.lists(st.integers(-1, 12) | st.integers(13, 40), min_size=1, max_size=3))


@settings(max_examples=1500, deadline=None, database=None)
@given(fed=fed(), wide_breaks=st.booleans(), keep_whole=st.booleans())
@example(fed=(["The quick brown fox jumps over"], [9]), wide_breaks=False, keep_whole=True)
@example(fed=(["abcdefghij abcdefghij\nabcdefghijk"], [10]), wide_breaks=True, keep_whole=False)
@example(fed=(["x" * 25, "y" * 7, " z"], [1]), wide_breaks=True, keep_whole=False)
@example(fed=(["x" * 25, "y" * 7, " z"], [10, 3, 40]), wide_breaks=True, keep_whole=False)
@example(fed=(["see `localgen run 'a b'` or localgen chat with m, ok"], [12]), wide_breaks=False, keep_whole=True)
@example(fed=(["a\u200d b\u200d\u200dc\u200d\n\u200d x"], [4]), wide_breaks=True, keep_whole=False)
@example(fed=(["\n\u200daaaa b"], [5]), wide_breaks=True, keep_whole=False)
@example(fed=(["\n\u200d", "aaaa b"], [5]), wide_breaks=True, keep_whole=False)
@example(fed=(["\n\u200d  ab cd"], [6]), wide_breaks=True, keep_whole=False)
@example(fed=(["abcd efgh\nabcd efghi\n  abcd\n     abcd\nab   \n   \nabcdefghi ab\n"], [9]), wide_breaks=True,
         keep_whole=False)
@example(fed=(["ab cd  \n  x\n"], [0]), wide_breaks=True, keep_whole=False)
@example(fed=(["ab\u200d", "\u200dcd efgh ij"], [4]), wide_breaks=True, keep_whole=False)  # a joiner ending one feed
def test_runs_show_the_bytes_characters_did(fed: tuple[list[str], list[int]], wide_breaks: bool,
                                            keep_whole: bool) -> None:
    chunks, widths = fed
    assert (wrapped(WordWrap, chunks, widths, wide_breaks, keep_whole)
            == wrapped(CharacterWrap, chunks, widths, wide_breaks, keep_whole))


@settings(max_examples=1500, deadline=None, database=None)
@given(text=texts)
def test_the_spans_kept_whole_are_those_every_index_found(text: str) -> None:
    assert whole_spans(text) == old_whole_spans(text)


def test_a_long_text_wraps_as_it_did_character_by_character() -> None:
    """Thousands of lines of prose, escapes, commands and wide text, at widths about and exactly a line's."""
    line = ("Answer 12. The \x1b[2mquick\x1b[0m brown fox, see `localgen run 'x'` or localgen chat with m; 日本語の"
            "テキスト cafe\u0301 \U0001f44d\U0001f3fd\t" + "z" * 30 + "\n")
    text = line * 60
    for width in (0, 1, 7, 40, len(line) - 1, len(line), 100):
        for wide_breaks in (True, False):
            assert (wrapped(WordWrap, [text], [width], wide_breaks, True)
                    == wrapped(CharacterWrap, [text], [width], wide_breaks, True)), width
