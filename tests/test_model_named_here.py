"""A model's name that a file or folder in the current folder has too (a folder smollm2 here and -m smollm2): refused
in one line that says what the file or folder is, and names the way to mean each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen_process

REGISTRY = "for the registry's model, use smollm2-135m"


def _run_here(here: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`localgen run -m smollm2 hi` in the folder here, offline."""
    env = {**os.environ, "LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", "LOCALGEN_AMX": "0",
           "PYTHONPATH": str(REPO_ROOT)}
    return run_localgen_process([sys.executable, "-m", "localgen", "run", "-m", "smollm2", "hi"], cwd=here, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("models", "said"), [
    ((), "'smollm2' is both a folder here, which holds no .gguf file, and a model family of the registry (hint: "
         f"{REGISTRY}; for a model file, pass its path)"),
    (("a.gguf", "b.gguf"), "'smollm2' is both a folder here, not a model file, and a model family of the registry "
                           f"(hint: {REGISTRY}; for one of the folder's 2 models, use ./smollm2/a.gguf, "
                           "./smollm2/b.gguf)"),
], ids=["no-gguf", "two-models"])
def test_a_folder_of_a_family_s_name_is_said_to_be_a_folder_with_both_ways(
        tmp_path: Path, models: tuple[str, ...], said: str) -> None:
    """-m smollm2 with a folder smollm2 here was refused as an unknown model; it is said to be the folder it is."""
    here = tmp_path / "here"
    (here / "smollm2").mkdir(parents=True)
    for name in models:
        (here / "smollm2" / name).symlink_to(bundled_model_file())
    refused = _run_here(here, tmp_path / "home")
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", f"localgen: error: {said}\n")


def test_a_file_of_a_family_s_name_that_is_no_model_is_said_to_be_one_with_both_ways(tmp_path: Path) -> None:
    """-m smollm2 with a text file smollm2 here was refused as an unknown model; it is said to be no model file."""
    here = tmp_path / "here"
    here.mkdir()
    (here / "smollm2").write_text("notes\n")
    refused = _run_here(here, tmp_path / "home")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == ("localgen: error: 'smollm2' is both a file here, not a model file, and a model family "
                              f"of the registry (hint: {REGISTRY}; for the file, use ./smollm2)\n")
