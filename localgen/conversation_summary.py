"""Saved conversations at a glance: each one's size, model and first message, for listings."""

from __future__ import annotations

from dataclasses import dataclass

from localgen.conversation import ForeignFormatError, list_conversations, read_conversation
from localgen.errors import LocalgenError
from localgen.units import iso_time

PREVIEW_CHARS = 60  # of the first message


@dataclass(frozen=True)
class Summary:
    """One saved conversation as a listing shows it (problem: why it cannot be read; the rest is then empty)."""

    name: str
    updated: float  # the file's modification time
    exchanges: int = 0
    model: str | None = None
    first_message: str = ""
    problem: str | None = None
    foreign: bool = False  # saved in another format by another localgen version: kept, not damaged

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready record, the time in ISO 8601 (UTC)."""
        record: dict[str, object] = {"name": self.name, "updated": iso_time(self.updated), "exchanges": self.exchanges,
                                     "model": self.model, "first_message": self.first_message}
        return record | ({"problem": self.problem} if self.problem else {})

    @property
    def described(self) -> str:
        """The first message on one line, cut with … past PREVIEW_CHARS (or what keeps the file from being read)."""
        if self.problem:
            return f"({self.problem})" if self.foreign else f"(damaged: {self.problem})"
        line = " ".join(self.first_message.split())
        return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1].rstrip() + "…"


def summaries() -> list[Summary]:
    """Every saved conversation, newest first; one that cannot be read says why."""
    found = []
    for name, mtime in list_conversations():
        try:
            conversation = read_conversation(name)
        except ForeignFormatError as exc:
            found.append(Summary(name, mtime, problem=f"format {exc.format_version}, from another localgen version",
                                 foreign=True))
            continue
        except LocalgenError as exc:  # damaged, or deleted since the listing
            found.append(Summary(name, mtime, problem=_reason(exc.message)))
            continue
        first = conversation.turns[0].user if conversation.turns else ""
        found.append(Summary(name, mtime, len(conversation.turns), conversation.model, first))
    return found


def _reason(message: str) -> str:
    """The reason in a 'PATH is not a valid saved conversation (REASON)' message, or the whole message."""
    _, found, reason = message.partition(" is not a valid saved conversation (")
    return reason.removesuffix(")") if found else message
