"""A JSON schema's $refs: one to its whole self ("#", a recursive tree's), which llama-cpp-python's converter refused
as "Unsupported ref #", made one to a copy of the schema in its $defs, which it follows; one beside other keywords
read alone where the schema declares a draft that reads it so."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from localgen.errors import UsageError
from localgen.json_schema_words import DEFINITIONS, LIMITING, schemas_in, subschemas

_REF_ALONE = re.compile(r"https?://json-schema\.org/draft-0([3-7])/schema#?")  # the drafts that read a $ref alone
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
    rewritten = _rewritten(schema, lambda node: {**node, "$ref": ref} if node.get("$ref") == "#" else node)
    kept = rewritten.get("$defs") if isinstance(rewritten.get("$defs"), dict) else {}
    whole = {key: value for key, value in rewritten.items() if key not in DEFINITIONS}
    return {**rewritten, "$defs": {**kept, name: whole}}, ref


def _refers_to_whole(node: object) -> bool:
    """Whether any $ref in node is "#"."""
    return any(item.get("$ref") == "#" for item in schemas_in(node))


def ref_alone_draft(schema: dict[str, Any]) -> int | None:
    """The draft a schema's $schema declares where it is one that reads a $ref alone (4, 6, 7), else None."""
    declared = schema.get("$schema")
    found = _REF_ALONE.fullmatch(declared.strip()) if isinstance(declared, str) else None
    return int(found.group(1)) if found else None


def refs_alone_where_declared(schema: dict[str, Any], dropped: list[str]) -> dict[str, Any]:
    """schema with each $ref's other keywords (but its definitions) left out where its $schema declares draft 4, 6
    or 7, which read a $ref alone, where they were held beside it as 2019-09 has it; dropped gets those that limit
    the value."""
    if ref_alone_draft(schema) is None:
        return schema

    def alone(node: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(node.get("$ref"), str):
            return node
        dropped.extend(key for key in node if key in LIMITING and key not in dropped)
        return {key: value for key, value in node.items() if key == "$ref" or key in DEFINITIONS}

    return _rewritten(schema, alone)


def _rewritten(node: object, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """node with change made to each schema object in it (in schemas, not in data: a const of {"$ref": "#"} kept)."""
    if not isinstance(node, dict):
        return node
    node = change(node)
    inner = {id(item) for item in subschemas(node)}
    return {key: _inner(value, inner, change) for key, value in node.items()}


def _inner(value: object, inner: set[int], change: Callable[[dict[str, Any]], dict[str, Any]]) -> object:
    """A keyword's value, its subschemas rewritten."""
    if id(value) in inner:
        return _rewritten(value, change)
    if isinstance(value, list):
        return [_rewritten(item, change) if id(item) in inner else item for item in value]
    if isinstance(value, dict):
        return {key: _rewritten(item, change) if id(item) in inner else item for key, item in value.items()}
    return value


def ref_target(schema: object, ref: str) -> object:
    """What a local $ref points at (None: nothing)."""
    if not ref.startswith("#/"):
        return None
    for part in ref[2:].split("/"):
        if not isinstance(schema, dict) or part not in schema:
            return None
        schema = schema[part]
    return schema


def schemas_read(schema: object) -> list[dict[str, Any]]:
    """Every schema object a value is read by: the schema's own, its definitions only as a local $ref reaches them
    (an allOf's or a $ref's beside keywords, merged where they stand, leave theirs unread), each once."""
    found: list[dict[str, Any]] = []
    stack, met = [schema], set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in met:
            continue
        met.add(id(node))
        found.append(node)
        if isinstance(node.get("$ref"), str):
            stack.append(ref_target(schema, node["$ref"]))
        stack.extend(subschemas({key: value for key, value in node.items() if key not in DEFINITIONS}))
    return found


def refuse_ref_cycle(schema: dict[str, Any], whole_ref: str) -> None:
    """Refuse local $refs that lead round to themselves through nothing but $refs (no value could ever start)."""
    for ref in local_refs(schema):
        seen, target = [ref], ref_target(schema, ref)
        while isinstance(target, dict) and isinstance(target.get("$ref"), str):
            if target["$ref"] in seen:
                cycle = " -> ".join([*seen, target["$ref"]]).replace(whole_ref, "#")  # as written
                raise UsageError(f"the JSON schema's $ref {seen[0].replace(whole_ref, '#')} is a cycle: {cycle}",
                                 hint="let one of them describe a value, not only refer on")
            seen.append(target["$ref"])
            target = ref_target(schema, target["$ref"])


def local_refs(node: object) -> set[str]:
    """Every local $ref (#/...) in a schema."""
    return {item["$ref"] for item in schemas_in(node)
            if isinstance(item.get("$ref"), str) and item["$ref"].startswith("#/")}


def recursive_refs(schema: object) -> frozenset[str]:
    """The local $refs whose target leads back to the same $ref, through $refs within it."""
    def reached(ref: str) -> set[str]:
        found, stack = set(), [ref]
        while stack:
            for inner in local_refs(ref_target(schema, stack.pop())) - found:
                found.add(inner)
                stack.append(inner)
        return found

    return frozenset(ref for ref in local_refs(schema) if ref in reached(ref))
