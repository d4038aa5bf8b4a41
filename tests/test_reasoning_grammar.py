"""A grammar or JSON schema with a chat template whose generation prompt opens the <think> block (DeepSeek-R1's
distills, QwQ): the reasoning runs free and the grammar applies from its </think> on, as llama.cpp's server does
where thinking is forced open."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_localgen
from tests.gguf_builders import tiny_family_model

# The bundled model follows the examples: it reasons, closes the block, then answers in JSON.
THINKS_THEN_JSON = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A: <think>One plus one is two.</think>{"answer": 2}
Q: What is 2+2?
A: <think>Two plus two is four.</think>{"answer": 4}
Q: {{ m.content }}
A: {% else %}{{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}<think>{% endif %}
"""
ANSWER_SCHEMA = '{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}'


def test_a_json_schema_applies_after_the_reasoning_the_prompt_opened(tmp_path: Path) -> None:
    template = tmp_path / "think.jinja"
    template.write_text(THINKS_THEN_JSON)
    ask = ("run", "--chat-template", str(template), "--temperature", "0", "--json-schema", ANSWER_SCHEMA,
           "--hide-thinking", "What is 3+3?")
    record = json.loads(run_localgen(*ask, "--json").out)
    assert record["thinking"] == "Three plus three is six.", "the reasoning is the model's own text"
    assert json.loads(record["text"]) == {"answer": 6} and record["finish_reason"] == "stop", record
    cut = run_localgen(*ask, "-n", "8")
    assert cut.returncode == 0 and cut.out == "", "-n counts the reasoning's tokens too"
    assert "the answer ended inside its <think> reasoning" in cut.err


def test_a_grammar_waits_for_the_reasoning_where_the_template_opens_it_with_a_control_token(tmp_path: Path) -> None:
    """DeepSeek-R1's template on a tiny model whose <think> and </think> are control tokens: the reasoning the
    random model writes is its own, not the grammar's one answer."""
    from tests.test_reasoning_turns import R1_SPECIALS, R1_TEMPLATE

    model = tiny_family_model(tmp_path / "r1.gguf", specials=R1_SPECIALS, template=R1_TEMPLATE,
                              bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>", add_bos=True)
    result = run_localgen("run", "-m", str(model), "--grammar", 'root ::= "x"', "--temperature", "0", "-n", "6",
                          "--hide-thinking", "--json", "hi")
    record = json.loads(result.out)
    assert (record["text"], record["finish_reason"]) == ("", "length") and record["thinking"] not in ("", "x"), record
