"""An integer's or number's bounds (minimum, maximum, their exclusive forms, draft 4's true or false ones too) held by
a grammar of the digits they allow, as llama.cpp's own converter writes an integer's range, where llama-cpp-python's
converter ignored them: the integer part's range, a number's fraction held digit by digit to a bound's decimal (0.5,
-2.75, 1e-3) at it, a multipleOf of 1, 0.1, 0.01, ... as that many decimals at most, and no exponent (1e3 could pass
any bound)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from localgen.json_schema_literals import gbnf_literal
from localgen.json_schema_words import OWN_RULE_KEYWORDS, no_value_within

PLAIN_DIGITS = 16  # the converter's integral-part and decimal-part: at most 16 digits, kept where no bound is larger
MAX_DIGITS = 100  # the longest bound (in digits) a range is written for (each digit nests it deeper): longer, warned
BOUND_KEYWORDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")


@dataclass(frozen=True)
class Bound:
    """One side's bound: its value, and whether the value itself is left out (exclusive)."""

    value: Fraction
    strict: bool


@dataclass(frozen=True)
class _Span:
    """The fractions (the digits after the point, read as a number from 0 to 1) a region allows: from lower, up to
    upper (None: below 1)."""

    lower: Bound
    upper: Bound | None


_ANY = _Span(Bound(Fraction(0), False), None)


@dataclass(frozen=True)
class _Region:
    """Numbers of one sign whose integer part's digits run from low to high (None: as many digits as allowed) and
    whose fraction is within a span (None: none at all, an integer's)."""

    low: int
    high: int | None
    fraction: _Span | None


def exact_decimal(number: float) -> Fraction:
    """A finite number as the decimal it is written as: an integer as itself, a float as its shortest decimal (0.1
    as 1/10, not the binary fraction nearest it), as a JSON reader's float compares with it."""
    return Fraction(number) if isinstance(number, int) else Fraction(repr(number))


def bounds_held(schema: dict[str, Any]) -> frozenset[str]:
    """The bound keywords of a schema that range_rule holds (none where it writes no rule), a number's multipleOf
    too."""
    if range_rule(schema) is None:
        return frozenset()
    stepped = schema.get("type") == "number" and _step_places(schema.get("multipleOf")) is not None
    held = (*BOUND_KEYWORDS, "multipleOf") if stepped else BOUND_KEYWORDS
    return frozenset(key for key in held if key in schema)


def range_rule(schema: dict[str, Any]) -> str | None:
    """The GBNF of an integer's or number's JSON text within its bounds (None: not such a schema, none given, or one
    the grammar cannot hold exactly: a bound of over MAX_DIGITS digits on either side of its point, of another
    kind)."""
    kind = schema.get("type")
    if kind not in ("integer", "number") or any(key in schema for key in OWN_RULE_KEYWORDS):
        return None
    places = _step_places(schema["multipleOf"]) if kind == "number" and "multipleOf" in schema else None
    stepped = places is not None  # another multipleOf is left to a warning, the bounds held alone
    sides = bounds_of_kind(schema, kind)
    if sides is None or (sides == (None, None) and not stepped):
        return None
    low, high = sides
    given = [bound.value for bound in (low, high) if bound is not None]
    digits = whole_digits(low, high)
    room = places if places is not None else max([PLAIN_DIGITS, *(len(fraction_digits(abs(value) % 1)) + 1
                                                                   for value in given)])
    positive, negative = _regions(low, high, negative=False), _regions(low, high, negative=True)
    if kind == "integer":
        positive, negative = _whole(positive), _whole(negative)
    pieces = [rule for region in positive if (rule := _region_rule(region, digits, room))]
    after = [rule for region in negative if (rule := _region_rule(region, digits, room))]
    if after:
        pieces.append('"-" ' + (after[0] if len(after) == 1 else f"({' | '.join(after)})"))
    if not pieces:
        raise no_value_within(schema, kind, stepped=stepped)
    return f"({' | '.join(pieces)}) space"


def ranges_apart(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether no number is within both schemas' bounds, as range_rule holds them (False where either holds none)."""
    sides = []
    for schema in (first, second):
        bounds = number_bounds(schema) if range_rule(schema) is not None else None
        if bounds is None:
            return False
        whole = schema.get("type") == "integer"
        sides.append((integral(bounds[0], above=True), integral(bounds[1], above=False)) if whole else bounds)
    return _below(sides[0][1], sides[1][0]) or _below(sides[1][1], sides[0][0])


def may_hold(schema: dict[str, Any], value: object) -> bool:
    """Whether a JSON value may meet an integer's or number's schema whose bounds range_rule holds (True where it holds
    none: not known)."""
    bounds = number_bounds(schema) if range_rule(schema) is not None else None
    if bounds is None:
        return True
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return False
    exact = exact_decimal(value)
    if schema.get("type") == "integer" and exact.denominator != 1:
        return False
    low, high = bounds
    return not (_below(Bound(exact, False), low) or _below(high, Bound(exact, False)))


def _below(high: Bound | None, low: Bound | None) -> bool:
    """Whether every number up to an upper bound is below every number from a lower bound (None: open)."""
    if high is None or low is None:
        return False
    return high.value < low.value or (high.value == low.value and (high.strict or low.strict))


def bounds_of_kind(schema: dict[str, Any], kind: str) -> tuple[Bound | None, Bound | None] | None:
    """An integer's or number's bounds (number_bounds), an integer's narrowed to whole numbers."""
    sides = number_bounds(schema)
    if sides is None or kind != "integer":
        return sides
    return integral(sides[0], above=True), integral(sides[1], above=False)


def whole_digits(low: Bound | None, high: Bound | None) -> int:
    """The digits before the point a grammar within these bounds writes at most (PLAIN_DIGITS, or a bound's more)."""
    return max([PLAIN_DIGITS, *(len(str(abs(math.trunc(bound.value)))) for bound in (low, high) if bound is not None)])


def number_bounds(schema: dict[str, Any]) -> tuple[Bound | None, Bound | None] | None:
    """The tightest lower and upper bound a schema gives, each the decimal it is written as (None for a side it
    leaves open; None for all: a bound of another kind than a finite number, or of over MAX_DIGITS digits before or
    after its point)."""
    sides: list[Bound | None] = []
    for plain, exclusive, tighter in (("minimum", "exclusiveMinimum", max), ("maximum", "exclusiveMaximum", min)):
        found: list[Bound] = []
        for key in (plain, exclusive):
            value = schema.get(key)
            if value is None or isinstance(value, bool):
                continue
            if not isinstance(value, int | float) or not (isinstance(value, int) or math.isfinite(value)):
                return None
            exact = exact_decimal(value)
            if len(str(abs(math.floor(exact)))) > MAX_DIGITS or len(fraction_digits(exact % 1)) > MAX_DIGITS:
                return None
            found.append(Bound(exact, key == exclusive or (schema.get(exclusive) is True)))
        if not isinstance(schema.get(exclusive, False), bool | int | float):
            return None
        chosen = tighter(found, key=lambda bound: (bound.value, bound.strict if tighter is max else not bound.strict),
                         default=None)
        sides.append(chosen)
    return sides[0], sides[1]


def _step_places(step: object) -> int | None:
    """The decimals a number's multipleOf of 1, 0.1, 0.01 (1e-3, ...) leaves it, at most MAX_DIGITS (None: another
    step, which a grammar of the digits alone cannot hold)."""
    if not isinstance(step, int | float) or isinstance(step, bool) or (isinstance(step, float) and not
                                                                         math.isfinite(step)) or step <= 0:
        return None
    exact = exact_decimal(step)
    places = len(str(exact.denominator)) - 1
    return places if exact.numerator == 1 and exact.denominator == 10 ** places <= 10 ** MAX_DIGITS else None


def fraction_digits(fraction: Fraction) -> str:
    """The digits after the point of a decimal from 0 to 1, no trailing zero ("" for 0; one of over MAX_DIGITS
    digits, or none that ends, cut after MAX_DIGITS + 1)."""
    digits = ""
    while fraction and len(digits) <= MAX_DIGITS:
        fraction *= 10
        digits += str(math.floor(fraction))
        fraction %= 1
    return digits


def integral(bound: Bound | None, *, above: bool) -> Bound | None:
    """An integer's bound as the nearest integer it allows, inclusive."""
    if bound is None:
        return None
    if above:
        value = math.floor(bound.value) + 1 if bound.strict else math.ceil(bound.value)
    else:
        value = math.ceil(bound.value) - 1 if bound.strict else math.floor(bound.value)
    return Bound(Fraction(value), False)


def _at_least(size: Fraction, strict: bool) -> list[_Region]:
    """The magnitudes (integer part and fraction) of at least size (above it, where strict)."""
    whole, rest = math.floor(size), size % 1
    if rest == 0 and not strict:
        return [_Region(whole, None, _ANY)]
    return [_Region(whole + 1, None, _ANY), _Region(whole, whole, _Span(Bound(rest, strict), None))]


def _at_most(size: Fraction, strict: bool) -> list[_Region]:
    """The magnitudes (integer part and fraction) of at most size (below it, where strict)."""
    whole, rest = math.floor(size), size % 1
    below = [_Region(0, whole - 1, _ANY)] if whole >= 1 else []
    if rest == 0 and strict:
        return below
    return [*below, _Region(whole, whole, _Span(_ANY.lower, Bound(rest, strict)))]


def _regions(low: Bound | None, high: Bound | None, *, negative: bool) -> list[_Region]:
    """The magnitudes of the numbers of one sign within the bounds (a negative one's is above zero: no -0)."""
    limits = [[_Region(0, None, _ANY)]]
    if negative:  # x < 0: its magnitude above zero, at most -low, at least -high
        limits.append(_at_least(Fraction(0), strict=True))
        if low is not None:
            limits.append(_at_most(-low.value, low.strict) if low.value <= 0 else [])
        if high is not None and high.value < 0:
            limits.append(_at_least(-high.value, high.strict))
    else:  # x >= 0: at least low, at most high
        if low is not None and (low.value > 0 or (low.value == 0 and low.strict)):
            limits.append(_at_least(low.value, low.strict))
        if high is not None:
            limits.append(_at_most(high.value, high.strict) if high.value >= 0 else [])
    regions = limits[0]
    for limit in limits[1:]:
        regions = [both for one in regions for other in limit if (both := _both(one, other))]
    return sorted(regions, key=lambda region: region.low)


def _both(first: _Region, second: _Region) -> _Region | None:
    """The magnitudes two regions share (None: none)."""
    low = max(first.low, second.low)
    highs = [high for high in (first.high, second.high) if high is not None]
    high = min(highs) if highs else None
    if (high is not None and low > high) or first.fraction is None or second.fraction is None:
        return None
    lower = max(first.fraction.lower, second.fraction.lower, key=lambda bound: (bound.value, bound.strict))
    uppers = [bound for bound in (first.fraction.upper, second.fraction.upper) if bound is not None]
    upper = min(uppers, key=lambda bound: (bound.value, not bound.strict)) if uppers else None
    return None if _below(upper, lower) else _Region(low, high, _Span(lower, upper))


def _whole(regions: list[_Region]) -> list[_Region]:
    """An integer's regions: those whose fraction cannot be zero dropped, the others joined where they meet."""
    joined: list[_Region] = []
    for region in regions:
        if region.fraction is None or region.fraction.lower != _ANY.lower:
            continue
        last = joined[-1] if joined else None
        if last is not None and last.high is not None and region.low <= last.high + 1:
            high = None if region.high is None else max(last.high, region.high)
            joined[-1] = _Region(last.low, high, None)
        else:
            joined.append(_Region(region.low, region.high, None))
    return joined


def _region_rule(region: _Region, digits: int, room: int) -> str | None:
    """GBNF of a region's numbers: its integer part's digits, then its fraction of at most room digits (none for an
    integer; None: no fraction of room digits fits)."""
    high = 10 ** digits - 1 if region.high is None else region.high
    alternatives = naturals(region.low, high)
    whole = alternatives[0] if len(alternatives) == 1 else f"({' | '.join(alternatives)})"
    if region.fraction is None:
        return whole
    fraction = _fraction_rule(region.fraction, room)
    return None if fraction is None else whole + fraction


def _fraction_rule(span: _Span, room: int) -> str | None:
    """GBNF of a fraction within span, of at most room digits after the point, or none where the span holds 0 (None:
    no fraction fits). At an upper bound's last digit the fraction ends: zeros after it change nothing, and a model
    that wanted a larger digit wrote them to the end of the room ("1.0000000000000000"); a bound at an integer takes
    one (".0") where other numbers may take decimals, none where room is 0 (a multipleOf of 1) as no other does."""
    lower = fraction_digits(span.lower.value)
    upper = None if span.upper is None else fraction_digits(span.upper.value)
    if span.upper is not None and upper == "" and not span.upper.strict:
        if lower != "" or span.lower.strict:
            return None
        return ' ("." "0")?' if room else ""
    digits, empty = _tail(lower, span.lower.strict, upper, span.upper is not None and span.upper.strict, room)
    if digits is None:
        return "" if empty else None
    return f' ("." {digits})?' if empty else f' "." {digits}'


@lru_cache(maxsize=4096)
def _tail(lower: str | None, low_strict: bool, upper: str | None, high_strict: bool,
          room: int) -> tuple[str | None, bool]:
    """GBNF of the digit strings of 1 to room digits whose decimal (after a point) is at least lower (above it, where
    low_strict) and at most upper (below it, where high_strict), each None where met whatever follows; and whether the
    empty string is (lower and upper: a bound's digits not yet written, no trailing zero)."""
    lower = None if lower == "" and not low_strict else lower
    empty = lower is None and (upper is None or upper != "" or not high_strict)
    if upper == "" or room == 0:  # at the upper bound: no digit more
        return None, empty
    if lower is None and upper is None:
        return _digits(1, room).strip(), empty
    groups: dict[tuple[str | None, str | None], list[int]] = {}
    for digit in range(10):
        if (lower and digit < int(lower[0])) or (upper is not None and digit > int(upper[0])):
            continue
        after_low = None if lower is None or digit > int(lower[:1] or "0") or (lower == "" and digit) else lower[1:]
        after_high = None if upper is None or digit < int(upper[0]) else upper[1:]
        groups.setdefault((after_low, after_high), []).append(digit)
    pieces = []
    for (after_low, after_high), chosen in groups.items():
        rest, ends = _tail(after_low, low_strict, after_high, high_strict, room - 1)
        if rest is None and not ends:
            continue
        digit = f"[{chosen[0]}]" if len(chosen) == 1 else f"[{chosen[0]}-{chosen[-1]}]"
        pieces.append(digit if rest is None else f"{digit} ({rest}){'?' if ends else ''}")
    return (f"({' | '.join(pieces)})" if len(pieces) > 1 else pieces[0]) if pieces else None, empty


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
