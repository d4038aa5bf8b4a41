"""The home folder localgen's folders fall back to: made where it is not there yet, said in one line where it cannot
be made or none is known."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import bundled_model_file
from tests.test_folder_variables import FOLDER_SETTINGS, _localgen
from tests.test_nonroot import run_unprivileged_in

# `python -m localgen` as a user with no entry in the password database, where Path.home() knows no home folder
# without HOME
NO_PASSWD_ENTRY = """import pwd, sys
def no_entry(uid): raise KeyError(uid)
pwd.getpwuid = no_entry
sys.argv[0] = "localgen"
from localgen.launcher import main
main()"""


def _run() -> tuple[str, ...]:
    """A two-token run of the bundled model given by its file."""
    return "run", "-m", str(bundled_model_file()), "-n", "2", "hi"


def test_a_home_not_there_yet_is_made_as_the_folders_under_it_are(tmp_path: Path) -> None:
    """HOME=/tmp/fresh in a container or CI, where no login made it: a run makes it with the folders it keeps, a
    listing (`models`, `conversations`, `cache`) makes nothing, `models show` keeps what it read under
    ~/.cache/localgen, and with LOCALGEN_HOME and HF_HOME set HOME is not read."""
    fresh = tmp_path / "fresh"
    made = _localgen(tmp_path, *_run(), HOME=str(fresh), LOCALGEN_OFFLINE="1")
    assert made.returncode == 0 and made.stdout, made.stderr
    assert fresh.is_dir()
    listed = _localgen(tmp_path, "models", HOME=str(tmp_path / "x" / "y"), LOCALGEN_OFFLINE="1")
    assert listed.returncode == 0 and "smollm2-135m" in listed.stdout, listed.stderr
    for listing in ("conversations", "cache"):
        done = _localgen(tmp_path, listing, HOME=str(tmp_path / "x" / "y"), LOCALGEN_OFFLINE="1")
        assert done.returncode == 0, done.stderr
    shown = _localgen(tmp_path, "models", "show", "smollm2-135m", HOME=str(tmp_path / "shown"), LOCALGEN_OFFLINE="1")
    assert shown.returncode == 0 and (tmp_path / "shown" / ".cache" / "localgen").is_dir(), shown.stderr
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


def _without_passwd_entry(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`localgen ARGS` with HOME unset (set again by env) as a user with no entry in the password database."""
    base = {k: v for k, v in os.environ.items() if k not in (*FOLDER_SETTINGS, "HOME")} | {"LOCALGEN_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", NO_PASSWD_ENTRY, *args], env=base | env, cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL, check=False)


def test_no_home_folder_known_is_one_line_and_help_still_shows(tmp_path: Path) -> None:
    """HOME unset for a user the password database does not know, or HOME='~': every command, --help and --version
    too, died with a traceback (Could not determine home directory); help (a command's too) and the version show, a
    command that keeps files under the home folder is refused in one line, and with LOCALGEN_HOME and HF_HOME set it
    runs."""
    unknown = f"localgen: error: no home folder is known: HOME is unset, and user {os.getuid()} has no entry in " \
              "the password database (hint: set HOME to your home folder's absolute path, or set LOCALGEN_HOME and " \
              "HF_HOME to folders of their own)\n"
    relative = "localgen: error: HOME={0} is not an absolute path, so the folders kept under it would follow the " \
               "current folder (hint: set HOME to your home folder's absolute path or unset it, or set LOCALGEN_HOME " \
               "and HF_HOME to folders of their own)\n"
    for home, said in (({}, unknown), ({"HOME": "~"}, relative.format("~")), ({"HOME": "~x"}, relative.format("~x"))):
        for shown in (("--help",), ("--version",), ("run", "--help"), ("models", "list", "-h"), ("help", "pull")):
            done = _without_passwd_entry(tmp_path, *shown, **home)
            assert done.returncode == 0 and done.stdout and not done.stderr, (home, shown, done.stderr)
        for args in (("models",), _run()):
            done = _without_passwd_entry(tmp_path, *args, **home)
            assert (done.returncode, done.stdout, done.stderr) == (1, "", said), (home, args, done.stderr)
    homes = {"LOCALGEN_HOME": str(tmp_path / "lg"), "HF_HOME": str(tmp_path / "hf")}
    done = _without_passwd_entry(tmp_path, *_run(), **homes)
    assert done.returncode == 0 and done.stdout, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["lg"], "nothing made under the current folder"


def test_a_command_s_help_reads_no_variable(tmp_path: Path) -> None:
    """A command's help, as localgen's own, shows whatever the environment holds (a LOCALGEN_DEBUG of no sense), where
    the command itself is refused."""
    for args in (("run", "--help"), ("models", "list", "-h"), ("help", "pull")):
        shown = _localgen(tmp_path, *args, LOCALGEN_DEBUG="maybe")
        assert shown.returncode == 0 and "Usage: localgen" in shown.stdout and not shown.stderr, (args, shown.stderr)
    refused = _localgen(tmp_path, "models", "list", LOCALGEN_DEBUG="maybe")
    assert refused.returncode == 1 and "LOCALGEN_DEBUG" in refused.stderr, refused.stderr


def test_a_command_s_help_invoked_by_click_s_runner_reads_no_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's help asked of the app itself (click's test runner, a script calling it, not localgen's main) shows
    whatever the environment holds, where LOCALGEN_DEBUG=maybe refused it."""
    from typer.testing import CliRunner

    from localgen.cli import app

    monkeypatch.setenv("LOCALGEN_DEBUG", "maybe")
    for args in (["run", "--help"], ["models", "list", "-h"]):
        shown = CliRunner().invoke(app, args)
        assert shown.exit_code == 0 and "Usage: " in shown.output, (args, shown.output)
    assert CliRunner().invoke(app, ["models", "list"]).exit_code == 1
