"""An object's minProperties, maxProperties and propertyNames held by its grammar, where llama-cpp-python's converter
ignored them: the properties it writes counted, rule by rule, and the names of those it does not list held to the
propertyNames schema (a listed property whose name that schema refuses left out)."""

from __future__ import annotations

import json
from typing import Any

from localgen.json_schema_ranges import BOUND_KEYWORDS, bounds_held, range_rule
from localgen.json_schema_steps import stepped_rule, steps_held
from localgen.json_schema_types import ANY_VALUE, objects_excluded
from localgen.json_schema_values import NoValueError, name_allowed, value_allowed
from localgen.json_schema_words import OWN_RULE_KEYWORDS, short_json

COUNT_KEYWORDS = ("minProperties", "maxProperties", "propertyNames")
HELD_KEYWORDS = (*BOUND_KEYWORDS, *COUNT_KEYWORDS)  # the keywords the converter ignores that own_rule may hold
MAX_COUNT_RULES = 2000  # the most rules an object's count takes (optional properties times counts): more, warned
_SEPARATOR = '"," space'


def keywords_held(schema: dict[str, Any]) -> frozenset[str]:
    """The keywords the converter ignores that own_rule holds for a schema: a number's bounds, an object's counts and
    property names (but a minProperties that names not listed may meet only by repeating one: free strings, a grammar
    cannot keep them apart, so past one such name it counts writings, not names)."""
    if _counted(schema):
        repeats = names_may_repeat(schema)
        return frozenset(key for key in COUNT_KEYWORDS if key in schema and not (repeats and key == "minProperties"))
    return bounds_held(schema) | steps_held(schema)


def names_may_repeat(schema: dict[str, Any]) -> bool:
    """Whether an object whose counts own_rule holds meets its minProperties only with more than one name it does not
    list, free strings, which a grammar cannot keep from repeating."""
    return _counted(schema) and _free_names(schema) and \
        schema.get("minProperties", 0) > len(schema.get("required") or ()) + 1


def own_rule(converter: Any, schema: dict[str, Any], name: str) -> str | None:
    """The GBNF of a schema the converter would write without its bounds or counts (None: the converter's own)."""
    bounded = stepped_rule(converter._add_rule, schema, name) or range_rule(schema)
    if bounded is not None or not _counted(schema):
        return bounded
    return _ObjectRule(converter, schema, name).rule()


def _counted(schema: dict[str, Any]) -> bool:
    """Whether a schema is an object's whose counts or property names own_rule holds."""
    return (schema.get("type") in ("object", None) and not any(key in schema for key in OWN_RULE_KEYWORDS)
            and any(key in schema for key in COUNT_KEYWORDS) and _rule_count(schema) <= MAX_COUNT_RULES)


def _names_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """propertyNames as a string's schema: of a type list split apart, its string's; of an enum, its strings alone
    (None: it allows no string, so no property)."""
    names = schema.get("propertyNames", {})
    names = {} if names is True else names
    if not isinstance(names, dict):
        return None
    split = names.get("anyOf") if "type" not in names else None
    if isinstance(split, list) and all(isinstance(part, dict) and "type" in part for part in split):
        return next((part for part in split if part["type"] == "string"), None)
    kinds = names.get("type", "string")
    if kinds != "string" and not (isinstance(kinds, list) and "string" in kinds):
        return None
    if isinstance(names.get("enum"), list):
        strings = [name for name in names["enum"] if isinstance(name, str)]
        names = {**names, "enum": strings} if strings else None
    if names is None or ("const" in names and not isinstance(names["const"], str)):
        return None
    return {**names, "type": "string"}


def refuse_refused_required(schema: dict[str, Any], written: object) -> None:
    """Refuse an object that requires a property it lists whose name its propertyNames refuses (written: the
    propertyNames as given, which the refusal quotes)."""
    if "propertyNames" not in schema or schema.get("type") not in ("object", None):
        return
    names = _names_schema(schema)
    listed = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = [key for key in schema.get("required") or () if key in listed]
    forbidden = next((key for key in required if names is None or not value_allowed(names, key)), None)
    if forbidden is not None:
        raise NoValueError(f"the JSON schema requires {forbidden}, a name its propertyNames {short_json(written)} "
                           "refuses", hint=f"drop {forbidden} from required, or allow it")


def exclude_objects_of_forbidden_required(schema: dict[str, Any]) -> None:
    """Narrow a schema that requires a name its additionalProperties false forbids (one it does not list, nor its
    patternProperties match), which no object meets, to its other types; refused where object is its only one."""
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    forbidden = next((name for name in required if isinstance(name, str) and not name_allowed(schema, name)), None)
    if forbidden is not None:
        objects_excluded(schema, NoValueError(f"the JSON schema requires {forbidden}, which it does not list in "
                                              "properties and its additionalProperties false forbids",
                                              hint=f"add {forbidden} to properties, or drop it from required"))


def _finite_names(names: dict[str, Any]) -> list[str] | None:
    """The names a propertyNames schema lists by enum (or const), each once (None: it lists none)."""
    if not isinstance(names.get("enum"), list):
        return None
    return list(dict.fromkeys(name for name in names["enum"] if isinstance(name, str)))


def _other_schema(schema: dict[str, Any]) -> object:
    """The schema of a property the object does not list (None or False: none allowed; as the converter reads it, a
    properties given, even empty, allows no other one unless additionalProperties does)."""
    return schema.get("additionalProperties", None if "properties" in schema else True)


def _free_names(schema: dict[str, Any]) -> bool:
    """Whether an object allows properties it does not list whose names are not a finite list: a name may repeat."""
    names = _names_schema(schema)
    return _other_schema(schema) not in (None, False) and names is not None and _finite_names(names) is None


def _rule_count(schema: dict[str, Any]) -> int:
    """How many rules an object's count takes: one for each optional property (listed, or named by propertyNames'
    enum) and count so far."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    names = _finite_names(_names_schema(schema) or {}) or []
    high = schema.get("maxProperties", schema.get("minProperties", 0))
    return (len(properties) + len(names) + 1) * (int(high) + 1) if isinstance(high, int) else MAX_COUNT_RULES + 1


class _ObjectRule:
    """An object's rule: its required properties, then each optional one (in the order listed) and other names, each
    counted (the count kept to maxProperties, and to minProperties where it ends)."""

    def __init__(self, converter: Any, schema: dict[str, Any], name: str) -> None:
        """The object's properties, visited as the converter visits them, those whose name propertyNames refuses left
        out (none required: refuse_refused_required refused the schema as it was prepared)."""
        self.converter, self.name, self.given = converter, name, schema
        self.states: dict[tuple[int, int], str | None] = {}  # each count rule's name (None: the object cannot end)
        names = _names_schema(schema)
        listed = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [key for key in schema.get("required") or () if key in listed]
        refused = [key for key in listed if names is None or not value_allowed(names, key)]  # none required
        kept = {key: sub for key, sub in listed.items() if key not in refused}
        self.required = [self._pair(key, kept[key]) for key in kept if key in required]
        self.optional = [self._pair(key, sub) for key, sub in kept.items() if key not in required]
        self.low, self.high = schema.get("minProperties", 0), schema.get("maxProperties")
        extra = _other_schema(schema)
        extra = None if extra in (None, False) else ANY_VALUE if extra is True else extra
        finite = None if names is None else _finite_names(names)
        if extra is not None and finite is not None:  # each name at most once, as an optional property of its own
            self.optional += [self._pair(key, extra) for key in finite if key not in listed]
        self.other = None if extra is None or names is None or finite is not None else self._other_pair(names, extra)

    def _pair(self, key: str, schema: object) -> str:
        """The rule of one listed property: its name, then its value."""
        prefix = f"{self.name}{'-' if self.name else ''}{key}"
        value = self.converter.visit(schema, prefix)
        literal = self.converter._format_literal(json.dumps(key))
        return str(self.converter._add_rule(f"{prefix}-kv", f'{literal} space ":" space {value}'))

    def _other_pair(self, names: dict[str, Any], schema: object) -> str:
        """The rule of a property not listed: a name propertyNames allows, then additionalProperties' value."""
        prefix = f"{self.name}{'-' if self.name else ''}additional"
        key = self.converter.visit(names, f"{prefix}-name")
        value = self.converter.visit(schema, f"{prefix}-value")
        return str(self.converter._add_rule(f"{prefix}-kv", f'{key} ":" space {value}'))

    def rule(self) -> str:
        """The object's GBNF: braces round its required pairs, then the counted rest."""
        rest = self._rest(0, len(self.required))
        if rest is None:
            counts = ", ".join(f"{key} {self.given[key]}" for key in ("minProperties", "maxProperties")
                               if key in self.given)
            raise NoValueError(f"the JSON schema's object of {counts} can be no object its properties allow",
                               hint="make its minProperties and maxProperties fit its properties")
        pieces = ['"{" space', f" {_SEPARATOR} ".join(self.required), rest, '"}" space']
        return " ".join(piece for piece in pieces if piece)

    def _rest(self, index: int, count: int) -> str | None:
        """The rule name (or GBNF) of what follows once count properties are written, the optional ones from index on
        left to write (None: no way to end the object)."""
        if self.high is not None and count > self.high:
            return None
        if index == len(self.optional):
            return self._others(count)
        state = (index, min(count, max(self.low, 1)) if self.high is None else count)  # counts past both alike
        if state not in self.states:
            take = self.optional[index] if count == 0 else f"{_SEPARATOR} {self.optional[index]}"
            taken = self._rest(index + 1, count + 1) if self.high is None or count < self.high else None
            choices = [f"{take} {taken}" if taken else None, self._rest(index + 1, count)]
            rule = " | ".join(choice for choice in choices if choice)
            name = f"{self.name}{'-' if self.name else ''}count-{state[0]}-{state[1]}"
            self.states[state] = str(self.converter._add_rule(name, rule)) if rule else None  # a name of its own
        return self.states[state]

    def _others(self, count: int) -> str | None:
        """GBNF of the properties not listed that end an object of count properties so far (None: none can)."""
        fewest = max(self.low - count, 0)
        most = None if self.high is None else self.high - count
        if most is not None and fewest > most:
            return None
        if self.other is None or most == 0:
            return '""' if fewest == 0 else None
        first = self.other if count == 0 else f"{_SEPARATOR} {self.other}"
        more = f"({_SEPARATOR} {self.other})"
        rest = f"{max(fewest - 1, 0)},{'' if most is None else most - 1}"  # how many after the first
        tail = "" if rest == "0,0" else f" {more}*" if rest == "0," else f" {more}{{{rest}}}"
        return f"({first}{tail})" if fewest else f"({first}{tail})?"
