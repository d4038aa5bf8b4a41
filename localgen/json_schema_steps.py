"""An integer's or number's multipleOf of another step than 1, 0.1, 0.01, ... (0.25, 0.5, 1.5, 2, 5, 7) held by a
grammar of its digits, within its bounds: the remainder of the digits read so far (as an integer, to the step's
decimals) carried digit by digit, as a divisibility automaton, where llama-cpp-python's converter ignored it."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from localgen.json_schema_ranges import (
    BOUND_KEYWORDS,
    Bound,
    bounds_of_kind,
    exact_decimal,
    fraction_digits,
    integral,
    whole_digits,
)
from localgen.json_schema_words import OWN_RULE_KEYWORDS, NoValueError, no_value_within

MAX_MODULUS = 1000  # the largest step, in units of its last decimal, whose remainders are carried: larger, warned
MAX_STEP_RULES = 2000  # the most rules a step's grammar takes (its remainders times the digits left): more, warned
MAX_STEP_WORK = 4 * MAX_STEP_RULES  # the most remainders times digits a step's grammar is built for: more, warned
_Edge = tuple[str, str] | None  # a bound's digits still to meet, and whether the bound itself is left out (None: met)


@dataclass(frozen=True)
class _Step:
    """A multipleOf as modulus / 10 ** places: a number is a multiple where its digits, read as an integer to places
    decimals, are a multiple of modulus."""

    modulus: int
    places: int


@dataclass(frozen=True)
class _Whole:
    """Reading an integer part: between fewest and most digits left, the digits still to meet of the lower and upper
    bound of its length (None: passed), the remainder so far, and the fraction's bounds where it ends at them."""

    fewest: int
    most: int
    lower: str | None
    upper: str | None
    remainder: int
    lower_fraction: _Edge
    upper_fraction: _Edge


@dataclass(frozen=True)
class _Decimals:
    """Reading a fraction: whether its point (and a first digit) is written, its bounds, remainder and room left."""

    started: bool
    lower: _Edge
    upper: _Edge
    remainder: int
    room: int


@dataclass(frozen=True)
class SteppedGrammar:
    """A step's grammar: its rules (children first, each body naming earlier ones as {0}, {1}, ...) and its root's
    body, with the same references."""

    rules: tuple[str, ...]
    root: str


def held_step(schema: dict[str, Any]) -> SteppedGrammar | None:
    """The grammar of an integer's or number's schema whose multipleOf is held by its digits' remainders, within its
    bounds (None: no such multipleOf, one left to ranges (1, 0.1, ...), or one too large to carry); made once for
    each type, step and bounds (a schema's properties alike share it)."""
    kind = schema.get("type")
    if kind not in ("integer", "number") or "multipleOf" not in schema or \
            any(key in schema for key in OWN_RULE_KEYWORDS):
        return None
    return _held_step(json.dumps({key: schema[key] for key in ("type", *BOUND_KEYWORDS, "multipleOf")
                                  if key in schema}, sort_keys=True))


@lru_cache(maxsize=256)
def _held_step(key: str) -> SteppedGrammar | None:
    """held_step of the schema of these keywords (its type, bounds and multipleOf, as JSON)."""
    schema = json.loads(key)
    kind, step = schema.get("type"), _step(schema)
    if step is None:
        return None
    bounds = bounds_of_kind(schema, kind)
    if bounds is None:
        return None
    low, high = bounds
    digits = whole_digits(low, high)
    if step.modulus * (digits + step.places) > MAX_STEP_WORK:
        return None
    grammar = _stepped(low, high, kind == "integer", step, digits)
    if grammar is not None and len(grammar.rules) > MAX_STEP_RULES:
        return None
    if grammar is None:
        raise no_value_within(schema, kind, stepped=True)
    return grammar


def steps_held(schema: dict[str, Any]) -> frozenset[str]:
    """The keywords a schema's grammar holds by held_step: its multipleOf and bounds (none where it holds none)."""
    if _every_integer(schema):
        return frozenset({"multipleOf"})
    try:
        held = held_step(schema) is not None
    except NoValueError:  # no multiple within its bounds: refused, or its alternative dropped, as its rule is made
        held = True
    if not held:
        return frozenset()
    return frozenset(key for key in (*BOUND_KEYWORDS, "multipleOf") if key in schema)


def _every_integer(schema: dict[str, Any]) -> bool:
    """Whether an integer's multipleOf divides every integer (1, 0.5, 0.25: 1 over a whole number)."""
    exact = _step_value(schema)
    return schema.get("type") == "integer" and exact is not None and exact.numerator == 1


def _step_value(schema: dict[str, Any]) -> Fraction | None:
    """A schema's multipleOf as the decimal it is written as (None: none, or not a number above 0)."""
    given = schema.get("multipleOf")
    if not isinstance(given, int | float) or isinstance(given, bool) or not (
            isinstance(given, int) or math.isfinite(given)) or given <= 0:
        return None
    return exact_decimal(given)


def stepped_rule(add_rule: Callable[[str, str], str], schema: dict[str, Any], name: str) -> str | None:
    """The GBNF body of a schema whose multipleOf held_step holds, its rules added with add_rule (None: not such a
    schema)."""
    grammar = held_step(schema)
    if grammar is None:
        return None
    names: list[str] = []
    shared = "step-" + hashlib.sha256("\n".join((*grammar.rules, grammar.root)).encode()).hexdigest()[:8]  # (shared)
    for index, body in enumerate(grammar.rules):
        names.append(add_rule(f"{shared}-{index}", body.format(*names)))
    return grammar.root.format(*names)


def _step(schema: dict[str, Any]) -> _Step | None:
    """A schema's multipleOf as a modulus of at most MAX_MODULUS over its decimals (None: none, one of 1, 0.1, ...
    on a number, which ranges holds, or one that is no finite decimal)."""
    exact = _step_value(schema)
    if exact is None:
        return None
    if schema.get("type") == "integer":  # an integer n is a multiple of p/q (lowest terms) where p divides n
        return _Step(exact.numerator, 0) if 1 < exact.numerator <= MAX_MODULUS else None
    places = next((count for count in range(0, 101) if 10 ** count % exact.denominator == 0), None)
    if places is None:
        return None
    modulus = exact.numerator * 10 ** places // exact.denominator
    return _Step(modulus, places) if 1 < modulus <= MAX_MODULUS else None


@lru_cache(maxsize=256)
def _stepped(low: Bound | None, high: Bound | None, whole: bool, step: _Step, digits: int) -> SteppedGrammar | None:
    """The grammar of the multiples of step within the bounds, as JSON text (None: there are none)."""
    builder = _Builder(step, 0 if whole else step.places)
    positive = builder.magnitudes(*_positive(low, high), digits, whole)
    negative = builder.magnitudes(*_negative(low, high), digits, whole)
    pieces = [piece for piece in (positive, f'"-" {negative}' if negative else None) if piece]
    if not pieces:
        return None
    return SteppedGrammar(tuple(builder.bodies), f"({' | '.join(pieces)}) space")


def _positive(low: Bound | None, high: Bound | None) -> tuple[Bound | None, Bound | None]:
    """The magnitudes of the numbers from 0 up within the bounds: least and greatest (None: none, or no greatest)."""
    if high is not None and high.value < 0:
        return None, None
    least = Bound(Fraction(0), False) if low is None or low.value < 0 else low
    return least, high


def _negative(low: Bound | None, high: Bound | None) -> tuple[Bound | None, Bound | None]:
    """The magnitudes of the numbers below 0 within the bounds (never -0)."""
    if low is not None and low.value >= 0:
        return None, None
    least = Bound(-high.value, high.strict) if high is not None and high.value < 0 else Bound(Fraction(0), True)
    return least, None if low is None else Bound(-low.value, low.strict)


class _Builder:
    """The rules of a divisibility automaton over digits, each state's once, identical ones shared (which makes it
    the smallest such automaton: the states it builds have no cycle)."""

    def __init__(self, step: _Step, room: int) -> None:
        """A builder for multiples of step of at most room decimals."""
        self.step, self.room = step, room
        self.bodies: list[str] = []
        self.named: dict[str, str] = {}  # a body: its reference
        self.states: dict[object, str | None] = {}

    def magnitudes(self, least: Bound | None, most: Bound | None, digits: int, whole: bool) -> str | None:
        """A reference to the rule of the magnitudes from least to most (None: none)."""
        if least is None:
            return None
        if whole:
            least = integral(least, above=True)
            most = integral(most, above=False)
            if least is None:
                return None
        low_int = math.floor(least.value)
        high_int = 10 ** digits - 1 if most is None else math.floor(most.value)
        if low_int > high_int:
            return None
        starts: list[str] = []
        free: list[int] = []  # lengths whose every integer part is allowed, no fraction bound at either end
        for length in range(len(str(low_int)), len(str(high_int)) + 1):
            first = max(low_int, 10 ** (length - 1) if length > 1 else 0)
            last = min(high_int, 10 ** length - 1)
            lower = _edge(least) if first == low_int else None
            upper = _edge(most) if most is not None and last == high_int else None
            if length > 1 and first == 10 ** (length - 1) and last == 10 ** length - 1 and _met(lower) is None \
                    and upper is None:
                free.append(length)
            elif first <= last:
                starts.append(self._transitions(_Whole(length, length, str(first), str(last), 0, lower, upper)))
        if free:  # any first digit but 0, then any digits
            starts.append(self._digits(range(1, 10), lambda digit: _Whole(
                free[0] - 1, free[-1] - 1, None, None, digit % self.step.modulus, None, None)))
        body = " | ".join(start for start in starts if start)
        return self._named(body) if body else None

    def _rule(self, state: _Whole | _Decimals) -> str | None:
        """A reference to the rule of what may follow in a state ("": the end alone; None: nothing may, not even the
        end)."""
        if state not in self.states:
            body = self._whole(state) if isinstance(state, _Whole) else self._decimals(state)
            self.states[state] = "" if body == '""' else self._named(body) if body else None
        return self.states[state]

    def _named(self, body: str) -> str:
        """A reference to a rule of body, the one made for the same body if any."""
        if body not in self.named:
            self.named[body] = f"{{{len(self.bodies)}}}"
            self.bodies.append(body)
        return self.named[body]

    def _whole(self, state: _Whole) -> str:
        """GBNF of an integer part's digits left, then what follows it."""
        pieces = [self._transitions(state)]
        if state.fewest == 0:
            pieces.append(self._decimals(_Decimals(False, _met(state.lower_fraction), state.upper_fraction,
                                                   state.remainder, self.room)))
        return " | ".join(piece for piece in pieces if piece)

    def _transitions(self, state: _Whole) -> str:
        """GBNF of the next digit of an integer part and what follows it."""
        if state.most == 0:
            return ""
        def after(digit: int) -> _Whole | None:
            lower = _next(state.lower, digit, above=True)
            upper = _next(state.upper, digit, above=False)
            if lower is False or upper is False:
                return None
            return _Whole(max(state.fewest - 1, 0), state.most - 1, lower, upper,
                          (state.remainder * 10 + digit) % self.step.modulus,
                          state.lower_fraction if lower is not None else None,
                          state.upper_fraction if upper is not None else None)
        return self._digits(range(10), after)

    def _decimals(self, state: _Decimals) -> str:
        """GBNF of a fraction's point and digits, or the end where the number may end here."""
        lower, upper = state.lower, state.upper
        pieces = []
        ends = lower is None and (upper is None or upper[0] != "" or upper[1] == "") and \
            state.remainder * 10 ** state.room % self.step.modulus == 0
        if state.started and ends:
            pieces.append('""')
        if not state.started:
            if ends:
                pieces.append('""')
            if upper == ("", "") and lower is None and self.room and ends:
                pieces.append('"." "0"')  # at an integer bound: one zero, as other numbers may take decimals
            elif self.room:
                first = self._digits(range(10), lambda digit: self._after(state, digit))
                pieces.extend([f'"." ({first})'] if first else [])
            return " | ".join(pieces)
        if state.room and (upper is None or upper[0] != ""):
            pieces.append(self._digits(range(10), lambda digit: self._after(state, digit)))
        return " | ".join(piece for piece in pieces if piece)

    def _after(self, state: _Decimals, digit: int) -> _Decimals | None:
        """The fraction's state after one more digit (None: the digit breaks a bound)."""
        lower = None if state.lower is None else _next_edge(state.lower, digit, above=True)
        upper = None if state.upper is None else _next_edge(state.upper, digit, above=False)
        if lower is False or upper is False or state.room == 0:
            return None
        return _Decimals(True, _met(lower), upper, (state.remainder * 10 + digit) % self.step.modulus,
                         state.room - 1)

    def _digits(self, digits: range, after: Callable[[int], Any]) -> str:
        """GBNF of one digit of digits, then the rule of the state it leads to, digits leading alike grouped."""
        groups: dict[str, list[int]] = {}
        for digit in digits:
            state = after(digit)
            rule = None if state is None else self._rule(state)
            if rule is not None:
                groups.setdefault(rule, []).append(digit)
        pieces = []
        for rule, chosen in groups.items():
            spans = _spans(chosen)
            pieces.append(f"[{spans}] {rule}" if rule else f"[{spans}]")
        return " | ".join(pieces)


def _spans(digits: list[int]) -> str:
    """A character class's body for digits: runs as ranges."""
    parts, start = [], 0
    for index in range(1, len(digits) + 1):
        if index == len(digits) or digits[index] != digits[index - 1] + 1:
            first, last = digits[start], digits[index - 1]
            parts.append(f"{first}" if first == last else f"{first}-{last}")
            start = index
    return "".join(parts)


def _edge(bound: Bound | None) -> _Edge:
    """A bound's fraction digits as an edge to meet, strict or not ("" / "x" for the flag, hashable)."""
    if bound is None:
        return None
    return fraction_digits(bound.value % 1), "x" if bound.strict else ""


def _met(edge: _Edge) -> _Edge:
    """A lower edge met whatever follows (None) where its digits are written and equality is allowed."""
    return None if edge is None or edge == ("", "") else edge


def _next(rest: str | None, digit: int, *, above: bool) -> str | bool | None:
    """An integer part's bound digits still to meet after one more digit (None: passed; False: broken)."""
    if rest is None:
        return None
    bound = int(rest[0])
    if digit == bound:
        return rest[1:]
    return None if (digit > bound) == above else False


def _next_edge(edge: tuple[str, str], digit: int, *, above: bool) -> _Edge | bool:
    """A fraction's bound after one more digit (None: passed; False: broken; an upper bound's digits all written
    lets no more digit come)."""
    rest, strict = edge
    if not rest:
        if not above:
            return False
        return None if digit > 0 else edge
    bound = int(rest[0])
    if digit == bound:
        return rest[1:], strict
    return None if (digit > bound) == above else False
