"""Which model file gave a chat's last answer, and that answer's figures: what /stats and the toolbar show."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from localgen.model_switch import ModelFile, file_identity

if TYPE_CHECKING:
    from localgen.conversation import Conversation, Turn
    from localgen.events import Finished


class SessionFigures:
    """The answers a chat computed, each with its figures and the model file that gave it (ChatSession builds on
    it)."""

    conversation: Conversation
    _model_file: ModelFile  # the model in use's
    _loaded_with: ModelFile  # the model in use as the conversation was loaded
    _figures: list[tuple[Turn, Finished | None, ModelFile]]  # None: an error cut the answer short

    @property
    def last(self) -> Finished | None:
        """The figures of the conversation's last answer (/stats, the toolbar), where this chat computed it whole."""
        turns = self.conversation.turns
        return next((done for answer, done, _ in reversed(self._figures) if turns and answer is turns[-1]), None)

    def last_answer_model(self) -> ModelFile | None:
        """The model file that gave the conversation's last answer: the one in use as this chat computed it, else
        (an answer that came with the conversation loaded) the file its saved details name, the model in use where
        they name it as the conversation now does, else the model in use as the conversation was loaded; None where
        there is no answer."""
        turns = self.conversation.turns
        if not turns or turns[-1].answer is None:
            return None
        given = next((model for answer, _, model in reversed(self._figures) if answer is turns[-1]), None)
        named = turns[-1].details.model if turns[-1].details is not None else None
        if given is not None:
            return given
        if named is not None and named == self.conversation.model:
            return self._model_file
        return file_identity(named) if named is not None and os.path.isabs(named) else self._loaded_with

    def figures_of_model_in_use(self) -> bool:
        """Whether the model file in use gave the conversation's last answer (so its figures are the toolbar's),
        whatever it was named; True where there is no answer."""
        return self.last_answer_model() in (None, self._model_file)
