"""A JSON schema's $ref to its whole self ("#", a recursive tree's), which llama-cpp-python's converter refused as
"Unsupported ref #", made one to a copy of the schema in its $defs, which it follows."""

from __future__ import annotations

from typing import Any

from localgen.json_schema_words import DEFINITIONS, schemas_in, subschemas

WHOLE = "whole-schema"  # the $defs entry that holds the schema's copy (the grammar's rule for it takes the name)
WHOLE_REF = f"#/$defs/{WHOLE}"


def whole_schema_referred(schema: dict[str, Any]) -> dict[str, Any]:
    """schema with each $ref "#" made WHOLE_REF, to a copy of the schema (its definitions left out) in its $defs; as
    it was where no $ref is "#"."""
    if not _refers_to_whole(schema):
        return schema
    rewritten = _rewritten(schema)
    definitions = rewritten.get("$defs") if isinstance(rewritten.get("$defs"), dict) else {}
    whole = {key: value for key, value in rewritten.items() if key not in DEFINITIONS}
    return {**rewritten, "$defs": {**definitions, WHOLE: whole}}


def _refers_to_whole(node: object) -> bool:
    """Whether any $ref in node is "#"."""
    return any(item.get("$ref") == "#" for item in schemas_in(node))


def _rewritten(node: object) -> Any:
    """node with each $ref "#" made WHOLE_REF (in schemas, not in data: a const of {"$ref": "#"} kept)."""
    if not isinstance(node, dict):
        return node
    inner = {id(item) for item in subschemas(node)}
    return {key: WHOLE_REF if key == "$ref" and value == "#" else _inner(value, inner) for key, value in node.items()}


def _inner(value: object, inner: set[int]) -> object:
    """A keyword's value, its subschemas rewritten."""
    if id(value) in inner:
        return _rewritten(value)
    if isinstance(value, list):
        return [_rewritten(item) if id(item) in inner else item for item in value]
    if isinstance(value, dict):
        return {key: _rewritten(item) if id(item) in inner else item for key, item in value.items()}
    return value
