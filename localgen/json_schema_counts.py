"""A string's lengths and an array's counts checked: within what a grammar can count, a minimum at most its maximum;
items false with no prefixItems as maxItems 0 (only []), where llama-cpp-python's converter failed on it, and
prefixItems cut to maxItems, which it ignored beside them."""

from __future__ import annotations

from typing import Any

from localgen.errors import UsageError
from localgen.json_schema_types import arrays_excluded
from localgen.json_schema_words import MAX_COUNT, MAX_SPAN, NoValueError

_BOUNDS = (("minLength", "maxLength"), ("minItems", "maxItems"))


def prefix_items_within_max_items(schema: dict[str, Any]) -> None:
    """prefixItems cut to a maxItems below their count, no items after them, where the converter wrote all of them
    ({"prefixItems": [{}, {}], "maxItems": 1} answered two items); cut to none, items false alone (only []). A maxItems
    below minItems is left for check_counts to refuse as such."""
    prefix, most, least = schema.get("prefixItems"), schema.get("maxItems"), schema.get("minItems", 0)
    if not isinstance(prefix, list) or not isinstance(most, int) or isinstance(most, bool) or len(prefix) <= most:
        return
    if isinstance(least, int) and not isinstance(least, bool) and least > most:
        return
    schema["items"] = False
    if most > 0:
        schema["prefixItems"] = prefix[:most]
    else:
        del schema["prefixItems"]


def items_false_as_no_items(schema: dict[str, Any]) -> None:
    """items false with no prefixItems, which allows only [], as maxItems 0 (the converter failed on it); beside a
    minItems above 0, which no array then meets, the schema's other types alone, refused where array is its only one."""
    if schema.get("items") is not False or isinstance(schema.get("prefixItems"), list):
        return
    if isinstance(schema.get("minItems"), int) and schema["minItems"] > 0:
        arrays_excluded(schema, NoValueError(f"the JSON schema's items false allows only an empty array, but its "
                                             f"minItems is {schema['minItems']:,}",
                                             hint="give items a schema, or drop minItems"))
        return
    del schema["items"]
    schema["maxItems"] = 0


def check_counts(schema: dict[str, Any]) -> None:
    """Refuse a count the grammar cannot hold (over MAX_COUNT) and a minimum above its maximum."""
    for low_key, high_key in _BOUNDS:
        for key in (low_key, high_key):
            count = schema.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and not 0 <= count <= MAX_COUNT:
                raise UsageError(f"the JSON schema's {key} {count:,} is beyond what a grammar can count "
                                 f"(0 to {MAX_COUNT:,})", hint=f"use a {key} of {MAX_COUNT:,} or less")
        low, high = schema.get(low_key, 0), schema.get(high_key)
        if isinstance(low, int) and isinstance(high, int) and low > high:
            raise UsageError(f"the JSON schema's {low_key} {low:,} is above its {high_key} {high:,}: no value "
                             "can follow it", hint=f"make {low_key} at most {high_key}")
        if isinstance(low, int) and isinstance(high, int) and high - low > MAX_SPAN:
            if low_key not in schema:
                raise UsageError(f"the JSON schema's {high_key} {high:,} is more than {MAX_SPAN:,}, which its grammar "
                                 "cannot nest", hint=f"make {high_key} {MAX_SPAN:,} or less, or drop it")
            raise UsageError(f"the JSON schema's {low_key} {low:,} and {high_key} {high:,} are more than "
                             f"{MAX_SPAN:,} apart, which its grammar cannot nest",
                             hint=f"narrow them, or drop {high_key}")
