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


def test_file_expands_environment_variables_no_shell_expanded(state: ChatState, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat reads /file's path itself: $VAR and ${VAR} are expanded as a shell would, but for a file named so."""
    (tmp_path / "notes.txt").write_text("The pass phrase is heliotrope.\n")
    (tmp_path / "cost$X.txt").write_text("A file named with a dollar sign.\n")
    monkeypatch.setenv("NOTES_DIR", str(tmp_path))
    monkeypatch.setenv("X", "notes")
    assert attach(state, "$NOTES_DIR/notes.txt") == ["The pass phrase is heliotrope.\n"]
    assert attach(state, "${NOTES_DIR}/$X.txt") == ["The pass phrase is heliotrope.\n"]
    assert attach(state, f"{tmp_path}/cost$X.txt") == ["A file named with a dollar sign.\n"], "not costnotes.txt"
    monkeypatch.delenv("NOTES_DIR")
    with pytest.raises(UsageError) as refused:
        attach(state, "$NOTES_DIR/notes.txt")
    assert refused.value.message == "no such file: $NOTES_DIR/notes.txt"
    monkeypatch.setenv("NOTES_DIR", str(tmp_path))
    with pytest.raises(UsageError) as refused:  # expanded before the / after a file's name is looked at
        attach(state, "$NOTES_DIR/notes.txt/")
    assert refused.value.message == "cannot read $NOTES_DIR/notes.txt/: Not a directory"


def test_a_file_option_given_a_variable_the_shell_left_reads_its_file(tmp_path: Path) -> None:
    """-f '$NOTES_DIR/notes.txt', quoted, reaches localgen as typed: expanded as in /file."""
    from tests.conftest import run_localgen

    (tmp_path / "notes.txt").write_text("The pass phrase is heliotrope.\n")
    result = run_localgen("run", "--print-prompt", "-f", "$NOTES_DIR/notes.txt", "q", env={"NOTES_DIR": str(tmp_path)})
    assert result.returncode == 0 and "The pass phrase is heliotrope." in result.out, result.err
