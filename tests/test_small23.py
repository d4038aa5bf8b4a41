"""Small leftovers of the command line: --version given a command, run's --system-file help, the closing line of
models rm that keeps a shared file, and models show's load plan for a split model with shards missing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from gguf_builders import write_split
from hub_server import HubServer, make_gguf_bytes, run_cli

from tests.conftest import bundled_model_file, run_localgen

TWIN = "org/twin-GGUF"
SPLIT = "org/split-GGUF"


@pytest.mark.parametrize("args", [["run", "--version"], ["run", "hi", "--version"], ["models", "list", "--version"]])
def test_version_given_a_command_is_hinted_localgen_s_own(args: list[str]) -> None:
    """Was: see `localgen run --help`, which lists no --version."""
    result = run_localgen(*args)
    command = " ".join(word for word in args if word not in ("hi", "--version"))
    assert result.returncode == 2 and result.out == ""
    assert result.err == (f"localgen: error: no such option: --version (hint: `localgen {command}` has no --version: "
                          "use `localgen --version`)\n")


def test_run_s_system_file_help_says_that_dash_reads_stdin_as_run_does_and_chat_s_does_not() -> None:
    """run's --system-file help read as chat's, which refuses -, where README says - is stdin and run takes it."""
    run_help = " ".join(run_localgen("run", "--help").out.split())
    assert "--system-file FILE System prompt read from a text file (- is stdin)." in run_help, run_help
    piped = run_localgen("run", "--system-file", "-", "--print-prompt", "hi", stdin=b"Answer in one word.\n")
    assert piped.returncode == 0, piped.err
    assert "<|im_start|>system\nAnswer in one word.<|im_end|>" in piped.out, piped.out
    chat_help = " ".join(run_localgen("chat", "--help").out.split())
    assert "--system-file FILE System prompt read from a text file. " in chat_help, chat_help


def test_models_rm_of_a_model_whose_file_others_share_names_them_in_its_closing_line(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The closing line said `kept 1 file another model uses`, where the question before it names the models."""
    server, env = hub
    same = make_gguf_bytes("twin", 80_000)
    server.add_repo(TWIN, {f"twin-{quant}.gguf": same for quant in ("Q8_0", "F16", "Q4_0")})
    for quant in ("Q8_0", "F16", "Q4_0"):
        assert run_cli(env, "pull", f"{TWIN}:{quant}").returncode == 0

    def removed(quant: str) -> subprocess.CompletedProcess[str]:
        done = run_cli(env, "models", "rm", "-y", f"{TWIN}:{quant}")
        assert done.returncode == 0, done.stderr
        return done

    assert removed("Q8_0").stderr == (f"localgen: removed {TWIN}:Q8_0: freed 0 B, kept 1 file {TWIN}:F16 and "
                                      f"{TWIN}:Q4_0 use\n")
    assert removed("F16").stderr == f"localgen: removed {TWIN}:F16: freed 0 B, kept 1 file {TWIN}:Q4_0 uses\n"


def _load_plan(env: dict[str, str], reference: str) -> str:
    """The `load plan` field `models show` prints of a model."""
    shown = run_cli(env, "models", "show", reference)
    assert shown.returncode == 0, shown.stderr
    return next(line for line in shown.stdout.splitlines() if line.startswith("load plan:")).split(":", 1)[1].strip()


def _plan_json(env: dict[str, str], reference: str) -> dict[str, object]:
    """What the `plan` of `models show --json` of a model counts (not the memory free, which changes as it runs)."""
    shown = run_cli(env, "models", "show", reference, "--json")
    assert shown.returncode == 0, shown.stderr
    plan = json.loads(shown.stdout)["plan"]
    return {key: plan[key] for key in ("ctx_size", "weights_bytes", "kv_bytes", "ram_bytes", "vram_bytes")}


def test_models_show_of_a_split_model_with_shards_missing_plans_for_the_whole_model_where_their_sizes_are_known(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """Its plan counted the first shard alone (the embeddings, not the layers the others hold): now the whole model's,
    as the Hub's listing that the stopped pull kept (or, online, the Hub) gives the other shards' sizes, as it is
    before the pull; where neither does, the plan says it counts only the shards here."""
    server, env = hub
    (tmp_path / "shards").mkdir()
    shards = write_split(bundled_model_file(), tmp_path / "shards", 3, prefix="m-Q4_1")
    server.add_repo(SPLIT, {path.name: path for path in shards})
    whole, whole_json = _load_plan(env, f"{SPLIT}:Q4_1"), _plan_json(env, f"{SPLIT}:Q4_1")  # as the Hub lists it
    server.corrupt.update((SPLIT, path.name) for path in shards[1:])  # the first shard kept, the others refused
    assert run_cli(env, "pull", f"{SPLIT}:Q4_1").returncode == 1
    offline = {**env, "LOCALGEN_OFFLINE": "1"}
    assert _load_plan(offline, f"{SPLIT}:Q4_1") == whole
    assert _plan_json(offline, f"{SPLIT}:Q4_1") == whole_json
    for listing in (tmp_path / "localgen").rglob("models--org--split-GGUF.json"):
        listing.unlink()  # localgen's listing of the repo gone: nothing here gives the missing shards' sizes
    counted = _load_plan(offline, f"{SPLIT}:Q4_1")
    assert counted.endswith(", counting only the 1 of 3 shards here)") and counted != whole, counted
    small = _load_plan({**offline, "LOCALGEN_MEMORY_LIMIT": "8MiB"}, f"{SPLIT}:Q4_1")
    assert small.startswith("does not fit: ") and small.endswith(" (counting only the 1 of 3 shards here)"), small
    asked = server.count()
    assert _load_plan(env, f"{SPLIT}:Q4_1") == whole  # online: as the Hub lists it now
    assert server.count() == asked + 1, "one listing"
