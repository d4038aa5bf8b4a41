"""Start-up cost: what a one-shot run imports (issue target: run costs little more than a bare llama.cpp script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from localgen import __version__
from tests.conftest import REPO_ROOT

HEAVY = ("importlib.metadata", "llama_cpp.llama", "numpy", "diskcache", "httpx", "requests",
         "huggingface_hub.file_download", "rich.markdown", "statistics")
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


def test_version_names_llama_cpp_python_s_without_importing_it() -> None:
    script = HELP.replace('"--help"', '"--version"')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    binding = metadata.version("llama_cpp_python")
    assert result.stdout == f"localgen {__version__} (llama-cpp-python {binding})\n", result.stdout
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


ENDS = """
import atexit, os, sys
from localgen.engine.native import lc
free = lc.llama_model_free
lc.llama_model_free = lambda model: (print("[model freed]", file=sys.stderr, flush=True), free(model))
atexit.register(lambda: print("[atexit ran]", file=sys.stderr, flush=True))
sys.argv = ["localgen", "run", "-n", "4", "--temperature", "0", "--stats", "hi"]
from localgen.cli import main as cli_main
from localgen.launcher import main as launch
(launch if os.environ["ENTRY"] == "launcher" else cli_main)()
"""


@pytest.mark.parametrize("entry", ["launcher", "cli"])
def test_a_run_says_its_notes_before_the_model_is_freed_and_its_entry_point_leaves_the_free_to_exit(
        tmp_path: Path, entry: str) -> None:
    """The notes after the answer come before the free (15-60 ms): the `localgen` entry point leaves it to the
    process's exit (os._exit, after the atexit work and a flush), an in-process caller of cli.main frees as before;
    the answer, its notes and the last-run record are whole either way."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1", "ENTRY": entry}
    result = subprocess.run([sys.executable, "-c", ENDS], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
                            env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "localgen: stopped at the limit of 4 tokens (-n/--max-tokens)", result.stderr
    assert lines[1].startswith("prompt ") and "generated 4 tok" in lines[1], result.stderr
    freed = ["[model freed]"] if entry == "cli" else []
    assert [line for line in lines[2:] if line.startswith("[")] == [*freed, "[atexit ran]"], result.stderr
    answer = json.loads((tmp_path / "data" / "last-run.json").read_text())["turns"][-1]
    assert result.stdout == answer["answer"] + "\n" and result.stdout.strip(), (result.stdout, answer)


END_PROCESS = """
import atexit, sys, threading, time
from localgen.cli_exit import end_process, free_or_leave_to_exit, leave_frees_to_exit
atexit.register(lambda: print("[atexit ran]", file=sys.stderr))
leave_frees_to_exit()
free_or_leave_to_exit(lambda: print("[freed]", file=sys.stderr))
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print("[thread done]", file=sys.stderr))).start()
sys.stdout.write("held in the buffer")
end_process(3)
"""


@pytest.mark.parametrize("other", ["none", "thread"])
def test_end_process_flushes_and_runs_the_atexit_work_and_waits_for_a_thread_that_is_no_daemon(other: str) -> None:
    """end_process: stdout's buffer written, atexit's work done, the exit code kept; a thread that is no daemon is
    waited for as the interpreter's exit waits for it, the frees left to exit done then."""
    result = subprocess.run([sys.executable, "-c", END_PROCESS, other], capture_output=True, text=True, timeout=60,
                            cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    said = ["[freed]", "[thread done]", "[atexit ran]"] if other == "thread" else ["[atexit ran]"]
    assert (result.returncode, result.stdout, result.stderr.splitlines()) == (3, "held in the buffer", said)


LATE_SIGNAL = """
import atexit, os, signal, sys, threading, time
from localgen.cli_exit import end_process
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # as CUDA's or OpenMP's threads are
def late() -> None:
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    time.sleep(0.3)
    print("[atexit done]", file=sys.stderr)
atexit.register(late)
end_process(0)
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_late_signal_while_the_process_ends_changes_nothing(name: str) -> None:
    """A Ctrl-C or SIGTERM once the command is over (while end_process does the atexit work) is ignored by the whole
    process, where a mask of the main thread's let another thread take it: a KeyboardInterrupt in the atexit work,
    or the default action's exit 143."""
    result = subprocess.run([sys.executable, "-c", LATE_SIGNAL, name], capture_output=True, text=True, timeout=60,
                            cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stderr) == (0, "[atexit done]\n"), result

SANDBOX = """
import sys
import localgen.template_sandbox as sandbox
capped, traced = [], sandbox._run_capped
sandbox._run_capped = lambda *args: capped.append("jinja2" in sys.modules) or traced(*args)
sandbox.check_template("{{ messages[0].content }}", model_name="m", hint="h")
print(capped)
"""


def test_the_template_sandbox_is_made_before_its_traced_part() -> None:
    """jinja2's import and the sandbox's making run no template code: traced line by line, as a template's compile
    and render are, they took 40 ms of CPU where they take 22."""
    result = subprocess.run([sys.executable, "-c", SANDBOX], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.stdout.split() == ["[True]"], result.stderr


PARSES = """
import sys, tomllib
from localgen.cli import main
parse, texts = tomllib.loads, []
tomllib.loads = lambda text, **options: texts.append(len(text)) or parse(text, **options)
sys.argv = ["localgen", "run", "-n", "1", "--temperature", "0", "hi"]
try:
    main()
except SystemExit as exc:
    code = exc.code
print(code, len(texts), file=sys.stderr)
"""


def test_a_run_parses_the_built_in_models_toml_once(tmp_path: Path) -> None:
    """The built-in registry is read four times in a run (the prompt's check for a model's name, the quant, the
    model, its settings): its TOML is parsed once (1 ms each time)."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", PARSES], capture_output=True, text=True, timeout=120,
                            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL)
    assert result.stderr.strip().splitlines()[-1] == "0 1", result.stderr
