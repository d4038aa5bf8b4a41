"""Start-up cost: what a one-shot run imports (issue target: run costs little more than a bare llama.cpp script)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest

from tests.conftest import REPO_ROOT

HEAVY = ("importlib.metadata", "llama_cpp.llama", "numpy", "diskcache", "httpx", "requests",
         "huggingface_hub.file_download", "rich.markdown")
RUN = f"""
import json, sys
from localgen.cli import main
sys.argv = ["localgen", "run", "-n", "1", "--temperature", "0", "hi"]
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}), file=sys.stderr)
"""


def test_a_run_of_a_local_model_imports_nothing_it_does_not_use() -> None:
    result = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, result.stderr
    assert report["loaded"] == [], "each costs start-up time a run does not need"


def test_the_llama_cpp_version_is_read_without_a_metadata_scan() -> None:
    from localgen.engine.native import llama_cpp_version

    assert llama_cpp_version() == metadata.version("llama_cpp_python")


HELP = """
import sys
from localgen.cli import main
sys.argv = ["localgen", "--help"]
try:
    main()
except SystemExit:
    pass
print(sorted({m.split(".")[0] for m in sys.modules} & {"rich", "llama_cpp", "huggingface_hub", "jinja2"}),
      file=sys.stderr)
"""


def test_help_imports_neither_rich_nor_the_engine() -> None:
    result = subprocess.run([sys.executable, "-c", HELP], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.stdout.startswith("Usage: localgen [OPTIONS] COMMAND [ARGS]..."), result.stdout
    assert result.stderr.strip().splitlines()[-1] == "[]", result.stderr


BUILDS = """
import sys
import typer.main
from localgen.cli import main
build, built = typer.main.get_command, []
typer.main.get_command = lambda app: built.append(app) or build(app)
sys.argv = ["localgen", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
print(code, len(built), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["run", "-n", "1", "--temperature", "0", "hi"],
                                  ["run", "-n", "1", "--", "smollm2-135m"]])
def test_a_start_builds_the_click_commands_once(args: list[str]) -> None:
    """Typer builds them from the commands' annotations at each get_command (20-40 ms); the usage checks made before
    the command runs, the run itself and its check of a model's name given after -- share one build."""
    result = subprocess.run([sys.executable, "-c", BUILDS, *args], capture_output=True, text=True, timeout=120,
                            cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert result.stderr.strip().splitlines()[-1] == "0 1", result.stderr


def test_a_command_added_after_a_build_gets_the_commands_built_again() -> None:
    import typer

    from localgen.cli_args import click_command

    app = typer.Typer()

    @app.command()
    def first() -> None:
        """The first."""

    assert click_command(app) is click_command(app)

    @app.command()
    def second() -> None:
        """The second."""

    assert set(click_command(app).commands) == {"first", "second"}
