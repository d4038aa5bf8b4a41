"""How the chat words what happened: short quotes of messages, conversation sizes, notes after answers."""

from __future__ import annotations

from localgen.conversation import Conversation
from localgen.events import Finished
from localgen.session import TurnStart
from localgen.units import counted


def brief(text: str, limit: int = 80) -> str:
    """Text on one line, cut to about limit characters, saying how long it was (a system prompt in a summary line)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else f"{line[:limit - 1]}… ({len(text):,} characters)"


def empty_answer_note(done: Finished) -> str | None:
    """A note for an answer that ended before any text, which would otherwise show as nothing at all."""
    return "the model gave an empty answer (/regen asks again)" if not done.text.strip() else None


def gist(message: str, width: int = 60) -> str:
    """A message on one line, its start and end when it is long (attached files come first, the typed text last)."""
    line = " ".join(message.split())
    if len(line) <= width:
        return line
    half = (width - 3) // 2
    return f"{line[:half].rstrip()} … {line[-half:].lstrip()}"


def room_notice(start: TurnStart) -> str | None:
    """What making room for a turn did, when it moved exchanges out of the model's context."""
    if not start.dropped:
        return None
    return (f"[{counted(start.dropped, 'earlier exchange')} left the model's context to make room; "
            f"the saved conversation keeps {'it' if start.dropped == 1 else 'them'}]")


def exchanges_in_context(conversation: Conversation) -> str:
    """How many exchanges a conversation has, and how many of them the model still sees when not all."""
    total, seen = len(conversation.turns), len(conversation.in_context())
    if seen == total:
        return counted(total, "exchange")
    last = "only the last" if seen == 1 else f"the last {seen}"
    return f"{counted(total, 'exchange')} ({last} in the model's context)"


def what_reset_kept(previous: Conversation, *, unsaved: bool = False) -> str:
    """What became of the conversation /reset left: saved (it had changes), its latest changes not saved, or never
    written."""
    if unsaved:
        return f"the latest changes to {previous.name} were not saved"
    if previous.on_disk:
        return f"{previous.name} stays saved"
    return "the previous one had nothing to save" if not previous.turns else "the previous one was not saved"
