"""A chat template's comparisons, hashes and sorts measured before they run: Python compares and hashes nested lists,
tuples and dicts in one C call (which no time limit interrupts), walking a part shared N times N times, so the items
such a call would walk are counted first, each distinct part (or pair of parts) measured once, and a call that would
walk more than the render's limit is refused."""

from __future__ import annotations

import inspect
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import wraps
from typing import Any, NoReturn

from jinja2 import runtime
from jinja2.utils import Namespace
from markupsafe import Markup

from localgen.template_budget import TooLarge, size_limit
from localgen.template_nodes import LONG_STRING

_SHALLOW = frozenset({str, Markup, int, float, bool, type(None)})  # compared and hashed in one step, whatever the other
_SET_VIEWS = (type({}.keys()), type({}.items()))
_SETS = (set, frozenset, *_SET_VIEWS)  # compared as sets: each item of one looked up in the other
_DEEP = (list, tuple, dict, *_SETS)
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
                                                     "gt": operator.gt, "lteq": operator.le, "gteq": operator.ge}
_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "lteq": "<=", "gteq": ">="}
_TESTS = {"==": "eq", "eq": "eq", "equalto": "eq", "!=": "ne", "ne": "ne", ">": "gt", "gt": "gt",
          "greaterthan": "gt", ">=": "gteq", "ge": "gteq", "<": "lt", "lt": "lt", "lessthan": "lt", "<=": "lteq",
          "le": "lteq"}
_SORTING_FILTERS = frozenset({"sort", "groupby", "dictsort"})  # the others (max, min, unique) meet each item once
_COMPARING_FILTERS = _SORTING_FILTERS | {"max", "min", "unique"}
_MISSING = object()
_NUMBERS = frozenset({int, float, bool})  # their hashes can be made to collide: n mod 2**61 - 1
_LOOP_CONTEXT: type | None = getattr(runtime, "LoopContext", None)  # read with a fallback, as other Jinja internals
_SET_METHODS = frozenset({"isdisjoint", "issubset", "issuperset", "union", "intersection", "difference",
                          "symmetric_difference"})


class TooDeep(TooLarge):
    """A template asked to compare, hash or sort values that one C call would walk for too long."""

    attempt = "compare or hash something too large"


def _is_deep(value: object) -> bool:
    """True where comparing or hashing value compares or hashes the values inside it."""
    return type(value) not in _SHALLOW and isinstance(value, _DEEP)


def _all_shallow(items: Iterable[object]) -> bool:
    """True where every item is a string, number, boolean or None (checked in C)."""
    return set(map(type, items)) <= _SHALLOW


def _listed(value: Any) -> Any:
    """value, an iterator read into a list (given in its place: measured, it could not be read again)."""
    return list(value) if isinstance(value, Iterator) else value


def _is_loop(value: object) -> bool:
    """True for a for loop's `loop` variable (jinja2.runtime's LoopContext, or a class of that name)."""
    return isinstance(value, _LOOP_CONTEXT) if _LOOP_CONTEXT is not None else type(value).__name__ == "LoopContext"


def _unequal_at_once(left: object, right: object) -> bool:
    """True where left and right, one a string, number, boolean or None, are not the same and not equal (found in
    one step)."""
    return left is not right and (type(left) in _SHALLOW or type(right) in _SHALLOW) and left != right


def _children(value: Any) -> list[object]:
    """The values a comparison or hash of value reaches inside it (a dict's keys and values)."""
    if isinstance(value, dict):
        return [part for item in value.items() for part in item]
    return value if isinstance(value, (list, tuple)) else list(value)


class _Walk:
    """The items one C call comparing, hashing or sorting values would walk, each shared part counted each time it
    is reached and measured once (kept by id, with the value kept alive), refused past the render's limit."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.limit = size_limit()
        self._trees: dict[int, tuple[object, int, int]] = {}
        self._pairs: dict[tuple[int, int], tuple[object, object, int, int]] = {}
        self._hashes: dict[int, tuple[object, int]] = {}

    def over(self) -> NoReturn:
        """Refuse: the call would walk more than the render's limit."""
        raise TooDeep(f"{self.what} walking over {self.limit:,} items, shared ones counted each time")

    def check(self, count: int) -> None:
        """Refuse a call that would walk count items, past the render's limit."""
        if count > self.limit:
            self.over()

    def tree(self, value: object) -> tuple[int, int]:
        """(the items an equality or hash of value can walk, those an ordering can): 1 for each item, and for an
        ordering, which compares the first unequal items again with its operator, the most one item's ordering
        can walk besides."""
        if not _is_deep(value):
            return 1, 1
        known = self._trees.get(id(value))
        if known is not None:
            return known[1], known[2]
        items = _children(value)
        size, again = 1 + len(items), 1
        if not _all_shallow(items):
            for item in items:
                if _is_deep(item):
                    item_size, item_order = self.tree(item)
                    size += item_size - 1
                    again = max(again, item_order)
                    self.check(size)
        self.check(size)
        order = size + again
        self._trees[id(value)] = (value, size, order)
        return size, order

    def pair(self, left: Any, right: Any) -> tuple[int, int]:
        """(the items `left == right` walks, those `left < right` can): each pair of items met once, identical ones
        and a string, number or None beside anything compared in one step, as Python does (one Python frame for each
        level of nesting, as Python's own comparison takes one C frame). Counted whole, not refused here: lists of
        unequal lengths are unequal at once, whatever their items would walk."""
        if left is right or not (_is_deep(left) and _is_deep(right)):
            return 1, 1
        key = (id(left), id(right))
        known = self._pairs.get(key)
        if known is not None:
            return known[2], known[3]
        if isinstance(left, _SETS) and isinstance(right, _SETS):  # each item of one looked up (hashed) in the other
            size = order = self.tree(left)[0] + self.tree(right)[0]
        elif isinstance(left, dict) and isinstance(right, dict):  # an ordering of dicts fails at once
            size, order = (1 if len(left) != len(right) else self._dict_pair(left, right)), 1
        elif (isinstance(left, list) and isinstance(right, list)) or (isinstance(left, tuple)
                                                                     and isinstance(right, tuple)):
            count = min(len(left), len(right))
            size, again = 1 + count, 1  # and the first unequal pair compared again with the operator
            if not (_all_shallow(left) or _all_shallow(right)):
                pairs = list(zip(left, right, strict=False))
                for index, (left_item, right_item) in enumerate(pairs):
                    if _unequal_at_once(left_item, right_item):
                        break  # Python's walk ends at the first unequal items, compared again in one step
                    item_size, item_order = self.pair(left_item, right_item)
                    size += item_size - 1
                    again = max(again, item_order)
                    following = pairs[index + 1] if index + 1 < len(pairs) else (left_item, right_item)
                    if (following[0] is not left_item or following[1] is not right_item) and \
                            self.unequal(left_item, right_item, item_size):
                        break  # and at nested items found unequal (the same next pair would walk alike)
            order = size + again
            if isinstance(left, list) and len(left) != len(right):
                size = 1  # lists of unequal lengths are unequal at once
        else:
            size = order = 1  # a list beside a tuple or a dict: unequal, or unordered, at once
        self._pairs[key] = (left, right, size, order)
        return size, order

    def unequal(self, left: object, right: object, size: int) -> bool:
        """True where left and right, nested values whose comparison walks size items, are found unequal by
        comparing them, which is done only within the render's limit (Python's walk of what holds them ends there)."""
        return size > 1 and size <= self.limit and left != right

    def _dict_pair(self, left: dict[Any, Any], right: dict[Any, Any]) -> int:
        """The items `left == right` walks for dicts of one length: each value compared with the other's under its
        key, up to a key the other lacks, a key not a string or number hashed and compared, with its value, whole."""
        size = 1
        for key, value in left.items():
            if type(key) in _SHALLOW:
                other = dict.get(right, key, _MISSING)
                if other is _MISSING or _unequal_at_once(value, other):
                    break  # Python's walk ends at a key the other lacks, or the first unequal values
                value_size = self.pair(value, other)[0]
                size += value_size
                if len(left) > 1 and self.unequal(value, other, value_size):
                    break
            else:
                size += self.tree(key)[0] + self.tree(value)[0]
        return size

    def key(self, value: object) -> int:
        """The items hashing value as a dict key and comparing it with a key of the same hash can walk: a tuple's
        items hashed, up to the first that cannot be (a list: TypeError), twice; nested tuples followed on a stack
        of their own (a tuple nested 3,000 deep hashes in Python)."""
        if not isinstance(value, tuple):
            return 1  # a string's or frozenset's hash is kept; a list's, a dict's fail at once
        if id(value) in self._hashes:
            return self._hashes[id(value)][1]
        stack: list[list[Any]] = [[value, iter(value), 2]]
        while stack:
            frame = stack[-1]
            item = next(frame[1], _MISSING)
            if item is _MISSING:  # the tuple is measured: its size added to the one holding it
                stack.pop()
                self.check(frame[2])
                self._hashes[id(frame[0])] = (frame[0], frame[2])
                if stack:
                    stack[-1][2] += frame[2]
            elif isinstance(item, tuple) and id(item) not in self._hashes:
                stack.append([item, iter(item), 2])
            else:
                frame[2] += self._hashes[id(item)][1] if isinstance(item, tuple) else 2
                if isinstance(item, (list, dict, set)):
                    frame[1] = iter(())  # its hash fails there
        return int(self._hashes[id(value)][1])

    def keys(self, keys: Iterable[object]) -> None:
        """Refuse keys whose hashes and comparisons, in one call, would walk past the render's limit (numbers of one
        hash among them: each compared with the others of its hash)."""
        total = 0
        numbers = []
        for key in keys:
            if type(key) in _NUMBERS:
                numbers.append((hash(key), key))
            elif type(key) not in _SHALLOW:
                total += self.key(key)
                self.check(total)
        self.check(total + _colliding(numbers))


def _colliding(numbers: list[tuple[int, Any]]) -> int:
    """The comparisons a dict or set makes of numbers sharing a hash, given as (hash, number) pairs (ints apart by
    2**61 - 1 share one): each of a hash's numbers compared with its distinct others (sorted, as hashing them again
    would collide again)."""
    numbers.sort(key=operator.itemgetter(0))
    count = 0
    for _, group in itertools.groupby(numbers, key=operator.itemgetter(0)):
        values = sorted(number for _, number in group)
        if len(values) > 1:
            distinct = 1 + sum(1 for before, after in itertools.pairwise(values) if before != after)
            count += len(values) * (distinct - 1)
    return count


def checked_compare(name: str, left: Any, right: Any) -> Any:
    """left OP right for Jinja's comparison operator name (eq, ne, lt, gt, lteq, gteq), the items it would walk
    measured first where both are nested values."""
    if not (type(left) in _SHALLOW or type(right) in _SHALLOW or left is right):
        walk = _Walk(_SYMBOLS[name])
        size, order = walk.pair(left, right)
        walk.check(size if name in ("eq", "ne") else order)
    return _OPERATORS[name](left, right)


def checked_in(item: Any, container: Any) -> bool:
    """item in container, each comparison or hash it makes measured first where item is a nested value (a list's
    items that would walk too long in all, or an iterator's, compared here one at a time, as Python compares them)."""
    if not _is_deep(item):
        if isinstance(item, str) and len(item) > LONG_STRING and isinstance(container, (list, tuple)):
            _Walk("in").check(_string_walk(item, container))
        return item in container
    walk = _Walk("in")
    if isinstance(container, (dict, *_SETS)):
        walk.check(walk.key(item) if not isinstance(container, _SET_VIEWS[1]) else 2 * walk.tree(item)[0])
        return item in container
    if isinstance(container, (list, tuple)):
        if _search_within(walk, item, container):
            return item in container
    elif hasattr(type(container), "__contains__"):
        return item in container  # a string, a range: their items are compared with item in one step
    for candidate in container:
        if candidate is item:
            return True
        walk.check(walk.pair(candidate, item)[0])
        if candidate == item:
            return True
    return False


def _string_walk(text: str, candidates: list[Any] | tuple[Any, ...]) -> int:
    """The items comparing text with each of candidates is worth: its characters, by LONG_STRING, for each string of
    its length not itself (a string of another length is unequal at once)."""
    alike = sum(1 for candidate in candidates if isinstance(candidate, str) and len(candidate) == len(text)
                and candidate is not text)
    return alike * (len(text) // LONG_STRING)


def _search_within(walk: _Walk, item: object, candidates: list[Any] | tuple[Any, ...], whole: bool = False) -> bool:
    """True where comparing item with candidates, as a search does (up to the first identical one, unless whole:
    Python stops there, or at an equal one before it), walks no more than the render's limit, measured lazily: an
    item of strings, numbers and None alone (a message) is compared with any candidate in as many steps as it has."""
    if type(item) in (list, tuple, dict) and _all_shallow(_children(item)) and \
            len(candidates) * (2 + len(_children(item))) <= walk.limit:
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
    _Walk("a dict's keys").keys(key for key, _ in pairs)
    return dict(pairs)


def checked_difference(left: Any, right: Any) -> Any:
    """left - right, where one is a set or a dict's keys or items, whose difference hashes the items of both (an
    iterator read into a list first), their hashes measured first."""
    if isinstance(left, _SETS) or isinstance(right, _SETS):
        left, right = _listed(left), _listed(right)
        _Walk("-").keys(itertools.chain(*(side for side in (left, right) if _is_deep(side))))
    return left - right


def check_key(container: object, key: object) -> None:
    """Refuse a lookup of key in a dict whose hash would walk past the render's limit (a slice hashes as the tuple of
    its bounds, from Python 3.12)."""
    if type(key) not in _SHALLOW and isinstance(container, Mapping):
        _Walk("a dict key").keys([(key.start, key.stop, key.step) if isinstance(key, slice) else key])


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
    _Walk(what).keys(pair[0] for pair in pairs if isinstance(pair, (list, tuple)) and len(pair) == 2)
    return pairs


def check_compared_arguments(method: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Refuse dict() or namespace() of pairs, a list's or tuple's index() or count(), a dict's get() or fromkeys(), a
    set's or a dict view's isdisjoint() (a set's union(), ...), or a loop's changed() whose comparisons or hashes
    would walk past the render's limit, returning its arguments (an iterator read into a list)."""
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if (method is dict or method is Namespace) and args:
        return (checked_pairs(args[0], f"{'dict' if method is dict else 'namespace'}()"), *args[1:])
    if isinstance(owner, (list, tuple)) and name in ("index", "count") and args and _is_deep(args[0]):
        walk = _Walk(f".{name}()")
        if not _search_within(walk, args[0], owner, whole=name == "count"):
            walk.over()
    elif (isinstance(owner, dict) or owner is dict) and name in ("get", "fromkeys") and args:  # fromkeys: dict's
        if name == "fromkeys":
            args = (_listed(args[0]), *args[1:])
        _Walk(f".{name}()").keys(args[0] if name == "fromkeys" and isinstance(args[0], Iterable) else args[:1])
    elif isinstance(owner, _SETS) and name in _SET_METHODS:  # each item of both hashed
        args = tuple(map(_listed, args))
        _Walk(f".{name}()").keys(itertools.chain(owner, *(arg for arg in args if _is_deep(arg))))
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
        _Walk("|attr").keys([name])
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
    if not isinstance(value, (list, tuple, dict, *_SETS)):
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
    walk = _Walk(f"|{name}")
    if name == "unique":
        walk.keys(part for parts in keys for part in parts)
        return
    if len(keys) < 2:
        return
    rounds = len(keys).bit_length() + 2 if name in _SORTING_FILTERS else 1
    total = 0
    for position in zip(*keys, strict=False):
        deep = {id(part): part for part in position if _is_deep(part)}
        for part in deep.values() if len(deep) == 1 else ():
            total += rounds * (2 + len(_children(part))) * position.count(part)
        for part in position if len(deep) > 1 else ():
            total += rounds * sum(walk.tree(part)) if _is_deep(part) else 0
            walk.check(total)
    walk.check(total)
