"""One Hub model, one spelling: every command names a repo as the Hub spells it (as its cache folder does), however
it was typed, so that scripts can join what pull, models list, run, models show, fit and models rm say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_server import HubServer, child_env, run_cli

SPELLED = "acme/Tiny-GGUF"  # the Hub's spelling; typed below as acme/tiny-gguf


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model llama.cpp loads and runs (125 KB): the commands here name it, whatever it answers."""
    from gguf_builders import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture
def hub(tmp_path: Path, tiny_gguf: Path) -> tuple[HubServer, dict[str, str]]:
    server = HubServer().start()
    server.add_repo(SPELLED, {"tiny-Q8_0.gguf": tiny_gguf, "tiny-Q4_1.gguf": b"GGUF" + b"\0" * 60_000})
    yield server, child_env(server, tmp_path)
    server.stop()


def _json(env: dict[str, str], *args: str) -> object:
    """A command's --json output, once it succeeded."""
    result = run_cli(env, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_command_names_a_repo_typed_in_another_case_as_the_hub_spells_it(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """run --json said "model": "acme/tiny-gguf:q8_0" (as typed) beside models list's acme/tiny-gguf:Q8_0, and
    models rm's error named the typed spelling where its success line named the cache's."""
    _server, env = hub
    pulled = run_cli(env, "pull", "acme/tiny-gguf:q8_0")
    assert pulled.returncode == 0, pulled.stderr
    assert f"localgen: downloading {SPELLED}/tiny-Q8_0.gguf " in pulled.stderr, pulled.stderr
    assert Path(pulled.stdout.strip()).parents[2].name == "models--acme--Tiny-GGUF", "kept as the Hub spells it"
    listed = [m for m in _json(env, "models", "list", "--json") if m["source"] == "hub"]
    assert [(m["name"], m["repo"]) for m in listed] == [(f"{SPELLED}:Q8_0", SPELLED)]
    ran = _json(env, "run", "--json", "-n", "1", "-m", "hf.co/acme/tiny-gguf:q8_0", "hi")
    assert ran["model"] == f"{SPELLED}:Q8_0" and ran["model_path"] == listed[0]["path"]
    assert _json(env, "models", "show", "--json", "acme/tiny-gguf:q8_0")["name"] == f"{SPELLED}:Q8_0"
    fit = _json(env, "fit", "--json", "--offline", "acme/tiny-gguf:q8_0")
    assert (fit["model"], fit["repo"]) == (f"{SPELLED}:Q8_0", SPELLED)
    again = run_cli(env, "pull", "acme/tiny-gguf:q8_0")
    assert again.stderr.startswith(f"localgen: {SPELLED}:Q8_0 is already downloaded"), again.stderr
    missing = run_cli(env, "models", "rm", "-y", "acme/tiny-gguf:q4_1")
    assert (missing.returncode, missing.stderr) == (1, f"localgen: error: {SPELLED}:Q4_1 is not in the cache (hint: "
                                                       f"of that repo, the cache holds {SPELLED}:Q8_0)\n")
    removed = run_cli(env, "models", "rm", "-y", "acme/tiny-gguf:q8_0")
    assert removed.returncode == 0 and removed.stderr.startswith(f"localgen: removed {SPELLED}:Q8_0:"), removed.stderr


def test_a_repo_the_cache_holds_in_another_spelling_keeps_it_and_gets_no_second_copy(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A folder an older download made as typed stays the one used, and named: the Hub's spelling would download the
    same files again beside it."""
    _server, env = hub
    typed = Path(env["HF_HUB_CACHE"]) / "models--acme--tiny-gguf"
    typed.mkdir(parents=True)
    pulled = run_cli(env, "pull", "acme/TINY-gguf:q8_0")
    assert pulled.returncode == 0 and Path(pulled.stdout.strip()).is_relative_to(typed), pulled.stderr
    assert [p.name for p in typed.parent.iterdir() if p.name.startswith("models--")] == [typed.name]
    listed = [m["name"] for m in _json(env, "models", "list", "--json") if m["source"] == "hub"]
    ran = _json(env, "run", "--json", "-n", "1", "-m", f"{SPELLED}:Q8_0", "hi")
    assert listed == [ran["model"]] == ["acme/tiny-gguf:Q8_0"]


def test_a_conversation_names_a_hub_model_as_every_command_does(hub: tuple[HubServer, dict[str, str]]) -> None:
    """It stored hf.co/acme/TINY-gguf:q8_0 as typed, where run --json named acme/Tiny-GGUF:Q8_0."""
    _server, env = hub
    ran = _json(env, "run", "--json", "--conversation", "tiny", "-n", "1", "-m", "hf.co/acme/TINY-gguf:q8_0", "hi")
    saved = json.loads((Path(env["LOCALGEN_HOME"]) / "data" / "conversations" / "tiny.json").read_text())
    assert saved["model"] == ran["model"] == f"{SPELLED}:Q8_0"
    went_on = _json(env, "run", "--json", "--conversation", "tiny", "-n", "1", "again")
    assert went_on["model"] == f"{SPELLED}:Q8_0"
