"""Constrained output: a GBNF grammar, its text or file (--grammar), or a JSON schema (--json-schema) as a Grammar."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localgen.errors import UsageError
from localgen.inputs import STDIN_NAME, InputFile, Waiting, whole_text
from localgen.params import Grammar

GRAMMAR_HINT = 'give a GBNF grammar, as text or a file, with a root rule, e.g. --grammar \'root ::= "yes" | "no"\''
SCHEMA_HINT = 'give a JSON schema as text or a file, e.g. --json-schema \'{"type": "object"}\''
_KINDS = {"--grammar": ("a grammar", GRAMMAR_HINT), "--json-schema": ("a JSON schema", SCHEMA_HINT)}  # as named
MAX_NESTING = 1000  # llama.cpp's recursive-descent grammar parser overflows the C stack near 20,000
_ROOT_RULE = re.compile(r"^\s*root\s*::=", re.MULTILINE)
_STRING_CHAR = re.compile(r'^char ::= \[\^"\\\\\] \|', re.MULTILINE)  # a JSON string's character, as converted
_ANY_VALUE = {"type": ["string", "number", "integer", "boolean", "object", "array", "null"]}  # the schema {}
_JSON_KINDS = {list: "an array", str: "a string", bool: "true or false", int: "a number", float: "a number",
               type(None): "null"}
# Keywords llama-cpp-python's converter does not turn into grammar: the answer may break them.
IGNORED_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minProperties",
                    "maxProperties", "uniqueItems", "contains", "not", "if", "then", "else", "dependentRequired",
                    "dependentSchemas", "patternProperties", "propertyNames")


@dataclass(frozen=True)
class ConstraintSource:
    """--grammar or --json-schema as given: its text, or its file (checked, and read by grammar_for)."""

    option: str  # "--grammar" or "--json-schema"
    given: str | InputFile

    @property
    def file(self) -> InputFile | None:
        """Its file (None for a text given whole)."""
        return self.given if isinstance(self.given, InputFile) else None

    def text(self, waiting: Waiting | None) -> str:
        """The grammar's or schema's text, read from its file (a binary, non-UTF-8 or empty one is refused)."""
        if isinstance(self.given, str):
            return self.given
        what, hint = _KINDS[self.option]
        return whole_text(self.given, what, hint, waiting=waiting)


def constraint_source(grammar: str | None, json_schema: str | None) -> ConstraintSource | None:
    """What the answer must follow, from --grammar TEXT|FILE or --json-schema TEXT|FILE (None: free text), checked
    as far as it can be before a file is read: a text as a whole, a file's path (check_file_path)."""
    if grammar is not None and json_schema is not None:
        raise UsageError("--grammar and --json-schema contradict each other", hint="give one of them")
    for option, value, hint in (("--grammar", grammar, GRAMMAR_HINT), ("--json-schema", json_schema, SCHEMA_HINT)):
        if value is not None and not value.strip():
            raise UsageError(f"{option} is empty", hint=hint)
    if grammar is not None and _is_inline(grammar):
        _refuse_non_utf8(grammar, "--grammar", GRAMMAR_HINT)
        if not _ROOT_RULE.search(grammar):
            raise UsageError("the --grammar text has no root rule: the answer starts at `root ::= ...`",
                             hint=GRAMMAR_HINT)
        return ConstraintSource("--grammar", grammar)
    if json_schema is not None and _is_inline_schema(json_schema):
        _refuse_non_utf8(json_schema, "--json-schema", SCHEMA_HINT)
        return ConstraintSource("--json-schema", json_schema)
    for option, value in (("--grammar", grammar), ("--json-schema", json_schema)):
        if value is not None:
            _refuse_stdin(value, option)
            return ConstraintSource(option, InputFile.checked(value, option))
    return None


def grammar_for(source: ConstraintSource | None, warn: list[str], *, waiting: Waiting | None = None) -> Grammar | None:
    """The grammar the answer must follow (None: free text), its file read now (waiting is told of a quiet pipe).

    warn gets what the answer may still get wrong (schema keywords the converter ignores).
    """
    if source is None:
        return None
    text = source.text(waiting)
    if source.option == "--grammar":
        file = source.file
        if file is not None and not _ROOT_RULE.search(text):
            raise UsageError(f"{file.name} has no root rule: the answer starts at `root ::= ...`", hint=GRAMMAR_HINT)
        return _checked(Grammar(text, source="--grammar" if file is None else f"--grammar {file.name}"))
    schema = _parsed_schema(text)
    ignored = sorted(_keywords_in(schema) & set(IGNORED_KEYWORDS))
    if ignored:
        them = "them" if len(ignored) > 1 else "it"
        warn.append(f"the JSON schema's {', '.join(ignored)} cannot be enforced (llama-cpp-python's converter "
                    f"ignores {them}): check the answer")
    return _checked(Grammar(_converted(schema), source="--json-schema"))


def _checked(grammar: Grammar) -> Grammar:
    """Refuse what llama.cpp would crash on rather than report: a NUL character, parentheses nested too deep."""
    if asks_for_nul(grammar.text):
        raise UsageError(f"{grammar.source}: the grammar asks for a NUL character, which no token can give",
                         hint="remove the NUL (\\x00) from the grammar or schema")
    depth = nesting_depth(grammar.text)
    if depth > MAX_NESTING:
        raise UsageError(f"{grammar.source}: the grammar nests parentheses {depth:,} deep, beyond {MAX_NESTING:,}",
                         hint="split the nesting into named rules")
    return grammar


def nesting_depth(text: str) -> int:
    """The deepest nesting of parentheses in GBNF text, outside string literals, character classes and comments."""
    depth = deepest = 0
    for kind, body in _pieces(text):
        if not kind and body == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif not kind and body == ")":
            depth -= 1
    return deepest


def asks_for_nul(text: str) -> bool:
    """Whether GBNF text can require a NUL character where nothing else would do (llama.cpp then aborts).

    That is a NUL in a string literal, or a character class of NUL alone; a class that also allows other
    characters ([\\x00-\\x7f]) or excludes NUL ([^\\x00]) is fine. A raw NUL byte anywhere would cut llama.cpp's
    C string short.
    """
    if "\x00" in text:
        return True
    for kind, body in _pieces(text):
        if kind == '"' and any(value == 0 for value, _ in _characters(body)):
            return True
        if kind == "[" and not body.startswith("^"):
            ranges = _class_ranges(_characters(body))
            if ranges and all(high == 0 for _, high in ranges):
                return True
    return False


def _pieces(text: str) -> Iterator[tuple[str, str]]:
    """GBNF text as pieces: ('"', a string literal's body), ('[', a character class's body) or ('', any other
    character); comments are left out."""
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
        elif char in "\"[":
            closing, j = '"' if char == '"' else "]", i + 1
            while j < end and text[j] != closing:
                j += 2 if text[j] == "\\" else 1
            yield char, text[i + 1:j]
            i = j + 1
        else:
            yield "", char
            i += 1


_ESCAPED = {"t": 9, "n": 10, "r": 13}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def _characters(body: str) -> list[tuple[int, bool]]:
    """The code points of a literal's or class's body, escapes decoded; True marks an unescaped '-'."""
    found, i = [], 0
    while i < len(body):
        if body[i] != "\\" or i + 1 == len(body):
            found.append((ord(body[i]), body[i] == "-"))
            i += 1
            continue
        escape, width = body[i + 1], _HEX_DIGITS.get(body[i + 1], 0)
        digits = body[i + 2:i + 2 + width]
        if width and len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
            found.append((int(digits, 16), False))
            i += 2 + width
        else:  # \t, \", \] and the like (a bad escape is llama.cpp's parser's to report)
            found.append((_ESCAPED.get(escape, ord(escape)), False))
            i += 2
    return found


def _class_ranges(characters: list[tuple[int, bool]]) -> list[tuple[int, int]]:
    """A character class's (low, high) ranges from its decoded characters: a-z is one range, x is (x, x)."""
    ranges, i = [], 0
    while i < len(characters):
        low = characters[i][0]
        if i + 2 < len(characters) and characters[i + 1][1]:
            ranges.append((low, characters[i + 2][0]))
            i += 3
        else:
            ranges.append((low, low))
            i += 1
    return ranges


def _is_inline(value: str) -> bool:
    """Whether --grammar's value is GBNF text (a rule, as llama-cli's --grammar takes) rather than a file name."""
    if "::=" not in value:
        return False
    try:
        return not Path(value).is_file()
    except (OSError, ValueError):  # a name too long or with a NUL is no file
        return True


def _refuse_stdin(value: str, option: str) -> None:
    """Refuse '-' as the option's value: stdin may carry the prompt."""
    if value.strip() == STDIN_NAME:
        raise UsageError(f"{option} does not read stdin (stdin may carry the prompt)", hint=_KINDS[option][1])


def _refuse_non_utf8(text: str, option: str, hint: str) -> None:
    """Refuse option text given with bytes that are not UTF-8 (kept by Python as lone surrogates): a grammar or
    schema made of U+FFFD would force them into the answer (a file of them is refused alike)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"the {option} text is not UTF-8", hint=hint) from None


def _is_inline_schema(value: str) -> bool:
    """Whether --json-schema's value is JSON text rather than a file name."""
    return value.lstrip().startswith(("{", "[", '"')) or value.strip() in ("true", "false", "null")


def _parsed_schema(text: str) -> dict[str, object]:
    """The schema as a JSON object, or a UsageError saying what is wrong with it."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the JSON schema is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                         hint=SCHEMA_HINT) from None
    except RecursionError:
        raise UsageError("the JSON schema nests too deep to read", hint="flatten it, or use $defs") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"a JSON schema is an object, not {_JSON_KINDS.get(type(parsed), 'that')}", hint=SCHEMA_HINT)
    return parsed


def _keywords_in(schema: object) -> set[str]:
    """Every key used anywhere in a schema (property names included: a rare false alarm at worst)."""
    keys: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys.update(str(key) for key in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return keys


def _converted(schema: dict[str, object]) -> str:
    """The GBNF grammar of the JSON values a schema allows (llama-cpp-python's converter, as llama.cpp's own)."""
    from localgen.engine.native import load_bindings

    converter = load_bindings("llama_grammar")  # pure Python; the package's __init__ would reset llama.cpp's log
    try:
        grammar = converter.json_schema_to_gbnf(json.dumps(_any_items_spelled_out(schema)))
    except RecursionError:
        raise UsageError("the JSON schema nests too deep to convert", hint="flatten it, or use $defs") from None
    except Exception as exc:  # the converter asserts and raises on what it does not support
        raise UsageError(f"cannot turn the JSON schema into a grammar: {_converter_problem(exc)}",
                         hint="use the common keywords: type, properties, required, items, enum, "
                              "minLength/maxLength, local $ref") from None
    # The converter lets a string hold raw control characters (a newline), which no JSON parser accepts; llama.cpp's
    # own converter excludes them. (No token gives a NUL, so \x01 on is enough, and the NUL check stays simple.)
    return _STRING_CHAR.sub(lambda _: r'char ::= [^"\\\x01-\x1F] |', grammar)


def _any_items_spelled_out(node: object) -> object:
    """The schema with `"items": {}` or `"items": true` (any value) spelled as every type: the converter reads an
    empty items as missing and fails."""
    if isinstance(node, dict):
        return {key: _ANY_VALUE if key == "items" and (value == {} or value is True) else _any_items_spelled_out(value)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_any_items_spelled_out(item) for item in node]
    return node


def _converter_problem(exc: Exception) -> str:
    """The converter's complaint in the user's terms."""
    text = str(exc)
    if "allow-fetch" in text or "allow_fetch" in text:
        return "a $ref to a remote schema (localgen does not fetch schemas)"
    if isinstance(exc, KeyError) and ("#" in text or "/" in text):  # the converter looks refs up in a dict
        return f"a $ref that does not resolve: {text}"
    if isinstance(exc, KeyError):
        return f"the converter looked for {text} and found none"
    if text.startswith("Error resolving ref "):  # the converter names the schema "stdin", whatever its source
        return f"a $ref that does not resolve: {text.split()[3].removeprefix('stdin').rstrip(':')}"
    return text or type(exc).__name__
