"""The management commands as a user coming from Ollama, llama.cpp and llm meets them: fit's name for a registry
model, bench given its model as an argument, the prompt cache's listing on an 80-column terminal, cache's help."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_localgen


def test_fit_names_a_registry_model_as_models_list_does(home: Path) -> None:
    """fit names a registry model by its entry's name, the quant as the Hub spells it, in its header and --json, as
    models list, run and bench name it, however it was typed (another case, a family, :latest)."""
    for typed, named in (("SmolLM2-135M:q4_1", "smollm2-135m:Q4_1"), ("smollm2:latest", "smollm2-135m"),
                         ("SMOLLM2", "smollm2-135m")):
        report = run_localgen("fit", typed, "--json", "--offline")
        assert report.returncode == 0, report.err
        assert json.loads(report.out)["model"] == named, report.out
    table = run_localgen("fit", "-m", "SmolLM2", "--offline")
    assert table.returncode == 0, table.err
    assert table.err.startswith("smollm2-135m: RAM "), table.err
