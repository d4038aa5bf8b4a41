"""A saved conversation's text: the JSON that json.dumps(record, indent=2, ensure_ascii=False) writes, built member by
member with json's C encoder (indent takes its pure-Python one), and each exchange's UTF-8 text kept while the exchange
stays as it was, so that a save of a long chat writes out and encodes only what is new."""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass

from localgen.conversation_turn import Turn, turn_record

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
INDENT = "  "
_TURNS_AT = "\0"  # where a record's text takes its exchanges' (JSON text holds no NUL of its own: it is escaped)
_TURN_FIELDS = tuple(item.name for item in fields(Turn))
_turn_values = operator.attrgetter(*(name for name in _TURN_FIELDS if name != "extra"))  # what a kept text is of
_compact = json.JSONEncoder(ensure_ascii=False).encode  # a scalar's or an empty container's text, as indent writes it
_text = json.encoder.encode_basestring  # a string's, as both encoders write it (C where there is the C encoder)
_PLAIN = frozenset({str, int, float, bool, type(None)})


def holds_lone_surrogates(text: str) -> bool:
    """Whether text holds a lone surrogate, which has no UTF-8 (a look at C speed, where a search takes 3 times as
    long)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def with_surrogates_escaped(text: str) -> str:
    """JSON text with its lone surrogates (a model's path that is not UTF-8), which have no UTF-8, as \\uXXXX escapes,
    as console.json_text writes them (read back, in a model's path, as the bytes they stand for)."""
    if not holds_lone_surrogates(text):
        return text
    return LONE_SURROGATE.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def object_text(record: Mapping[object, object], level: int, made: Mapping[str, str] | None = None) -> str:
    """The text of a JSON object written level deep (made: members whose values are written already)."""
    if not record:
        return "{}"
    if not all(isinstance(key, str) for key in record):  # json's own rules for keys that are not text
        return json.dumps(record, indent=len(INDENT), ensure_ascii=False).replace("\n", "\n" + INDENT * level)
    if not made and all(type(value) in _PLAIN for value in record.values()):  # one call of the C encoder
        return _flat_encoder(level).encode(record)
    made = made or {}
    inner = "\n" + INDENT * (level + 1)
    members = [f"{_text(key)}: {made[key] if key in made else value_text(value, level + 1)}"
               for key, value in record.items()]
    return "{" + inner + ("," + inner).join(members) + "\n" + INDENT * level + "}"


@functools.cache
def _flat_encoder(level: int) -> json.JSONEncoder:
    """The C encoder that writes an object of text and numbers alone as indent writes it level deep."""
    inner = "\n" + INDENT * (level + 1)

    class Flat(json.JSONEncoder):
        def encode(self, o: object) -> str:
            return "{" + inner + super().encode(o)[1:-1] + "\n" + INDENT * level + "}"

    return Flat(ensure_ascii=False, separators=("," + inner, ": "))


def value_text(value: object, level: int) -> str:
    """The text of a JSON value written level deep."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict) and value:
        return object_text(value, level)
    if isinstance(value, (list, tuple)) and value:
        return list_text([value_text(item, level + 1) for item in value], level)
    return _compact(value)


def list_text(items: list[str], level: int) -> str:
    """The text of a JSON array written level deep, its items' texts given."""
    if not items:
        return "[]"
    inner = "\n" + INDENT * (level + 1)
    return "[" + inner + ("," + inner).join(items) + "\n" + INDENT * level + "]"


def record_bytes(record: Mapping[str, object], turns: list[bytes]) -> bytes:
    """The UTF-8 text of a conversation's record and a newline, its "turns" member written from its exchanges' texts
    (TurnTexts.texts) as they are."""
    head = with_surrogates_escaped(object_text(record, 0, made={"turns": _TURNS_AT}))
    before, after = head.encode("utf-8").split(_TURNS_AT.encode())
    inner = ("\n" + INDENT * 2).encode()
    listed = b"[" + inner + (b"," + inner).join(turns) + ("\n" + INDENT + "]").encode() if turns else b"[]"
    return b"".join((before, listed, after, b"\n"))


def plain(value: object) -> object:
    """value as dataclasses.asdict makes it, without asdict's deep copy of every text and number."""
    if type(value) in _PLAIN:
        return value
    names = _field_names(type(value))
    if names is not None:
        return {name: plain(getattr(value, name)) for name in names}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


class TurnTexts:
    """The UTF-8 text of each exchange of a conversation as its record last held it (surrogates escaped, two levels
    deep), kept while the exchange is the same object with the same values in its fields, each one that never changes
    in place (text, a number, a frozen record, a tuple of them); one with fields localgen does not know (extra: a
    dict, which can) is written anew each time."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Turn, tuple[object, ...], bytes]] = {}

    def texts(self, turns: list[Turn]) -> list[bytes]:
        """The texts of these exchanges; those not kept are written and kept."""
        known, kept, texts = self._known, {}, []
        for turn in turns:
            values = _turn_values(turn)
            found = known.get(id(turn))
            if found is not None and found[0] is turn and not turn.extra and all(map(operator.is_, found[1], values)):
                kept[id(turn)] = found
            else:
                record = turn_record(plain({name: getattr(turn, name) for name in _TURN_FIELDS}))
                found = (turn, values, with_surrogates_escaped(object_text(record, 2)).encode("utf-8"))
                if not turn.extra and all(map(_never_changes, values)):
                    kept[id(turn)] = found
            texts.append(found[2])
        self._known = kept
        return texts


def _never_changes(value: object) -> bool:
    """Whether a value can never change in place: text, a number, None, a frozen dataclass or a tuple of such."""
    if type(value) in _PLAIN or isinstance(value, (str, int, float)):
        return True
    if isinstance(value, tuple):
        return all(map(_never_changes, value))
    names = _field_names(type(value))
    return names is not None and type(value).__dataclass_params__.frozen and \
        all(_never_changes(getattr(value, name)) for name in names)  # type: ignore[attr-defined]


@functools.cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """The fields of a dataclass, None for another type."""
    return tuple(item.name for item in fields(kind)) if is_dataclass(kind) else None
