"""What one C call comparing or hashing a chat template's values would walk, measured in Python first: Python compares
and hashes nested lists, tuples and dicts in one C call (which no time limit interrupts), walking a part shared N
times N times, so the items are counted, each distinct part (or pair of parts) measured once, and refused past the
render's limit."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from typing import Any, NoReturn

from markupsafe import Markup

from localgen.template_budget import TooLarge, size_limit
from localgen.template_nodes import LONG_STRING, is_long

SHALLOW = frozenset({str, Markup, int, float, bool, type(None)})  # compared and hashed in one step, whatever the other
SET_VIEWS = (type({}.keys()), type({}.items()))
SETS = (set, frozenset, *SET_VIEWS)  # compared as sets: each item of one looked up in the other
_DEEP = (list, tuple, dict, *SETS)
_MISSING = object()
_NUMBERS = frozenset({int, float, bool})  # their hashes can be made to collide: n mod 2**61 - 1


class TooDeep(TooLarge):
    """A template asked to compare, hash or sort values that one C call would walk for too long."""

    attempt = "compare or hash something too large"


def is_deep(value: object) -> bool:
    """True where comparing or hashing value compares or hashes the values inside it."""
    return type(value) not in SHALLOW and isinstance(value, _DEEP)


def all_shallow(items: Iterable[object]) -> bool:
    """True where every item is a string, number, boolean or None (checked in C)."""
    return set(map(type, items)) <= SHALLOW


def _unequal_at_once(left: object, right: object) -> bool:
    """True where left and right, one a string, number, boolean or None, are not the same and not equal (found in
    one step)."""
    return left is not right and (type(left) in SHALLOW or type(right) in SHALLOW) and left != right


def string_weight(left: object, right: object) -> int:
    """The items comparing two strings is worth besides one: their characters by LONG_STRING, where they are long,
    of one length (others are unequal at once) and not the same string."""
    if is_long(left) and isinstance(right, str) and left is not right and len(left) == len(right):
        return chars_weight(len(left))
    return 0


def chars_weight(length: int) -> int:
    """The items comparing two strings of length characters alike is worth besides one (1 MB: 18 us, 3,200 items)."""
    return length // LONG_STRING


def children(value: Any) -> list[object] | tuple[object, ...]:
    """The values a comparison or hash of value reaches inside it (a dict's keys and values)."""
    if isinstance(value, dict):
        return [part for item in value.items() for part in item]
    return value if isinstance(value, (list, tuple)) else list(value)


def flat_size(value: object) -> int:
    """The items comparing value, a list, tuple or dict of strings, numbers and None alone, with any other walks
    at most: one for it, one for each item and one more, its long strings' characters by LONG_STRING besides."""
    items = children(value)
    return items_size(items) + long_strings_weight(items) + looked_up_collisions(value)


def items_size(items: list[object] | tuple[object, ...]) -> int:
    """The items comparing a list, tuple or dict of items, each compared in one step, walks: one for it, one for
    each item and one more."""
    return 2 + len(items)


def long_strings_weight(items: Iterable[object]) -> int:
    """The items comparing each long string among items with one of its length is worth besides one."""
    return sum(chars_weight(len(item)) for item in items if is_long(item))


def looked_up_collisions(value: object) -> int:
    """The comparisons looking up each key of value, a dict, set or dict view, in another of its keys makes among
    its numbers sharing a hash (an items view looked up by its keys)."""
    if not isinstance(value, (dict, *SETS)):
        return 0
    keys = value.mapping if isinstance(value, SET_VIEWS[1]) else value
    return _colliding([(hash(key), key) for key in keys if type(key) in _NUMBERS])


class Walk:
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
        if not is_deep(value):
            return 1, 1
        known = self._trees.get(id(value))
        if known is not None:
            return known[1], known[2]
        items = children(value)
        size, again = 1 + len(items), 1
        if not all_shallow(items):
            for item in items:
                if is_deep(item):
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
        if left is right or not (is_deep(left) and is_deep(right)):
            weight = 1 + string_weight(left, right)
            return weight, weight
        key = (id(left), id(right))
        known = self._pairs.get(key)
        if known is not None:
            return known[2], known[3]
        if isinstance(left, SETS) and isinstance(right, SETS):  # each item of one looked up (hashed) in the other
            size = order = self.tree(left)[0] + self.tree(right)[0] + looked_up_collisions(right)
        elif isinstance(left, dict) and isinstance(right, dict):  # an ordering of dicts fails at once
            size = 1 if len(left) != len(right) else self._dict_pair(left, right) + looked_up_collisions(right)
            order = 1
        elif (isinstance(left, list) and isinstance(right, list)) or (isinstance(left, tuple)
                                                                     and isinstance(right, tuple)):
            count = min(len(left), len(right))
            size, again = 1 + count, 1  # and the first unequal pair compared again with the operator
            if all_shallow(left) or all_shallow(right):  # long strings alike compared character by character
                for left_item, right_item in zip(left, right, strict=False):
                    size += string_weight(left_item, right_item)
                    if size > self.limit:
                        break
            else:
                pairs = list(zip(left, right, strict=False))
                for index, (left_item, right_item) in enumerate(pairs):
                    if _unequal_at_once(left_item, right_item):
                        size += string_weight(left_item, right_item)
                        break  # Python's walk ends at the first unequal items, compared again in one step
                    item_size, item_order = self.pair(left_item, right_item)
                    size += item_size - 1
                    again = max(again, item_order)
                    if size > self.limit:
                        break  # refused whatever follows (or, for lists of unequal lengths, counted as 1 below)
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
            if type(key) in SHALLOW:
                other = dict.get(right, key, _MISSING)
                if other is _MISSING or _unequal_at_once(value, other):
                    size += 0 if other is _MISSING else string_weight(value, other)
                    break  # Python's walk ends at a key the other lacks, or the first unequal values
                value_size = self.pair(value, other)[0]
                size += value_size
                if len(left) > 1 and self.unequal(value, other, value_size):
                    break
            else:
                size += self.tree(key)[0] + self.tree(value)[0]
            if size > self.limit:
                break  # refused whatever follows
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
            elif type(key) not in SHALLOW:
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
