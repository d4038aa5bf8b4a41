"""A JSON schema's $ref to its whole self ("#", a recursive tree's), which llama-cpp-python's converter refused as
"Unsupported ref #", made one to a copy of the schema in its $defs, which it follows."""

from __future__ import annotations

from typing import Any

from localgen.json_schema_words import DEFINITIONS, schemas_in, subschemas

WHOLE = "whole-schema"  # the $defs entry that holds the schema's copy (the grammar's rule for it takes the name)


def whole_schema_referred(schema: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """schema with each $ref "#" made one to a copy of the schema (its definitions left out) in its $defs, under a
    name none of its definitions ($defs and draft 7's definitions: the converter names a rule by it) has, and that
    $ref; as it was, and "#", where no $ref is "#"."""
    if not _refers_to_whole(schema):
        return schema, "#"
    taken = {name for key in DEFINITIONS if isinstance(schema.get(key), dict) for name in schema[key]}
    name = next(f"{WHOLE}-{n}" if n else WHOLE for n in range(len(taken) + 1)
                if (f"{WHOLE}-{n}" if n else WHOLE) not in taken)
    ref = f"#/$defs/{name}"
    rewritten = _rewritten(schema, ref)
    kept = rewritten.get("$defs") if isinstance(rewritten.get("$defs"), dict) else {}
    whole = {key: value for key, value in rewritten.items() if key not in DEFINITIONS}
    return {**rewritten, "$defs": {**kept, name: whole}}, ref


def _refers_to_whole(node: object) -> bool:
    """Whether any $ref in node is "#"."""
    return any(item.get("$ref") == "#" for item in schemas_in(node))


def _rewritten(node: object, ref: str) -> Any:
    """node with each $ref "#" made ref (in schemas, not in data: a const of {"$ref": "#"} kept)."""
    if not isinstance(node, dict):
        return node
    inner = {id(item) for item in subschemas(node)}
    return {key: ref if key == "$ref" and value == "#" else _inner(value, inner, ref) for key, value in node.items()}


def _inner(value: object, inner: set[int], ref: str) -> object:
    """A keyword's value, its subschemas rewritten."""
    if id(value) in inner:
        return _rewritten(value, ref)
    if isinstance(value, list):
        return [_rewritten(item, ref) if id(item) in inner else item for item in value]
    if isinstance(value, dict):
        return {key: _rewritten(item, ref) if id(item) in inner else item for key, item in value.items()}
    return value
