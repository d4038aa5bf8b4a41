"""GBNF literals of JSON text: exact (a quote, a backslash and control characters escaped), and an enum's values as
one tree of the beginnings they share, where the converter wrote each value as an alternative of its own and
llama.cpp's sampler followed every one of them at each token (256 listed integers halved the decoding speed)."""

from __future__ import annotations

import json

MAX_DEPTH = 64  # the deepest a tree of values nests (grammar.MAX_NESTING bounds a grammar's parentheses)


def gbnf_literal(text: str) -> str:
    """text as a GBNF string literal that matches exactly its text."""
    return '"' + "".join(_gbnf_char(char) for char in text) + '"'


def enum_rule(values: list[object]) -> str:
    """The GBNF alternatives of an enum's values as JSON text (as the converter writes them), their shared
    beginnings written once."""
    return _tree([json.dumps(value) for value in values])


def _tree(texts: list[str], depth: int = 0) -> str:
    """GBNF that matches each of texts (none empty), grouped by their first character, each group's longest shared
    beginning written once before the alternatives of its rest; at MAX_DEPTH, the texts as alternatives."""
    if depth >= MAX_DEPTH:  # values each the one before and a character more: their tree nests as deep as they run
        return " | ".join(map(gbnf_literal, dict.fromkeys(texts)))
    groups: dict[str, list[str]] = {}
    for text in dict.fromkeys(texts):
        groups.setdefault(text[0], []).append(text)
    pieces = []
    for group in groups.values():
        shared = _shared_start(group)
        rests = [text[len(shared):] for text in group if len(text) > len(shared)]
        piece = gbnf_literal(shared)
        if rests:
            piece += f" ({_tree(rests, depth + 1)})" + ("?" if len(rests) < len(group) else "")
        pieces.append(piece)
    return " | ".join(pieces)


def _shared_start(texts: list[str]) -> str:
    """The longest beginning all of texts share."""
    first, last = min(texts), max(texts)
    size = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last)))
    return first[:size]


def _gbnf_char(char: str) -> str:
    """One character in a GBNF string literal: a quote and a backslash escaped, a control character as \\xNN."""
    if char in '"\\':
        return "\\" + char
    return f"\\x{ord(char):02X}" if ord(char) < 0x20 or ord(char) == 0x7F else char
