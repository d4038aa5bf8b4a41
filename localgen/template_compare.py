"""A chat template's comparisons, hashes and sorts (operators, tests, filters, methods, keys) measured before they
run, by template_walk's measure of what their one C call would walk, and refused past the render's limit."""

from __future__ import annotations

import inspect
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import wraps
from typing import Any

from jinja2 import runtime
from jinja2.utils import Namespace

from localgen.template_walk import (
    SET_VIEWS,
    SETS,
    SHALLOW,
    Walk,
    all_shallow,
    children,
    flat_size,
    is_deep,
    is_long,
    items_size,
    long_strings_weight,
    string_weight,
)

_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
                                                     "gt": operator.gt, "lteq": operator.le, "gteq": operator.ge}
_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "lteq": "<=", "gteq": ">="}
_TESTS = {"==": "eq", "eq": "eq", "equalto": "eq", "!=": "ne", "ne": "ne", ">": "gt", "gt": "gt",
          "greaterthan": "gt", ">=": "gteq", "ge": "gteq", "<": "lt", "lt": "lt", "lessthan": "lt", "<=": "lteq",
          "le": "lteq"}
_SORTING_FILTERS = frozenset({"sort", "groupby", "dictsort"})  # the others (max, min, unique) meet each item once
_COMPARING_FILTERS = _SORTING_FILTERS | {"max", "min", "unique"}
_LOOP_CONTEXT: type | None = getattr(runtime, "LoopContext", None)  # read with a fallback, as other Jinja internals
_SET_METHODS = frozenset({"isdisjoint", "issubset", "issuperset", "union", "intersection", "difference",
                          "symmetric_difference"})


def _listed(value: Any) -> Any:
    """value, an iterator read into a list (given in its place: measured, it could not be read again)."""
    return list(value) if isinstance(value, Iterator) else value


def _is_loop(value: object) -> bool:
    """True for a for loop's `loop` variable (jinja2.runtime's LoopContext, or a class of that name)."""
    return isinstance(value, _LOOP_CONTEXT) if _LOOP_CONTEXT is not None else type(value).__name__ == "LoopContext"


def checked_compare(name: str, left: Any, right: Any) -> Any:
    """left OP right for Jinja's comparison operator name (eq, ne, lt, gt, lteq, gteq), the items it would walk
    measured first where both are nested values."""
    if not (type(left) in SHALLOW or type(right) in SHALLOW or left is right):
        walk = Walk(_SYMBOLS[name])
        size, order = walk.pair(left, right)
        walk.check(size if name in ("eq", "ne") else order)
    return _OPERATORS[name](left, right)


def checked_in(item: Any, container: Any) -> bool:
    """item in container, each comparison or hash it makes measured first where item is a nested value (a list's
    items that would walk too long in all, or an iterator's, compared here one at a time, as Python compares them,
    and counted in all)."""
    if not is_deep(item):
        if is_long(item) and isinstance(container, (list, tuple)):
            walk = Walk("in")
            walk.check(_string_walk(item, container, walk.limit))
        return item in container
    walk = Walk("in")
    if isinstance(container, (dict, *SETS)):
        walk.check(walk.key(item) if not isinstance(container, SET_VIEWS[1]) else 2 * walk.tree(item)[0])
        return item in container
    if isinstance(container, (list, tuple)):
        if _search_within(walk, item, container):
            return item in container
    elif hasattr(type(container), "__contains__"):
        return item in container  # a string, a range: their items are compared with item in one step
    total = 0
    for candidate in container:
        if candidate is item:
            return True
        total += walk.pair(candidate, item)[0]
        walk.check(total)
        if candidate == item:
            return True
    return False


def _string_walk(text: str, candidates: list[Any] | tuple[Any, ...], limit: int, whole: bool = False) -> int:
    """The items comparing text with each of candidates is worth: its characters' weight for each string of its
    length not itself (a string of another length is unequal at once), counted up to the first past limit and,
    unless whole, to the first identical or equal one, where Python's search stops."""
    total, length = 0, len(text)
    for candidate in candidates:
        if candidate is text and not whole:
            break
        weight = string_weight(text, candidate) if type(candidate) is str and len(candidate) == length else 0
        if weight:  # (a quick gate before it: a string of another length, or not a string, weighs nothing)
            total += weight
            if total > limit or (not whole and candidate == text):
                break
    return total


def _search_within(walk: Walk, item: object, candidates: list[Any] | tuple[Any, ...], whole: bool = False) -> bool:
    """True where comparing item with candidates, as a search does (up to the first identical one, unless whole:
    Python stops there, or at an equal one before it), walks no more than the render's limit, measured lazily: an
    item of strings, numbers and None alone (a message) is compared with any candidate in as many steps as it has."""
    if type(item) in (list, tuple, dict) and all_shallow(children(item)) and \
            len(candidates) * flat_size(item) <= walk.limit:
        return True
    total = 0
    for candidate in candidates:
        if candidate is item and not whole:
            return True
        total += walk.pair(candidate, item)[0]
        if total > walk.limit:
            return False
    return True


def checked_chain(left: Any, *operations: Any) -> Any:
    """A chained comparison (a < b < c): each operand after the first, a function giving it, is evaluated when
    reached, as Python evaluates a chain, and each comparison measured as checked_compare measures it."""
    result: Any = True
    for name, operand in zip(operations[::2], operations[1::2], strict=True):
        right = operand()
        if name in ("in", "notin"):
            result = checked_in(left, right) == (name == "in")
        else:
            result = checked_compare(name, left, right)
        if not result:
            return result
        left = right
    return result


def checked_dict(*pairs: tuple[Any, Any]) -> dict[Any, Any]:
    """A dict literal's dict, built from its (key, value) pairs, their keys' hashes measured first."""
    Walk("a dict's keys").keys(key for key, _ in pairs)
    return dict(pairs)


def checked_difference(left: Any, right: Any) -> Any:
    """left - right, where one is a set or a dict's keys or items, whose difference hashes the items of both (an
    iterator read into a list first), their hashes measured first."""
    if isinstance(left, SETS) or isinstance(right, SETS):
        left, right = _listed(left), _listed(right)
        Walk("-").keys(itertools.chain(*(side for side in (left, right) if is_deep(side))))
    return left - right


def check_key(container: object, key: object) -> None:
    """Refuse a lookup of key in a dict whose hash would walk past the render's limit (a slice hashes as the tuple of
    its bounds, from Python 3.12)."""
    if type(key) not in SHALLOW and isinstance(container, Mapping):
        Walk("a dict key").keys([(key.start, key.stop, key.step) if isinstance(key, slice) else key])


def checked_slice(container: Any, start: Any, stop: Any, step: Any) -> Any:
    """container[start:stop:step], a mapping's hash of the slice's bounds measured first."""
    key = slice(start, stop, step)
    check_key(container, key)
    return container[key]


def checked_pairs(value: Any, what: str) -> Any:
    """dict()'s or namespace()'s argument, its pairs' keys measured first (an iterator's pairs read into a list,
    given in its place); a dict's keys, hashed already, are not hashed again."""
    if isinstance(value, dict) or not isinstance(value, Iterable) or isinstance(value, str):
        return value
    pairs = _listed(value)
    Walk(what).keys(pair[0] for pair in pairs if isinstance(pair, (list, tuple)) and len(pair) == 2)
    return pairs


def check_compared_arguments(method: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Refuse dict() or namespace() of pairs, a list's or tuple's index() or count(), a dict's get() or fromkeys(), a
    set's or a dict view's isdisjoint() (a set's union(), ...), or a loop's changed() whose comparisons or hashes
    would walk past the render's limit, returning its arguments (an iterator read into a list)."""
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if (method is dict or method is Namespace) and args:
        return (checked_pairs(args[0], f"{'dict' if method is dict else 'namespace'}()"), *args[1:])
    if isinstance(owner, (list, tuple)) and name in ("index", "count") and args:
        walk, whole = Walk(f".{name}()"), name == "count"
        if is_long(args[0]):
            walk.check(_string_walk(args[0], owner, walk.limit, whole=whole))
        elif is_deep(args[0]) and not _search_within(walk, args[0], owner, whole=whole):
            walk.over()
    elif (isinstance(owner, dict) or owner is dict) and name in ("get", "fromkeys") and args:  # fromkeys: dict's
        if name == "fromkeys":
            args = (_listed(args[0]), *args[1:])
        Walk(f".{name}()").keys(args[0] if name == "fromkeys" and isinstance(args[0], Iterable) else args[:1])
    elif isinstance(owner, SETS) and name in _SET_METHODS:  # each item of both hashed
        args = tuple(map(_listed, args))
        Walk(f".{name}()").keys(itertools.chain(owner, *(arg for arg in args if is_deep(arg))))
    elif name == "changed" and _is_loop(owner):  # compares the values with the last ones
        checked_compare("ne", getattr(owner, "_last_changed_value", None), args)
    return args


def compared_tests(tests: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Jinja's tests, the comparing ones (eq, lt, in, ...) measuring their comparisons first."""

    def test(name: str) -> Callable[[Any, Any], Any]:
        def compared(value: Any, other: Any) -> Any:
            return checked_compare(name, value, other)

        return compared

    own = {name: test(operator_name) for name, operator_name in _TESTS.items() if name in tests}
    return {**tests, **own, "in": checked_in}


def compared_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that compares or hashes its items (sort, groupby, dictsort, max, min, unique), measuring first
    what its comparisons of the keys taken from them can walk (an iterator's items read into a list, given in its
    place)."""
    if name == "attr":
        return _named_attribute(func)
    if name not in _COMPARING_FILTERS:
        return func
    skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0
    signature = inspect.signature(func)

    @wraps(func)
    def compared(*args: Any, **kwargs: Any) -> Any:
        if len(args) > skip:
            args = (*args[:skip], _listed(args[skip]), *args[skip + 1:])
        try:
            arguments = signature.bind(*args, **kwargs)
        except TypeError:
            return func(*args, **kwargs)  # Jinja's own error
        arguments.apply_defaults()
        _check_keys(name, _filter_keys(name, arguments.arguments))
        return func(*args, **kwargs)

    return compared


def _named_attribute(func: Callable[..., Any]) -> Callable[..., Any]:
    """|attr, its name's hash measured first: Python looks it up in the classes' attribute dicts (a name not a
    string then fails, as Python's)."""

    @wraps(func)
    def attr(environment: Any, obj: Any, name: Any) -> Any:
        Walk("|attr").keys([name])
        return func(environment, obj, name)

    return attr


def _filter_keys(name: str, arguments: dict[str, Any]) -> list[list[Any]]:
    """The keys a comparing filter compares or hashes, one list of parts for each item (empty where the filter fails
    on its own): each item's attribute values as Jinja's attribute getter takes them (one for each comma of |sort's),
    or a dict's keys or values for |dictsort."""
    value = arguments.get("value")
    if name == "dictsort":
        position = 1 if arguments.get("by") == "value" else 0
        return [[pair[position]] for pair in value.items()] if isinstance(value, dict) else []
    if not isinstance(value, (list, tuple, dict, *SETS)):
        return []  # a string's characters, or the filter's own error
    attribute, default = arguments.get("attribute"), arguments.get("default")
    if attribute is None and default is None:
        return [[item] for item in value]
    from jinja2 import filters

    getter = getattr(filters, "make_multi_attrgetter" if name == "sort" else "make_attrgetter", None)
    if getter is None:  # a later Jinja: each item counted whole
        return [[item, default] for item in value]
    if name == "sort":
        take = getter(arguments["environment"], attribute)
        return [take(item) for item in value]
    take = getter(arguments["environment"], attribute, default=default)
    return [[take(item)] for item in value]


def _check_keys(name: str, keys: list[list[Any]]) -> None:
    """Refuse a filter's comparisons of its keys that would walk past the render's limit: each key hashed once by
    |unique; in about log2(n) comparisons for a sort, one for |max or |min, none where there is one; a key alone
    of its kind (the others strings, numbers or itself) compared with itself item by item, as Python does."""
    walk = Walk(f"|{name}")
    if name == "unique":
        walk.keys(part for parts in keys for part in parts)
        return
    if len(keys) < 2:
        return
    rounds = len(keys).bit_length() + 2 if name in _SORTING_FILTERS else 1
    total = 0
    for position in zip(*keys, strict=False):
        total += rounds * long_strings_weight(position)  # compared character by character, even with themselves
        deep = {id(part): part for part in position if is_deep(part)}
        for part in deep.values() if len(deep) == 1 else ():
            total += rounds * items_size(children(part)) * position.count(part)
        for part in position if len(deep) > 1 else ():
            total += rounds * (sum(walk.tree(part)) + long_strings_weight(children(part))) if is_deep(part) else 0
            walk.check(total)
    walk.check(total)
