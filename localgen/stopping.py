"""Stop strings: warnings about ones that cannot match as meant, and incremental matching over streamed text, without
rescanning the output."""

from __future__ import annotations

import re
import sys

ESCAPES = {"\\n": "a newline", "\\t": "a tab", "\\r": "a carriage return"}
# chat's /set stop reads these, and /show writes a stop string with them (a quote escaped inside its own quotes)
READ_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\r": "\r", "\\\\": "\\", "\\'": "'", '\\"': '"', "\\,": ","}
_WRITTEN = {char: escape for escape, char in READ_ESCAPES.items() if char not in "'\","}  # those go in quotes
_READ = re.compile(r"""\\(?:[ntr\\'",]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})""")
_CODES = {"x": 2, "u": 4, "U": 8}  # \xHH, \uHHHH, \UHHHHHHHH: any other character, by its code (as Python writes it)


def escapes_read(text: str) -> str:
    """A stop string typed in the chat (/set stop) with its escapes read as what they stand for: \\n, \\t, \\r,
    \\\\, \\', \\" and \\, (a comma that parts no stop strings), and a character by its code, \\x1b (any other
    backslash is kept)."""
    return re.sub(_READ, _escape_read, text)


def _escape_read(found: re.Match[str]) -> str:
    """The character one escape stands for (a code beyond Unicode's: the escape as typed)."""
    escape = found[0]
    if escape in READ_ESCAPES:
        return READ_ESCAPES[escape]
    code = int(escape[2:], 16)
    return chr(code) if code <= sys.maxunicode else escape


def escaped(text: str) -> str:
    """A stop string as /set stop reads it back (escapes_read), quoted: backslashes, the quote and every character
    that does not print (\\n, \\t, ESC as \\x1b) escaped; in single quotes unless it holds one and no double quote
    (as Python writes a string)."""
    quote = '"' if "'" in text and '"' not in text else "'"
    return quote + "".join(_escaped_char(char, quote) for char in text) + quote


def _escaped_char(char: str, quote: str) -> str:
    """One character of a quoted stop string, escaped where it must be."""
    if char == quote:
        return "\\" + char
    if char in _WRITTEN:
        return _WRITTEN[char]
    if char.isprintable():
        return char
    return _code_escaped(char)


def printable_escaped(text: str) -> str:
    """Text with each character that does not print (a control, a zero-width space) escaped as Python writes it
    (\\n, \\x1b, \\u200b)."""
    return "".join(char if char.isprintable() else _WRITTEN.get(char) or _code_escaped(char) for char in text)


def _code_escaped(char: str) -> str:
    """A character written by its code, as Python writes it (\\x1b, \\u200b, \\U000e0001)."""
    code = ord(char)
    letter = "x" if code < 0x100 else "u" if code < 0x10000 else "U"
    return f"\\{letter}{code:0{_CODES[letter]}x}"


def words_read(argument: str) -> list[str]:
    """The stop strings /set stop's argument gives: words split at spaces or commas (as /show lists them: '###',
    'User:'), quoted as in a shell ('User says:', 'a,b'), each with its escapes read (escapes_read: a\\,b is one), a
    quote escaped inside its own quotes (\\'); a ValueError for a quote left open."""
    words: list[str] = []
    typed, quote, at, started = "", "", 0, False
    while at < len(argument):
        char = argument[at]
        pair = argument[at:at + 2]
        if char == "\\" and len(pair) == 2 and (quote or not pair[1].isspace()):
            typed, at, started = typed + pair, at + 2, True  # read with the rest by escapes_read
            continue
        if char == quote or (not quote and char in "'\""):
            quote = "" if quote else char
            started = True
        elif quote or not (char.isspace() or char == ","):
            typed, started = typed + char, True
        elif started:
            words.append(escapes_read(typed))
            typed, started = "", False
        at += 1
    if quote:
        raise ValueError("No closing quotation")
    return [*words, escapes_read(typed)] if started else words


def partial_suffix(text: str, word: str, *, longer_than: int = 0) -> int:
    """Length of the longest suffix of text, over longer_than, that is a proper prefix of word; else 0."""
    for size in range(min(len(word) - 1, len(text)), longer_than, -1):
        if text.endswith(word[:size]):
            return size
    return 0


def typed_escape_warnings(stops: list[str]) -> list[str]:
    """A warning for each --stop string holding a typed escape (a backslash and n, t or r): llama-cli reads '\\n' in
    its reverse prompts as a newline; localgen takes --stop as the shell gives it, so such a string rarely matches."""
    import shlex

    warnings = []
    for stop in stops:
        typed = [(escape, name) for escape, name in ESCAPES.items() if escape in stop]
        if typed:
            escape, name = typed[0]
            meant = "$'" + stop.replace("'", "\\'") + "'"
            warnings.append(f"--stop {shlex.quote(stop)} holds {escape} as a backslash and a letter, not {name}: stop "
                            f"strings are taken as typed (in bash or zsh, --stop {meant} turns {escape} into {name})")
    return warnings


def hidden_tag_stops(stops: list[str]) -> list[str]:
    """A warning for each --stop string that spells <think> or </think>: --hide-thinking matches stop strings in the
    answer shown, which has the reasoning's tags left out, so such a string never matches them."""
    from localgen.thinking import CLOSE_TAG, OPEN_TAG  # thinking imports this module

    return [f"--stop {stop!r} never matches the reasoning's tags with --hide-thinking: stop strings are matched in the "
            f"answer, which has its {OPEN_TAG}…{CLOSE_TAG} reasoning left out (without --hide-thinking it stops at the "
            "tag)"
            for stop in stops if OPEN_TAG in stop or CLOSE_TAG in stop]


class StopMatcher:
    """Holds back text that may be the start of a stop string; reports a full match."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.matched: str | None = None

    def feed(self, text: str) -> str:
        """Add streamed text; return what is now safe to emit (text before any stop string)."""
        if not self._stops:
            return text
        buffer = self._held + text
        cut = min((i for i in (buffer.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.matched = next(s for s in self._stops if buffer.find(s) == cut)
            self._held = ""
            return buffer[:cut]
        keep = 0
        for stop in self._stops:
            keep = partial_suffix(buffer, stop, longer_than=keep) or keep
        self._held = buffer[len(buffer) - keep:] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """Release held-back text at the end of the stream."""
        held, self._held = self._held, ""
        return held


class TrailingBlank:
    """Holds back the blank space at the end of the text so far, given out once other text follows it: the space a
    JSON schema's grammar allows after a value, left out where the answer ends there (off: text passes as it is)."""

    def __init__(self, *, on: bool) -> None:
        self._on = on
        self._held = ""

    def feed(self, text: str) -> str:
        """Add streamed text; return it without the blank space at its end, which is held back."""
        if not self._on:
            return text
        buffer = self._held + text
        kept = buffer.rstrip(" \t\r\n")
        self._held = buffer[len(kept):]
        return kept

    def flush(self) -> str:
        """Release the held-back blank space (an answer cut short keeps it)."""
        held, self._held = self._held, ""
        return held
