"""Chat templates in the sandbox, and how a user message is composed."""

from __future__ import annotations

import pytest

from localgen.chat import Message, PromptFormat, compose_user_message
from localgen.errors import TemplateError
from localgen.template_sandbox import render_template

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _render(template: str) -> str:
    return render_template(template, [Message("user", "hi")], bos_token="<s>", eos_token="</s>",
                           model_name="test-model")


def test_chatml_renders() -> None:
    assert _render(CHATML) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_helpers_are_available() -> None:
    out = _render("{{ bos_token }}{{ strftime_now('%Y') | length }}{{ eos_token }}")
    assert out == "<s>4</s>"


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        ("{{ raise_exception('no system role') }}", "refused"),
        ("{% for x in %}", "not valid Jinja"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "failed a sandbox check"),
        ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "exceeds"),
    ],
)
def test_broken_or_hostile_templates_give_template_errors(template: str, needle: str) -> None:
    with pytest.raises(TemplateError) as info:
        _render(template)
    assert needle in info.value.message and "test-model" in info.value.message
    assert "template" in (info.value.hint or "")


def test_a_template_that_leaves_the_last_user_message_out_is_told() -> None:
    def warning(template: str | None, *messages: Message) -> str | None:
        fmt = PromptFormat(template=template, bos_token="", eos_token="", adds_bos=False, model_name="qa.jinja",
                           template_hint="fix qa.jinja")
        return fmt.left_out_warning(fmt.render(list(messages)), messages)

    last_only = "{{ messages[-1]['content'] | trim }}"
    assert warning(CHATML, Message("user", "hi")) is None
    assert warning(last_only, Message("user", "  hi\n")) is None, "the text, stripped, is what must be there"
    assert warning(last_only, Message("user", "dropped"), Message("assistant", "ok"), Message("user", "hi")) is None
    assert warning("{{ messages[0]['content'] }}", Message("user", " ")) is None, "nothing to leave out"
    assert warning(None, Message("user", "hi")) is None, "a plain completion has no template"
    said = warning("You are a calculator.", Message("system", "Be brief."), Message("user", "What is 2+2?"))
    assert said == ("qa.jinja: the chat template left the message out of the prompt: the model does not see it "
                    "(fix qa.jinja)")
    assert warning("{{ messages[0]['content'] }}", Message("user", "first"), Message("user", "second")) == said


def test_attachments_come_before_the_instruction() -> None:
    assert compose_user_message("Summarize.", ["doc one\n", "doc two"]) == "doc one\n\ndoc two\n\nSummarize."
    assert compose_user_message(None, ["only stdin"]) == "only stdin"
    assert compose_user_message("  ", ["", "\n"]) == ""
    assert compose_user_message(None, ["def add(a, b):\n"], exact=True) == "def add(a, b):\n"
    assert compose_user_message("The capital of France is ", [], exact=True) == "The capital of France is "
    assert compose_user_message("Q:", ["doc\n", "more\n\n"], exact=True) == "doc\n\nmore\n\nQ:"
