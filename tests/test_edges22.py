"""Edges users meet: what a --json-schema's uniqueItems is warned of where an answer could break it."""

from __future__ import annotations

import pytest

from tests.test_gen_hunt import _warnings

_UNIQUE_ITEMS = ("the JSON schema's uniqueItems cannot be enforced (a grammar cannot compare an array's items with "
                 "each other, so one may repeat): check the answer")


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": False}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 1}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 0}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "allOf": [{"maxItems": 1}]}, False),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 2}, True),
    ({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True, "maxItems": 1},
                                       "b": {"type": "array", "uniqueItems": True}}}, True),
], ids=["false", "max-one", "max-zero", "max-one-in-all-of", "max-two", "one-of-two-arrays"])
def test_unique_items_is_warned_of_only_where_an_item_could_repeat(schema: dict[str, object], warned: bool) -> None:
    """`"uniqueItems": false` asks for nothing, and an array of at most one item cannot repeat one: neither is warned
    of, where both were said to let an item repeat; an array that may hold two still is."""
    assert _warnings(schema) == ([_UNIQUE_ITEMS] if warned else [])
