"""A JSON schema's pattern in the terms of llama-cpp-python's converter: checked with Python's re, anchored, its
escapes and syntax characters spelled so that the converter reads them as meant and a JSON string can hold them."""

from __future__ import annotations

import json
import re
import warnings

from localgen.errors import UsageError
from localgen.json_schema_words import MAX_COUNT, MAX_SPAN, NOT_IN_JSON_STRING

_CLASS_ESCAPES = {"d": "0-9", "w": "0-9A-Za-z_"}  # a pattern's \d and \w, as a character class's body
_ESCAPES = {"d": "[0-9]", "D": "[^0-9]", "w": "[0-9A-Za-z_]", "W": "[^0-9A-Za-z_]"}
_JSON_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}  # escapes of these
_COUNT = re.compile(r"\{(?!\})(\d*)(?:,(\d*))?\}")  # as Python's re reads a count: {m}, {m,}, {,n}, {m,n}, {,}


def converter_pattern(pattern: str) -> str:
    """A schema's pattern as the converter reads it and a JSON string can hold: checked with Python's re, its body
    grouped (^yes|no$ is ^(yes|no)$), \\d and \\w spelled as classes, other escapes, and a ], { or } that is a
    character, as JSON text or \\xNN (the converter would read a bare one as syntax, or loop for ever on it)."""
    try:
        with warnings.catch_warnings():  # [[:a:]] is a class and a ]: Python's FutureWarning would reach stderr
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"the JSON schema's pattern {pattern} is not a valid regular expression ({exc.msg})",
                         hint="check its parentheses, brackets and {m,n} counts") from None
    if not _anchored(pattern):
        raise UsageError(f"the JSON schema's pattern {pattern} is not anchored: a grammar matches the whole string",
                         hint='start it with ^ and end it with $, e.g. "^[a-z]+$"')
    return "^(" + "".join(_translated(pattern, pattern[1:-1])) + ")$"


def _anchored(pattern: str) -> bool:
    """Whether a pattern starts with ^ and ends with a $ that no backslash escapes."""
    before = pattern[1:-1]
    return (len(pattern) > 1 and pattern.startswith("^") and pattern.endswith("$")
            and (len(before) - len(before.rstrip("\\"))) % 2 == 0)


def _check_count(pattern: str, count: re.Match[str]) -> None:
    """Refuse a {m,n} count in a pattern over MAX_COUNT (the converter would spell it out that many times)."""
    low, high = (int(number) if number else None for number in count.groups())
    if max(low or 0, high or 0) > MAX_COUNT:
        raise UsageError(f"the JSON schema's pattern repeats {count.group(0)}, beyond {MAX_COUNT:,} times",
                         hint=f"use counts of {MAX_COUNT:,} or less")
    if high is not None and high - (low or 0) > MAX_SPAN:
        raise UsageError(f"the JSON schema's pattern repeats {count.group(0)}: counts more than {MAX_SPAN:,} "
                         "apart, which its grammar cannot nest", hint="narrow them, or leave the maximum out")


def _translated(pattern: str, body: str) -> list[str]:
    """The pattern's body, piece by piece, in the converter's terms (see converter_pattern)."""
    pieces: list[str] = []
    i, class_from, negated = 0, -1, False  # class_from: where the open class's characters start (-1: none open)
    while i < len(body):
        char = body[i]
        count = _COUNT.match(body, i) if class_from < 0 else None
        if char == "\\" and i + 1 < len(body):
            pieces.append(_class_escape(pattern, body[i + 1]) if class_from >= 0 else _escape(pattern, body[i + 1]))
            i += 2
            continue
        if count:
            _check_count(pattern, count)
            pieces.append(count.group(0))
            i = count.end()
            continue
        if class_from >= 0 and char == "]":
            if i == class_from:  # a ] first in its class is one of its characters
                pieces.append("\\x5D")
            else:
                pieces.append(NOT_IN_JSON_STRING + "]" if negated else "]")
                class_from = -1
        elif class_from < 0 and char == "[":
            negated = body[i + 1:i + 2] == "^"
            class_from = i + 1 + negated
            pieces.append(body[i:class_from])
            i = class_from
            continue
        elif class_from < 0 and char in "]{}":  # the character itself: no count, no class
            pieces.append(f"[\\x{ord(char):02X}]")
        elif char == '"' or ord(char) < 0x20:
            if class_from >= 0:
                raise _unmatchable(pattern, char if char == '"' else f"\\x{ord(char):02X}")
            pieces.append(f"({_json_text(char)})")
        else:
            pieces.append(char)
        i += 1
    return pieces


def _json_text(char: str) -> str:
    """A quote, backslash or control character as the pattern text from which the converter matches its JSON
    escape: the escape's backslashes doubled (the converter keeps an escaped backslash as GBNF's)."""
    return json.dumps(char)[1:-1].replace("\\", "\\\\")


def _escape(pattern: str, char: str) -> str:
    """An escape outside a character class, in the converter's terms."""
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char in _JSON_ESCAPES:
        return f"({_json_text(_JSON_ESCAPES[char])})"
    if not char.isalnum():
        return f"[\\x{ord(char):02X}]"
    raise _unsupported(pattern, char)


def _class_escape(pattern: str, char: str) -> str:
    """An escape inside a character class, in the converter's terms."""
    if char in _CLASS_ESCAPES:
        return _CLASS_ESCAPES[char]
    if char in _JSON_ESCAPES:
        raise _unmatchable(pattern, "\\" + char)
    if not char.isalnum():
        return f"\\x{ord(char):02X}"
    raise _unsupported(pattern, char)


def _unsupported(pattern: str, char: str) -> UsageError:
    """The error for an escape the translation does not know (\\s, \\b, \\1...)."""
    return UsageError(f"the JSON schema's pattern {pattern}: its \\{char} is not supported",
                      hint="spell the characters out, e.g. [ ] for a space, [0-9] for a digit")


def _unmatchable(pattern: str, what: str) -> UsageError:
    """The error for a character a JSON string writes as two (", \\ or a control character) in a class."""
    return UsageError(f"the JSON schema's pattern {pattern} has {what} in a character class: a JSON string "
                      "writes it as two characters", hint='use an alternation instead, e.g. (a|")')
