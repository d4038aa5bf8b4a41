"""A JSON schema's types: a type list beside other keywords split into one schema a type, and a type that names no
JSON type refused with the one meant."""

from __future__ import annotations

import json
from typing import Any

from localgen.errors import UsageError
from localgen.json_schema_words import DEFINITIONS, NOTES, TYPE_KEYWORDS

ANY_VALUE = {"type": ["string", "number", "integer", "boolean", "object", "array", "null"]}  # the schema {}
_OTHER_TYPE_NAMES = {"int": "integer", "float": "number", "double": "number", "str": "string", "text": "string",
                     "bool": "boolean", "list": "array", "dict": "object", "none": "null"}  # Python's, and others'


def types_apart(schema: dict[str, Any]) -> dict[str, Any]:
    """A type list beside other keywords as an anyOf of one schema a type, each with the keywords that apply to its
    type (its definitions kept at the top), where the converter read the types alone: {"type": ["string", "null"],
    "maxLength": 3} allowed any string, and each type's schema had all the keywords (the null one, properties)."""
    types = schema.get("type")
    if not isinstance(types, list) or all(key == "type" or key in NOTES for key in schema):
        return schema
    definitions = {key: schema[key] for key in DEFINITIONS if key in schema}
    return {"anyOf": [{**{key: value for key, value in schema.items()
                          if key not in definitions and _applies(key, name)}, "type": name} for name in types],
            **definitions}


def of_several_types(schema: dict[str, Any]) -> bool:
    """Whether a schema of no type (nor $ref, allOf, anyOf or oneOf, merged before it is read) has keywords of more
    than one type's ({"properties": {...}, "minLength": 2}): by JSON Schema it allows any value, each type held to
    its own keywords, where the converter read it as of the first of them alone (an object)."""
    if any(key in schema for key in ("type", "$ref", "allOf", "anyOf", "oneOf")):
        return False
    kinds = {"number" if name == "integer" else name for name, keys in TYPE_KEYWORDS.items()
             if any(key in schema for key in keys)}
    return len(kinds) > 1


def _applies(key: str, type_name: str) -> bool:
    """Whether a keyword limits values of the type: one of its own, or one of no type (enum, anyOf, a note)."""
    return key in TYPE_KEYWORDS.get(type_name, ()) or not any(key in keys for keys in TYPE_KEYWORDS.values())


def check_type(given: object) -> None:
    """Refuse a `type` that names no JSON type (int, Object), with the one meant, where the converter said only
    "Unrecognized schema"."""
    import difflib

    types = ANY_VALUE["type"]
    for name in given if isinstance(given, list) else [] if given is None else [given]:
        if name in types:
            continue
        meant = _OTHER_TYPE_NAMES.get(str(name).lower()) or next(
            iter(difflib.get_close_matches(str(name).lower(), types, n=1)), None)
        raise UsageError(f"the JSON schema's type {json.dumps(name)} is not a JSON type",
                         hint=f'use "{meant}"' if meant else f"use one of {', '.join(types)}")


def objects_excluded(merged: dict[str, Any], refusal: UsageError) -> None:
    """Narrow merged, which no object meets, to its other types and their keywords (no type: every other one);
    refusal raised where object is the only type it allows."""
    _type_excluded(merged, "object", refusal)


def arrays_excluded(schema: dict[str, Any], refusal: UsageError) -> None:
    """Narrow schema, which no array meets, to its other types and their keywords (no type: every other one);
    refusal raised where array is the only type it allows."""
    _type_excluded(schema, "array", refusal)


def _type_excluded(schema: dict[str, Any], excluded: str, refusal: UsageError) -> None:
    """Narrow schema, which no value of the excluded type meets, to its other types, the excluded type's keywords
    dropped; refusal raised where it allows no other type."""
    given = schema.get("type", ANY_VALUE["type"])
    kept = [name for name in (given if isinstance(given, list) else [given]) if name != excluded]
    if not kept:
        raise refusal
    for key in TYPE_KEYWORDS[excluded]:
        schema.pop(key, None)
    schema["type"] = kept[0] if len(kept) == 1 else kept
