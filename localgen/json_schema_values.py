"""A JSON schema's enum or const narrowed to the values its other keywords allow, and JSON values compared as JSON
compares them: llama-cpp-python's converter reads an enum or const alone, so {"type": "string", "const": 5} allowed
5, and Python's 1 == True made true one of the values both [true] and [1] allow."""

from __future__ import annotations

import re
from typing import Any

from localgen.errors import UsageError
from localgen.json_schema_words import short_json

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


def enum_narrowed(schema: dict[str, Any]) -> dict[str, Any]:
    """schema's enum and const as one enum of the values its type, lengths and bounds allow, the converter's only
    reading of it (unchanged without an enum or const)."""
    if "enum" not in schema and "const" not in schema:
        return schema
    values = [schema["const"]] if "const" in schema else list(schema["enum"])
    if "const" in schema and "enum" in schema:
        values = [value for value in values if any(same_value(value, other) for other in schema["enum"])]
    kept = [value for value in values if _allowed(schema, value)]
    if not kept:
        given = "const" if "const" in schema else "enum"
        raise UsageError(f"the JSON schema's {given} {short_json(schema[given])} holds no value its other keywords "
                         "allow", hint=f"make the {given}'s values of its type and within its bounds")
    narrowed = {key: value for key, value in schema.items() if key not in ("const", "type")}
    return {**narrowed, "enum": kept}


def _allowed(schema: dict[str, Any], value: object) -> bool:
    """Whether value is of the schema's type and within its lengths, bounds and pattern, and an object's or array's
    properties, required names and items allow it (the keywords cheap to check; the others are not, nor a keyword
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
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        return all(name in value for name in required if isinstance(name, str)) and all(
            _allowed(properties[name], item) if isinstance(properties.get(name), dict)
            else properties.get(name, schema.get("additionalProperties", True)) is not False
            for name, item in value.items())
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return all(_allowed(schema["items"], item) for item in value)
    return True


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


def _of_type(value: object, name: object) -> bool:
    """Whether value is a JSON value of the type name (an integer is one whose fraction is zero)."""
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    kinds = _KINDS.get(str(name), ())
    return isinstance(value, kinds) and (name == "boolean" or not isinstance(value, bool))


def _within(schema: dict[str, Any], value: float) -> bool:
    """Whether a number is within the schema's minimum, maximum and (numeric) exclusive bounds."""
    def bound(key: str) -> float | None:
        given = schema.get(key)
        return given if isinstance(given, int | float) and not isinstance(given, bool) else None

    low, high, above, below = (bound(key) for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
    return ((low is None or value >= low) and (high is None or value <= high)
            and (above is None or value > above) and (below is None or value < below))
