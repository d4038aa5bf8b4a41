"""How many optional items in a row a GBNF grammar lets begin with one character: llama.cpp's grammar sampler tries
every way of spreading a token over such a run, which grows past minutes per token ("a"? repeated 200 times).

An item's enders are the terminals (a literal, a character class) it can begin with that can also end it: after one
of them, the rest of the item can match nothing. In a run of optional items each ender can take the next character,
and the items after it are all still open for the one after that.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from localgen.grammar import MAX_CODE_POINT, class_ranges, gbnf_characters, gbnf_pieces

MAX_RUN = 16  # ([^"]?){16} costs llama.cpp about a second per token on SmolLM2's vocabulary; {24}, half a minute
RUN_HINT = ('write a run of optional items as one bounded repetition: "a"{0,200} rather than ("a"?){200} '
            "(in a schema's pattern, a{0,200} rather than a?a?a?...)")
_TOKEN = re.compile(r"\s+|::=|[A-Za-z0-9_-]+|\{[^}]*\}|[|()?*+.]")

Key = tuple[tuple[int, int], ...]  # the characters a terminal can begin with, as (low, high) ranges
Node = tuple  # ("lit", Key | None), ("cls", Key), ("ref", name), ("alt", [[Node, ...], ...]), ("rep", Node, m, n)


class _Unread(Exception):
    """GBNF this reader does not follow (llama.cpp's parser reports what is wrong with it)."""


@dataclass
class _Run:
    """The longest run found: its size, the character its items share, and the rule it is in."""

    size: int = 0
    char: int = 0
    rule: str = ""


@dataclass
class _Reader:
    """A grammar's rules, and the summary of each once worked out: (can match nothing, its enders)."""

    rules: dict[str, list[list[Node]]]
    done: dict[str, tuple[bool, Counter[Key]]] = field(default_factory=dict)
    longest: _Run = field(default_factory=_Run)
    rule: str = ""


@dataclass(frozen=True)
class OptionalRun:
    """A run of optional items in a row that can each begin with the same character."""

    size: int
    char: str
    rule: str


def longest_optional_run(text: str) -> OptionalRun | None:
    """The longest run of items in a row, each able to match nothing, that can each begin with one same character
    and leave the run complete (None: the grammar was not read: llama.cpp's parser is left to say why)."""
    try:
        reader = _Reader(_rules(_tokens(text)))
        for name in reader.rules:
            _rule_summary(reader, name)
    except (_Unread, RecursionError, ValueError, IndexError):
        return None
    run = reader.longest
    return OptionalRun(run.size, chr(run.char), run.rule) if run.size else None


def matches_only_empty(text: str) -> bool:
    """Whether a GBNF grammar's root matches the empty text alone (root ::= ""): an answer of it can hold nothing
    (False where the grammar was not read, or a rule refers back to itself)."""
    try:
        rules = _rules(_tokens(text))
    except (_Unread, RecursionError, ValueError, IndexError):
        return False
    return "root" in _rules_of_only_empty(rules)


def _rules_of_only_empty(rules: dict[str, list[list[Node]]]) -> set[str]:
    """The rules that match the empty text alone, each worked out once from the rules it refers to, so that a rule
    referred to many times, or a chain of thousands, costs no more than its size (one that refers back to itself,
    or to a rule not defined, is not one)."""
    needs: dict[str, set[str]] = {}  # each rule that can be one, and the rules it waits on
    users: dict[str, list[str]] = {name: [] for name in rules}
    for name, alternatives in rules.items():
        referred = _referred_if_only_empty(rules, alternatives)
        if referred is not None:
            needs[name] = referred
            for other in referred:
                users[other].append(name)
    found = {name for name, referred in needs.items() if not referred}
    waiting = list(found)
    while waiting:
        done = waiting.pop()
        for user in users[done]:
            needs[user].discard(done)
            if not needs[user] and user not in found:
                found.add(user)
                waiting.append(user)
    return found


def _referred_if_only_empty(rules: dict[str, list[list[Node]]], alternatives: list[list[Node]]) -> set[str] | None:
    """The rules a rule's alternatives refer to, which match the empty text alone where each of these does (None: a
    character, or a rule not defined, makes it match more, or nothing)."""
    referred: set[str] = set()
    stack: list[Node] = [item for sequence in alternatives for item in sequence]
    while stack:
        node = stack.pop()
        kind = node[0]
        if kind == "ref" and node[1] in rules:
            referred.add(node[1])
        elif kind == "alt":
            stack.extend(item for sequence in node[1] for item in sequence)
        elif kind == "rep":
            stack.extend([] if node[3] == 0 else [node[1]])
        elif not (kind == "lit" and node[1] is None):
            return None
    return referred


def _tokens(text: str) -> list[tuple[str, str]]:
    """GBNF text as tokens: ('"', a literal's body), ('[', a class's body), ('word', a name), or the symbol itself."""
    tokens: list[tuple[str, str]] = []
    plain: list[str] = []
    for kind, body in [*gbnf_pieces(text), ("end", "")]:
        if not kind:
            plain.append(body)
            continue
        joined, at = "".join(plain), 0
        while at < len(joined):
            match = _TOKEN.match(joined, at)
            if match is None:
                raise _Unread(joined[at])
            token, at = match.group(0), match.end()
            if not token.isspace():
                tokens.append(("word", token) if token[0].isalnum() or token[0] in "_-" else (token, token))
        plain.clear()
        if kind != "end":
            tokens.append((kind, body))
    return tokens


def _rules(tokens: list[tuple[str, str]]) -> dict[str, list[list[Node]]]:
    """The rules in tokens, each as its alternatives (a rule named twice keeps its last definition)."""
    starts = [i for i in range(len(tokens) - 1) if tokens[i][0] == "word" and tokens[i + 1][0] == "::="]
    rules = {}
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(tokens)
        body = tokens[start + 2:end]
        alternatives, at = _alternatives(body, 0)
        if at != len(body):
            raise _Unread(body[at][1])
        rules[tokens[start][1]] = alternatives
    return rules


def _alternatives(tokens: list[tuple[str, str]], at: int) -> tuple[list[list[Node]], int]:
    """The alternatives from at, up to a ')' or the end."""
    alternatives = [[]]
    while at < len(tokens) and tokens[at][0] != ")":
        if tokens[at][0] == "|":
            alternatives.append([])
            at += 1
            continue
        node, at = _element(tokens, at)
        alternatives[-1].append(node)
    return alternatives, at


def _element(tokens: list[tuple[str, str]], at: int) -> tuple[Node, int]:
    """One element at at, with the repetitions after it."""
    kind, body = tokens[at]
    if kind == '"':
        characters = gbnf_characters(body)
        node: Node = ("lit", ((characters[0][0],) * 2,) if characters else None)
    elif kind == "[":
        node = ("cls", _class_key(body))
    elif kind == ".":
        node = ("cls", ((1, MAX_CODE_POINT),))
    elif kind == "word":
        node = ("ref", body)
    elif kind == "(":
        alternatives, at = _alternatives(tokens, at + 1)
        if at >= len(tokens):
            raise _Unread("(")
        node = ("alt", alternatives)
    else:
        raise _Unread(body)
    at += 1
    while at < len(tokens) and (tokens[at][0] in "?*+" or tokens[at][0].startswith("{")):
        node = ("rep", node, *_counts(tokens[at][0]))
        at += 1
    return node, at


def _counts(symbol: str) -> tuple[int, int | None]:
    """The least and most times a repetition symbol allows (None: no most)."""
    if symbol in ("?", "*", "+"):
        return {"?": (0, 1), "*": (0, None), "+": (1, None)}[symbol]
    low, comma, high = symbol[1:-1].partition(",")
    return int(low), (int(high) if high.strip() else None) if comma else int(low)


def _class_key(body: str) -> Key:
    """The characters a class matches, as ranges (a negated class's complement, NUL left out)."""
    ranges = sorted(class_ranges(gbnf_characters(body.removeprefix("^"))))
    if not body.startswith("^"):
        return tuple(ranges)
    left, low = [], 1
    for start, end in ranges:
        if start > low:
            left.append((low, start - 1))
        low = max(low, end + 1)
    return tuple(left + ([(low, MAX_CODE_POINT)] if low <= MAX_CODE_POINT else []))


def _rule_summary(reader: _Reader, name: str) -> tuple[bool, Counter[Key]]:
    """Whether a rule can match nothing, and its enders (a rule met again while worked out counts as neither)."""
    if name in reader.done:
        return reader.done[name]
    if name not in reader.rules:
        return False, Counter()
    reader.done[name] = (False, Counter())
    outer, reader.rule = reader.rule, name
    reader.done[name] = _alternatives_summary(reader, reader.rules[name])
    reader.rule = outer
    return reader.done[name]


def _alternatives_summary(reader: _Reader, alternatives: list[list[Node]]) -> tuple[bool, Counter[Key]]:
    """Whether any alternative can match nothing, and their enders together."""
    empty, enders = False, Counter()
    for sequence in alternatives:
        can_be_empty, found = _sequence_summary(reader, sequence)
        empty, enders = empty or can_be_empty, enders + found
    return empty, enders


def _sequence_summary(reader: _Reader, sequence: list[Node]) -> tuple[bool, Counter[Key]]:
    """Whether a sequence can match nothing, and its enders: the terminals it can begin with that leave it complete.

    Each run of items that can match nothing is measured on the way (reader.longest).
    """
    summaries = [_summary(reader, node) for node in sequence]
    run: Counter[Key] = Counter()
    for can_be_empty, enders in [*summaries, (False, Counter())]:
        if can_be_empty:
            run += enders
            continue
        _measure(reader, run)
        run = Counter()
    needed = [index for index, (empty, _) in enumerate(summaries) if not empty]  # the items that must match
    if len(needed) > 1:  # an item between two that must match leaves the sequence incomplete
        return False, Counter()
    if needed:
        return False, summaries[needed[0]][1]
    return True, sum((found for _, found in summaries), Counter())


def _summary(reader: _Reader, node: Node) -> tuple[bool, Counter[Key]]:
    """Whether one element can match nothing, and its enders."""
    kind = node[0]
    if kind == "lit":
        return node[1] is None, Counter() if node[1] is None else Counter({node[1]: 1})
    if kind == "cls":
        return False, Counter({node[1]: 1})
    if kind == "ref":
        return _rule_summary(reader, node[1])
    if kind == "alt":
        return _alternatives_summary(reader, node[1])
    can_be_empty, enders = _summary(reader, node[1])
    low, high = node[2], node[3]
    copies = high if high is not None else low + 1
    if can_be_empty:  # llama.cpp writes x{m,n} as m copies and n - m nested optional ones: each can take the token
        return True, Counter({key: count * copies for key, count in enders.items()})
    return low == 0, enders if low <= 1 else Counter()


def _measure(reader: _Reader, run: Counter[Key]) -> None:
    """Keep the run if more of its items can begin with one character than in any run before."""
    steps: list[tuple[int, int]] = []
    for key, count in run.items():
        for low, high in key:
            steps += [(low, count), (high + 1, -count)]
    steps.sort()
    total = 0
    for index, (at, change) in enumerate(steps):
        total += change
        if total > reader.longest.size:
            reader.longest = _Run(total, _shown_char(at, steps[index + 1][0] - 1), reader.rule)


def _shown_char(low: int, high: int) -> int:
    """A character from low to high to name: a printable one where there is one."""
    return next((c for c in (low, ord("a"), ord("A"), ord("0"), ord("!")) if low <= c <= high and chr(c).isprintable()),
                low)
