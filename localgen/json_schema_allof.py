"""A JSON schema's allOf folded into one schema: llama-cpp-python's converter reads an allOf only as objects' merged
properties, and made any other allOf ({"allOf": [{"$ref": "#/definitions/Color"}]}, as pydantic v1 writes a field
with a description) a grammar of objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from localgen.errors import UsageError
from localgen.json_schema_kinds import check_kinds
from localgen.json_schema_types import objects_excluded
from localgen.json_schema_values import NoValueError, is_number, name_allowed, same_value
from localgen.json_schema_words import DEFINITIONS, NOTES, short_json

MAX_ALTERNATIVES = 64  # anyOf alternatives an allOf's parts multiply out to, at most
_LOWER_BOUNDS = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")  # the larger one holds
_UPPER_BOUNDS = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")  # the smaller one holds
_MAPS = ("properties", "$defs", "definitions", "patternProperties")
ALTERNATIVES = ("anyOf", "oneOf")

Resolver = Callable[[str], object]  # a local $ref's target (None: none)


@dataclass(frozen=True)
class Wording:
    """How a refused merge names the keywords the user wrote: an allOf, or a $ref, anyOf or oneOf beside others."""

    merged: str  # what merges the schemas: "the JSON schema's allOf"
    holder: str  # what holds a part that is not a schema, or refers: "the JSON schema's allOf"
    side: str  # one of the schemas merged: "a part"
    hint: str  # what to do where they cannot be merged
    dropped: list[str] = field(default_factory=list, compare=False)  # each alternative left out, and why


# An allOf's wording, copied (replace) with a dropped list of its own wherever one is used.
ALL_OF = Wording("the JSON schema's allOf", "the JSON schema's allOf", "a part",
                 "write the combined schema out in one object, or drop the allOf")


def beside_wording(written: dict[str, Any]) -> Wording:
    """The wording of a merge of the keywords beside a schema's $ref, anyOf or oneOf (written: the schema as given)
    with it, or of its allOf."""
    if "allOf" in written:
        return replace(ALL_OF, dropped=[])
    if "$ref" in written:
        ref = written["$ref"]
        return Wording(f"the JSON schema's $ref {ref} with the keywords beside it", "the JSON schema", "one side",
                       f"make the keywords beside the $ref fit {ref}, or drop them")
    key = next(key for key in ALTERNATIVES if key in written)
    return Wording(f"the JSON schema's {key} with the keywords beside it", f"the JSON schema's {key}", "one side",
                   f"make the keywords beside the {key} fit one of its schemas, or drop them")


def merged_all_of(schema: dict[str, Any], resolve: Resolver, seen: tuple[str, ...] = (),
                  words: Wording | None = None) -> dict[str, Any]:
    """schema with its allOf's parts (a local $ref's target for a part that refers) merged into it: every keyword
    that limits the value kept, a bound the tighter of two, types and enums the values both allow (seen: the $refs
    being followed, each followed once on a path; words: how a refusal names what the user wrote)."""
    parts = schema.get("allOf")
    if not isinstance(parts, list):
        return schema
    words = words or replace(ALL_OF, dropped=[])  # a list of its own, never ALL_OF's
    definitions = {key: schema[key] for key in DEFINITIONS if key in schema}  # kept where $refs find them
    merged = _part({key: value for key, value in schema.items() if key != "allOf" and key not in definitions},
                   resolve, seen, words, words.holder)
    for part in parts:
        merged = _merged(merged, _part(part, resolve, seen, words, words.holder), words)
    return {**merged, **definitions}


def _part(part: object, resolve: Resolver, seen: tuple[str, ...], words: Wording, holder: str) -> dict[str, Any]:
    """One allOf part, or one alternative of a part's anyOf, as a schema object: true as {}, a $ref as its target
    beside the part's other keywords (but a $ref already being followed, left to the converter), each anyOf or oneOf
    alternative so too (resolved here, on the path that reached it, so that no later merge follows it again), the
    kind of each of its keywords' values checked before any is read (holder: what holds the part, as a refusal names
    it)."""
    if part is True:
        return {}
    if not isinstance(part, dict):
        raise UsageError(f"{holder} holds {json.dumps(part)}, which allows no value",
                         hint="give each allOf part as a schema object")
    part = dict(part)
    check_kinds(part)
    ref = part.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        target = resolve(ref)
        if not ref.startswith("#"):
            raise UsageError(f"{holder} refers to {ref}, a remote schema, which localgen does not fetch",
                             hint="copy that schema into $defs and refer to it there")
        if not isinstance(target, dict):
            raise UsageError(f"{holder} refers to {ref}, which does not resolve to a schema",
                             hint="point the $ref at a schema in $defs")
        rest = _part({key: value for key, value in part.items() if key != "$ref"}, resolve, seen, words, holder)
        return _merged(_part(target, resolve, (*seen, ref), words, holder), rest, words)
    for key in ALTERNATIVES:
        if isinstance(part.get(key), list):  # false, which allows no value, kept for KeptAlternatives to drop
            holds = f"the JSON schema's {key}"
            part = {**part, key: [item if item is False else _part(item, resolve, seen, words, holds)
                                  for item in part[key]]}
    return merged_all_of(part, resolve, seen, replace(ALL_OF, dropped=words.dropped))


class KeptAlternatives:
    """An anyOf's or oneOf's alternatives as they are made, one that allows no value (false, one refused as such) left
    out and said, with why, in dropped: refused only where none is left, its refusal saying it. Each is made as
    `with kept.trying(item): kept.add(made(kept.schema(item)))`, in the frame of the loop over them, so that
    alternatives nest as deep as other subschemas do before a refusal says the schema nests too deep."""

    def __init__(self, key: str, dropped: list[str]) -> None:
        """No alternative made yet of key's (as a refusal names it); dropped gets those left out."""
        self.key, self.dropped, self.start = key, dropped, len(dropped)
        self.kept: list[Any] = []
        self.refusal: NoValueError | None = None
        self.item: object = None
        self.checked = False

    def trying(self, item: object) -> KeptAlternatives:
        """This, to make item within (a NoValueError leaves it out)."""
        self.item, self.checked = item, False
        return self

    def schema(self, item: object) -> Any:
        """item, the alternative being made; false refused as allowing no value."""
        if item is False:
            raise NoValueError(f"the JSON schema's {self.key} holds false, which allows no value",
                               hint=f"give the {self.key} a schema some value meets")
        self.checked = True
        return item

    def add(self, made: object) -> None:
        """Keep what the alternative was made into; a RuntimeError where schema did not first check it."""
        if not self.checked:
            raise RuntimeError(f"a {self.key} alternative kept unchecked: make it of kept.schema(item)")
        self.kept.append(made)

    def __enter__(self) -> None:
        """Nothing to set up: trying named the alternative."""

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> bool:
        """Leave out an alternative that allows no value, saying why (false alone unsaid: it says it)."""
        if not isinstance(error, NoValueError):
            return False
        self.refusal = self.refusal or error
        why = f"{self.key} alternative {short_json(self.item)} ({error.message})"
        self.dropped.extend([why] if self.item is not False and why not in self.dropped else [])
        return True

    def result(self) -> list[Any]:
        """The alternatives kept; the first refusal where none is."""
        if self.refusal and not self.kept:
            del self.dropped[self.start:]  # the refusal says it
            raise self.refusal
        return self.kept


def _merged(first: dict[str, Any], second: dict[str, Any], words: Wording) -> dict[str, Any]:
    """The schema of the values both schemas allow; an anyOf or oneOf of either spread over the other's keywords,
    an alternative no value of the other meets dropped."""
    for key in ALTERNATIVES:
        for one, other in ((first, second), (second, first)):
            alternatives = one.get(key)
            if isinstance(alternatives, list) and alternatives:
                rest = _merged(other, {name: value for name, value in one.items() if name != key}, words)
                kept = KeptAlternatives(key, words.dropped)
                for item in alternatives:
                    with kept.trying(item):
                        kept.add(_merged(rest, kept.schema(item), words))
                return {key: _within_alternatives(kept.result(), words)}
    merged = dict(first)
    for key, value in second.items():
        if key not in merged or same_value(merged[key], value) or key in NOTES:
            merged.setdefault(key, value)
            continue
        merged[key] = _combined(key, merged[key], value, words)
    for one in (first, second):
        _close_properties(merged, one, words)
        _close_items(merged, one)
    return merged


def _close_items(merged: dict[str, Any], part: dict[str, Any]) -> None:
    """Hold a part's items false, which allows no item past its own prefixItems (none without), on the merged array:
    maxItems at most their count, where another part's prefixItems asked for more."""
    if part.get("items") is not False:
        return
    own = len(part["prefixItems"]) if isinstance(part.get("prefixItems"), list) else 0
    given = merged.get("maxItems")
    merged["maxItems"] = min(given, own) if is_number(given) else own


def _close_properties(merged: dict[str, Any], part: dict[str, Any], words: Wording) -> None:
    """Hold a part's additionalProperties on the merged properties the part does not list: a property it forbids
    (false) left out, refused where required, and one it limits to a schema given that schema too."""
    extra, listed = part.get("additionalProperties"), part.get("properties")
    properties = merged.get("properties")
    required = merged.get("required") if isinstance(merged.get("required"), list) else []
    forbidden = [name for name in required if isinstance(name, str) and not name_allowed(part, name)]
    if forbidden:  # listed by another part, or by none
        objects_excluded(merged, NoValueError(f"{words.merged} requires {forbidden[0]}, which {words.side}'s "
                                              "additionalProperties false forbids", hint=words.hint))
        return
    if extra in (None, True) or not isinstance(properties, dict):
        return
    others = [name for name in properties if not isinstance(listed, dict) or name not in listed]
    merged["properties"] = {name: sub if name not in others else {"allOf": [sub, extra]}
                            for name, sub in properties.items() if not (extra is False and name in others)}


def _within_alternatives(spread: list[dict[str, Any]], words: Wording) -> list[dict[str, Any]]:
    """An allOf's alternatives spread over its other parts, refused where they multiply out to over
    MAX_ALTERNATIVES."""
    if sum(_alternative_count(item) for item in spread) > MAX_ALTERNATIVES:
        raise UsageError(f"{words.merged} multiplies out to over {MAX_ALTERNATIVES} alternatives", hint=words.hint)
    return spread


def _alternative_count(schema: dict[str, Any]) -> int:
    """How many plain alternatives a schema's anyOf or oneOf, nested ones counted out, comes to (1: none)."""
    alternatives = next((schema[key] for key in ALTERNATIVES if isinstance(schema.get(key), list)), None)
    return 1 if not alternatives else sum(_alternative_count(item) if isinstance(item, dict) else 1
                                          for item in alternatives)


def _combined(key: str, first: object, second: object, words: Wording) -> object:
    """One keyword's value that two schemas give differently, as both hold it (a UsageError where it cannot be)."""
    if key in _LOWER_BOUNDS and _numbers(first, second):
        return max(first, second)  # type: ignore[type-var]
    if key in _UPPER_BOUNDS and _numbers(first, second):
        return min(first, second)  # type: ignore[type-var]
    if key == "required" and isinstance(first, list) and isinstance(second, list):
        return [*first, *(name for name in second if name not in first)]
    if key in _MAPS and isinstance(first, dict) and isinstance(second, dict):
        return {**first, **{name: {"allOf": [first[name], schema]} if name in first and first[name] != schema
                            else schema for name, schema in second.items()}}
    if key == "items" and isinstance(first, dict) and isinstance(second, dict):
        return {"allOf": [first, second]}
    if key == "type":
        return _common_type(first, second, words)
    if key == "additionalProperties" and isinstance(first, dict | bool) and isinstance(second, dict | bool):
        return False if False in (first, second) else {"allOf": [first, second]}
    if key == "not":  # neither A nor B: not (A or B); the converter ignores it, and says so, either way
        return {"anyOf": [first, second]}
    if key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(first, bool) and isinstance(second, bool):
        return first or second  # draft 4's: the converter ignores it, and says so
    if key == "enum" and isinstance(first, list) and isinstance(second, list):
        both = [value for value in first if any(same_value(value, other) for other in second)]
        if both:
            return both
    two = f"{words.merged} gives {key} two values, {short_json(first)} and {short_json(second)}"
    if key in ("enum", "const"):
        raise NoValueError(f"{two}, that no value can meet together", hint=words.hint)
    raise UsageError(f"{two}, which localgen cannot combine", hint=words.hint)


def _numbers(*values: object) -> bool:
    """Whether every value is a number (not true or false)."""
    return all(map(is_number, values))


def _common_type(first: object, second: object, words: Wording) -> object:
    """The JSON types two `type` keywords both allow (an integer is a number too)."""
    def names(given: object) -> list[object]:
        return given if isinstance(given, list) else [given]

    def allows(given: object, name: object) -> bool:
        return name in names(given) or (name == "integer" and "number" in names(given))

    both = [name for name in names(first) if allows(second, name)]
    both += [name for name in names(second) if name == "integer" and allows(first, name) and name not in both]
    if not both:
        raise NoValueError(f"{words.merged} asks for a value of type {short_json(first)} and of type "
                           f"{short_json(second)}, which no value is", hint=words.hint)
    return both[0] if len(both) == 1 else both

