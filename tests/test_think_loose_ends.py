"""Reasoning at its edges: text glued after a </think> that a grammar rejects, the variable a chat template only
sets (no think switch), the origin of a models.toml template a --think is refused for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localgen.think_switch import think_switch
from tests.conftest import run_localgen, user_registry
from tests.test_reasoning_turns import R1_TEMPLATE
from tests.test_think_switch import DEEPSEEK_V31, GPT_OSS, QWEN3

# The bundled model follows the examples: it reasons, closes the block and glues a ',' to its '>' (one token, '>,'),
# then answers in JSON.
GLUES_AFTER_THINK = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A: <think>One plus one is two.</think>, {"answer": 2}
Q: What is 2+2?
A: <think>Two plus two is four.</think>, {"answer": 4}
Q: {{ m.content }}
A: {% else %}{{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}<think>{% endif %}
"""
ANSWER_SCHEMA = '{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}'


def test_text_glued_after_the_reasoning_s_end_that_the_json_schema_rejects_is_left_out_of_the_answer(
        tmp_path: Path) -> None:
    """llama.cpp would abort on it (llama-server fails the request): the grammar applies from the next token, and
    the answer is only what it took, where the ',' stayed in front of the JSON."""
    template = tmp_path / "glues.jinja"
    template.write_text(GLUES_AFTER_THINK)
    ask = ("run", "--chat-template", str(template), "--temperature", "0", "-n", "40", "--json-schema", ANSWER_SCHEMA,
           "--json", "What is 3+3?")
    free = run_localgen(*ask[:7], *ask[9:])
    assert "</think>," in json.loads(free.out)["text"], "without the schema the model glues ',' to its </think>"
    hidden = json.loads(run_localgen(*ask, "--hide-thinking").out)
    assert (hidden["thinking"], json.loads(hidden["text"])) == ("Three plus three is six.", {"answer": 6}), hidden
    assert hidden["text"].startswith("{"), hidden
    shown = json.loads(run_localgen(*ask).out)
    assert shown["text"] == "Three plus three is six.</think>" + hidden["text"], shown


SMOLLM3_DEFAULT = ("{%- if enable_thinking is not defined -%}{%- set enable_thinking = true -%}{%- endif -%}"
                   "{%- if enable_thinking -%}{%- set reasoning_mode = '/think' -%}{%- else -%}"
                   "{%- set reasoning_mode = '/no_think' -%}{%- endif -%}"
                   "{{ 'Reasoning Mode: ' + reasoning_mode }}")  # SmolLM3's: set where not given, then read
ONLY_SETS = ("{% for m in messages %}{% if m.role == 'system' %}{% set enable_thinking = false %}{% endif %}"
             "{{ m.content }}{% endfor %}")  # set in an {% if %}, never read: no switch


@pytest.mark.parametrize(("template", "switch"), [
    (QWEN3, "enable_thinking"), (SMOLLM3_DEFAULT, "enable_thinking"), (DEEPSEEK_V31, "thinking"),
    (GPT_OSS, "reasoning_effort"), (R1_TEMPLATE, None), (ONLY_SETS, None),
    ("{% if x %}{% set thinking = true %}{% endif %}{{ 'on' if thinking }}", "thinking"),  # read: the context's
])
def test_the_think_switch_is_a_variable_the_template_reads_not_one_it_only_sets(template: str,
                                                                                switch: str | None) -> None:
    assert think_switch(template) == switch


def test_think_is_refused_for_a_template_that_only_sets_the_variable(tmp_path: Path) -> None:
    template = tmp_path / "sets.jinja"
    template.write_text(ONLY_SETS)
    result = run_localgen("run", "--chat-template", str(template), "--think", "off", "hi", timeout=60)
    assert (result.returncode, result.out) == (2, "")
    assert f"{template}: --think off: this model's chat template has no switch for thinking" in result.err


def test_a_models_toml_template_refused_for_think_is_named_by_its_entry(home: Path, bundled_model: Path) -> None:
    registry = user_registry(home, f'[models.plain]\npath = "{bundled_model}"\ntemplate = "{{{{ messages }}}}"\n'
                                   f'[models.broken]\npath = "{bundled_model}"\ntemplate = "{{{{ messages }}"\n')
    result = run_localgen("run", "-m", "plain", "--think", "off", "hi", env={"LOCALGEN_HOME": str(home)})
    assert (result.returncode, result.out) == (2, "")
    assert result.err.startswith(f"localgen: error: plain ([models.plain] in {registry}): --think off: this model's "
                                 "chat template has no switch for thinking"), result.err
    result = run_localgen("run", "-m", "broken", "--think", "on", "hi", env={"LOCALGEN_HOME": str(home)})
    assert result.returncode == 1 and result.err.startswith(  # as when it loads: its syntax, not the switch it lacks
        f"localgen: error: broken ([models.broken] in {registry}): the chat template is not valid Jinja"), result.err
