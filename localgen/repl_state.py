"""What a chat's slash commands act on: its session, how its answers are shown, and whether it goes on."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

from localgen.conversation import Conversation
from localgen.events import Event
from localgen.repl_unsaved import LeaveGuard
from localgen.session import ChatSession
from localgen.session_turns import TurnStart

ShowAnswer = Callable[[TurnStart, Generator[Event, None, None]], None]


@dataclass
class ChatState:
    """A chat's state that its commands read and change (the REPL reads it back for each answer and line)."""

    session: ChatSession
    leaving: LeaveGuard
    show_answer: ShowAnswer  # streams an answer's events (/regen's), as a message's are
    escapes: bool  # the terminal takes escape sequences (not TERM=dumb): Markdown can be drawn live
    markdown: bool
    show_thinking: bool
    wrap: bool = True  # answers' lines break between words at the window's edge (chat --no-wrap, /wrap off: whole)
    stats_after_answers: bool = False  # chat --stats, /stats on
    running: bool = True  # False once /exit (or Ctrl-D) ends the chat
    typed: str | None = None  # the command as typed (/bye for /exit), for messages
    asked_in: Conversation | None = None  # the conversation this chat last sent a message (or /regen) in

    def display_options(self) -> list[str]:
        """The chat options that start a chat showing answers as this one does now (/markdown, /wrap, /thinking,
        /stats as they stand)."""
        return [option for option, given in (("--no-markdown", self.escapes and not self.markdown),
                                             ("--no-wrap", not self.wrap), ("--hide-thinking", not self.show_thinking),
                                             ("--stats", self.stats_after_answers)) if given]

    def asked_in_current(self) -> bool:
        """Whether this chat asked something in the conversation it has now (not in one it left since, nor one it
        only reopened with --resume or /load)."""
        return self.asked_in is not None and self.asked_in is self.session.conversation
