"""An integer's or number's bounds (minimum, maximum, their exclusive forms, draft 4's true or false ones too) held by
a grammar of the digits they allow, as llama.cpp's own converter writes an integer's range, where llama-cpp-python's
converter ignored them: the integer part's range, a number's fraction allowed, zero or above zero where a bound
needs it, and no exponent (1e3 could pass any bound)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from localgen.json_schema_literals import gbnf_literal
from localgen.json_schema_words import OWN_RULE_KEYWORDS, NoValueError, short_json

PLAIN_DIGITS = 16  # the converter's integral-part and decimal-part: at most 16 digits, kept where no bound is larger
MAX_DIGITS = 100  # the longest bound (in digits) a range is written for (each digit nests it deeper): longer, warned
BOUND_KEYWORDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
_ANY, _ZERO, _ABOVE_ZERO, _NONE = "any", "zero", "above zero", "none"  # a region's fraction: any, all zeros (or
# none), above zero, or none at all (an integer's)


@dataclass(frozen=True)
class _Bound:
    """One side's bound: its value, and whether the value itself is left out (exclusive)."""

    value: Fraction
    strict: bool


@dataclass(frozen=True)
class _Region:
    """Numbers of one sign whose integer part's digits run from low to high (None: as many digits as allowed) and
    whose fraction is of one kind."""

    low: int
    high: int | None
    fraction: str


def bounds_held(schema: dict[str, Any]) -> frozenset[str]:
    """The bound keywords of a schema that range_rule holds (none where it writes no rule)."""
    if range_rule(schema) is None:
        return frozenset()
    return frozenset(key for key in BOUND_KEYWORDS if key in schema)


def range_rule(schema: dict[str, Any]) -> str | None:
    """The GBNF of an integer's or number's JSON text within its bounds (None: not such a schema, none given, or one
    the grammar cannot hold exactly: a number's bound off an integer, a bound too long, of another kind)."""
    kind = schema.get("type")
    if kind not in ("integer", "number") or any(key in schema for key in OWN_RULE_KEYWORDS):
        return None
    sides = _bounds(schema)
    if sides is None or sides == (None, None):
        return None
    low, high = sides
    if kind == "integer":
        low, high = _integral(low, above=True), _integral(high, above=False)
    elif any(bound is not None and bound.value.denominator != 1 for bound in (low, high)):
        return None
    digits = max(PLAIN_DIGITS, *(len(str(abs(bound.value.numerator))) for bound in (low, high) if bound))
    positive, negative = _regions(low, high, negative=False), _regions(low, high, negative=True)
    if kind == "integer":
        positive, negative = _whole(positive), _whole(negative)
    pieces = [_region_rule(region, digits) for region in positive]
    if negative:
        after = [_region_rule(region, digits) for region in negative]
        pieces.append('"-" ' + (after[0] if len(after) == 1 else f"({' | '.join(after)})"))
    if not pieces:
        given = ", ".join(f"{key} {short_json(schema[key])}" for key in BOUND_KEYWORDS if key in schema)
        raise NoValueError(f"the JSON schema's {kind} of {given} can be no {kind}",
                           hint=f"make its bounds hold {'an integer' if kind == 'integer' else 'a number'}")
    return f"({' | '.join(pieces)}) space"


def ranges_apart(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether no number is within both schemas' bounds, as range_rule holds them (False where either holds none)."""
    sides = []
    for schema in (first, second):
        bounds = _bounds(schema) if range_rule(schema) is not None else None
        if bounds is None:
            return False
        integral = schema.get("type") == "integer"
        sides.append((_integral(bounds[0], above=True), _integral(bounds[1], above=False)) if integral else bounds)
    return _below(sides[0][1], sides[1][0]) or _below(sides[1][1], sides[0][0])


def may_hold(schema: dict[str, Any], value: object) -> bool:
    """Whether a JSON value may meet an integer's or number's schema whose bounds range_rule holds (True where it holds
    none: not known)."""
    bounds = _bounds(schema) if range_rule(schema) is not None else None
    if bounds is None:
        return True
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return False
    exact = Fraction(value)
    if schema.get("type") == "integer" and exact.denominator != 1:
        return False
    low, high = bounds
    return not (_below(_Bound(exact, False), low) or _below(high, _Bound(exact, False)))


def _below(high: _Bound | None, low: _Bound | None) -> bool:
    """Whether every number up to an upper bound is below every number from a lower bound (None: open)."""
    if high is None or low is None:
        return False
    return high.value < low.value or (high.value == low.value and (high.strict or low.strict))


def _bounds(schema: dict[str, Any]) -> tuple[_Bound | None, _Bound | None] | None:
    """The tightest lower and upper bound a schema gives (None for a side it leaves open; None for all: a bound of
    another kind than a finite number, or beyond MAX_DIGITS)."""
    sides: list[_Bound | None] = []
    for plain, exclusive, tighter in (("minimum", "exclusiveMinimum", max), ("maximum", "exclusiveMaximum", min)):
        found: list[_Bound] = []
        for key in (plain, exclusive):
            value = schema.get(key)
            if value is None or isinstance(value, bool):
                continue
            if not isinstance(value, int | float) or not (isinstance(value, int) or math.isfinite(value)):
                return None
            exact = Fraction(value)
            if len(str(abs(math.floor(exact)))) > MAX_DIGITS:
                return None
            found.append(_Bound(exact, key == exclusive or (schema.get(exclusive) is True)))
        if not isinstance(schema.get(exclusive, False), bool | int | float):
            return None
        chosen = tighter(found, key=lambda bound: (bound.value, bound.strict if tighter is max else not bound.strict),
                         default=None)
        sides.append(chosen)
    return sides[0], sides[1]


def _integral(bound: _Bound | None, *, above: bool) -> _Bound | None:
    """An integer's bound as the nearest integer it allows, inclusive."""
    if bound is None:
        return None
    if above:
        value = math.floor(bound.value) + 1 if bound.strict else math.ceil(bound.value)
    else:
        value = math.ceil(bound.value) - 1 if bound.strict else math.floor(bound.value)
    return _Bound(Fraction(value), False)


def _at_least(size: int, strict: bool) -> list[_Region]:
    """The magnitudes (integer part and fraction) of at least size (above it, where strict)."""
    return [_Region(size + 1, None, _ANY), _Region(size, size, _ABOVE_ZERO)] if strict else [_Region(size, None, _ANY)]


def _at_most(size: int, strict: bool) -> list[_Region]:
    """The magnitudes (integer part and fraction) of at most size (below it, where strict)."""
    below = [_Region(0, size - 1, _ANY)] if size >= 1 else []
    return below if strict else [*below, _Region(size, size, _ZERO)]


def _regions(low: _Bound | None, high: _Bound | None, *, negative: bool) -> list[_Region]:
    """The magnitudes of the numbers of one sign within the bounds (a negative one's is above zero: no -0)."""
    limits = [[_Region(0, None, _ANY)]]
    if negative:  # x < 0: its magnitude above zero, at most -low, at least -high
        limits.append(_at_least(0, strict=True))
        if low is not None:
            limits.append(_at_most(int(-low.value), low.strict) if low.value <= 0 else [])
        if high is not None and high.value < 0:
            limits.append(_at_least(int(-high.value), high.strict))
    else:  # x >= 0: at least low, at most high
        if low is not None and (low.value > 0 or (low.value == 0 and low.strict)):
            limits.append(_at_least(int(low.value), low.strict))
        if high is not None:
            limits.append(_at_most(int(high.value), high.strict) if high.value >= 0 else [])
    regions = limits[0]
    for limit in limits[1:]:
        regions = [both for one in regions for other in limit if (both := _both(one, other))]
    return sorted(regions, key=lambda region: region.low)


def _both(first: _Region, second: _Region) -> _Region | None:
    """The magnitudes two regions share (None: none)."""
    low = max(first.low, second.low)
    highs = [high for high in (first.high, second.high) if high is not None]
    high = min(highs) if highs else None
    kinds = {first.fraction, second.fraction} - {_ANY}
    if (high is not None and low > high) or len(kinds) > 1:
        return None
    return _Region(low, high, kinds.pop() if kinds else _ANY)


def _whole(regions: list[_Region]) -> list[_Region]:
    """An integer's regions: a fraction above zero dropped, the others joined where they meet."""
    joined: list[_Region] = []
    for region in regions:
        if region.fraction == _ABOVE_ZERO:
            continue
        last = joined[-1] if joined else None
        if last is not None and last.high is not None and region.low <= last.high + 1:
            high = None if region.high is None else max(last.high, region.high)
            joined[-1] = _Region(last.low, high, _NONE)
        else:
            joined.append(_Region(region.low, region.high, _NONE))
    return joined


def _region_rule(region: _Region, digits: int) -> str:
    """GBNF of a region's numbers: its integer part's digits, then its fraction (none for an integer)."""
    high = 10 ** digits - 1 if region.high is None else region.high
    alternatives = naturals(region.low, high)
    whole = alternatives[0] if len(alternatives) == 1 else f"({' | '.join(alternatives)})"
    fraction = {_ANY: f' ("." [0-9]{{1,{PLAIN_DIGITS}}})?', _ZERO: f' ("." "0"{{1,{PLAIN_DIGITS}}})?',
                _ABOVE_ZERO: f' "." "0"{{0,{PLAIN_DIGITS - 1}}} [1-9] [0-9]{{0,{PLAIN_DIGITS - 1}}}',
                _NONE: ""}[region.fraction]
    return whole + fraction


def naturals(low: int, high: int) -> list[str]:
    """GBNF alternatives of the decimal text of each whole number from low to high (0 <= low <= high), no leading
    zero: one for 0, one for each run of digit counts it covers whole, one for each count it covers in part."""
    pieces = ['"0"'] if low == 0 else []
    low = max(low, 1)
    if low > high:
        return pieces
    whole: list[int] = []  # digit counts covered whole, in a run
    for count in range(len(str(low)), len(str(high)) + 1):
        first, last = max(low, 10 ** (count - 1)), min(high, 10 ** count - 1)
        if first == 10 ** (count - 1) and last == 10 ** count - 1:
            whole.append(count)
            continue
        pieces.extend([_whole_counts(whole)] if whole else [])
        whole = []
        pieces.append(_same_length(str(first), str(last)))
    pieces.extend([_whole_counts(whole)] if whole else [])
    return pieces


def _whole_counts(counts: list[int]) -> str:
    """GBNF of every whole number of a run of digit counts: a first digit, then the rest."""
    return f"[1-9]{_digits(counts[0] - 1, counts[-1] - 1)}"


def _digits(fewest: int, most: int) -> str:
    """GBNF of fewest to most digits, a space before it (nothing for none)."""
    if most == 0:
        return ""
    if fewest == most:
        return " [0-9]" if most == 1 else f" [0-9]{{{most}}}"
    return f" [0-9]{{{fewest},{most}}}"


def _same_length(low: str, high: str) -> str:
    """GBNF of the digit strings of one length from low to high: their shared beginning, then the digit where they
    part, each side's rest bounded on that side alone."""
    shared = next((i for i, (one, other) in enumerate(zip(low, high, strict=True)) if one != other), len(low))
    start = gbnf_literal(low[:shared]) if shared else ""
    if shared == len(low):
        return start
    first, last, rest = low[shared], high[shared], len(low) - shared - 1
    low_rest, high_rest = low[shared + 1:], high[shared + 1:]
    pieces = []
    from_first, to_last = low_rest == "0" * rest, high_rest == "9" * rest
    if not from_first:
        pieces.append(f"[{first}] ({_same_length(low_rest, '9' * rest)})")
    middle = (first if from_first else chr(ord(first) + 1), last if to_last else chr(ord(last) - 1))
    if middle[0] <= middle[1]:
        digit = f"[{middle[0]}]" if middle[0] == middle[1] else f"[{middle[0]}-{middle[1]}]"
        pieces.append(digit + _digits(rest, rest))
    if not to_last:
        pieces.append(f"[{last}] ({_same_length('0' * rest, high_rest)})")
    body = pieces[0] if len(pieces) == 1 else "(" + " | ".join(pieces) + ")"
    return f"{start} {body}" if start else body
