"""A saved conversation at a glance: what a listing shows of it (its number of exchanges, model and first message),
read without building every exchange (`localgen conversations` over thousands of long conversations)."""

from __future__ import annotations

from localgen.conversation import Conversation, checked_details, parsed_json
from localgen.conversation_store import saved_path
from localgen.conversation_turn import checked_attachments
from localgen.errors import LocalgenError


def glance(name: str) -> tuple[int, str | None, str | None] | None:
    """The saved conversation NAME's number of exchanges, model and first message, its file checked as a whole read
    checks it, the exchanges after the first without being built; None where anything is off (not a file, not JSON,
    damaged...), for a whole read to say what."""
    try:
        path = saved_path(name)
        if not path.is_file():  # a pipe would be waited on; a folder or a dangling link is named by a whole read
            return None
        text = path.read_bytes().decode("utf-8-sig")
        data = parsed_json(text)
    except (OSError, ValueError, LocalgenError):
        return None
    turns = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(turns, list) or not all(map(_plain_exchange, turns)):
        return None
    try:
        first = Conversation.from_parsed({**data, "turns": turns[:1]}, path, name=name, text=text)
    except LocalgenError:  # damaged, or in another version's format
        return None
    return len(turns), first.model, first.turns[0].headline() if first.turns else None


def _plain_exchange(turn: object) -> bool:
    """Whether a saved exchange is sound as a whole read checks it: an object with a text question and answer, and
    details (tokens, times...) and files attached of the types a whole read takes."""
    if not (isinstance(turn, dict) and isinstance(turn.get("user"), str) and isinstance(turn.get("answer"), str)
            and isinstance(turn.get("interrupted", False), bool)):
        return False
    try:
        checked_details(turn)
        checked_attachments(turn)
    except ValueError:
        return False
    return True
