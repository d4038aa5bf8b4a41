"""The hints of a malformed model reference: one level, naming the form that was meant."""

from __future__ import annotations

import pytest

from localgen.errors import UsageError
from localgen.references import parse_reference


@pytest.mark.parametrize(("text", "hint"), [
    ("", "name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; `localgen models list --all` lists the names"),
    (" ", "name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; `localgen models list --all` lists the names"),
    ("org/repo:", "write org/repo:QUANT, e.g. org/repo:Q4_K_M, or org/repo alone for the quant that fits best here"),
    ("qwen2.5-1.5b:", "write qwen2.5-1.5b:QUANT, e.g. qwen2.5-1.5b:Q4_K_M"),
    ("org/repo/m.Q4_0.gguf:", "a file takes no quant: drop the ':', writing org/repo/m.Q4_0.gguf alone"),
    ("m.gguf:", "a file takes no quant: drop the ':', writing m.gguf alone"),
    ("org/repo:" + "q" * 200, "a quant is a tag of at most 96 characters, e.g. Q8_0: write org/repo:QUANT, e.g. "
                              "org/repo:Q4_K_M, or org/repo alone for the quant that fits best here"),
    ("qwen2.5-1.5b:" + "q" * 200, "a quant is a tag of at most 96 characters, e.g. Q8_0: write qwen2.5-1.5b:QUANT, "
                                  "e.g. qwen2.5-1.5b:Q4_K_M"),
    ("org/repo/m.gguf:" + "q" * 200, "a file takes no quant: drop the ':', writing org/repo/m.gguf alone"),
])
def test_a_malformed_reference_s_hint_names_the_form_meant_without_nested_parentheses(text: str, hint: str) -> None:
    """An empty reference's hint names `models list --all` without parentheses inside the hint's own; an empty or
    overlong quant after a name or ORG/REPO is shown written after what was typed, and after a file is to be
    dropped."""
    with pytest.raises(UsageError) as refused:
        parse_reference(text)
    assert refused.value.hint == hint
