"""What the chat's /model says of the model it switches to, in a real pseudo-terminal on the bundled model and copies
of it: one with no chat template gets the conversation as plain text, as the chat's start says of it, and one whose
chat template writes another system prompt of its own gives the model that one, where the chat set none."""

from __future__ import annotations

from pathlib import Path

from tests.chat_terminal import ESCAPE, end_chat
from tests.test_repl import Chat

PLAIN_TEXT = "has no chat template, so the conversation goes to it as plain text to continue"


def test_model_to_one_without_a_chat_template_says_the_conversation_goes_to_it_as_plain_text(
        tmp_path: Path, bundled_model: Path) -> None:
    """/model of a file with no chat template says so, as the chat's start does (it said only "now using"), and the
    answer that follows comes from it; back on the bundled model nothing of the kind is said."""
    from gguf_builders import copy_with_metadata

    base = copy_with_metadata(bundled_model, tmp_path / "base.gguf", drop=["tokenizer.chat_template"])
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        said = " ".join(chat.command_words(f"/model {base}", "saved to resume)").split())
        assert f"now using {base}" in said, said
        assert (f"{PLAIN_TEXT} (a chat template: /exit, then start the chat again with `localgen chat -m {base} "
                "--temperature 0 -n 5 --no-markdown --chat-template FILE`, as it has no exchange saved to resume)"
                ) in said, said  # /model takes no --chat-template
        assert chat.ask("Once upon a time")["turns"][-1]["model"] == str(base)
        since = len(chat.transcript.getvalue())
        chat.command_words("/model smollm2-135m", "now using smollm2-135m")  # then the prompt, drawn whole
        back = chat.transcript.getvalue()[since:]
        assert "no chat template" not in back, back
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_model_names_the_template_s_own_system_prompt_the_new_model_gives_where_it_differs(
        tmp_path: Path, bundled_model: Path) -> None:
    """With no system prompt set, /model of a file whose chat template writes another system prompt of its own names
    the one the model now gets (it said only "now using"), and /model back names SmolLM2's; a system prompt set in the
    chat stands, and no /model says it changed."""
    from gguf_builders import copy_with_metadata

    from localgen.gguf_reader import read_gguf

    template = read_gguf(bundled_model).metadata["tokenizer.chat_template"]
    own = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert own in template
    other = copy_with_metadata(bundled_model, tmp_path / "other.gguf",
                               set_values={"tokenizer.chat_template": template.replace(own, "You are Nemo, a pilot")})
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.command_words(f"/model {other}", "changed with it: the chat template's own system prompt "
                                              "'You are Nemo, a pilot'")
        chat.command_words("/model smollm2-135m", f"changed with it: the chat template's own system prompt '{own}'")
        chat.command("/system Be brief.", "system prompt set")
        since = len(chat.transcript.getvalue())
        chat.command_words(f"/model {other}", f"now using {other}")  # then the prompt, drawn whole
        switched = chat.transcript.getvalue()[since:]
        assert "system prompt" not in switched, switched
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_model_names_the_template_s_own_system_prompt_that_differs_past_where_a_summary_cuts_it(
        tmp_path: Path, bundled_model: Path) -> None:
    """Two chat templates' own system prompts of one length that differ only past the 80 characters a summary quotes
    are told apart: /model from one to the other names the new one (it said only "now using")."""
    from gguf_builders import copy_with_metadata

    from localgen.gguf_reader import read_gguf

    template = read_gguf(bundled_model).metadata["tokenizer.chat_template"]
    own = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    long = "You are Nemo, a pilot who flies small planes over the mountains and the sea, and who answers briefly: "
    models = [copy_with_metadata(bundled_model, tmp_path / f"{word}.gguf",
                                 set_values={"tokenizer.chat_template": template.replace(own, long + word)})
              for word in ("yes", "now")]
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.command_words(f"/model {models[0]}", "changed with it: the chat template's own system prompt")
        said = chat.command_words(f"/model {models[1]}", "(105 characters)')")
        assert "changed with it: the chat template's own system prompt 'You are Nemo" in " ".join(said.split()), said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_an_answer_stopped_at_the_end_of_the_context_gets_the_command_that_resumes_it_with_a_larger_one(
        tmp_path: Path, bundled_model: Path) -> None:
    """An answer that fills the chat's context is told how to go on with a larger one, the conversation resumed (it
    was told to start the chat with a larger --ctx-size, which starts a new one); one that fills the most its model
    takes is told so (where a larger --ctx-size is refused)."""
    from gguf_builders import copy_with_metadata

    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "-1", "-c", "160")
    try:
        name = chat.ask("Write a long story about a dragon.")["name"]
        said = " ".join(ESCAPE.sub("", chat.transcript.getvalue()).split())
        assert (f"[stopped at the end of the context window (a larger context: /exit, then `localgen chat --resume "
                f"{name} --no-markdown -c SIZE` (up to 8,192 for this model; it is 160 now))]") in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)
    small = copy_with_metadata(bundled_model, tmp_path / "small.gguf", set_values={"llama.context_length": 128})
    chat = Chat(tmp_path / "home2", "-m", str(small), "--temperature", "0", "--no-markdown", "-n", "-1")
    try:
        chat.ask("Write a long story about a dragon.")
        said = " ".join(ESCAPE.sub("", chat.transcript.getvalue()).split())
        assert "[stopped at the end of the context window (128 tokens, the most this model takes)]" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)
