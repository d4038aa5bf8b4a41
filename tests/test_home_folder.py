"""The home folder localgen's folders fall back to: made where it is not there yet, said in one line where it cannot
be made."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import bundled_model_file
from tests.test_folder_variables import FOLDER_SETTINGS, _localgen
from tests.test_nonroot import run_unprivileged_in


def _run() -> tuple[str, ...]:
    """A two-token run of the bundled model given by its file."""
    return "run", "-m", str(bundled_model_file()), "-n", "2", "hi"


def test_a_home_not_there_yet_is_made_as_the_folders_under_it_are(tmp_path: Path) -> None:
    """HOME=/tmp/fresh in a container or CI, where no login made it: a run makes it with the folders it keeps, a
    reading command (`models`) makes nothing, and with LOCALGEN_HOME and HF_HOME set HOME is not read."""
    fresh = tmp_path / "fresh"
    made = _localgen(tmp_path, *_run(), HOME=str(fresh), LOCALGEN_OFFLINE="1")
    assert made.returncode == 0 and made.stdout, made.stderr
    assert fresh.is_dir()
    listed = _localgen(tmp_path, "models", HOME=str(tmp_path / "x" / "y"), LOCALGEN_OFFLINE="1")
    assert listed.returncode == 0 and "smollm2-135m" in listed.stdout, listed.stderr
    homes = {"LOCALGEN_HOME": str(tmp_path / "lg"), "HF_HOME": str(tmp_path / "hf"), "LOCALGEN_OFFLINE": "1"}
    moved = _localgen(tmp_path, *_run(), HOME=str(tmp_path / "gone"), **homes)
    assert moved.returncode == 0 and moved.stdout, moved.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "gone").exists()


def test_a_home_that_cannot_be_made_is_said_with_a_hint_to_set_localgen_home(tmp_path: Path) -> None:
    """HOME in a folder that may not be written: the folder a run keeps its conversation in cannot be made, said in
    one line naming the folder to check, or LOCALGEN_HOME to set."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    env = {k: v for k, v in os.environ.items() if k not in FOLDER_SETTINGS} | {"HOME": str(locked / "home"),
                                                                                "LOCALGEN_OFFLINE": "1"}
    try:
        done = run_unprivileged_in(env, *_run(), "--conversation", "c")
    finally:
        locked.chmod(0o755)
    assert done.returncode == 1 and not done.stdout, done.stderr
    assert done.stderr == (f"localgen: error: could not create {locked / 'home/.local/share/localgen/conversations'}: "
                           f"Permission denied (hint: check the permissions of {locked}, or set LOCALGEN_HOME to a "
                           "folder you can write to)\n")

