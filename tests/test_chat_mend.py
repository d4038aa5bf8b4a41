"""The chat's small mends, in a real pseudo-terminal on the bundled model: /stats after /model, /list's count of
misnamed files, the transcript's dim notes, the answer room's hint and the input history's trim of a huge entry."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_repl import Chat


def _stop(chat: Chat) -> None:
    """End a chat a failed test left running."""
    if chat.child.isalive():
        chat.child.terminate(force=True)


def test_stats_after_model_names_the_model_that_gave_the_last_answer(tmp_path: Path, bundled_model: Path) -> None:
    """/stats after /model of another file says the model in use has not answered yet and names the one that did (it
    showed that model's figures as the last answer's), as the toolbar shows no speed; the new model's answer has
    figures again."""
    first, other = tmp_path / "first.gguf", tmp_path / "other.gguf"
    first.symlink_to(bundled_model)
    shutil.copyfile(bundled_model, other)
    chat = Chat(tmp_path / "home", "-m", str(first), "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Name a fruit.")
        chat.command("/stats", "tok/s")
        chat.command(f"/model {other}", "now using")
        said = chat.command_words("/stats", "no answer from the model in use yet: the last answer came from "
                                            "first.gguf")
        assert "tok/s" not in said, said
        chat.ask("Name another.")
        chat.command("/stats", "tok/s")
        assert chat.quit() == 0
    finally:
        _stop(chat)
