"""Input bytes as text: UTF-8, or UTF-16 or UTF-32 where a byte-order mark says so; binary data refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from localgen.control_chars import NOT_TEXT_CONTROLS, terminal_safe
from localgen.errors import UsageError
from localgen.units import counted

MOST_BYTES_PER_CHARACTER = 4  # in UTF-8, UTF-16 (a surrogate pair) and UTF-32
BOM = "\ufeff"  # a byte-order mark, which some editors put at the start of a UTF-8 file
DOCUMENT_HINT = "send text; convert documents to plain text first"
# what a terminal reading a line passes on as typed for a key that is no text: the escape sequence of an arrow or
# another key (ESC [ ... final, ESC O x), or a control character
_TYPED_KEY = re.compile(rf"\x1b(?:\[[0-?]*[ -/]*[@-~]|O[@-~])|[{NOT_TEXT_CONTROLS}]")
_ARROW_KEY = re.compile(r"\x1b(?:\[[\d;]*|O)[A-D]")  # Up, Down, Right, Left (with Ctrl or Shift too: ESC [ 1;5D)


def decode_input(data: bytes, source: str, warnings: list[str], *, binary_hint: str = DOCUMENT_HINT) -> str:
    """Decode input bytes as UTF-8, or as UTF-16 or UTF-32 where a byte-order mark says so (Windows' "Unicode"
    text), without the mark; binary data is refused, undecodable bytes are replaced with a warning."""
    encoding = wide_encoding(data)
    refuse_binary(data, source, binary_hint)
    try:
        text = data.decode(encoding or "utf-8")
    except UnicodeDecodeError:
        warnings.append(f"{source} is not valid {(encoding or 'utf-8').upper()}; undecodable bytes were replaced "
                        "with U+FFFD")
        text = data.decode(encoding or "utf-8", errors="replace")
    if "\x00" in text:  # a NUL character in UTF-16 text
        raise UsageError(f"{source} looks like binary data (it contains NUL characters)", hint=binary_hint)
    return text.removeprefix(BOM)


def argument_text(value: str, source: str, warnings: list[str]) -> str:
    """A command-line argument as text, read as UTF-8 (argument_utf8): bytes that were not UTF-8 become U+FFFD, with
    a warning."""
    text = argument_utf8(value)
    return text if text is not None else decode_input(value.encode("utf-8", "surrogateescape"), source, warnings)


def argument_utf8(value: str) -> str | None:
    """A command-line argument read as UTF-8, as argument_text reads it (in a locale that is not UTF-8, Python kept
    its bytes as lone surrogates), or None where its bytes are not UTF-8."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return None


def typed_at_a_terminal(text: str, warnings: list[str]) -> str:
    """Text typed at a terminal that reads it a line at a time (`localgen run -`), without the keys it passed on as
    text (the arrows' escape sequences, ^[[D, other control characters), with a warning, as the chat drops them."""
    keys = _TYPED_KEY.findall(text)
    if not keys:
        return text
    shown = " ".join(dict.fromkeys(map(terminal_safe, keys)))
    arrows = ": arrow keys do not edit a line typed there (Backspace does)" if any(map(_ARROW_KEY.fullmatch, keys)) \
        else ""
    warnings.append(f"dropped {counted(len(keys), 'non-text key')} typed at the terminal ({shown}){arrows}")
    return _TYPED_KEY.sub("", text)


def plain_newlines(text: str) -> str:
    """Text with Windows line ends (CRLF) as plain newlines, as a text-mode read makes them."""
    return text.replace("\r\n", "\n")


def argument_as_file_text(value: str) -> str:
    """An argument's text as a file's is read (`"$(cat FILE)"`): without a leading byte-order mark, and with Windows
    line ends as plain newlines (argument_line_ends)."""
    return argument_line_ends(value).removeprefix(BOM)


def argument_line_ends(value: str) -> str:
    """An argument's text with Windows line ends as plain newlines; a CR at its end is what `"$(cat FILE)"` left of
    the last line's end, whose newline it took away, and goes too."""
    return plain_newlines(value).removesuffix("\r")


_WIDE_MARKS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
               (b"\xfe\xff", "utf-16"))  # UTF-32's marks first: UTF-16 LE's is the start of one


def refuse_binary(data: bytes, source: str, hint: str) -> None:
    """Refuse data with a NUL byte in it, unless a UTF-16 or UTF-32 byte-order mark starts it, as binary data."""
    if b"\x00" in data and wide_encoding(data) is None:
        raise UsageError(f"{source} looks like binary data (it contains NUL bytes)", hint=hint)


def wide_encoding(data: bytes) -> str | None:
    """"utf-16" or "utf-32" when data starts with its byte-order mark (which no UTF-8 text does), else None."""
    return next((encoding for mark, encoding in _WIDE_MARKS if data.startswith(mark)), None)


@dataclass(frozen=True)
class SizeCap:
    """The most bytes an option that takes its file as a whole (a grammar) reads of it, below a document's cap: a
    read stops there, and a larger file is refused naming the option, the cap and what the option takes. A cap of
    characters (chars) reads no more bytes than that many characters take, and refuses a longer text in its words."""

    option: str
    size: int
    what: str  # what the option takes: "a grammar"
    chars: int | None = None  # the most characters the text may have, where the cap is one of characters

    @classmethod
    def of_characters(cls, option: str, chars: int, what: str) -> SizeCap:
        """The cap of a text of at most chars characters: its file is read no further than the bytes they can take
        (4 a character in UTF-8, UTF-16 and UTF-32, and one more character's for a byte-order mark)."""
        return cls(option, MOST_BYTES_PER_CHARACTER * (chars + 1), what, chars)

    def refusal(self, name: str) -> UsageError:
        """The error for a file over the cap, called name."""
        over = f"larger than {self.size // 2**20} MiB" if self.chars is None else \
            f"longer than {self.chars:,} characters"
        return UsageError(f"{self.option} {name} is {over}, the most {self.what} may be",
                          hint=f"check the file given to {self.option}")

    def check_length(self, text: str, name: str) -> None:
        """Refuse the text of the file called name, read within the cap, where it has more characters than a cap of
        characters allows."""
        if self.chars is not None and len(text) > self.chars:
            raise self.refusal(name)


@dataclass(frozen=True)
class TextBound:
    """How much text a read may gather: text of refused_at UTF-8 bytes or more, counted with what came before it
    (counted), cannot be used, and refuse(bytes) raises the error that says so, before the rest is read; named
    says what that text is made of, as it is read."""

    refused_at: int
    refuse: Callable[[int], object]
    counted: int = 0
    naming: Callable[[str], Callable[[int], object]] | None = None  # a refuse naming what the text is made of

    def named(self, made_of: str) -> TextBound:
        """The bound whose refusal names what the text counted is made of ('with -f a.txt and the prompt'), where it
        can name it."""
        return self if self.naming is None else replace(self, refuse=self.naming(made_of))

    def beside(self, *texts: str | None) -> TextBound:
        """The bound for what is read next, texts counted with what came before."""
        return replace(self, counted=self.counted + sum(len(text.encode()) for text in texts if text))

    def check(self, data: bytes) -> int:
        """Refuse data whose text certainly reaches the bound (its bytes as decode_input's text would count them, a
        character cut at the end left out); else the size of data at which to check again (as large again)."""
        if len(data) + self.counted >= self.refused_at:
            text = data.decode(wide_encoding(data) or "utf-8", errors="ignore").removeprefix(BOM)
            size = len(text.encode()) + self.counted
            if size >= self.refused_at:
                self.refuse(size)
        return max(2 * len(data), self.refused_at - self.counted)
