"""A JSON schema's $ref to its whole self ("#", a recursive tree's), which llama-cpp-python's converter refused as
"Unsupported ref #", made one to a copy of the schema in its $defs, which it follows."""

from __future__ import annotations

from typing import Any

from localgen.json_schema_words import DEFINITIONS

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
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("$ref") == "#":
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _rewritten(node: object) -> Any:
    """node with each $ref "#" made WHOLE_REF."""
    if isinstance(node, list):
        return [_rewritten(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: WHOLE_REF if key == "$ref" and value == "#" else _rewritten(value) for key, value in node.items()}
