"""Listings on a pipe: one line a row, its fields tab-separated, each field escaped so that a script can read it back
whole (as PostgreSQL's COPY text format and `ls --quoting-style=escape` do)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TextIO

NAMED_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
# a backslash, control characters (C0, DEL, C1), lone surrogates (a file name's bytes that are not UTF-8) and the
# Unicode line and paragraph separators, which some readers split lines at
_ESCAPED = re.compile("[\\\\\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def escaped_field(text: str) -> str:
    """A field as a tab-separated line holds it: a backslash, tab, newline and carriage return written \\\\, \\t, \\n
    and \\r, any other control or line-breaking character as the \\xHH of each of its UTF-8 bytes, and a file name's
    byte that is not UTF-8 as \\xHH of that byte."""
    return _ESCAPED.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    """The escape of one character that escaped_field escapes."""
    char = match.group()
    return NAMED_ESCAPES.get(char) or byte_escapes(char)


def byte_escapes(char: str) -> str:
    """A character as the \\xHH of each of its UTF-8 bytes, or of the one byte of a file name that was not UTF-8 (read
    by Python as a lone surrogate, U+DC80-U+DCFF): what a shell's $'...' reads back as that file name's bytes."""
    try:
        data = char.encode("utf-8", "surrogateescape")  # U+DC80-U+DCFF: the byte Python read as it
    except UnicodeEncodeError:
        data = char.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in data)


def write_rows(stream: TextIO, rows: Iterable[list[str]]) -> None:
    """Rows as tab-separated lines, each field escaped."""
    for row in rows:
        stream.write("\t".join(escaped_field(cell) for cell in row) + "\n")
    stream.flush()
