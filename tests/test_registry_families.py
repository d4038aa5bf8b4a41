"""Ollama's bare model names: a family the registry has in one size means that size, NAME:latest means NAME, and a
family of several sizes is refused with a name to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localgen.errors import ModelNotFoundError
from localgen.registry import load_registry
from tests.conftest import REPO_ROOT, CliResult, bundled_model_file, run_localgen, run_localgen_process, user_registry


def localgen(home: Path, *args: str) -> CliResult:
    """The CLI offline, with home as LOCALGEN_HOME."""
    return run_localgen(*args, env={"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", "LOCALGEN_AMX": "0"})


@pytest.mark.parametrize("typed", ["smollm2", "smollm2:latest", "SmolLM2:Latest"])
def test_a_family_in_one_size_runs_that_size(tmp_path: Path, typed: str) -> None:
    """`-m smollm2` was `unknown model 'smollm2'` (did you mean smollm2-135m?), the registry having that size alone."""
    ran = localgen(tmp_path, "run", "-m", typed, "--json", "-n", "1", "hi")
    assert ran.returncode == 0, ran.err
    assert json.loads(ran.out)["model"] == "smollm2-135m"


def test_a_family_in_one_size_is_that_entry_wherever_a_name_is_read(tmp_path: Path) -> None:
    registry = load_registry(tmp_path / "none.toml")
    assert (registry.reference("smollm2").name, registry.reference("smollm2:q8_0").quant) == ("smollm2-135m", "Q8_0")
    assert registry.reference("mistral:latest").name == "mistral-7b"
    assert registry.get("smollm2").name == "smollm2-135m"
    assert registry.reference("phi4").name == "phi4", "phi4-mini is no size of a family phi4"
    shown = localgen(tmp_path, "models", "show", "smollm2")
    assert shown.returncode == 0 and "name:            smollm2-135m" in shown.out, shown.err
    set_to = localgen(tmp_path, "models", "default", "smollm2")
    assert set_to.returncode == 0, set_to.err
    assert 'model = "smollm2-135m"' in (tmp_path / "config" / "models.toml").read_text(), "the entry's name is kept"


@pytest.mark.parametrize("typed", ["llama3.2", "llama3.2:latest"])
def test_a_family_of_several_sizes_is_refused_with_a_name_to_run(tmp_path: Path, typed: str) -> None:
    """It was `unknown model 'llama3.2'` (hint: it comes in sizes: name one of ...), with no command to run."""
    refused = localgen(tmp_path, "run", "-m", typed, "hi")
    assert refused.returncode == 1
    assert refused.err == ("localgen: error: 'llama3.2' comes in 2 sizes: llama3.2-1b, llama3.2-3b (hint: name one "
                           "of them (the smallest: llama3.2-1b))\n"), refused.err


def test_a_size_of_the_user_s_makes_a_family_of_several(tmp_path: Path) -> None:
    user = user_registry(tmp_path, '[models.smollm2-360m]\nrepo = "org/SmolLM2-360M-GGUF"\nquant = "Q8_0"\n')
    with pytest.raises(ModelNotFoundError) as info:
        load_registry(user).get("smollm2")
    assert info.value.message == "'smollm2' comes in 2 sizes: smollm2-135m, smollm2-360m"
    mine = user_registry(tmp_path, '[models.mistral-nemo-12b]\nrepo = "org/nemo-GGUF"\nquant = "Q4_K_M"\n')
    assert load_registry(mine).reference("mistral").name == "mistral-7b", "mistral-nemo-12b is no size of mistral"


def test_a_family_name_never_shadows_an_entry_a_path_or_a_hub_repo(tmp_path: Path) -> None:
    user = user_registry(tmp_path, '[models.smollm2]\nrepo = "org/SmolLM2-1.7B-GGUF"\nquant = "Q8_0"\n')
    registry = load_registry(user)
    assert registry.get("smollm2").repo == "org/SmolLM2-1.7B-GGUF", "the user's entry of that name is meant"
    assert registry.reference("./smollm2").path is not None
    assert (registry.reference("acme/smollm2").repo, registry.reference("acme/smollm2").name) == ("acme/smollm2", None)


def test_a_family_name_that_a_file_or_folder_here_has_is_refused_naming_both(tmp_path: Path) -> None:
    """`-m mistral` with a folder mistral/ here was read as mistral-7b (online: a 4.4 GB download nobody chose), and
    `-m smollm2` with a file smollm2 here ran the registry's model, where both were told the ./ path to use."""
    here = tmp_path / "here"
    (here / "mistral").mkdir(parents=True)
    (here / "mistral" / "my.gguf").symlink_to(bundled_model_file())
    (here / "smollm2").symlink_to(bundled_model_file())
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1", "LOCALGEN_AMX": "0",
           "PYTHONPATH": str(REPO_ROOT)}

    def localgen_here(*args: str) -> subprocess.CompletedProcess[str]:
        """The CLI run in the folder here."""
        return run_localgen_process([sys.executable, "-m", "localgen", *args], cwd=here, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    folder = localgen_here("run", "-m", "mistral", "hi")
    assert (folder.returncode, folder.stderr) == (1, "localgen: error: 'mistral' is both a folder here, not a model "
                                                     "file, and a model family of the registry (hint: for the "
                                                     "registry's model, use mistral-7b; for the folder's model, use "
                                                     "./mistral/my.gguf)\n")
    file = localgen_here("run", "-m", "smollm2", "hi")
    assert (file.returncode, file.stderr) == (1, "localgen: error: 'smollm2' is both a model file here and a model "
                                                 "family of the registry (hint: for the registry's model, use "
                                                 "smollm2-135m; for the file, use ./smollm2)\n")
    ran = localgen_here("run", "-m", "./smollm2", "--json", "-n", "1", "hi")
    assert ran.returncode == 0, ran.stderr
    registry = load_registry(tmp_path / "none.toml")
    assert registry.reference("smollm2", base=here).name == "smollm2", "the folder of a models.toml's default"
    assert registry.reference("mistral", base=tmp_path).name == "mistral-7b"


def test_a_conversation_names_the_entry_a_family_name_meant_and_goes_on_once_it_has_two_sizes(tmp_path: Path) -> None:
    """It stored smollm2 as typed, and once the user's models.toml gave smollm2 a second size, --conversation failed:
    'smollm2' comes in 2 sizes."""
    started = localgen(tmp_path, "run", "--conversation", "fam", "-m", "smollm2:latest", "-n", "1", "hi")
    assert started.returncode == 0, started.err
    saved = json.loads((tmp_path / "data" / "conversations" / "fam.json").read_text())
    assert saved["model"] == "smollm2-135m"
    user_registry(tmp_path, '[models.smollm2-360m]\nrepo = "org/SmolLM2-360M-GGUF"\nquant = "Q8_0"\n')
    went_on = localgen(tmp_path, "run", "--conversation", "fam", "-n", "1", "--json", "again")
    assert went_on.returncode == 0 and json.loads(went_on.out)["model"] == "smollm2-135m", went_on.err
