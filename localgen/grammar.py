"""Constrained output: a GBNF grammar file (--grammar) or a JSON schema (--json-schema) as grammar text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from localgen.errors import UsageError
from localgen.inputs import option_path, read_file_input, short_path

GRAMMAR_HINT = 'pass a GBNF grammar file, e.g. one with the line: root ::= "yes" | "no"'
_JSON_KINDS = {list: "an array", str: "a string", bool: "true or false", int: "a number", float: "a number",
               type(None): "null"}
_ROOT_RULE = re.compile(r"^\s*root\s*::=", re.MULTILINE)
SCHEMA_HINT = 'give a JSON schema as text or a file, e.g. --json-schema \'{"type": "object"}\''


def grammar_text(grammar_file: str | None, json_schema: str | None) -> str | None:
    """The GBNF grammar the answer must follow, from --grammar FILE or --json-schema TEXT|FILE (None: free text)."""
    if grammar_file is not None and json_schema is not None:
        raise UsageError("--grammar and --json-schema contradict each other", hint="give one of them")
    if grammar_file is not None:
        return _grammar_file(option_path(grammar_file, "--grammar"))
    if json_schema is not None:
        return schema_grammar(_schema_text(json_schema))
    return None


def _grammar_file(path: Path) -> str:
    """The text of a GBNF grammar file (checked by llama.cpp when the sampler is built)."""
    warnings: list[str] = []
    text = read_file_input(path, warnings, option="--grammar", binary_hint=GRAMMAR_HINT)
    if warnings or not text.strip():
        raise UsageError(f"{short_path(path)} is not a grammar ({'not UTF-8' if warnings else 'it is empty'})",
                         hint=GRAMMAR_HINT)
    if not _ROOT_RULE.search(text):
        raise UsageError(f"{short_path(path)} has no root rule: the answer starts at `root ::= ...`", hint=GRAMMAR_HINT)
    return text


def _schema_text(value: str) -> str:
    """--json-schema's value: JSON text as given, or the text of the file it names."""
    if value.lstrip().startswith("{"):
        return value
    warnings: list[str] = []
    text = read_file_input(option_path(value, "--json-schema"), warnings, option="--json-schema",
                           binary_hint=SCHEMA_HINT)
    if warnings:
        raise UsageError(f"{short_path(Path(value))} is not a JSON schema (not UTF-8)", hint=SCHEMA_HINT)
    return text


def schema_grammar(schema: str) -> str:
    """The GBNF grammar of the JSON values a schema allows (llama-cpp-python's converter, as llama.cpp's own)."""
    try:
        parsed = json.loads(schema)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the JSON schema is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                         hint=SCHEMA_HINT) from None
    if not isinstance(parsed, dict):
        raise UsageError(f"a JSON schema is an object, not {_JSON_KINDS.get(type(parsed), 'that')}", hint=SCHEMA_HINT)
    from localgen.engine.native import load_bindings

    converter = load_bindings("llama_grammar")  # pure Python; the package's __init__ would reset llama.cpp's log
    try:
        return converter.json_schema_to_gbnf(schema)
    except Exception as exc:  # the converter asserts on what it does not support
        raise UsageError(f"cannot turn the JSON schema into a grammar: {str(exc) or type(exc).__name__}",
                         hint="use the common keywords: type, properties, required, items, enum, "
                              "minLength/maxLength") from None
