"""How a path typed to a chat's /file becomes a file: a / after a file's name refused as `cat` refuses it, and
environment variables expanded where no shell expands them, on a real chat session with the bundled model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.conversation import Conversation
from localgen.errors import UsageError
from localgen.params import GenerationLimits, SamplingParams
from localgen.repl_state import ChatState
from localgen.runner import ModelOptions, load_model
from localgen.session import ChatSession


@pytest.fixture(scope="module")
def state(bundled_model: Path) -> Iterator[ChatState]:
    """A chat's state, as the REPL hands it to /file, on the bundled model."""
    from localgen.repl_unsaved import LeaveGuard

    options = ModelOptions(model=str(bundled_model), ctx_size=1024, threads=1)
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=str(bundled_model)),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=8), autosave=False)
    yield ChatState(session, LeaveGuard(session), show_answer=lambda *_: None, escapes=False, markdown=False,
                    show_thinking=False)
    session.loaded.close()


def attach(state: ChatState, typed: str) -> list[str]:
    """The texts attached to the next message after `/file TYPED`, from none."""
    from localgen.chat_commands_conversation import file_command

    state.session.attachments = []
    file_command(state, typed)
    return list(state.session.attachments)


def test_file_refuses_a_slash_after_a_file_s_name_as_cat_does(state: ChatState, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("The pass phrase is heliotrope.\n")
    for typed in (f"{tmp_path}/notes.txt/", f"{tmp_path}/notes.txt/."):
        with pytest.raises(UsageError) as refused:
            attach(state, typed)
        assert refused.value.message == f"cannot read {typed}: Not a directory"
        assert refused.value.hint == f"{tmp_path}/notes.txt is a file, not a folder: drop the / after it"
        assert not state.session.attachments
    assert attach(state, f"{tmp_path}/notes.txt") == ["The pass phrase is heliotrope.\n"]
