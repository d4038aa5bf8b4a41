"""The hints of a malformed model reference: one level, naming the form that was meant."""

from __future__ import annotations

import pytest

from localgen.errors import UsageError
from localgen.references import parse_reference


@pytest.mark.parametrize(("text", "hint"), [
    ("", "name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; `localgen models list --all` lists the names"),
    (" ", "name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; `localgen models list --all` lists the names"),
    ("org/repo:", "write ORG/REPO:QUANT, e.g. bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M, or ORG/REPO alone for "
                  "the quant that fits best here"),
    ("qwen2.5-1.5b:", "write NAME:QUANT, e.g. qwen2.5-1.5b:Q8_0"),
])
def test_a_malformed_reference_s_hint_names_the_form_meant_without_nested_parentheses(text: str, hint: str) -> None:
    """An empty reference's hint names `models list --all` without parentheses inside the hint's own, and an empty
    quant after ORG/REPO: is shown ORG/REPO:QUANT, where it was told to write NAME:QUANT."""
    with pytest.raises(UsageError) as refused:
        parse_reference(text)
    assert refused.value.hint == hint
