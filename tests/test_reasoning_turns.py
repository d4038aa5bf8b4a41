"""An earlier answer's reasoning reaches the chat template apart from its answer, as transformers gives it: on a tiny
model with DeepSeek-R1's template, whose generation prompt opens the <think> block and whose </think> is a control
token, the template drops the reasoning of an answer it never saw open."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localgen.chat import Message
from tests.gguf_builders import tiny_family_model

R1_SPECIALS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<|endoftext|>",
               "<think>", "</think>")
R1_TEMPLATE = (  # DeepSeek-R1-Distill-Qwen's, its tool calls left out
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}"
    "{%- endif %}{%- if message['role'] == 'assistant' %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}"
    "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
)


@pytest.fixture(scope="module")
def loaded_r1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A tiny model with DeepSeek-R1's template and special tokens, <think> and </think> typed control, loaded as a
    run loads it."""
    from localgen.runner import ModelOptions, load_model

    model = tiny_family_model(tmp_path_factory.mktemp("r1") / "r1.gguf", specials=R1_SPECIALS, template=R1_TEMPLATE,
                              bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>", add_bos=True)
    loaded = load_model(ModelOptions(model=str(model), ctx_size=512, threads=2))
    try:
        yield loaded
    finally:
        loaded.close()


def test_the_reasoning_of_an_answer_the_generation_prompt_opened_is_left_out_of_the_next_turn(loaded_r1) -> None:
    engine, prompt_format = loaded_r1.engine, loaded_r1.prompt_format
    assert "</think>" in prompt_format.control_tokens
    turns = [Message("user", "hi"), Message("assistant", "Okay, the user says hi.\n</think>\n\nHello!"),
             Message("user", "and again")]
    text, tokens = prompt_format.prompt(engine, turns)
    assert text.endswith("<｜User｜>hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>and again"
                         "<｜Assistant｜><think>\n")
    assert tokens == engine.tokenize(text, add_special=False)


def test_an_answer_s_own_think_block_is_apart_and_its_text_after_stays_characters(loaded_r1) -> None:
    """The answer after the reasoning is still message text: a </think> the model wrote in it reaches the model as
    characters."""
    engine, prompt_format = loaded_r1.engine, loaded_r1.prompt_format
    turns = [Message("user", "hi"), Message("assistant", "<think>Greeting.</think>Hello! Close with </think>."),
             Message("user", "ok")]
    text, tokens = prompt_format.prompt(engine, turns)
    assert "Greeting." not in text and "<｜Assistant｜>Hello! Close with </think>.<｜end▁of▁sentence｜>" in text
    assert engine.tokenize("</think>", add_special=False)[0] not in tokens, "no </think> token in the prompt"


def test_an_answer_whose_reasoning_never_closed_reaches_the_next_turn_as_written(loaded_r1) -> None:
    """An answer cut off inside its <think> block (by -n or Ctrl-C) has no answer apart from it: its text is kept
    whole, not an empty turn."""
    engine, prompt_format = loaded_r1.engine, loaded_r1.prompt_format
    turns = [Message("user", "hi"), Message("assistant", "<think>\nreasoning cut off"), Message("user", "ok")]
    text, _ = prompt_format.prompt(engine, turns)
    assert "<｜Assistant｜><think>\nreasoning cut off<｜end▁of▁sentence｜>" in text
