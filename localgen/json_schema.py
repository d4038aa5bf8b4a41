"""--json-schema: a JSON schema checked, prepared and turned into GBNF by llama-cpp-python's converter."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from localgen.errors import UsageError
from localgen.json_schema_allof import ALTERNATIVES, KeptAlternatives, Resolver
from localgen.json_schema_beside import (
    all_of_merged,
    alternatives_beside_keywords_as_all_of,
    ref_beside_keywords_as_all_of,
)
from localgen.json_schema_counts import check_counts, items_false_as_no_items, prefix_items_within_max_items
from localgen.json_schema_kinds import check_kinds
from localgen.json_schema_lengths import lengths_folded
from localgen.json_schema_literals import enum_rule, gbnf_literal
from localgen.json_schema_objects import (
    HELD_KEYWORDS,
    exclude_objects_of_forbidden_required,
    keywords_held,
    own_rule,
    refuse_refused_required,
)
from localgen.json_schema_oneof import ONE_OF_WARNING, may_overlap
from localgen.json_schema_pattern import converter_pattern
from localgen.json_schema_ranges import MAX_DIGITS
from localgen.json_schema_refs import (
    local_refs,
    recursive_refs,
    ref_alone_draft,
    ref_target,
    refs_alone_where_declared,
    refuse_ref_cycle,
    schemas_read,
    whole_schema_referred,
)
from localgen.json_schema_steps import held_step
from localgen.json_schema_types import ANY_VALUE, check_type, of_several_types, types_apart
from localgen.json_schema_unheld import unheld_warnings
from localgen.json_schema_values import ENUM_HOLDS, NoValueError, enum_narrowed, is_number
from localgen.json_schema_words import (
    DEFINITIONS,
    MAX_SPAN,
    NOT_IN_JSON_STRING,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_VALUED,
    TYPE_KEYWORDS,
    dropped_warning,
    schemas_in,
    short_json,
)

SCHEMA_HINT = 'give a JSON schema as text or a file, e.g. --json-schema \'{"type": "object"}\''
CONVERTER_HINT = ("use the common keywords: type, properties, required, items, enum, minLength/maxLength, "
                  "local $ref")
_STRING_CHAR = re.compile(r'^char ::= \[\^"\\\\\] \|', re.MULTILINE)  # a JSON string's character, as converted
_DOT = re.compile(r"^dot ::= \[\^\\x0A\\x0D\]$", re.MULTILINE)  # a pattern's `.`, as converted
_JSON_KINDS = {list: "an array", str: "a string", bool: "true or false", int: "a number", float: "a number",
               type(None): "null"}
# Keywords llama-cpp-python's converter does not turn into grammar: the answer may break them.
IGNORED_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minProperties",
                    "maxProperties", "uniqueItems", "contains", "not", "if", "then", "else", "dependentRequired",
                    "dependentSchemas", "patternProperties", "propertyNames", "dependencies", "unevaluatedProperties",
                    "unevaluatedItems", "minContains", "maxContains")
KNOWN_FORMAT = re.compile(r"date|time|date-time|uuid[1-5]?")  # the string formats the converter turns into grammar
_VALUE_KEYWORDS = ("type", "$ref", "allOf", "anyOf", "oneOf", "const", "enum", "properties", "additionalProperties",
                   "items", "prefixItems", "pattern")  # a schema without these or a known format allows any value
_SHADOW_REMEDIES = {"pattern": "count the characters in the pattern, e.g. ^[a-z]{1,20}$",
                    "format": "give a pattern in its place", "items": "give prefixItems with items false"}
_LISTED_ITEMS = {"enum": "value", "anyOf": "schema", "oneOf": "schema", "type": "type"}  # none allows no value


def schema_grammar(text: str, warn: list[str]) -> str:
    """The GBNF grammar of the JSON values the schema in text allows; warn gets what the answer may still break."""
    beside_refs: list[str] = []  # keywords a declared draft drops beside a $ref
    try:
        given = parsed_schema(text)
        schema, whole_ref = whole_schema_referred(refs_alone_where_declared(given, beside_refs))
    except RecursionError:
        raise UsageError("the JSON schema nests too deep to read", hint="flatten it, or use $defs") from None
    if beside_refs:
        warn.append(f"the JSON schema declares draft {ref_alone_draft(given)}, which reads a $ref alone: the "
                    f"{', '.join(beside_refs)} beside a $ref cannot hold (leave out its $schema, or put both in an "
                    "allOf, to hold them)")
    how = _Preparation(lambda ref: ref_target(schema, ref), recursive_refs(schema))
    try:
        prepared = _prepared(schema, how)
    except RecursionError:
        raise UsageError("the JSON schema's allOf parts and $refs nest too deep to merge",
                         hint="flatten them, or refer to fewer definitions in a chain") from None
    ignored: dict[str, list[dict[str, Any]]] = {}  # each keyword left unheld: the schema objects holding it
    for node in schemas_read(prepared):
        for key in _keywords_in([node]) & set(IGNORED_KEYWORDS):
            ignored.setdefault(key, []).append(node)
    warn.extend(unheld_warnings(ignored))
    formatted = [node for node in schemas_read(schema)
                 if isinstance(node.get("format"), str) and not KNOWN_FORMAT.fullmatch(node["format"])]
    unknown_formats = sorted({node["format"] for node in formatted})
    if unknown_formats:
        them = "them" if len(unknown_formats) > 1 else "it"
        of_strings = any(_may_be_string(node) for node in formatted)
        warn.append(f"the JSON schema's format {', '.join(map(json.dumps, unknown_formats))} cannot be enforced "
                    f"(llama-cpp-python's converter knows date, time, date-time and uuid, and ignores {them}): "
                    f"check the answer{', or give a pattern' if of_strings else ''}")  # a pattern holds strings alone
    if how.unlisted:
        them = "them" if len(how.unlisted) > 1 else "it"
        warn.append(f"the JSON schema requires {', '.join(how.unlisted)} but does not list {them} in properties, so "
                    f"the answer may leave {them} out: add {them} to properties")
    warn.extend(_shadowed_keywords(prepared))
    warn.extend([dropped_warning(how.dropped)] if how.dropped else [])
    warn.extend([ONE_OF_WARNING] if how.one_of_overlaps else [])
    refuse_ref_cycle(prepared, whole_ref)
    return _converted(prepared)


def _may_be_string(node: dict[str, Any]) -> bool:
    """Whether a schema's type allows a string (no type does)."""
    types = node.get("type", "string")
    return types == "string" or (isinstance(types, list) and "string" in types)


def _shadowed_keywords(schema: object) -> list[str]:
    """Warnings for keywords the converter drops beside another one it follows alone: a string's length beside its
    pattern or format, prefixItems beside items."""
    dropped: dict[str, list[str]] = {}  # by what the converter follows alone
    for node in schemas_read(schema):
        follows = "pattern" if isinstance(node.get("pattern"), str) else \
            "format" if KNOWN_FORMAT.fullmatch(str(node.get("format"))) else None
        lengths = [key for key in ("minLength", "maxLength") if key in node] if follows else []
        if isinstance(node.get("prefixItems"), list) and isinstance(node.get("items"), dict):
            follows, lengths = "items", ["prefixItems"]
        for key in lengths:
            if key not in dropped.setdefault(str(follows), []):
                dropped[str(follows)].append(key)
    return [f"the JSON schema's {', '.join(keys)} beside {'' if follows == 'items' else 'a '}{follows} cannot be "
            f"enforced (llama-cpp-python's converter follows the {follows} alone): check the answer, or "
            f"{_SHADOW_REMEDIES[follows]}" for follows, keys in dropped.items()]


def parsed_schema(text: str) -> dict[str, Any]:
    """The schema as a JSON object, or a UsageError saying what is wrong with it."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the JSON schema is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                         hint=SCHEMA_HINT) from None
    except RecursionError:
        raise UsageError("the JSON schema nests too deep to read", hint="flatten it, or use $defs") from None
    except ValueError:  # Python reads an integer of at most sys.get_int_max_str_digits() digits
        raise UsageError(f"the JSON schema holds an integer of more than {sys.get_int_max_str_digits():,} digits, "
                         "more than localgen reads", hint="write it shorter: a bound of over "
                         f"{MAX_DIGITS} digits cannot be held anyway") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"a JSON schema is an object, not {_JSON_KINDS.get(type(parsed), 'that')}", hint=SCHEMA_HINT)
    return parsed


def _keywords_in(nodes: list[dict[str, Any]]) -> set[str]:
    """Every keyword of a prepared schema's objects (nodes), but the bounds an enum beside them holds (enum_narrowed
    made each const, and each integer its bounds list, such an enum, and kept its values to each bound that is a
    number)."""
    return {str(key) for node in nodes for key, value in node.items()
            if not (key in ENUM_HOLDS and "enum" in node and is_number(value)) and key not in keywords_held(node)
            and not _of_other_types(node, key)}


def _of_other_types(node: dict[str, Any], key: str) -> bool:
    """Whether key is a bound or count the grammar holds on its own type's values, and node's type rules that type out
    (a string's minimum, as an anyOf's spreads it): it limits nothing there."""
    if key not in HELD_KEYWORDS:
        return False
    given = node.get("type")
    types = set(given if isinstance(given, list) else [given] if isinstance(given, str) else [])
    types |= {"number"} if "integer" in types else set()
    owners = {kind for kind, keys in TYPE_KEYWORDS.items() if key in keys}
    return bool(types and owners) and not types & owners


@dataclass
class _Preparation:
    """What preparing a schema keeps: how a local $ref resolves, the recursive $refs (those that lead back to
    themselves), the required names missing from properties, and each schema object prepared, by its id and the
    $refs followed above it (one met again, as an anyOf's keywords spread over its alternatives hold theirs, is
    prepared once and is one rule of the grammar)."""

    resolve: Resolver
    recursive: frozenset[str]
    unlisted: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # each alternative left out as allowing no value, and why
    one_of_overlaps: bool = False  # whether a oneOf's alternatives left may share a value
    done: dict[tuple[int, tuple[str, ...]], tuple[object, object]] = field(default_factory=dict)


def _prepared(node: object, how: _Preparation, seen: tuple[str, ...] = ()) -> object:
    """A schema as the converter handles it, its subschemas too (_checked, an allOf merged), each schema object once
    (how.done); seen: the recursive $refs an allOf above followed, left to the converter below it; how.unlisted gets
    the required names missing from properties."""
    if not isinstance(node, dict):
        return node
    met = (id(node), seen)
    if met in how.done:
        return how.done[met][1]
    written = _checked(node)
    schema = alternatives_beside_keywords_as_all_of(ref_beside_keywords_as_all_of(written, how.resolve))
    if "allOf" in schema:
        merged = all_of_merged(schema, written, how.resolve, seen, how.dropped)
        seen = (*seen, *sorted(local_refs(schema["allOf"]) & how.recursive))
        schema = _checked(merged)
    elif str(schema.get("$ref")).startswith("#/") and schema["$ref"] not in how.recursive:
        _prepared(how.resolve(schema["$ref"]), how, seen)  # a target that allows no value refused here (or dropped)
    exclude_objects_of_forbidden_required(schema)
    split = isinstance(schema.get("type"), list)
    schema = types_apart(schema)
    held_step(schema)  # a multipleOf its bounds hold no multiple of: refused here (or its alternative dropped)
    _refuse_forbidden_required(schema)
    refuse_refused_required(schema, node.get("propertyNames", schema.get("propertyNames")))
    for key, value in schema.items():
        if key in ALTERNATIVES and isinstance(value, list):  # an anyOf of a type list's types named as that
            kept = KeptAlternatives("type list" if split and "type" not in schema else key, how.dropped)
            for item in value:
                with kept.trying(item):
                    kept.add(_prepared(_as_object(kept.schema(item), kept.key), how, seen))
            schema[key] = kept.result()
            how.one_of_overlaps |= kept.key == "oneOf" and may_overlap(schema[key], how.resolve)
        elif key in SCHEMA_MAPS and isinstance(value, dict):  # a property of false cannot be there: left out
            schema[key] = {name: _inner_prepared(_as_object(sub, key), how, seen, key in DEFINITIONS)
                           for name, sub in value.items() if not (key == "properties" and sub is False)}
        elif (key in SCHEMA_LISTS and isinstance(value, list)) or key in SCHEMA_VALUED:
            schema[key] = [_inner_prepared(_as_object(sub, key), how, seen) for sub in value] \
                if isinstance(value, list) else _inner_prepared(value, how, seen)
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    how.unlisted.extend(str(name) for name in required if name not in properties and str(name) not in how.unlisted)
    how.done[met] = (node, schema)  # node kept: its id stays its own
    return schema


def _inner_prepared(node: object, how: _Preparation, seen: tuple[str, ...], definition: bool = False) -> object:
    """A subschema other than an alternative (a property's, an item's) prepared: one that allows no value is refused
    as such, not taken for an alternative of the schema holding it that allows none (an optional property's leaves
    the object others); a definition that allows none is kept as written, refused (or dropped) where a $ref meets it."""
    try:
        return _prepared(node, how, seen)
    except NoValueError as exc:
        if definition:
            return node
        raise UsageError(exc.message, hint=exc.hint) from None


def _refuse_forbidden_required(schema: dict[str, Any]) -> None:
    """Refuse a required property whose schema is false (no object can have it, nor lack it)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    forbidden = [name for name in schema.get("required") or () if properties.get(name) is False]
    if forbidden:
        raise UsageError(f"the JSON schema requires {forbidden[0]}, whose schema is false, so no object follows it",
                         hint=f"drop {forbidden[0]} from required, or give it a schema")


def _as_object(schema: object, key: str) -> object:
    """A schema among key's as the converter reads it: true, any value, as an object; false refused."""
    if schema is False:
        raise UsageError(f"the JSON schema's {key} holds false, a schema no value follows", hint="leave it out")
    return dict(ANY_VALUE) if schema is True else schema


def _checked(node: dict[str, Any]) -> dict[str, Any]:
    """A schema object as the converter handles it: its type and bounds checked, any items spelled out."""
    schema = dict(node)
    check_kinds(schema)
    check_type(schema.get("type"))
    prefix_items_within_max_items(schema)
    items_false_as_no_items(schema)
    check_counts(schema)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise UsageError(f"the JSON schema's required is {short_json(required)}, not a list of property names",
                         hint='list the names in the object\'s required, e.g. "required": ["name"]')
    empty = next((key for key in _LISTED_ITEMS if schema.get(key) == []), None)
    if empty:
        raise UsageError(f"the JSON schema's {empty} is an empty list, which allows no value",
                         hint=f"list at least one {_LISTED_ITEMS[empty]} in {empty}, or leave it out")
    if schema.get("items") == {} or schema.get("items") is True or (
            schema.get("type") == "array" and "items" not in schema and "prefixItems" not in schema
            and ("minItems" in schema or "maxItems" in schema)):
        schema["items"] = ANY_VALUE  # the converter reads an empty or missing items as none: no bounds kept
    if schema and not any(key in schema for key in _VALUE_KEYWORDS) and not KNOWN_FORMAT.fullmatch(
            str(schema.get("format"))):
        schema["type"] = ANY_VALUE["type"]  # notes or constraints alone ({"title": "Data"}, {"minLength": 2})
    elif of_several_types(schema):
        schema["type"] = ANY_VALUE["type"]  # {"properties": {...}, "minLength": 2}: each type held to its keywords
    return enum_narrowed(lengths_folded(schema))


def _converted(schema: dict[str, Any]) -> str:
    """The GBNF grammar of the JSON values a schema allows (llama-cpp-python's converter, as llama.cpp's own)."""
    from localgen.engine.native import load_bindings

    module = load_bindings("llama_grammar")  # pure Python; the package's __init__ would reset llama.cpp's log
    try:
        converter = _exact_converter(module)
        converter._refs["#"] = schema  # a {"$ref": "#"} left in a const or default is data, not one to follow
        converter.visit(converter.resolve_refs(schema, "stdin"), "")
        grammar = converter.format_grammar()
    except UsageError:  # a schema or pattern refused (_checked, converter_pattern)
        raise
    except RecursionError:
        optional = _most_optional_properties(schema)
        if optional > MAX_SPAN // 2:  # the converter chains them one call deeper each
            raise UsageError(f"the JSON schema has an object of {optional:,} optional properties, more than the "
                             "converter can chain", hint="require some of them, or group them in nested objects"
                             ) from None
        raise UsageError("the JSON schema nests too deep to convert", hint="flatten it, or use $defs") from None
    except Exception as exc:  # the converter asserts and raises on what it does not support
        raise _unconvertible(_converter_problem(exc)) from None
    # The converter lets a string hold raw control characters (a newline), and a pattern's . a raw quote, which no
    # JSON parser accepts; llama.cpp's own converter excludes them. (No token gives a NUL, so \x01 on is enough.)
    grammar = _STRING_CHAR.sub(lambda _: r'char ::= [^"\\\x01-\x1F] |', grammar)
    return _DOT.sub(lambda _: f"dot ::= [^\\x0A\\x0D{NOT_IN_JSON_STRING}]", grammar)


def _most_optional_properties(schema: object) -> int:
    """The most properties an object of the schema lists but does not require."""
    counts = [len(set(node["properties"]) - {name for name in node.get("required") or () if isinstance(name, str)})
              for node in schemas_in(schema)
              if isinstance(node.get("properties"), dict) and isinstance(node.get("required", []), list)]
    return max(counts, default=0)


def _exact_converter(module: Any) -> Any:
    """llama-cpp-python's SchemaConverter, its literals (const, enum, property names) in exact JSON text."""

    class ExactConverter(module.SchemaConverter):  # type: ignore[name-defined,misc]
        """The converter escaped only \\r, \\n and " in a literal: a value's backslash escape was read by GBNF."""

        def __init__(self) -> None:
            """The converter of local $refs alone, and the rules it made for each schema object."""
            super().__init__(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
            self.made: dict[int, tuple[Any, str]] = {}

        def _format_literal(self, literal: str) -> str:
            """literal as a GBNF string literal that matches exactly its text."""
            return gbnf_literal(literal)

        def visit(self, schema: Any, name: str) -> Any:
            """The converter's, on the schema checked: each one it meets, wherever a $ref finds it; a schema object
            met again (_prepared shares them) is the rule made for it the first time."""
            if not isinstance(schema, dict):
                return super().visit(schema, name)
            if id(schema) not in self.made:
                self.made[id(schema)] = (schema, self._visit_checked(_checked(schema), name))  # its id its own
            return self.made[id(schema)][1]

        def _visit_checked(self, schema: dict[str, Any], name: str) -> str:
            """The converter's, an enum written as a tree of its values' beginnings, a number's bounds as digits."""
            if (own := own_rule(self, schema, name)) is not None:
                return str(self._add_rule(f"{name}-" if name in module.RESERVED_NAMES else name or "root", own))
            if not isinstance(schema.get("enum"), list) or isinstance(schema.get("type"), list) or any(
                    key in schema for key in ("$ref", "anyOf", "oneOf", "const")):
                return str(super().visit(schema, name))
            return str(self._add_rule(f"{name}-" if name in module.RESERVED_NAMES else name or "root",
                                      enum_rule(schema["enum"])))

        def _visit_pattern(self, pattern: object, name: str) -> str:
            """The converter's, on the pattern in its terms: each pattern it meets, wherever a $ref finds it."""
            if not isinstance(pattern, str):
                raise UsageError(f"the JSON schema's pattern {json.dumps(pattern)} is not a string",
                                 hint='give a regular expression as a string, e.g. "^[a-z]+$"')
            return super()._visit_pattern(converter_pattern(pattern), name)

        def resolve_refs(self, schema: Any, url: str) -> Any:
            """The converter's, each schema object once (_prepared shares them, and the converter walked each path
            to one), and the root's siblings of a $ref ($defs) too: it left them unresolved."""
            stack, met = [schema], set()
            while stack:
                node = stack.pop()
                if isinstance(node, list):
                    stack.extend(node)
                elif isinstance(node, dict) and id(node) not in met:
                    met.add(id(node))
                    ref = node.get("$ref")
                    if ref is None or ref in self._refs or node is schema:
                        stack.extend(node.values())
                    if ref is not None and ref not in self._refs:
                        self._refs[_resolved_here(node, schema, url)] = ref_target(schema, ref)
            return schema

    return ExactConverter()


def _resolved_here(node: dict[str, Any], root: dict[str, Any], url: str) -> str:
    """A schema object's $ref as the converter keeps it, where it points at a schema in root: url before it."""
    ref = node["$ref"]
    if isinstance(ref, str) and ref.startswith(("https://", "http://")):
        raise _unconvertible("a $ref to a remote schema (localgen does not fetch schemas)")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise _unconvertible(f"Unsupported ref {ref}")
    if ref_target(root, ref) is None:
        raise _unconvertible(f"a $ref that does not resolve: {ref}")
    node["$ref"] = f"{url}{ref}"
    return node["$ref"]


def _unconvertible(problem: str) -> UsageError:
    """The error for a schema the converter cannot turn into a grammar, problem said in the user's terms."""
    return UsageError(f"cannot turn the JSON schema into a grammar: {problem}", hint=CONVERTER_HINT)


def _converter_problem(exc: Exception) -> str:
    """The converter's complaint in the user's terms."""
    text = str(exc)
    if isinstance(exc, KeyError) and ("#" in text or "/" in text):  # the converter looks refs up in a dict
        return f"a $ref that does not resolve: {text}"
    if isinstance(exc, KeyError):
        return f"the converter looked for {text} and found none"
    return text or type(exc).__name__
