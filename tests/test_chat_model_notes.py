"""What the chat's /model says of the model it switches to, in a real pseudo-terminal on the bundled model and copies
of it: one with no chat template gets the conversation as plain text, as the chat's start says of it."""

from __future__ import annotations

from pathlib import Path

from tests.test_repl import Chat

PLAIN_TEXT = "has no chat template, so the conversation goes to it as plain text to continue"


def _stop(chat: Chat) -> None:
    """End a chat a failed test left running."""
    if chat.child.isalive():
        chat.child.terminate(force=True)


def test_model_to_one_without_a_chat_template_says_the_conversation_goes_to_it_as_plain_text(
        tmp_path: Path, bundled_model: Path) -> None:
    """/model of a file with no chat template says so, as the chat's start does (it said only "now using"), and the
    answer that follows comes from it; back on the bundled model nothing of the kind is said."""
    from gguf_builders import copy_with_metadata

    base = copy_with_metadata(bundled_model, tmp_path / "base.gguf", drop=["tokenizer.chat_template"])
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        said = chat.command_words(f"/model {base}", PLAIN_TEXT)
        assert f"now using {base}" in " ".join(said.split()), said
        assert chat.ask("Once upon a time")["turns"][-1]["model"] == str(base)
        since = len(chat.transcript.getvalue())
        chat.command_words("/model smollm2-135m", "now using smollm2-135m")  # then the prompt, drawn whole
        back = chat.transcript.getvalue()[since:]
        assert "no chat template" not in back, back
        assert chat.quit() == 0
    finally:
        _stop(chat)
