"""Chat templates written for transformers through localgen's prompt path, each in a tiny GGUF: Jinja's loop
controls, and transformers' {% generation %} tag and tojson filter."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen import template_sandbox
from localgen.chat import Message
from localgen.errors import TemplateError
from localgen.template_sandbox import render_template
from tests.conftest import run_localgen
from tests.gguf_builders import copy_with_metadata, tiny_model

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
SPM_CONTROLS = ("<|im_start|>", "<|im_end|>")


@pytest.fixture(scope="module")
def family_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny SentencePiece model (BOS <s>, added) in one GGUF file for each template."""
    folder = tmp_path_factory.mktemp("families")
    tiny = tiny_model(folder / "tiny.gguf", tokenizer="llama", spm_controls=SPM_CONTROLS)
    templates = {"loop-controls": LOOP_CONTROLS, "generation": GENERATION, "tojson": TOJSON}
    return {name: copy_with_metadata(tiny, folder / f"{name}.gguf", set_values={"tokenizer.chat_template": template})
           for name, template in templates.items()}


@pytest.mark.parametrize(("family", "system", "expected"), [
    ("loop-controls", "", "<s><|im_start|>user (last question)\nhi<|im_end|>\n<|im_start|>assistant\n"),
    ("generation", "none", "<s><|im_start|>user\nhi<|im_end|>\nscoped<|im_start|>assistant\n"),
    ("tojson", "<b>'é'</b>",
     '<s><|im_start|>system\n{"role": "system", "content": "<b>\'é\'</b>"}\n"<b>\'é\'</b>"<|im_end|>\n'
     '<|im_start|>user\n{"role": "user", "content": "hi"}\n"hi"<|im_end|>\n<|im_start|>assistant\n'),
])
def test_templates_using_transformers_jinja_render_as_transformers_renders_them(
        family_models: dict[str, Path], family: str, system: str, expected: str) -> None:
    """Jinja's {% break %} and {% continue %} (past the empty system message), transformers' {% generation %} (its
    body in a block of its own, as a {% set %} inside shows) and its tojson (json.dumps: keys in order, nothing
    escaped for HTML)."""
    result = run_localgen("run", "-m", str(family_models[family]), "-s", system, "--print-prompt", "hi", timeout=60)
    assert (result.returncode, result.err) == (0, "")
    assert result.stdout.decode() == expected


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
    assert info.value.message == f"m: the chat template is not valid Jinja: {{% {word} %}} outside a loop"


def test_tojson_takes_transformers_arguments() -> None:
    template = ("{{ messages[0] | tojson(separators=(',', ':'), sort_keys=true) }} "
                "{{ 'é' | tojson(ensure_ascii=true) }} {{ {'a': [1]} | tojson(indent=2) }}")
    out = render_template(template, [Message("user", "<hi>")], bos_token="", eos_token="", model_name="m")
    assert out == '{"content":"<hi>","role":"user"} "\\u00e9" {\n  "a": [\n    1\n  ]\n}'
