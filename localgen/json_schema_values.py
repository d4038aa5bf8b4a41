"""A JSON schema's enum or const narrowed to the values its other keywords allow, and JSON values compared as JSON
compares them: llama-cpp-python's converter reads an enum or const alone, so {"type": "string", "const": 5} allowed
5, and Python's 1 == True made true one of the values both [true] and [1] allow."""

from __future__ import annotations

import math
import re
from typing import Any

from localgen.json_schema_ranges import exact_decimal, range_rule
from localgen.json_schema_steps import held_step
from localgen.json_schema_words import NUMBER_KEYWORDS, NoValueError, finite_number, no_value_within, short_json

MAX_LISTED = 256  # the most integers a bounded integer's schema of a multipleOf is listed as (listed_range)
# Keywords the converter ignores that an enum or const beside them holds: its values are narrowed to those they allow.
ENUM_HOLDS = (*NUMBER_KEYWORDS, "minProperties", "maxProperties")
_KINDS = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
          "array": (list,), "null": (type(None),)}


def same_value(first: object, second: object) -> bool:
    """Whether two JSON values are equal as JSON has it: true is not 1, 1 is 1.0."""
    if isinstance(first, bool) or isinstance(second, bool) or first is None or second is None:
        return first is second or (type(first) is type(second) and first == second)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(map(same_value, first, second))
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(same_value(first[key], second[key]) for key in first)
    numbers = (int, float)
    if isinstance(first, numbers) and isinstance(second, numbers):
        return first == second
    return type(first) is type(second) and first == second


def listed_range(schema: dict[str, Any]) -> list[int] | None:
    """The integers an integer's schema allows where its bounds (minimum, maximum, exclusive ones) leave at most
    MAX_LISTED of them, a multipleOf's multiples alone, for an enum: the converter ignores bounds and allowed any
    integer (None: not such a schema, or one of more integers, or of draft 4's true or false exclusive bounds)."""
    if schema.get("type") != "integer" or "enum" in schema or "const" in schema or any(
            isinstance(schema.get(key), bool) for key in ("exclusiveMinimum", "exclusiveMaximum")):
        return None
    lows = [math.ceil(schema[key]) for key in ("minimum", "exclusiveMinimum") if finite_number(schema.get(key))]
    highs = [math.floor(schema[key]) for key in ("maximum", "exclusiveMaximum") if finite_number(schema.get(key))]
    low, high = max(lows, default=None), min(highs, default=None)
    if low is None or high is None or high - low >= MAX_LISTED:
        return None
    return [value for value in range(low, high + 1) if _within(schema, value)]


def _of_integers_alone(schema: dict[str, Any]) -> bool:
    """Whether a schema's type is integer, or a type list holding integer and not number: its numbers are integers."""
    types = schema.get("type")
    names = types if isinstance(types, list) else [types]
    return "integer" in names and "number" not in names


def is_number(value: object) -> bool:
    """Whether a JSON value is a number (not true or false)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def enum_narrowed(schema: dict[str, Any]) -> dict[str, Any]:
    """schema's enum and const as one enum of the values its type, lengths and bounds allow, the converter's only
    reading of it, and a bounded integer's as the enum of its integers (listed_range); otherwise unchanged."""
    if "enum" not in schema and "const" not in schema:
        listed = listed_range(schema)
        if listed == []:
            raise no_value_within(schema, "integer", stepped="multipleOf" in schema)
        if (listed is None or "multipleOf" not in schema) and (
                range_rule(schema) is not None or held_step(schema) is not None):
            return schema  # its bounds held as a range of digits, faster to sample than a listing of its integers
        return schema if listed is None else {**schema, "enum": listed}
    values = [schema["const"]] if "const" in schema else list(schema["enum"])
    if "const" in schema and "enum" in schema:
        values = [value for value in values if any(same_value(value, other) for other in schema["enum"])]
    others = {key: value for key, value in schema.items() if key not in ("enum", "const")}  # each value is one
    kept = [value for value in values if value_allowed(others, value)]
    if not kept:
        given = "const" if "const" in schema else "enum"
        raise NoValueError(f"the JSON schema's {given} {short_json(schema[given])} holds no value its other "
                           "keywords allow", hint=f"make the {given}'s values of its type and within its bounds")
    narrowed = {key: value for key, value in schema.items() if key not in ("const", "type")}
    return {**narrowed, "enum": [_integers_as_such(schema, value) for value in kept]}


def _integers_as_such(schema: object, value: object) -> object:
    """value with each number its schema makes an integer written as one (1.0 as 1, which JSON Schema takes for the
    same value), its items' and properties' too, where the converter wrote 1.0 and an integer's enum allowed no
    integer."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value) if _of_integers_alone(schema) else value
    if isinstance(value, list):
        item_schemas = _item_schemas(schema, len(value))
        return [_integers_as_such(sub, item) for sub, item in zip(item_schemas, value, strict=True)]
    if isinstance(value, dict):
        return {name: _integers_as_such(_property_schema(schema, name), item) for name, item in value.items()}
    return value


def value_allowed(schema: dict[str, Any], value: object) -> bool:
    """Whether value is of the schema's type and within its lengths, counts, bounds and pattern, and an object's
    properties, patternProperties, additionalProperties and required names or an array's items and prefixItems allow
    it (the keywords cheap to check; the others are not, nor a keyword
    whose value cannot be read)."""
    types = schema.get("type")
    names = types if isinstance(types, list) else [types] if isinstance(types, str) else list(_KINDS)
    if not any(_of_type(value, name) for name in names):
        return False
    if "enum" in schema and isinstance(schema["enum"], list) and not any(same_value(value, v) for v in schema["enum"]):
        return False
    if "const" in schema and not same_value(value, schema["const"]):
        return False
    if isinstance(value, str):
        return _count(schema, "minLength", 0) <= len(value) <= _count(schema, "maxLength", len(value)) and _matches(
            schema.get("pattern"), value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _within(schema, value)
    if isinstance(value, dict):
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        return (_count(schema, "minProperties", 0) <= len(value) <= _count(schema, "maxProperties", len(value))
                and all(name in value for name in required if isinstance(name, str))
                and all(_property_allowed(schema, name, item) for name, item in value.items()))
    if isinstance(value, list):
        item_schemas = _item_schemas(schema, len(value))
        return _count(schema, "minItems", 0) <= len(value) <= _count(schema, "maxItems", len(value)) and all(
            _fits(item_schema, item) for item_schema, item in zip(item_schemas, value, strict=True))
    return True


def _fits(schema: object, value: object) -> bool:
    """Whether value is allowed by a subschema (true, false or an object; None or one of no other kind: any)."""
    return value_allowed(schema, value) if isinstance(schema, dict) else schema is not False


def _property_allowed(schema: dict[str, Any], name: str, value: object) -> bool:
    """Whether an object's property is allowed: by its schema in properties, else the patternProperties it
    matches, else additionalProperties."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if name in properties:
        return _fits(properties[name], value)
    patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
    if not all(_readable(pattern) for pattern in patterns):
        return True  # one Python's re cannot read (\p{Lu}, a JavaScript named group): which names it takes is unknown
    matched = [sub for pattern, sub in patterns.items() if _matches(pattern, name)]
    return all(_fits(sub, value) for sub in matched) if matched else _fits(schema.get("additionalProperties"), value)


def name_allowed(schema: dict[str, Any], name: str) -> bool:
    """Whether an object's schema allows a property of that name at all: listed in properties, matched by a
    patternProperties one (or one Python's re cannot read), or additionalProperties not false."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
    return name in properties or schema.get("additionalProperties") is not False or any(
        not _readable(pattern) or _matches(pattern, name) for pattern in patterns)


def _property_schema(schema: dict[str, Any], name: str) -> object:
    """The schema of an object's property: its own in properties, else the first patternProperties one it matches,
    else additionalProperties (None: any)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
    matched = (sub for pattern, sub in patterns.items() if _readable(pattern) and _matches(pattern, name))
    return properties[name] if name in properties else next(matched, schema.get("additionalProperties"))


def _item_schemas(schema: dict[str, Any], count: int) -> list[object]:
    """The schema of each of an array's count items: prefixItems (or draft 7's items list) a tuple, then items (or
    additionalItems) for the rest (None: any)."""
    items = schema.get("items")
    prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else \
        items if isinstance(items, list) else []
    rest = schema.get("additionalItems") if isinstance(items, list) else items
    return [*prefix[:count], *[rest] * max(count - len(prefix), 0)]


def _count(schema: dict[str, Any], key: str, default: int) -> float:
    """A count keyword's value, or default where it holds none that reads as one (a nested schema's bad count is
    refused where that schema is checked)."""
    given = schema.get(key)
    return given if isinstance(given, int | float) and not isinstance(given, bool) else default


def _matches(pattern: object, text: str) -> bool:
    """Whether text matches a schema's pattern (found anywhere, as JSON Schema has it; a bad pattern is refused
    where the converter meets it)."""
    if not isinstance(pattern, str):
        return True
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True


def _readable(pattern: object) -> bool:
    """Whether a pattern is one Python's re reads."""
    try:
        return isinstance(pattern, str) and re.compile(pattern) is not None
    except re.error:
        return False


def _of_type(value: object, name: object) -> bool:
    """Whether value is a JSON value of the type name (an integer is one whose fraction is zero)."""
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    kinds = _KINDS.get(str(name), ())
    return isinstance(value, kinds) and (name == "boolean" or not isinstance(value, bool))


def _within(schema: dict[str, Any], value: float) -> bool:
    """Whether a number is within the schema's minimum, maximum and (numeric) exclusive bounds, and a multiple of its
    multipleOf."""
    def bound(key: str) -> float | None:
        given = schema.get(key)
        return given if isinstance(given, int | float) and not isinstance(given, bool) else None

    low, high, above, below = (bound(key) for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
    return ((low is None or value >= low) and (high is None or value <= high)
            and (above is None or value > above) and (below is None or value < below)
            and _multiple(value, bound("multipleOf")))


def _multiple(value: float, step: float | None) -> bool:
    """Whether a number is a whole multiple of a schema's multipleOf (None, or one not above 0: any is), reckoned on
    the decimals as written (0.3 is a multiple of 0.1), integers of any size in integers."""
    if step is None or step <= 0 or not finite_number(step) or not finite_number(value):
        return True
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    return (exact_decimal(value) / exact_decimal(step)).denominator == 1

