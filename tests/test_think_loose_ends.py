"""Reasoning at its edges: the variable a chat template only sets (no think switch), the origin of a models.toml
template a --think is refused for."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen.think_switch import think_switch
from tests.conftest import run_localgen, user_registry
from tests.test_reasoning_turns import R1_TEMPLATE
from tests.test_think_switch import DEEPSEEK_V31, GPT_OSS, QWEN3

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
