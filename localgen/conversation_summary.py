"""Saved conversations at a glance: each one's size, model and first message, for listings; and each answer's
details on one line."""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from localgen.conversation import AnswerDetails, DamagedConversationError, ForeignFormatError, Turn
from localgen.conversation_glance import glance
from localgen.conversation_names import NAME_PATTERN, misnamed_file, name_taken
from localgen.conversation_store import (
    conversations_dir,
    list_conversations,
    read_conversation,
    saved_path,
)
from localgen.errors import LocalgenError
from localgen.links import broken_link
from localgen.text_cut import one_line
from localgen.units import counted, iso_time

PREVIEW_CHARS = 60  # of the first message
EMPTY = "(empty)"  # a listing's first message of a conversation with no exchange (its system prompt, settings kept)
CUT_SHORT = {"length": "stopped at the token limit", "context": "stopped at the end of the context",
             "interrupted": "interrupted", "error": "cut short by an error"}  # by finish reason; "stop" is complete


@dataclass(frozen=True)
class Summary:
    """One saved conversation as a listing shows it (problem: why it cannot be read; what it holds is then None)."""

    name: str
    updated: float  # the file's modification time
    exchanges: int | None = None
    model: str | None = None
    first_message: str | None = None
    problem: str | None = None
    kept: bool = False  # not damaged: in another localgen version's format, named against the naming rule, unread

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready record, the time in ISO 8601 (UTC)."""
        return {"name": self.name, "updated": iso_time(self.updated), "exchanges": self.exchanges, "model": self.model,
                "first_message": self.first_message, "problem": self.problem or None}

    @property
    def described(self) -> str:
        """The first message on one line, cut with … past PREVIEW_CHARS (or what keeps the file from being read, or
        EMPTY for one with no exchange: /undo took every one)."""
        if self.problem:
            return f"({self.problem})" if self.kept else f"(damaged: {self.problem})"
        if not self.exchanges:
            return EMPTY
        return one_line(self.first_message or "", PREVIEW_CHARS)


def summaries(limit: int | None = None, *, listing: list[tuple[str, float]] | None = None,
              keep: str | None = None) -> list[Summary]:
    """Every saved conversation, newest first (only the newest limit of them, when given, and keep's after them
    where it is older); one that cannot be read says why. listing: list_conversations()'s, where it was taken."""
    listing = list_conversations(unusable=True) if listing is None else listing
    chosen = listing if limit is None else [*listing[:limit], *(entry for entry in listing[limit:] if entry[0] == keep)]
    found = []
    for name, mtime in chosen:
        if not NAME_PATTERN.fullmatch(name):  # copied in by hand: a name no command takes (a pipe no name opens)
            irregular = not_a_file(name)
            problem = "not a file" if irregular else misnamed_file(name, name_taken)
            found.append(Summary(name, mtime, problem=problem, kept=not irregular))
            continue
        if (broken := broken_link(saved_path(name))) is not None:  # its file in a folder not mounted now, say
            found.append(Summary(name, mtime, problem=broken))
            continue
        if (glanced := glance(name)) is not None:  # each exchange not built: a whole read says what is off
            found.append(Summary(name, mtime, *glanced))
            continue
        try:
            conversation = read_conversation(name)
        except ForeignFormatError as exc:
            found.append(Summary(name, mtime, problem=f"format {exc.format_version}, from another localgen version",
                                 kept=True))
            continue
        except LocalgenError as exc:  # damaged, or deleted since the listing, or not to be read (another user's)
            found.append(Summary(name, mtime, problem=_reason(exc.message),
                                 kept=not isinstance(exc, DamagedConversationError)))
            continue
        first = conversation.turns[0].headline() if conversation.turns else None
        found.append(Summary(name, mtime, len(conversation.turns), conversation.model, first))
    return found


def not_a_file(name: str) -> bool:
    """Whether NAME.json in the conversations folder is there but no regular file (a pipe), whatever its name."""
    try:
        return not stat.S_ISREG((conversations_dir() / f"{name}.json").stat().st_mode)
    except OSError:  # a link to a file not there, or deleted since the listing: said as before
        return False


def _reason(message: str) -> str:
    """The reason in a 'PATH is not a valid saved conversation (REASON)' message (or 'PATH is not a saved
    conversation (not a file)'), or the whole message."""
    for said in (" is not a valid saved conversation (", " is not a saved conversation ("):
        _, found, reason = message.partition(said)
        if found:
            return reason.removesuffix(")")
    return message


def cut_short(turn: Turn) -> str | None:
    """Why a saved answer is not whole ("stopped at the token limit", "interrupted"), or None when it is."""
    reason = turn.details.finish_reason if turn.details is not None else None
    if reason in CUT_SHORT:
        return CUT_SHORT[reason]
    if reason not in (None, "stop"):  # a reason a later version gave
        return reason
    return "interrupted" if turn.interrupted else None


def details_line(turn: Turn) -> str | None:
    """A saved answer's details on one line, as far as they are known: 'smollm2-135m · 212 tokens · 3.1 s · 68 tok/s
    · stopped at the token limit' (None for a whole answer saved without them)."""
    details, ending = turn.details, cut_short(turn)
    if details is None:
        return f"({ending})" if ending else None
    parts = [model_name(details.model)] if details.model else []
    if details.completion_tokens is not None:
        parts.append(counted(details.completion_tokens, "token"))
    if details.duration_s is not None:
        parts.append(_duration(details.duration_s))
    if details.decode_tokens_per_s:
        parts.append(f"{details.decode_tokens_per_s:.0f} tok/s")
    return " · ".join([*parts, *([ending] if ending else [])]) or None


def saved_figures(turns: Sequence[Turn]) -> AnswerDetails | None:
    """The details saved with the last answer of these turns, where they hold a figure (its tokens, time or speed)."""
    details = turns[-1].details if turns and turns[-1].answer is not None else None
    if details is None or (details.completion_tokens is None and details.duration_s is None
                           and not details.decode_tokens_per_s):
        return None
    return details


def model_name(reference: str) -> str:
    """A model as a listing names it: a local file by its file name, any other reference as it is."""
    return Path(reference).name if os.path.isabs(reference) else reference


def _duration(seconds: float) -> str:
    """'0.4 s', '3.1 s', '2 min 5 s'."""
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def system_change(name: str, before: str | None, now: str | None, template_default: Callable[[], str | None]
                  ) -> str | None:
    """What to say when a system prompt given now (run's and chat's -s; None: run's -s none) replaces the one
    conversation NAME had (where it has none, the one its chat template writes: template_default's), or None when it
    is the same."""
    from localgen.repl_text import brief

    if now == before:
        return None
    default = "the model's default" if template_default() else "none"
    given = default if now is None else "an empty system prompt" if now == "" else f"system prompt {brief(now)!r}"
    was = default if before is None else "an empty one" if before == "" else repr(brief(before))
    return f"localgen: conversation '{name}' now has {given} instead of {was}"


def name_like_saved(name: str, *, close: bool = True) -> str | None:
    """The saved conversation, other than name, that a new conversation named name may be meant as: one named the
    same but for case (which a case-insensitive file system takes for it) or (close) a slip away; None where none
    is, or the folder cannot be listed (the save says what is wrong)."""
    try:
        saved = [saved_name for saved_name, _ in list_conversations() if saved_name != name]
    except LocalgenError:
        return None
    same_but_case = [saved_name for saved_name in saved if saved_name.casefold() == name.casefold()]
    like = same_but_case or (difflib.get_close_matches(name, saved, n=1, cutoff=0.8) if close else [])
    return like[0] if like else None
