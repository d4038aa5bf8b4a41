"""What each keyword of a JSON schema holds checked, as JSON Schema has it (a schema, a list of them, a count), where
llama-cpp-python's converter read an enum string's characters as its values and failed on others with Python's
words ('int' object has no attribute 'get')."""

from __future__ import annotations

import math
from typing import Any, NoReturn

from localgen.errors import UsageError
from localgen.json_schema_words import (
    NUMBER_KEYWORDS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_VALUED,
    finite_number,
    short_json,
)

_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_TEXTS = ("$ref", "format")  # a pattern's is refused as the converter reads it (converter_pattern)
_LISTS = ("enum",)


def check_kinds(schema: dict[str, Any]) -> None:
    """Refuse a keyword of a schema object whose value is not of its kind: a schema (an object, or true or false), a
    list of schemas, a map of names to schemas, a whole count (3.0 made 3), a text, a list of values, a finite number
    (a multipleOf above 0; an exclusive bound true or false too, as draft 4 writes it)."""
    for key, value in schema.items():
        if key == "items" and isinstance(value, list):  # draft 7's tuple, as prefixItems
            if not all(map(_is_schema, value)):
                _refuse(key, value, "a schema, or a list of them", '{"type": "string"}')
        elif key in SCHEMA_VALUED and not _is_schema(value):
            _refuse(key, value, "a schema (an object, or true or false)", '{"type": "string"}')
        elif key in SCHEMA_LISTS and not (isinstance(value, list) and all(_is_schema(item) for item in value)):
            _refuse(key, value, "a list of schemas", '[{"type": "string"}, {"type": "null"}]')
        elif key in SCHEMA_MAPS and not (isinstance(value, dict) and all(map(_is_schema, value.values()))):
            _refuse(key, value, "an object of names and their schemas", '{"name": {"type": "string"}}')
        elif key in _COUNTS and isinstance(value, float) and value.is_integer():
            schema[key] = int(value)  # 3.0 is an integer from draft 6 on
        elif key in _COUNTS and (not isinstance(value, int) or isinstance(value, bool)):
            _refuse(key, value, "a whole number", "3")
        elif key in _TEXTS and not isinstance(value, str):
            _refuse(key, value, "a string", '"date"' if key == "format" else '"#/$defs/Name"')
        elif key in _LISTS and not isinstance(value, list):
            _refuse(key, value, "a list of values", '["red", "green"]')
        elif key in NUMBER_KEYWORDS:
            _check_number(key, value)


def _check_number(key: str, value: object) -> None:
    """Refuse a number keyword that is not a finite number (NaN, Infinity, a 1e400 read as it, a string), or a
    multipleOf not above 0: no number meets it."""
    if isinstance(value, bool) and key.startswith("exclusive"):
        return
    if not finite_number(value):
        beyond = isinstance(value, float) and math.isinf(value)  # Infinity, or a number past 1.8e308 read as it
        _refuse(key, value, f"a finite number{' (a number past 1.8e308 reads as Infinity)' if beyond else ''}", "10")
    if key == "multipleOf" and value <= 0:  # type: ignore[operator]
        read_as_zero = isinstance(value, float) and value == 0  # 0.0 written, or a number too small for a double
        raise UsageError(f"the JSON schema's multipleOf is {short_json(value)}: a multipleOf is a number above 0"
                         f"{' (a number too small for a double, such as 1e-400, reads as 0)' if read_as_zero else ''}",
                         hint='e.g. "multipleOf": 2, or leave it out')


def _is_schema(value: object) -> bool:
    """Whether a value is a schema: an object, or true or false."""
    return isinstance(value, dict | bool)


def _refuse(key: str, value: object, kind: str, example: str) -> NoReturn:
    """The error for a keyword whose value is not of its kind."""
    raise UsageError(f"the JSON schema's {key} is {short_json(value)}, not {kind}", hint=f'e.g. "{key}": {example}')
