"""A string's minLength and maxLength beside its pattern, folded into the pattern where it is a plain run of single
characters (literals, classes, `.`, escapes) of which at most one repeats a varying number of times: the count of that
one narrowed to the lengths, as `^[a-z]+$` with maxLength 5 is `^[a-z]{1,5}$`; llama-cpp-python's converter follows a
pattern alone and dropped them."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

from localgen.json_schema_words import MAX_SPAN, NoValueError

LENGTH_KEYWORDS = ("minLength", "maxLength")
ONE_CHARACTER_ESCAPES = "dwtnr"  # escapes of one character each that the converter turns into GBNF
# a quantifier as Python's re reads one: *, +, ?, {m}, {m,}, {,n}, {m,n}
_QUANTIFIER = re.compile(r"[*+?]|\{(?!\})(\d*)(?:(,)(\d*))?\}")


@dataclass(frozen=True)
class _Piece:
    """One character of a pattern (its text) repeated fewest to most times (None: without end)."""

    text: str
    fewest: int
    most: int | None


def lengths_folded(schema: dict[str, Any]) -> dict[str, Any]:
    """schema with its minLength and maxLength folded into its pattern where they can be (or found to hold whatever
    the pattern matches), left out of it then; otherwise unchanged."""
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    pattern = schema.get("pattern")
    if not isinstance(pattern, str) or not any(key in schema for key in LENGTH_KEYWORDS) or "enum" in schema or \
            "const" in schema or schema.get("type", "string") != "string" or not _count(low) or not (
            high is None or _count(high)) or not _readable(pattern):
        return schema
    pieces = _pieces(pattern)
    varying = [piece for piece in pieces or () if piece.fewest != piece.most]
    if pieces is None or len(varying) > 1:
        return schema
    fixed = sum(piece.fewest for piece in pieces if piece not in varying)
    if not varying:
        if low <= fixed and (high is None or fixed <= high):
            return _without_lengths(schema)
        raise _no_string(schema)
    piece = varying[0]
    fewest = max(piece.fewest, low - fixed)
    most = piece.most if high is None else high - fixed if piece.most is None else min(piece.most, high - fixed)
    if most is not None and fewest > most:
        raise _no_string(schema)
    if most is not None and most - fewest > MAX_SPAN:
        return schema  # a count its grammar cannot nest: the lengths left to their warning
    count = f"{{{fewest},{'' if most is None else most}}}"
    body = "".join(part.text + (count if part is piece else _count_text(part)) for part in pieces)
    return {**_without_lengths(schema), "pattern": f"^{body}$"}


def _count(value: object) -> bool:
    """Whether a length keyword's value is a count (a whole number from 0: others are refused elsewhere)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _readable(pattern: str) -> bool:
    """Whether Python's re reads a pattern (one it does not is refused where the converter meets it)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except re.error:
        return False
    return True


def _without_lengths(schema: dict[str, Any]) -> dict[str, Any]:
    """schema without minLength and maxLength."""
    return {key: value for key, value in schema.items() if key not in LENGTH_KEYWORDS}


def _no_string(schema: dict[str, Any]) -> NoValueError:
    """The refusal of a pattern whose strings all break the lengths beside it."""
    lengths = ", ".join(f"{key} {schema[key]}" for key in LENGTH_KEYWORDS if key in schema)
    return NoValueError(f"the JSON schema's pattern {schema['pattern']} matches no string of {lengths}",
                        hint="make its minLength and maxLength fit the pattern, or drop them")


def _count_text(piece: _Piece) -> str:
    """A piece's count as pattern text (none for once)."""
    if piece.fewest == piece.most:
        return "" if piece.fewest == 1 else f"{{{piece.fewest}}}"
    return f"{{{piece.fewest},{'' if piece.most is None else piece.most}}}"


def _pieces(pattern: str) -> list[_Piece] | None:
    """An anchored pattern's characters, each with its count (None: not anchored, or more than a run of single
    characters: a group, an alternation, an anchor inside, a quantifier on a quantifier)."""
    if len(pattern) < 2 or not pattern.startswith("^") or not pattern.endswith("$"):
        return None
    body, pieces, index = pattern[1:-1], [], 0
    if body.endswith("\\") and (len(body) - len(body.rstrip("\\"))) % 2:
        return None
    while index < len(body):
        end = _atom_end(body, index)
        if end is None:
            return None
        text, index = body[index:end], end
        quantifier = _QUANTIFIER.match(body, index)
        if quantifier is None:
            pieces.append(_Piece(text, 1, 1))
            continue
        index = quantifier.end()
        if body[index:index + 1] == "?":
            index += 1  # lazy: the same strings
        if body[index:index + 1] in ("*", "+", "?", "{"):
            return None
        pieces.append(_Piece(text, *_counts(quantifier)))
    return pieces


def _atom_end(body: str, index: int) -> int | None:
    """Where the single character starting at index ends (None: not one, as a group or an alternation)."""
    char = body[index]
    if char == "\\":  # an escape of one character the converter takes: \d, \w, \t, \n, \r, \. ... (not \x41, \s,
        escaped = body[index + 1:index + 2]  # \u00e9, \S, nor \b, which matches none: left to the converter as written)
        return index + 2 if escaped and (escaped in ONE_CHARACTER_ESCAPES or not escaped.isalnum()) else None
    if char == "[":
        end = index + 1 + (body[index + 1:index + 2] == "^")
        end += body[end:end + 1] == "]"  # a ] first in its class is one of its characters
        while end < len(body) and body[end] != "]":
            end += 2 if body[end] == "\\" else 1
        return end + 1 if end < len(body) else None
    return None if char in "()|^$*+?{}" else index + 1


def _counts(quantifier: re.Match[str]) -> tuple[int, int | None]:
    """A quantifier's fewest and most repeats (None: without end)."""
    text = quantifier.group(0)
    if text in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[text]
    low, comma, high = quantifier.groups()
    fewest = int(low) if low else 0
    return fewest, (int(high) if high else None) if comma else fewest
