"""A chat template's size budget: what an operator, filter or method would build in one C call (which no time limit
interrupts) is measured against the render's limit before it is built."""

from __future__ import annotations

import itertools
import math
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NoReturn

TEMPLATE_OUTPUT_LIMIT_CHARS = 4 * 1024 * 1024  # plus twice the messages' own length
TEMPLATE_INT_LIMIT_BITS = 100_000

_LIMITS = threading.local()  # the size limit of the render running in this thread
_DICT_VIEWS = {type({}.keys()): "dict_keys(", type({}.values()): "dict_values(", type({}.items()): "dict_items("}
_PRINTF = re.compile(r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d*))?[hlL]?"
                     r"(?P<kind>.?)", re.DOTALL)
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d+))?", re.DOTALL)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_SMALL_INT_BITS = 256  # str() of an int this long is a few dozen digits, written at once
_LOG10_2 = math.log10(2)
_NUMBER_KINDS = frozenset("diouxXeEfFgGc")
_FLOAT_CHARS = 320  # the longest float in %f (1e308 has 309 digits), beside its precision


class TooLarge(Exception):
    """A template asked for a string, number or sequence too large to build."""

    attempt = "build something too large"  # what the template tried, in its refusal


def size_limit() -> int:
    """The largest string or sequence the current render may build."""
    return int(getattr(_LIMITS, "chars", TEMPLATE_OUTPUT_LIMIT_CHARS))


def set_size_limit(chars: int | None) -> None:
    """Set this thread's render size limit (None: the default)."""
    _LIMITS.chars = TEMPLATE_OUTPUT_LIMIT_CHARS if chars is None else chars


def refuse(what: str) -> None:
    """Stop a template that asked for something too large."""
    raise TooLarge(what)


def check_size(size: int, what: str, unit: str = "characters") -> None:
    """Refuse what would be size characters (or items) long, past the render's limit."""
    if size > size_limit():
        refuse(f"{what} of over {size_limit():,} {unit}")


class TextMeter:
    """Counts the characters str() would write for values, without writing them: each shared list, dict or string
    is measured once, and the count stops as soon as it passes the render's limit."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.total = 0
        self._sizes: dict[int, tuple[object, int]] = {}  # id -> (the value, kept alive; its repr's length)
        self._open: set[int] = set()  # containers being measured: one met inside itself is written '[...]'
        self._cyclic: dict[int, tuple[object, int, frozenset[int], frozenset[int]]] = {}  # one with cycle marks
        self._marks: set[int] = set()  # the open containers met in the container being measured: '[...]'
        self._members: set[int] = set()  # the containers measured in it whose sizes hold cycle marks

    def add(self, size: int) -> None:
        """Count size more characters."""
        self.total += size
        check_size(self.total, self.what)

    def over(self) -> NoReturn:
        """Refuse: the text counted passes the render's limit."""
        raise TooLarge(f"{self.what} of over {size_limit():,} characters")

    def text(self, value: object) -> int:
        """Count str(value)'s characters, and return them."""
        if isinstance(value, str):
            size = len(value)
        elif _is_container(value):
            size = self._repr(value, size_limit() - self.total)
        elif type(value) is int:
            size = int_chars(value, size_limit() - self.total)
        else:
            size = len(str(value))  # a float, None, an Undefined
        self.add(size)
        return size

    def _repr(self, value: object, room: int) -> int:
        """repr(value)'s length, refused where it passes room (one Python frame for each level of nesting)."""
        key = id(value)
        if key in self._sizes:
            size = self._sizes[key][1]
        elif key in self._open:  # written as '[...]', '{...}': a size measured around it holds while it is open
            self._marks.add(key)
            return _cycle_mark_chars(value)
        elif key in self._cyclic and self._reusable(*self._cyclic[key][2:]):
            _, size, marks, members = self._cyclic[key]
            self._marks |= marks
            self._members |= members
            return size if size <= room else self.over()
        elif not _is_container(value):
            size = int_chars(value, room) if type(value) is int else len(repr(value))
        else:
            head, items, tail = _parts(value)
            size = head + tail + 2 * max(len(items) - 1, 0)
            scalars = _scalars_chars(items, room - size) if size <= room else None
            if scalars is not None:
                size += scalars
            else:  # measured here, not in a helper: one Python frame for each level of nesting
                outer, guarded = (self._marks, self._members), not _is_namespace(value)  # Python guards its dict
                self._marks, self._members = set(), set()
                if guarded:
                    self._open.add(key)
                for item in items:
                    size += self._repr(item, room - size) if size <= room else self.over()
                if guarded:
                    self._open.discard(key)
                return self._keep(value, size, room, outer, guarded)
        if size > room:
            self.over()
        self._sizes[key] = (value, size)
        return size

    def _keep(self, value: object, size: int, room: int, outer: tuple[set[int], set[int]], guarded: bool) -> int:
        """Keep value's size (measured with its items') for the next time it is met, and return it: where a cycle
        mark ('[...]') was met inside, with the open containers the marks referred to and the containers measured
        around them, for as long as those are open and these are not (their marks are written where they are)."""
        key, marks, members = id(value), self._marks, self._members
        self._marks, self._members = outer
        if size > room:
            self.over()
        if not marks and not members:
            self._sizes[key] = (value, size)
            return size
        marks.discard(key)
        if guarded:
            members.add(key)
        self._cyclic[key] = (value, size, frozenset(marks), frozenset(members))
        self._marks |= marks
        self._members |= members
        return size

    def _reusable(self, marks: frozenset[int], members: frozenset[int]) -> bool:
        """True where a size measured with the cycle marks of marks holds now: those are open, and none of the
        containers measured with it (written whole then) is."""
        return marks <= self._open and self._open.isdisjoint(members)


def _is_namespace(value: object) -> bool:
    """True for a Jinja namespace."""
    from jinja2.utils import Namespace

    return isinstance(value, Namespace)


def _parts(value: Any) -> tuple[int, list[object], int]:
    """A container's repr as (its opening's length, the items whose reprs follow, its closing's length), each two
    items with two characters between them (', ', or a dict's ': ')."""
    if _is_namespace(value):
        return len("<Namespace "), [value._Namespace__attrs], len(">")
    prefix = _DICT_VIEWS.get(type(value))
    if prefix is not None:
        return len(prefix) + 1, list(value), 2
    if isinstance(value, dict):
        return 1, list(itertools.chain.from_iterable(value.items())), 1
    if isinstance(value, (set, frozenset)):
        if not value:
            return len(repr(type(value)())), [], 0
        return (1, list(value), 1) if type(value) is set else (len("frozenset({"), list(value), 2)
    if isinstance(value, tuple):
        return 1, list(value), 2 if len(value) == 1 else 1
    return 1, list(value), 1


def _cycle_mark_chars(value: object) -> int:
    """The length of what repr() writes for a container met inside itself: '[...]', 'set(...)', a dict view's
    '...'."""
    if type(value) in _DICT_VIEWS:
        return 3
    if isinstance(value, (set, frozenset)):
        return len(type(value).__name__) + 5
    return 5


def _scalars_chars(items: list[object], room: int) -> int | None:
    """The length of items' reprs where all are strings, floats, small ints, booleans or None, counted in C (None
    where some are not); past room, at least room + 1."""
    kinds = set(map(type, items))
    if not kinds <= _SCALARS:
        return None
    if int in kinds:
        ints = items if len(kinds) == 1 else [item for item in items if type(item) is int]
        if max(map(int.bit_length, ints)) > _SMALL_INT_BITS:
            return None
    least = sum(map(len, map(str, items)))  # at most their reprs' length, the strings not copied
    return sum(map(len, map(repr, items))) if least <= room else least


def int_chars(value: int, room: int | None = None) -> int:
    """len(str(value)) for an int, found from its bit length and a power of ten without writing its digits (which
    takes time quadratic in their number); past Python's int_max_str_digits, str()'s ValueError; where even its
    fewest digits pass room (the render's limit by default), that lower bound, found without a power of ten."""
    bits = value.bit_length()
    if bits <= _SMALL_INT_BITS:
        return len(str(value))
    room = size_limit() if room is None else room
    least = int((bits - 1) * _LOG10_2) + 1  # 2**(bits - 1)'s digits: the value has as many, or one more
    if 0 < sys.get_int_max_str_digits() < least:
        str(value)  # raises str()'s own ValueError at once, from the bit length, before writing any digit
    if least > room:
        return least  # refused as it is: no power of ten (one C call of seconds for millions of digits) is needed
    magnitude, digits = abs(value), least
    while magnitude < _power_of_ten(digits - 1):
        digits -= 1
    while magnitude >= _power_of_ten(digits):
        digits += 1
    if 0 < sys.get_int_max_str_digits() < digits:
        str(value)  # raises str()'s own ValueError (having written the digits of one just past the limit)
    return digits + (value < 0)


@lru_cache(maxsize=64)
def _power_of_ten(exponent: int) -> int:
    """10 ** exponent, kept for the next int of as many digits."""
    return 10**exponent


def _is_container(value: object) -> bool:
    """True where str(value) writes the reprs of values inside it (a list, tuple, dict, set, dict view, namespace)."""
    return isinstance(value, (list, tuple, dict, set, frozenset)) or type(value) in _DICT_VIEWS or _is_namespace(value)


def text_size(*values: object, what: str) -> int:
    """The characters str() would write for all the values together, refused past the render's limit."""
    size = 0
    for value in values:  # most often strings alone (a message's content|trim): counted without a meter
        if type(value) is not str:
            break
        size += len(value)
    else:
        check_size(size, what)
        return size
    meter = TextMeter(what)
    for value in values:
        meter.text(value)
    return meter.total


def _length(value: object) -> int:
    """The length of a string or sequence, else 0."""
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def check_binop(operator: str, left: object, right: object) -> None:
    """Refuse arithmetic with a huge result or cost: string repetition, giant integers (their product, power or
    division), a %-format that writes too much."""
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "*":
        count = right if isinstance(right, int) else left if isinstance(left, int) else 1
        if max(_length(left), _length(right)) * max(int(count), 0) > size_limit():
            refuse("a repetition larger than the output limit")
        if ints and int(left).bit_length() + int(right).bit_length() > TEMPLATE_INT_LIMIT_BITS:
            refuse("a product of huge integers")
    elif operator == "**":
        if ints and abs(int(left)) > 1 and int(right) * int(left).bit_length() > TEMPLATE_INT_LIMIT_BITS:
            refuse("a huge power")
    elif operator == "+":
        if _length(left) + _length(right) > size_limit():
            refuse("a concatenation larger than the output limit")
    elif operator == "%" and isinstance(left, (str, bytes)):
        check_printf(left, right)
    elif (operator in ("%", "//") and ints
          and int(left).bit_length() + int(right).bit_length() > TEMPLATE_INT_LIMIT_BITS):
        refuse("a division of huge integers")


def check_printf(template: str | bytes, values: object) -> None:
    """Refuse a %-format (`'%s' % x`, |format) whose text could pass the render's limit: each conversion counted
    at its width and precision beside its value's text."""
    text = template.decode("latin-1") if isinstance(template, bytes) else template
    if "%" not in text:
        return
    positional = iter(values if isinstance(values, tuple) else (values,))
    meter = TextMeter("a %-format's text")
    meter.add(len(text))
    for match in _PRINTF.finditer(text):
        if match["kind"] in ("%", ""):
            continue
        for part in ("width", "precision"):
            number = next(positional, 0) if match[part] == "*" else match[part]
            if match[part] == "*" and not isinstance(number, int):
                return  # % refuses it itself: '* wants int'
            meter.add(abs(number) if isinstance(number, int) else int(number or 0))
        value = _mapped(values, match["key"]) if match["key"] is not None else next(positional, "")
        if match["kind"] in _NUMBER_KINDS:
            meter.add(_number_chars(value))
        else:
            meter.text(value if match["kind"] == "s" else [value])  # %r and %a write the repr (and 2 more)


def _mapped(values: Any, key: str) -> object:
    """values[key], as a %(key)s conversion reads it ('' where it cannot: the format itself then fails)."""
    try:
        return values[key]
    except Exception:  # not a mapping, no such key: % says so
        return ""


def check_format_field(meter: TextMeter, value: object, spec: str) -> None:
    """Refuse a str.format field ('{:>9}') whose text could pass the render's limit."""
    match = _FORMAT_SPEC.match(spec)
    width, precision = (match["width"], match["precision"]) if match else ("", "")
    meter.add(int(width or 0) + int(precision or 0))
    if isinstance(value, (int, float)):
        meter.add(_number_chars(value))
    else:
        meter.text(value)


def _number_chars(value: object) -> int:
    """The most characters a number conversion writes for value, beside width and precision."""
    if isinstance(value, int):
        return value.bit_length() + 3  # binary's digits (the most), a sign and a prefix
    return _FLOAT_CHARS


def check_arguments(args: Sequence[object], kwargs: dict[str, Any]) -> None:
    """Refuse widths and counts beyond the output limit (center(10**9), batch(10**9), tojson(indent=10**9))."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and abs(value) > size_limit():
            refuse(f"a width or count of {value:,}")


def check_replace(text: str | bytes, old: object, new: object, count: object = -1, *, what: str) -> None:
    """Refuse a replace() that writes new, longer than old, so often that the text passes the render's limit."""
    if isinstance(old, type(text)) and isinstance(new, type(text)) and len(new) > len(old):
        found = text.count(old)  # type: ignore[arg-type]
        times = found if not isinstance(count, int) or count < 0 else min(found, count)
        check_size(len(text) + times * (len(new) - len(old)), what)


def joined_items(separator: int, iterable: Iterable[object], *, what: str, strings: bool = False) -> list[object]:
    """The items a join would join, read one by one and refused as soon as their text and the separators (separator
    characters each) pass the render's limit (a generator's items all read first could pass it many times over);
    with strings (str.join), read up to the first that is not a str, which str.join refuses with its TypeError."""
    meter, items = TextMeter(what), []
    for item in iterable:
        if strings and not isinstance(item, str):
            items.append(item)
            break
        meter.add(separator if items else 0)
        if isinstance(item, bytes):
            meter.add(len(item))
        else:
            meter.text(item)
        items.append(item)
    return items


def check_method(method: Callable[..., Any], args: Sequence[object], kwargs: dict[str, Any]) -> tuple[object, ...]:
    """Refuse a str, bytes, list, tuple or int method call that would build too much ((5).to_bytes(10**9)),
    returning its arguments (an iterable that join() reads, read into a list)."""
    check_arguments(args, kwargs)
    text, name = method.__self__, method.__name__  # type: ignore[attr-defined]
    if name == "join" and len(args) == 1 and not kwargs:
        args = (joined_items(len(text), args[0], what=".join()'s text",  # type: ignore[arg-type]
                             strings=isinstance(text, str)),)
    elif name == "replace" and 2 <= len(args) <= 3:
        check_replace(text, *args, what=".replace()'s text")
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tabsize, int):
            check_size(len(text) + text.count(b"\t" if isinstance(text, bytes) else "\t") * tabsize,
                       ".expandtabs()'s text")
    elif name == "translate" and isinstance(text, str) and args:
        check_size(len(text) * _longest_value(args[0]), ".translate()'s text")
    return tuple(args)


def _longest_value(table: object) -> int:
    """The longest text a translate() table maps a character to (1 at least)."""
    values: Iterable[object] = table.values() if isinstance(table, Mapping) else table if isinstance(
        table, (list, tuple, str)) else ()
    return max((len(value) for value in values if isinstance(value, str)), default=1) or 1
