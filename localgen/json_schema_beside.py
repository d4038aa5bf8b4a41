"""A JSON schema's $ref, anyOf or oneOf beside keywords that limit the value read as an allOf of the two, as JSON
Schema has it (a $ref so from 2019-09 on), where llama-cpp-python's converter followed the $ref or the alternatives
alone."""

from __future__ import annotations

from typing import Any

from localgen.json_schema_allof import ALTERNATIVES, Resolver, beside_wording, merged_all_of
from localgen.json_schema_words import DEFINITIONS, LIMITING


def ref_beside_keywords_as_all_of(schema: dict[str, Any], resolve: Resolver) -> dict[str, Any]:
    """A $ref beside keywords that limit the value as an allOf of the two (as JSON Schema has it from 2019-09 on),
    where the converter followed the $ref alone; beside other keywords (OpenAPI's nullable, an x- extension), or a
    type its target is already of ({"$ref": A, "type": ["object", "null"]} for an object A), a $ref the grammar's one
    rule for it serves, where each use wrote the target out again."""
    if not isinstance(schema.get("$ref"), str) or "allOf" in schema:
        return schema
    rest = {key: value for key, value in schema.items() if key != "$ref" and key not in DEFINITIONS}
    if _type_adds_nothing(rest.get("type"), resolve(schema["$ref"])):
        schema = {key: value for key, value in schema.items() if key != "type"}
        rest.pop("type")
    if not any(key in LIMITING for key in rest):  # notes, OpenAPI's nullable and example, x-* extensions
        return schema
    definitions = {key: schema[key] for key in DEFINITIONS if key in schema}
    return {"allOf": [{"$ref": schema["$ref"]}, rest], **definitions}


def _type_adds_nothing(types: object, target: object) -> bool:
    """Whether a type (or type list) beside a $ref allows every type its target (the schema it refers to) may be."""
    if not isinstance(target, dict) or types is None:
        return False
    allowed = {types} if isinstance(types, str) else set(types) if isinstance(types, list) else set()
    kinds = target.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else None
    return kinds is not None and all(isinstance(kind, str) and kind in allowed for kind in kinds)


def alternatives_beside_keywords_as_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    """An anyOf or oneOf beside keywords that limit the value (a type list, properties, the other of the two) as an
    allOf of the two, its keywords spread over its alternatives as it is merged, where the converter followed the
    alternatives alone: {"type": ["string", "integer"], "anyOf": [...]} allowed null, and an object's anyOf of
    required names any value."""
    key = next((key for key in ALTERNATIVES if isinstance(schema.get(key), list)), None)
    if key is None or "allOf" in schema:  # an allOf's merge spreads them already
        return schema
    rest = {name: value for name, value in schema.items() if name != key and name not in DEFINITIONS}
    if not any(name in LIMITING for name in rest):
        return schema
    definitions = {name: schema[name] for name in DEFINITIONS if name in schema}
    return {"allOf": [rest, {key: schema[key]}], **definitions}


def all_of_merged(schema: dict[str, Any], written: dict[str, Any], resolve: Resolver, seen: tuple[str, ...],
                  dropped: list[str]) -> dict[str, Any]:
    """schema's allOf merged (merged_all_of), a refusal naming what the user wrote (written: the schema as given): its
    allOf, or the $ref, anyOf or oneOf the keywords beside it were merged with; dropped gets each alternative the
    merge left out as allowing no value, and why."""
    words = beside_wording(written)
    merged = merged_all_of(schema, resolve, seen, words)
    dropped.extend(why for why in words.dropped if why not in dropped)
    return merged
