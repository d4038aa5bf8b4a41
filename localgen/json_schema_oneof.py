"""Whether a JSON schema's oneOf may let a value meet more than one of its alternatives: llama-cpp-python's converter
reads a oneOf as an anyOf, so "exactly one" holds only where no two alternatives share a value (of different types,
or of values listed apart, as a discriminated union's const)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from typing import Any

from localgen.json_schema_ranges import may_hold, ranges_apart
from localgen.json_schema_types import ANY_VALUE
from localgen.json_schema_values import same_value

ONE_OF_WARNING = ("the JSON schema's oneOf cannot be held to exactly one of its alternatives (llama-cpp-python's "
                  "converter reads it as an anyOf, and a value may meet several of them): check the answer")
_VALUE_KINDS = ((bool, "boolean"), ((int, float), "number"), (str, "string"), (type(None), "null"), (list, "array"),
                (dict, "object"))  # bool before int: true is no number
_MAX_REFS = 16  # $refs followed in a chain to reach an alternative's schema, at most


def may_overlap(alternatives: list[Any], resolve: Callable[[str], object]) -> bool:
    """Whether some value may meet two of a oneOf's alternatives (prepared): False only where each two are provably
    apart, by their types or by the values their enum or const, or a property both require, list."""
    schemas = [_followed(item, resolve) for item in alternatives]
    return any(not _apart(first, second, resolve) for first, second in combinations(schemas, 2))


def _followed(schema: object, resolve: Callable[[str], object]) -> object:
    """The schema a $ref alone stands for (its target, followed down a chain), else the schema itself."""
    for _ in range(_MAX_REFS):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            break
        schema = resolve(schema["$ref"])
    return schema


def _apart(first: object, second: object, resolve: Callable[[str], object]) -> bool:
    """Whether no value meets both schemas, as far as their types, listed values, numeric bounds and required listed
    properties show."""
    if not (isinstance(first, dict) and isinstance(second, dict)):
        return False
    if not _kinds(first) & _kinds(second):
        return True
    listed = _listed(first), _listed(second)
    if listed[0] is not None and listed[1] is not None:
        return not any(same_value(one, other) for one in listed[0] for other in listed[1])
    if ranges_apart(first, second) or any(
            values is not None and not any(may_hold(other, value) for value in values)
            for values, other in ((listed[0], second), (listed[1], first))):
        return True
    if _kinds(first) != {"object"} or _kinds(second) != {"object"}:
        return False
    both = set(_names(first.get("required"))) & set(_names(second.get("required")))
    return any(_apart(_property(first, name, resolve), _property(second, name, resolve), resolve) for name in both)


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The kinds of JSON value a schema may allow (an integer is a number), as its type or its listed values say."""
    listed = _listed(schema)
    if listed is not None:
        return {next(kind for types, kind in _VALUE_KINDS if isinstance(value, types)) for value in listed}
    given = schema.get("type", ANY_VALUE["type"])
    names = given if isinstance(given, list) else [given]
    return {"number" if name == "integer" else str(name) for name in names}


def _listed(schema: dict[str, Any]) -> list[Any] | None:
    """The values a schema's const or enum lists (None: neither)."""
    if "const" in schema:
        return [schema["const"]]
    return schema["enum"] if isinstance(schema.get("enum"), list) else None


def _names(required: object) -> list[str]:
    """The property names a required lists."""
    return [name for name in required if isinstance(name, str)] if isinstance(required, list) else []


def _property(schema: dict[str, Any], name: str, resolve: Callable[[str], object]) -> object:
    """The schema of an object's property, its $ref followed."""
    properties = schema.get("properties")
    return _followed(properties.get(name), resolve) if isinstance(properties, dict) else None
