"""A run whose model file is removed once llama.cpp has loaded it (a models rm beside it) answers all the same, keeping
no prompt cache entry of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

_REMOVED_ONCE_LOADED = """
import os, sys
from localgen import runner
real = runner.load_model
def loaded_then_removed(*args, **kwargs):
    loaded = real(*args, **kwargs)
    os.unlink(loaded.resolved.path)
    return loaded
runner.load_model = loaded_then_removed
sys.argv = ["localgen", *sys.argv[1:]]
from localgen.launcher import main
main()
"""


def test_a_run_whose_model_is_removed_once_loaded_answers_all_the_same(tmp_path: Path) -> None:
    """The run failed with 'internal error: FileNotFoundError' as it opened the prompt cache for the file."""
    from gguf_builders import tiny_model

    model = tiny_model(tmp_path / "tiny.gguf")
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _REMOVED_ONCE_LOADED, "run", "-m", str(model), "-n", "4", "--temp",
                           "0", "hi"], cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stderr == "" and done.stdout, done.stderr
    assert not model.exists()
