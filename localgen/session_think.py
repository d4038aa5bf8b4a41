"""A chat's --think and /think choice: the chat template's thinking switch set in its prompts, saved with the
conversation as stop strings are, and taken again when one is resumed or loaded."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from localgen.think_switch import THINK_VALUES

if TYPE_CHECKING:
    from localgen.chat import Message
    from localgen.runner import LoadedModel, ModelOptions

THINK_SETTING = "think"  # a saved conversation's /think or --think choice, beside its sampling settings


class SessionThink:
    """The thinking switch of a chat session (ChatSession builds on it)."""

    options: ModelOptions
    loaded: LoadedModel
    _rendered: list[tuple[LoadedModel, list[Message], str, list[int]]]
    _think_flag: str | None  # --think, as the command line gave it

    def set_think(self, think: str | None) -> None:
        """Render the prompts with the chat template's thinking switch set to think (/think; None: as it has it)."""
        self.options = replace(self.options, think=think)
        self.loaded.prompt_format = replace(self.loaded.prompt_format, think=think)
        self._rendered = []  # rendered with the switch as it was

    if TYPE_CHECKING:
        def _save(self, *, command: bool = False) -> None:
            """ChatSession's autosave."""

    def choose_think(self, think: str) -> None:
        """Use the thinking switch /think chose, and save it."""
        self.set_think(think)
        self._save(command=True)

    def _take_saved_think(self, saved: object, *, flag_wins: bool) -> None:
        """A resumed or loaded conversation's choice: --think's where given and it wins (flag_wins: --resume, run
        --conversation; not /load), else the one it saved, else --think's (not the previous conversation's /think)."""
        given = self._think_flag is not None and flag_wins
        self.set_think(saved if isinstance(saved, str) and saved in THINK_VALUES and not given else self._think_flag)

    def saved_think(self) -> dict[str, str]:
        """What a save keeps of the choice: the one made (--think, /think, a resumed conversation's), if any."""
        return {THINK_SETTING: self.options.think} if self.options.think is not None else {}
