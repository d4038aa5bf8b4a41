"""What the JSON schema modules share: the keywords that hold schemas, the counts a grammar can hold, a value shown
short."""

from __future__ import annotations

import json

MAX_COUNT = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD: a larger count is refused, or (a maximum) silently dropped
MAX_SPAN = 1000  # the converter nests a maximum's optional items (max - min) deep: grammar.MAX_NESTING
NOT_IN_JSON_STRING = r"\x22\x5C\x01-\x1F"  # what a JSON string holds only escaped: ", \ and control characters
SCHEMA_VALUED = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")
SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")  # name: schema
DEFINITIONS = ("$defs", "definitions")
NOTES = ("title", "description", "default", "examples", "$comment", "$id", "$schema", "deprecated", "readOnly",
         "writeOnly")  # keywords that say nothing of the value


def short_json(value: object) -> str:
    """A keyword's value as JSON, cut to 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"
