"""One exchange of a saved conversation: the user's message (with the files attached to it named, where it had
some), the answer and how it came about, and their JSON record, checked field by field."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import PurePath

from localgen.events import Finished


@dataclass(frozen=True)
class AnswerDetails:
    """How one answer came about: why it ended (stop, length, context, interrupted, error), its prompt and completion
    tokens, the seconds from the question to its last token, its decode speed, and the model that gave it (a
    reference, as Conversation.model); None where not known."""

    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    duration_s: float | None = None
    decode_tokens_per_s: float | None = None

    @classmethod
    def of(cls, finished: Finished, model: str | None) -> AnswerDetails:
        """The details of a finished generation (no decode speed for an answer of fewer than two tokens)."""
        timings, usage = finished.timings, finished.usage
        duration = timings.prefill_s if timings.ttft_s is None else timings.ttft_s + (timings.decode_s or 0.0)
        speed = round(timings.decode_tokens_per_s, 1) if timings.decode_tokens_per_s else None
        return cls(finished.finish_reason, model, usage.prompt_tokens, usage.completion_tokens, round(duration, 3),
                   speed)


DETAIL_TYPES: dict[str, type] = {"finish_reason": str, "model": str, "prompt_tokens": int, "completion_tokens": int,
                                 "duration_s": float, "decode_tokens_per_s": float}  # saved beside a turn's answer
_PARSED_AS: dict[type, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float)}  # JSON's types for each


@dataclass(frozen=True)
class Attachment:
    """A file attached to a message (/file, chat -f), as its exchange records it: its name as given, the characters
    of its text, and those of its part of the message (sent: None in exchanges saved before localgen recorded it)."""

    name: str
    characters: int
    sent: int | None = None  # the message's CRLFs made LF, the newlines about the text dropped


@dataclass
class Turn:
    """One exchange: the user's message and the model's answer (None until answered), and how that answer came about
    (details: None where not recorded, as in files saved before localgen recorded them); a message with files
    attached names them (attached) and keeps what was typed after them (typed), its user text holding them all."""

    user: str
    answer: str | None = None
    interrupted: bool = False
    details: AnswerDetails | None = field(default=None, compare=False)  # about the exchange, not part of it
    attached: tuple[Attachment, ...] = field(default=(), compare=False)  # named: user holds their text
    typed: str | None = field(default=None, compare=False)  # what user holds after the files attached
    extra: dict[str, object] = field(default_factory=dict, repr=False)  # fields localgen does not know, kept as read

    def headline(self) -> str:
        """The message as listings show it: the files attached named in brackets before what was typed ([doc.txt]
        Summarize), or the message itself where none was attached."""
        if not self.attached:
            return self.user
        names = ", ".join(PurePath(file.name).name or file.name for file in self.attached)
        return f"[{names}] {self.typed or ''}".rstrip()


def turn_from_json(item: object) -> Turn:
    """One saved exchange, checked field by field."""
    if not isinstance(item, dict):
        raise ValueError("a turn is not an object")
    if "user" not in item:
        raise ValueError("a turn has no 'user'")
    user, answer, interrupted = item["user"], item.get("answer"), item.get("interrupted", False)
    if not isinstance(user, str) or not (answer is None or isinstance(answer, str)) \
            or not isinstance(interrupted, bool):
        raise ValueError("a turn has fields of the wrong type")
    attached, typed = checked_attachments(item)
    return Turn(user=user, answer=answer, interrupted=interrupted, details=_details_from_json(item),
                attached=attached, typed=typed,
                extra=unknown_fields(item, Turn, also_known=frozenset(DETAIL_TYPES)))


def checked_attachments(item: dict[str, object]) -> tuple[tuple[Attachment, ...], str | None]:
    """The files a saved exchange names as attached to its message, and what was typed after them, each checked; a
    ValueError says which is off."""
    attached, typed = item.get("attached", []), item.get("typed")
    if not isinstance(attached, list) or not all(
            isinstance(file, dict) and isinstance(file.get("name"), str) and _is_count(file.get("characters"))
            and (file.get("sent") is None or _is_count(file["sent"])) for file in attached):
        raise ValueError("a turn's 'attached' is not a list of files, each with a 'name' and 'characters'")
    if not (typed is None or isinstance(typed, str)):
        raise ValueError("a turn's 'typed' is not text")
    return tuple(Attachment(file["name"], file["characters"], file.get("sent")) for file in attached), typed


def _is_count(value: object) -> bool:
    """Whether a saved value is a count: a whole number of at least 0."""
    return type(value) is int and value >= 0


def _details_from_json(item: dict[str, object]) -> AnswerDetails | None:
    """The details saved beside an answer, checked field by field (None when it has none, as in older files)."""
    found = checked_details(item)
    return AnswerDetails(**found) if found else None  # type: ignore[arg-type]


def checked_details(item: dict[str, object]) -> dict[str, object]:
    """The detail fields a saved exchange gives (those not null), each checked; a ValueError says which is off."""
    found = {}
    for key, kind in DETAIL_TYPES.items():
        value = item.get(key)
        if value is None:
            continue
        if type(value) not in _PARSED_AS[kind] or (kind is not str and not 0 <= value < math.inf):  # NaN: not <=
            raise ValueError(f"a turn's '{key}' is " + ("not text" if kind is str else
                                                        f"not a {'count' if kind is int else 'number'} of at least 0"))
        found[key] = value
    return found


def turn_record(turn: dict[str, object]) -> dict[str, object]:
    """A turn to save (as asdict made it): its known details beside its answer, its attached files where it had
    some, then the unknown fields it was read with."""
    details = turn.pop("details") or {}
    assert isinstance(details, dict)
    if not turn["attached"]:  # a message without files is saved as before
        del turn["attached"], turn["typed"]
    else:
        turn["attached"] = [{key: value for key, value in dict(file).items() if value is not None}  # sent: where known
                            for file in turn["attached"]]
    return with_extra(turn | {key: value for key, value in details.items() if value is not None})


def unknown_fields(record: dict[str, object], kind: type, *, also_known: frozenset[str] = frozenset()
                   ) -> dict[str, object]:
    """The fields of a saved record that kind does not read (added by hand or by a later version), to save back;
    also_known: what else is read from the record."""
    known = {f.name for f in fields(kind)} - {"extra", "on_disk", "as_left", "link_target", "details"} | also_known
    return {key: value for key, value in record.items() if key not in known}


def with_extra(record: dict[str, object]) -> dict[str, object]:
    """A record to save: its own fields, then the unknown ones it was read with."""
    extra = record.pop("extra")
    return record | extra
