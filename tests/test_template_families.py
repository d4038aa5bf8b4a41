"""Real model families' chat templates through localgen's prompt format (Gemma 2's also in a tiny GGUF, through the
CLI and a chat): a system prompt where the template has no place for one (Gemma 2, Mistral v0.1, the first Phi-3),
Jinja's loop controls, and transformers' {% generation %} tag and tojson filter."""

from __future__ import annotations

import dataclasses
import json
import logging
import typing
from pathlib import Path

import pytest

from localgen import chat, template_sandbox
from localgen.chat import Message, PromptFormat, with_system_folded
from localgen.errors import TemplateError
from localgen.template_sandbox import TemplateStopped, render_template
from tests.conftest import run_localgen
from tests.gguf_builders import copy_with_metadata, tiny_model

GEMMA2 = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
          "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
          "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
MISTRAL01 = ("{{ bos_token }}{% for message in messages %}"
             "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
             "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
             "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
             "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
             "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
PHI3_FIRST = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
              "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}"
              "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}"
              "{% endfor %}")  # Phi-3-mini's of April 2024: a system message is left out
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LOOP_CONTROLS = ("{% set ns = namespace(last=-1) %}{% for m in messages[::-1] %}{% if m.role == 'user' %}"
                 "{% set ns.last = messages|length - 1 - loop.index0 %}{%- break %}{% endif %}{% endfor %}"
                 "{% for m in messages %}{% if not m.content %}{% continue %}{% endif %}"
                 "<|im_start|>{{ m.role }}{{ ' (last question)' if loop.index0 == ns.last }}\n{{ m.content }}"
                 "<|im_end|>\n{% endfor %}{{ '<|im_start|>assistant\n' }}")  # Qwen3.5's {%- break %}, and a continue
GENERATION = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% generation %}{% set seen = true %}{{ m.content }}"
              "{% endgeneration %}<|im_end|>\n{% endfor %}{{ 'scoped' if seen is not defined }}"
              "{{ '<|im_start|>assistant\n' }}")  # a TRL fine-tune's tag, around every message here
TOJSON = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m | tojson }}\n{{ m.content | tojson }}"
          "<|im_end|>\n{% endfor %}{{ '<|im_start|>assistant\n' }}")
SPM_CONTROLS = ("<start_of_turn>", "<end_of_turn>")


@pytest.fixture(scope="module")
def gemma2_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny SentencePiece model (BOS <s>, added) in a GGUF file with Gemma 2's template."""
    folder = tmp_path_factory.mktemp("families")
    tiny = tiny_model(folder / "tiny.gguf", tokenizer="llama", spm_controls=SPM_CONTROLS)
    return copy_with_metadata(tiny, folder / "gemma2.gguf", set_values={"tokenizer.chat_template": GEMMA2})


def test_a_system_prompt_goes_before_the_message_where_the_template_has_no_place_for_one(gemma2_model: Path) -> None:
    result = run_localgen("run", "-m", str(gemma2_model), "-s", "Be brief.", "--print-prompt", "hi", timeout=60)
    assert (result.returncode, result.err) == (0, ""), "no error, and no warning that the message was left out"
    assert result.stdout.decode() == "<s><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\n"


@pytest.mark.parametrize(("template", "system", "expected"), [
    (GEMMA2, "", "<s><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"),
    (MISTRAL01, "Be brief.", "<s>[INST] Be brief.\n\nhi [/INST]"),
    (PHI3_FIRST, "Answer in French.", "<s><|user|>\nAnswer in French.\n\nhi<|end|>\n<|assistant|>\n"),
    (LOOP_CONTROLS, "", "<|im_start|>user (last question)\nhi<|im_end|>\n<|im_start|>assistant\n"),
    (GENERATION, None, "<|im_start|>user\nhi<|im_end|>\nscoped<|im_start|>assistant\n"),
    (TOJSON, "<b>'é'</b>",
     '<|im_start|>system\n{"role": "system", "content": "<b>\'é\'</b>"}\n"<b>\'é\'</b>"<|im_end|>\n'
     '<|im_start|>user\n{"role": "user", "content": "hi"}\n"hi"<|im_end|>\n<|im_start|>assistant\n'),
])
def test_real_families_templates_render_a_system_prompt_and_the_jinja_transformers_gives_them(
        template: str, system: str | None, expected: str) -> None:
    """A system prompt (-s; "": the template's none; None: none at all) before the message where the template has
    no place for one (Gemma 2's, Mistral v0.1's, the first Phi-3's); Jinja's {% break %} and {% continue %} (past the
    empty system message), transformers' {% generation %} (its body in a block of its own, as a {% set %} inside
    shows) and its tojson (json.dumps: keys in order, nothing escaped for HTML)."""
    prompt_format = PromptFormat(template=template, bos_token="<s>", eos_token="</s>", adds_bos=True, model_name="m")
    messages = [Message("system", system)] * (system is not None) + [Message("user", "hi")]
    text = prompt_format.render(messages)
    assert text == expected
    assert prompt_format.left_out_warning(text, messages) is None


def test_the_debug_log_says_once_where_the_system_prompt_goes() -> None:
    """Read by a handler of the chat's own logger: the records the suite's other tests route to the root logger (a CLI
    run in-process stops or restores "localgen"'s propagation) count no record twice or none."""
    records: list[logging.LogRecord] = []
    collector = logging.Handler(logging.DEBUG)
    collector.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("localgen.chat")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(collector)
    try:
        gemma = PromptFormat(template=GEMMA2, bos_token="<bos>", eos_token="", adds_bos=False, model_name="gemma\n2")
        for _ in range(2):
            gemma.render([Message("system", "S"), Message("user", "hi")])
    finally:
        logger.removeHandler(collector)
        logger.setLevel(level)
    said = [record.getMessage() for record in records if "system message" in record.getMessage()]
    assert said == ["gemma 2: the chat template has no place for a system message: the system prompt goes before the "
                    "first user message's text"]


def test_a_chat_s_system_prompt_reaches_a_template_without_a_system_role_every_turn(gemma2_model: Path) -> None:
    from localgen.conversation import Conversation
    from localgen.events import Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=str(gemma2_model), ctx_size=256, threads=1)
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=options.model),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=3), autosave=False)
    try:
        session.set_system("Be brief.")  # /system Be brief.
        for message in ("hi", "again"):
            assert [e for e in session.ask(message)[1] if isinstance(e, Finished)], "answered"
        answer = session.conversation.turns[0].answer
        assert answer is not None
        asked = session.conversation.messages()[:-1]  # as the second message was answered
        assert session.prompt_text(asked) == (
            "<s><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n"
            f"<start_of_turn>model\n{answer.strip()}<end_of_turn>\n<start_of_turn>user\nagain<end_of_turn>\n<start_of_turn>model\n")
        assert session.conversation.messages()[0] == Message("system", "Be brief."), "kept as the system prompt"
    finally:
        session.loaded.close()


def _counted_renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The templates of every render the prompt format makes from here on, in order."""
    renders: list[str] = []

    def counted(template: str, *args: object, **kwargs: typing.Any) -> str:
        renders.append(template)
        return render_template(template, *args, **kwargs)

    monkeypatch.setattr(chat, "render_template", counted)
    return renders


def test_whether_a_template_has_no_place_for_a_system_prompt_is_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    renders = _counted_renders(monkeypatch)
    gemma = PromptFormat(template=GEMMA2, bos_token="<bos>", eos_token="", adds_bos=False, model_name="m")
    chatml = dataclasses.replace(gemma, template=CHATML)
    messages = [Message("system", "S"), Message("user", "hi")]
    for _ in range(3):
        assert gemma.render(messages) == "<bos><start_of_turn>user\nS\n\nhi<end_of_turn>\n<start_of_turn>model\n"
        assert chatml.render(messages).startswith("<|im_start|>system\nS<|im_end|>\n")
    assert renders.count(GEMMA2) == 3 + 3, "refused as given twice, then folded: once; then each render once"
    assert renders.count(CHATML) == 1 + 3, "kept as given: once"
    assert gemma.render([Message("user", "hi")]) and renders.count(GEMMA2) == 7


def test_a_template_s_own_system_prompt_and_its_place_for_one_are_found_from_one_render_of_a_system_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    renders: list[tuple[str, ...]] = []

    def counted(template: str, messages: list[Message], *args: object, **kwargs: typing.Any) -> str:
        renders.append(tuple(m.role for m in messages))
        return render_template(template, messages, *args, **kwargs)

    monkeypatch.setattr(chat, "render_template", counted)
    own = CHATML.replace("{% for", "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nBe kind.<|im_end|>\n"
                                   "{% endif %}{% for", 1)
    prompt_format = PromptFormat(template=own, bos_token="", eos_token="", adds_bos=False, model_name="m")
    assert not prompt_format.folds_system() and prompt_format.default_system() == "Be kind."
    assert renders == [("system", "user"), ("user",)], "the system and user message rendered once"


def test_a_render_stopped_at_a_limit_decides_nothing_and_a_template_failing_whatever_it_gets_keeps_its_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    renders: list[str] = []
    stopped = [True]

    def stopped_once(template: str, *args: object, **kwargs: typing.Any) -> str:
        renders.append(template)
        if stopped[0]:  # as a render that ran past the time limit on a busy machine
            stopped[0] = False
            raise TemplateStopped("m: the chat template took over 2 s and was stopped")
        return render_template(template, *args, **kwargs)

    monkeypatch.setattr(chat, "render_template", stopped_once)
    chatml = PromptFormat(template=CHATML, bos_token="", eos_token="", adds_bos=False, model_name="m")
    assert not chatml.folds_system(), "not known: not folded"
    assert chatml.folds_system() is False and len(renders) == 2, "found by the next render, which kept it"
    broken = dataclasses.replace(chatml, template="{{ messages[9]['content'] + 1 }}")
    for _ in range(2):
        with pytest.raises(TemplateError, match="failed: UndefinedError"):
            broken.render([Message("system", "S"), Message("user", "hi")])
    assert renders.count(broken.template) == 3 + 2, "found once that folding does not help; the error is its own"


def test_a_template_refusing_a_system_message_folds_it_where_the_folded_probe_was_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    renders: list[str] = []

    def folded_stopped_once(template: str, messages: list[Message], *args: object, **kwargs: typing.Any) -> str:
        renders.append(template)
        if len(renders) == 3:  # the folded probe, on a busy machine
            raise TemplateStopped("m: the chat template took over 2 s and was stopped")
        return render_template(template, messages, *args, **kwargs)

    monkeypatch.setattr(chat, "render_template", folded_stopped_once)
    gemma = PromptFormat(template=GEMMA2, bos_token="<bos>", eos_token="", adds_bos=False, model_name="m")
    messages = [Message("system", "S"), Message("user", "hi")]
    folded = "<bos><start_of_turn>user\nS\n\nhi<end_of_turn>\n<start_of_turn>model\n"
    assert gemma.render(messages) == folded, "folded, not refused as System role not supported"
    assert gemma.render(messages) == folded and len(renders) == 4 + 4, "not settled: found by the next render"
    assert gemma.render(messages) == folded and len(renders) == 8 + 1


def test_a_template_without_a_system_role_has_no_system_prompt_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    renders = _counted_renders(monkeypatch)
    gemma = PromptFormat(template=GEMMA2, bos_token="<bos>", eos_token="", adds_bos=False, model_name="m")
    for _ in range(3):
        assert gemma.default_system() is None and gemma.with_own_system([]) == []
    assert len(renders) == 3, "found once that it has no place for one, then asked no more"
    assert gemma.render([Message("system", "S"), Message("user", "hi")]).startswith("<bos><start_of_turn>user\nS\n")


def test_a_template_with_a_system_role_refusing_an_even_count_of_messages_keeps_its_system_role() -> None:
    odd_only = "{% if messages | length is even %}{{ raise_exception('An odd count, please') }}{% endif %}" + CHATML
    prompt_format = PromptFormat(template=odd_only, bos_token="", eos_token="", adds_bos=False, model_name="m")
    assert not prompt_format.folds_system()
    messages = [Message("system", "S"), Message("user", "u"), Message("assistant", "a"), Message("user", "v"),
                Message("assistant", "b")]
    assert prompt_format.render(messages, add_generation_prompt=False).startswith("<|im_start|>system\nS<|im_end|>")
    with pytest.raises(TemplateError, match="refused the messages: An odd count, please"):
        prompt_format.render(messages[:2])


def test_a_template_that_keeps_no_system_prompt_even_folded_is_left_as_it_is() -> None:
    roles_only = "{% for m in messages %}{{ m['role'] }} {% endfor %}"
    prompt_format = PromptFormat(template=roles_only, bos_token="", eos_token="", adds_bos=False, model_name="m")
    assert not prompt_format.folds_system()
    assert prompt_format.render([Message("system", "S"), Message("user", "hi")]) == "system user "


@pytest.mark.parametrize(("messages", "expected"), [
    ([Message("system", "S"), Message("user", "hi")], [Message("user", "S\n\nhi")]),
    ([Message("system", ""), Message("user", "hi")], [Message("user", "hi")]),
    ([Message("system", "S"), Message("user", "")], [Message("user", "S")]),
    ([Message("system", "S")], [Message("user", "S")]),
    ([Message("system", "S"), Message("assistant", "a"), Message("user", "u")],
     [Message("user", "S"), Message("assistant", "a"), Message("user", "u")]),
    ([Message("user", "u"), Message("assistant", "a"), Message("system", "S"), Message("user", "v")],
     [Message("user", "u"), Message("assistant", "a"), Message("user", "S\n\nv")]),
])
def test_a_system_message_folds_into_the_user_message_after_it(messages: list[Message],
                                                               expected: list[Message]) -> None:
    assert with_system_folded(messages) == expected


LOOPS_WITH_CONTROLS = [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% if j % 2 %}{% continue %}{% endif %}{% endfor %}"
    "{% endfor %}",
    "{% for i in range(100000) %}{{ 'x' * 1000 }}{% if i < 0 %}{% break %}{% endif %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% generation %}{{ j }}{% endgeneration %}{% endfor %}"
    "{% if i > 10 ** 9 %}{% break %}{% endif %}{% endfor %}",
    "{% macro f(n) %}{% generation %}{{ f(n + 1) }}{% endgeneration %}{% endmacro %}{{ f(0) }}",
    "{{ range(100000) | list | tojson(separators=('x' * 4000000, ':')) }}",
    "{{ messages | tojson(indent=2000000000) }}",
]


@pytest.mark.parametrize("template", LOOPS_WITH_CONTROLS)
def test_loop_controls_and_transformers_additions_keep_the_sandbox_s_bounds(template: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_sandbox, "TEMPLATE_TIME_LIMIT_S", 0.5)
    with pytest.raises(TemplateError) as info:
        render_template(template, [Message("user", "hi")], bos_token="", eos_token="", model_name="m")
    assert any(word in info.value.message for word in ("took over", "output exceeds", "too deeply", "memory",
                                                       "too large")), info.value.message


@pytest.mark.parametrize(("template", "word"), [
    ("{% if messages %}{% break %}{% endif %}", "break"),
    ("{% for m in messages %}{% generation %}{% continue %}{% endgeneration %}{% endfor %}", "continue"),
])
def test_a_loop_control_outside_a_loop_is_not_valid_jinja(template: str, word: str) -> None:
    with pytest.raises(TemplateError) as info:
        render_template(template, [Message("user", "hi")], bos_token="", eos_token="", model_name="m")
    assert info.value.message == (f"m: the chat template is not valid Jinja: {{% {word} %}} outside a loop in its own "
                                  "block (a macro's, {% call %}'s or {% generation %}'s body is one)")


def test_tojson_takes_transformers_arguments() -> None:
    template = ("{{ messages[0] | tojson(separators=(',', ':'), sort_keys=true) }} "
                "{{ 'é' | tojson(ensure_ascii=true) }} {{ {'a': [1]} | tojson(indent=2) }}")
    out = render_template(template, [Message("user", "<hi>")], bos_token="", eos_token="", model_name="m")
    assert out == '{"content":"<hi>","role":"user"} "\\u00e9" {\n  "a": [\n    1\n  ]\n}'


DOUBLED = "{% set ns = namespace(x=[1]) %}{% for i in range(14) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"


def test_a_huge_value_written_as_json_stops_at_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list of 2**14 ones built in 14 steps, written in milliseconds by json.dumps unchecked, against a limit of
    0.1 s: as 2**26 ones (over a minute) against 2 s. Written as text, its size is measured first (in
    test_template_budget)."""
    monkeypatch.setattr(template_sandbox, "TEMPLATE_TIME_LIMIT_S", 0.1)
    with pytest.raises(TemplateError) as info:
        render_template(DOUBLED + "{{ ns.x | tojson }}", [Message("user", "hi")], bos_token="", eos_token="",
                        model_name="m")
    assert info.value.message == "m: the chat template took over 0.1 s of CPU time and was stopped"


def test_tojson_stops_at_the_output_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_sandbox, "TEMPLATE_OUTPUT_LIMIT_CHARS", 1000)
    with pytest.raises(TemplateError) as info:
        render_template("{{ (range(1000) | list | tojson) | length }}", [Message("user", "hi")], bos_token="",
                        eos_token="", model_name="m")
    assert info.value.message == "m: the chat template output exceeds 1,004 characters"


VALUES = [{"a": [1, 2.5, None, True, 'é<\n"'], "b": {}, "c": [], "d": {"z": 1, "a": (1,)}}, "s", 3, [], (), (1,),
          [(1, 2), {"k": "v"}, ()], {}]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("arguments", [{}, {"indent": 2}, {"indent": "\t"}, {"separators": (",", ":")},
                                       {"sort_keys": True}, {"ensure_ascii": True}])
def test_tojson_writes_json_dumps_text(value: object, arguments: dict[str, typing.Any]) -> None:
    assert template_sandbox._tojson(value, **arguments) == json.dumps(value, **{"ensure_ascii": False, **arguments})


def test_a_list_tuple_or_dict_written_as_text_reads_as_str_writes_it() -> None:
    out = render_template("{{ messages[0] }} {{ [1, 'a', (2,), {'k': none}, [], (), {}, (1, 2)] }} {{ 'x' }} {{ 3 }}",
                          [Message("user", "hi")], bos_token="", eos_token="", model_name="m")
    assert out == "{'role': 'user', 'content': 'hi'} [1, 'a', (2,), {'k': None}, [], (), {}, (1, 2)] x 3"
