"""What the JSON schema modules share: the keywords that hold schemas, the counts a grammar can hold, a value shown
short."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from localgen.errors import UsageError

MAX_COUNT = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD: a larger count is refused, or (a maximum) silently dropped
MAX_SPAN = 1000  # the converter nests a maximum's optional items (max - min) deep: grammar.MAX_NESTING
NOT_IN_JSON_STRING = r"\x22\x5C\x01-\x1F"  # what a JSON string holds only escaped: ", \ and control characters
SCHEMA_VALUED = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")
SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")  # name: schema
DEFINITIONS = ("$defs", "definitions")
NOTES = ("title", "description", "default", "examples", "$comment", "$id", "$schema", "deprecated", "readOnly",
         "writeOnly")  # keywords that say nothing of the value
NUMBER_KEYWORDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")  # a number's bounds
TYPE_KEYWORDS = {  # the keywords that limit values of one type alone
    "string": ("minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"),
    "number": NUMBER_KEYWORDS, "integer": NUMBER_KEYWORDS,
    "object": ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "propertyNames",
               "unevaluatedProperties"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
              "minContains", "maxContains", "unevaluatedItems"),
}
OWN_RULE_KEYWORDS = ("enum", "const", "$ref", "anyOf", "oneOf", "allOf")  # the converter writes their own rule
LIMITING = frozenset({"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                      *(key for keys in TYPE_KEYWORDS.values() for key in keys)})  # the keywords that limit a value


class NoValueError(UsageError):
    """A schema no value meets: an allOf's parts together, an enum or const beside keywords none of its values
    meets, bounds that leave no number (an anyOf alternative that is such a schema is dropped, not refused)."""


def short_json(value: object) -> str:
    """A keyword's value as JSON, cut to 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def dropped_warning(dropped: list[str]) -> str:
    """The one-line warning naming each alternative left out as allowing no value, and why (given in dropped)."""
    them = "them" if len(dropped) > 1 else "it"
    return (f"the JSON schema's {'; '.join(dropped)} {'allow' if len(dropped) > 1 else 'allows'} no value, so the "
            f"answer is never {'one of them' if len(dropped) > 1 else 'it'}: fix {them}, or drop {them}")


def subschemas(node: dict[Any, Any]) -> Iterator[Any]:
    """The schemas a schema object holds where a schema goes (not in const, enum, default or examples: data)."""
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            yield from value.values()
        elif (key in SCHEMA_LISTS or key in SCHEMA_VALUED) and isinstance(value, list):
            yield from value
        elif key in SCHEMA_VALUED:
            yield value


def schemas_in(schema: object) -> Iterator[dict[Any, Any]]:
    """Every schema object within a schema (or a list of them), the schema itself included, each once (a prepared
    schema shares some)."""
    stack, met = list(schema) if isinstance(schema, list) else [schema], set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict) and id(node) not in met:
            met.add(id(node))
            yield node
            stack.extend(subschemas(node))


def finite_number(value: object) -> bool:
    """Whether a keyword's value is a finite number (not true or false; an integer of any size is)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and (
        isinstance(value, int) or math.isfinite(value))


def no_value_within(schema: dict[str, Any], kind: str, *, stepped: bool) -> NoValueError:
    """The refusal of an integer's or number's schema whose bounds hold no value of its kind (stepped: no multiple
    of its multipleOf, named with them)."""
    given = ", ".join(f"{key} {short_json(schema[key])}" for key in NUMBER_KEYWORDS
                      if finite_number(schema.get(key)) and (key != "multipleOf" or stepped))
    return NoValueError(f"the JSON schema's {kind} of {given} can be no {kind}",
                        hint=f"make its bounds hold {'an integer' if kind == 'integer' else 'a number'}"
                             f"{' (a multiple of its multipleOf)' if stepped else ''}")
