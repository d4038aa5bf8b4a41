"""models.toml's text as data: TOML read with tomllib, and its errors about a table or key given twice, or a key
under a value, said with the line and the table or key, as the file writes them; and the one change localgen makes
to the text, `[defaults] model`."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from localgen.errors import ConfigError
from localgen.references import NAME_PATTERN

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def read_toml(text: str, source: Path | str) -> dict[str, Any]:
    """One models.toml text as data, or a ConfigError naming the file."""
    try:
        return tomllib.loads(text)
    except RecursionError as exc:
        raise ConfigError(f"{source}: not valid TOML (nested too deeply)", hint="fix or remove the file") from exc
    except tomllib.TOMLDecodeError as exc:
        reason = _broken_header(str(exc), text) or str(exc)
        twice = _given_twice(reason, text)
        if twice is not None:
            raise ConfigError(f"{source}: {twice[0]}", hint=twice[1]) from exc
        raise ConfigError(f"{source}: not valid TOML ({reason})", hint="fix or remove the file") from exc


_TWICE_ERRORS = ("Cannot declare", "Cannot redefine namespace", "Cannot mutate immutable namespace",
                 "Cannot overwrite a value")  # tomllib's errors for a table or key given twice
_AT = re.compile(r"\(at (?:line (\d+), column \d+|end of document)\)$")


def _broken_header(reason: str, text: str) -> str | None:
    """For an error of a table or key given twice at a table header's line that is no header by itself (an unclosed
    [models.x, which TOML finds given twice before it finds the ] missing), the error that line gives alone, at its
    line; None otherwise (a row of an array of arrays starts with [ too)."""
    if not reason.startswith(_TWICE_ERRORS):
        return None
    at = _AT.search(reason)
    lines = text.split("\n")  # TOML's lines, as _given_twice takes them
    number = 0 if at is None else int(at[1]) if at[1] else len(lines)
    line = lines[number - 1] if 0 < number <= len(lines) else ""
    if not line.strip().startswith("["):
        return None
    try:
        tomllib.loads("\n" * (number - 1) + line + "\n")
    except tomllib.TOMLDecodeError as exc:
        return str(exc)
    return None


_TABLE = re.compile(r"Cannot (declare|redefine namespace|mutate immutable namespace) (\(.*\))(?: twice)? "
                    r"\(at line (\d+)")
_KEY_TWICE = re.compile(r"Cannot overwrite a value \(at line (\d+)")


def _given_twice(reason: str, text: str) -> tuple[str, str] | None:
    """A TOML error for a table or a key given twice (an entry pasted in again, say) as a message naming the table
    as the file writes it, or the key, and a hint; None for other errors."""
    lines = text.split("\n")  # TOML's lines: a string may hold U+2028 or U+0085, which splitlines() splits at
    table = _TABLE.match(reason)
    if table is not None:
        return _table_given_twice(table[1], table[2], int(table[3]), lines)
    key = _KEY_TWICE.match(reason)
    if key is None:
        return None
    number = int(key[1])
    over = _over_a_value(lines, number)
    if over is not None:
        return over
    line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    name = line.partition("=")[0].strip()
    named = f"{name[:40]!r} " if name else "a key "
    return f"line {number} sets {named}again, in a table that already has it", "keep one of the two lines"


def _table_given_twice(what: str, names: str, number: int, lines: list[str]) -> tuple[str, str] | None:
    """The message and hint for a table given again at line number: by a second [header], by a header over keys the
    lines above gave it (x.repo = ... or x = {...}, the first such line named), by a dotted key into a table with its
    own header, by a key added to an inline table, or by either over an array."""
    try:
        keys = ast.literal_eval(names)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(keys, tuple) or not keys or not all(isinstance(key, str) for key in keys):
        return None
    over = _over_a_value(lines, number)  # an array is a value: stop = [...] then stop.x = 1, or [models.x.stop]
    if over is not None:
        return over
    name = _table_name(keys)
    if what == "mutate immutable namespace":
        return _key_into_inline(number, list(keys), _giver_above(lines, number, list(keys)))
    if what == "redefine namespace":
        return (f"line {number} adds a key to [{name}] with a dotted key, but [{name}] has a table of its own above",
                f"write the key under the [{name}] line, without the {keys[-1]}. before it")
    if any(_header_keys(line.strip()) == list(keys) and _statement(lines, index)
           for index, line in enumerate(lines[:number - 1])):
        return (f"[{name}] appears twice (again at line {number})", f"keep one [{name}] table, with every key it needs")
    giver = _giver_above(lines, number, list(keys))
    if giver is None:
        return (f"line {number} opens [{name}], but lines above already give it keys (dotted keys, or an inline "
                f"table {{...}}, that hold it)",
                f"give [{name}]'s keys in one place: under the [{name}] line, or above")
    at, held, inline = giver
    if inline:
        return _header_over_inline(number, list(keys), at, held)
    dotted = _table_name(held[len(_table_above(lines, at)):])
    return (f"line {number} opens [{name}], but lines above already give it keys (line {at}: the dotted key "
            f"{dotted})", f"give [{name}]'s keys in one place: under the [{name}] line, or as dotted keys above")


def _over_a_value(lines: list[str], number: int) -> tuple[str, str] | None:
    """For a [header] or a dotted key (a.b = 2) whose line fails because a key on its way already holds a value
    (a = 1, or an array a = [...]): the message naming that key and the table it is in, and a hint; None where that
    is not the cause."""
    line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    header = _header_keys(line)
    table = [] if header else _table_above(lines, number)
    dotted = [] if header else _line_keys(line)
    keys = header or table + dotted
    path = header or keys[:-1]  # the keys that must be tables: a plain key (a = 1) adds none to its table's
    if len(path) <= len(table):
        return None
    try:
        data = tomllib.loads("\n".join(lines[:number - 1]))
    except tomllib.TOMLDecodeError:
        return None
    arrays_of_tables = {tuple(_header_keys(earlier.strip())) for index, earlier in enumerate(lines[:number - 1])
                        if earlier.strip().startswith("[[") and _statement(lines, index)}
    node: object = data
    for depth, key in enumerate(path, 1):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
        if isinstance(node, list) and node and tuple(path[:depth]) in arrays_of_tables:
            node = node[-1]
        elif not isinstance(node, dict):
            return _value_in_the_way(number, keys, depth, None if header else table, isinstance(node, list))
    return None


def _value_in_the_way(number: int, keys: list[str], depth: int, table: list[str] | None,
                      array: bool) -> tuple[str, str]:
    """The message and hint for line number's header (table None) or dotted key (in table), whose key at depth
    already holds a value, or an array."""
    held, what = ("is an array", "array") if array else ("already has a value", "value")
    if table is None:
        value, name = keys[depth - 1], _table_name(keys)
        where = f" in [{_table_name(keys[:depth - 1])}]" if depth > 1 else ""
        return (f"line {number} makes [{name}] a table, but {value!r} {held}{where}",
                f"keep one of the two: the {value!r} {what} or the [{name}] table")
    value, dotted = _table_name(keys[len(table):depth]), _table_name(keys[len(table):])
    where = f" in [{_table_name(table)}]" if table else ""
    return (f"line {number} sets {dotted} as if {value!r} were a table, but {value!r} {held}{where}",
            f"keep one of the two: the {value!r} {what} or the {dotted} key")


def _header_over_inline(number: int, keys: list[str], at: int, held: list[str]) -> tuple[str, str]:
    """The message and hint for line number's header [keys], which line at gave already, or a table held in it, as
    an inline table (held: its keys)."""
    name, value = _table_name(keys), held[-1]
    if held == keys:
        return (f"line {number} opens [{name}], but line {at} already gives it as an inline table: {value} = {{...}}",
                f"give [{name}]'s keys in one place: inside the braces of {value} = {{...}}, "
                f"or under the [{name}] line")
    where = f" in [{_table_name(held[:-1])}]" if len(held) > 1 else ""
    return (f"line {number} opens [{name}], but line {at} makes {value!r}{where} an inline table {{...}}, which takes "
            "no table after it", f"put {keys[len(held)]} = {{...}} inside the braces of {value} = {{...}}, or make "
                                 f"{value!r} a [{_table_name(held)}] table")


def _key_into_inline(number: int, keys: list[str], giver: tuple[int, list[str], bool] | None) -> tuple[str, str]:
    """The message and hint for line number's dotted key into the table keys, which an inline table above gave
    (giver: its line and keys, as _giver_above finds them)."""
    name = _table_name(keys)
    message = f"line {number} adds a key to {name}, an inline table {{...}} above, which takes none after it"
    hint = f"put the key inside the braces of {keys[-1]} = {{...}}, or make it a [{name}] table"
    if giver is None or not giver[2]:
        return message, hint
    at, held, _ = giver
    return f"{message} (line {at}: {held[-1]} = {{...}}{'' if held == keys else ', which holds it'})", hint


def _giver_above(lines: list[str], number: int, keys: list[str]) -> tuple[int, list[str], bool] | None:
    """The first line above line number that gives the table keys, or a table that holds it, as an inline table
    (a = {...}: its keys, and True), or gives it a key with a dotted key (a.b = 1: its keys, and False); None when
    there is none."""
    for index, line in enumerate(lines[:number - 1]):
        table, dotted = _table_above(lines, index + 1), _line_keys(line.strip())
        held = table + dotted
        inline = line.partition("=")[2].strip().startswith("{")
        gives = held == keys[:len(held)] if inline else len(held) > len(keys) and held[:len(keys)] == keys
        if dotted and gives and _statement(lines, index):
            return index + 1, held, inline
    return None


def _table_above(lines: list[str], number: int) -> list[str]:
    """The keys of the table line number is in: the nearest header above it (none at the top of the file), not a
    line of a multi-line array or string that starts with [."""
    for index in range(number - 2, -1, -1):
        keys = _header_keys(lines[index].strip())
        if keys and _statement(lines, index):
            return keys
    return []


def _statement(lines: list[str], index: int) -> bool:
    """True when the line at index (from 0) is one of its own, not a line inside a multi-line array or string: the
    text up to its end is TOML (the text above a line TOML fails at is)."""
    try:
        tomllib.loads("\n".join(lines[:index + 1]))
    except tomllib.TOMLDecodeError:
        return False
    return True


def _line_keys(line: str) -> list[str]:
    """The keys a key = value line sets (a.b = 2 sets 'a', 'b'); empty when the line is no such line."""
    name, equals, _ = line.partition("=")
    if not equals or name.strip().startswith("["):
        return []
    return _path_of(f"{name} = 0")


def _table_name(keys: tuple[str, ...] | list[str]) -> str:
    """A table's name as a models.toml writes it: its keys joined by dots, quoted where they must be."""
    return ".".join(key if NAME_PATTERN.fullmatch(key) and "." not in key else f'"{key}"' for key in keys)


def _header_keys(line: str) -> list[str]:
    """The keys a table header line ([a.b] or [[a.b]]) names; empty when the line is no table header."""
    return _path_of(line) if line.startswith("[") else []


def _path_of(text: str) -> list[str]:
    """The keys down the one path a TOML text of one header or one key gives (the last table of an array of
    tables); empty when it is not TOML."""
    try:
        node: object = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    keys: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        keys.append(key)
        node = node[-1] if isinstance(node, list) and node else node
    return keys


def with_default_model(text: str, name: str, source: Path | str) -> str:
    """models.toml's text with `[defaults] model` set to name: its line rewritten, else one added under [defaults],
    else a [defaults] table added at the end; the rest of the file as it was. A ConfigError where the file gives
    [defaults] another way (defaults = {...}, dotted keys), which would take an editor to change."""
    data = read_toml(text, source)
    lines = text.split("\n")
    header = model = None
    for index, line in enumerate(lines):  # a line's own checks first: _statement parses every line above it
        stripped = line.strip()
        if stripped.startswith("[["):
            continue
        if _header_keys(stripped) == ["defaults"]:
            header = index if _statement(lines, index) else header
        elif (_line_keys(stripped) == ["model"] and _statement(lines, index)
              and _table_above(lines, index + 1) == ["defaults"]):
            model = index
    setting = f"model = {json.dumps(name, ensure_ascii=False)}"  # as typed: TOML takes no JSON \ud83d surrogates
    if model is not None:
        line = lines[model]
        lines[model] = line[:len(line) - len(line.lstrip())] + setting + _trailing_comment(line)
    elif header is not None:
        lines.insert(header + 1, setting)
    else:
        lines = [*text.rstrip("\n").split("\n"), "", "[defaults]", setting, ""] if text.strip() else [
            "[defaults]", setting, ""]
    changed = "\n".join(lines)
    defaults = data.get("defaults", {})
    try:
        done = isinstance(defaults, dict) and tomllib.loads(changed) == {**data, "defaults": {**defaults,
                                                                                             "model": name}}
    except tomllib.TOMLDecodeError:
        done = False
    if not done:
        raise ConfigError(f"{source}: [defaults] is given in a way localgen cannot change",
                          hint=f"set {setting} under [defaults] in that file by hand")
    return changed


def _trailing_comment(line: str) -> str:
    """The comment that ends a `key = value` line, with the spaces before it ('' where there is none): the first #
    whose text before it reads as the line's value alone."""
    for at in (index for index, char in enumerate(line) if char == "#"):
        try:
            tomllib.loads(line[:at])
        except tomllib.TOMLDecodeError:
            continue
        before = line[:at].rstrip()
        return line[len(before):]
    return ""
