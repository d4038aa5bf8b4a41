"""Control characters: model text as a terminal shows it rather than obeys it, its controls made visible; the ones
input drops as no text."""

from __future__ import annotations

import re

NOT_TEXT_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f"  # (a regex class's range) C0 controls and DEL; tabs and newlines are text
BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))  # embeddings, overrides and isolates (U+202E)
_TERMINAL_SAFE = {code: f"^{chr(code + 64)}" for code in range(32) if chr(code) not in "\n\t"} | {
    0x7F: "^?"} | {code: "\ufffd" for code in (*range(0x80, 0xA0), *BIDI_CONTROLS)}


_ON_ONE_LINE = {code: shown for code, shown in _TERMINAL_SAFE.items() if code not in BIDI_CONTROLS} | {
    ord(char): " " for char in "\n\r\t"} | {  # after the table that shows a carriage return as ^M
    code: "\ufffd" for code in range(0xD800, 0xE000)}  # lone surrogates: a file name's bytes that were not UTF-8


def shown_on_one_line(text: str) -> str:
    """Text on one line with its control characters shown as terminal_safe shows them (^[, U+FFFD for C1 codes):
    line ends (a Windows one, \\r\\n, as one) and tabs as spaces, bytes that were not UTF-8 U+FFFD; bidi controls kept
    for a pipe (a terminal's writer makes them visible)."""
    return text.replace("\r\n", "\n").translate(_ON_ONE_LINE)


def terminal_safe(text: str) -> str:
    """Model text a terminal shows rather than obeys: control characters (escape sequences, a carriage return but a
    Windows line end's) become visible ^X, and C1 codes and the bidi controls that reorder a line (U+202E shows
    gnp.exe as exe.png) U+FFFD."""
    return text.replace("\r\n", "\n").translate(_TERMINAL_SAFE)


class TerminalSafePieces:
    """terminal_safe for text that comes in pieces: a carriage return that ends a piece is held until the next one
    shows whether a line end follows it (a Windows line end in two pieces) or not (^M)."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        """The piece made safe, less a carriage return it ends with (held)."""
        text = self._held + text
        self._held = "\r" if text.endswith("\r") else ""
        return terminal_safe(text[:len(text) - len(self._held)])

    def flush(self) -> str:
        """What is held, made safe: a carriage return that nothing came after is ^M."""
        held, self._held = self._held, ""
        return terminal_safe(held)


_JSON_ESCAPED = re.compile(f"[\x7f-\x9f{''.join(map(chr, BIDI_CONTROLS))}\ud800-\udfff]")  # controls; lone surrogates


def json_escaped(text: str) -> str:
    """JSON text with DEL, the C1 and bidi controls and lone surrogates (only ever inside strings) written as \\uXXXX
    escapes: the same value, which a terminal shows rather than obeys."""
    return _JSON_ESCAPED.sub(lambda c: f"\\u{ord(c.group()):04x}", text)
