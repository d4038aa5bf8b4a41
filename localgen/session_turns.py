"""What a chat turn tells its caller before its answer streams, and the error of a change the chat could not save."""

from __future__ import annotations

from dataclasses import dataclass

from localgen.errors import LocalgenError


@dataclass(frozen=True)
class TurnStart:
    """What happened before a turn's answer streams: earlier exchanges moved out of the context to make room
    (dropped), how many of the earlier exchanges the model does not see in all (out_of_context), and the tokens of
    the prompt the answer follows (prompt_tokens)."""

    dropped: int
    out_of_context: int = 0
    prompt_tokens: int = 0


class UnsavedChangeError(LocalgenError):
    """An autosave that failed: the change stays in the session, which is marked unsaved."""
