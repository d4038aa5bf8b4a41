"""A downloaded model given to -m by its path in the Hub cache is printed by the name `models list` gives its file
(run's --json, a conversation's record, the chat's banner, toolbar and /show), as it is given by that name; a file
elsewhere keeps its path. Real processes, the real bundled model, the loopback Hub, the chat in a pseudo-terminal."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hub_server import HubEnv, run_cli

from tests.conftest import bundled_model_file, user_registry
from tests.test_repl import Chat

REPO = "test/Smol-GGUF"


def _pulled_entry(hubenv: HubEnv) -> Path:
    """REPO serving the bundled file as smol-Q4_1.gguf, the models.toml entry mine picking it, pulled: its snapshot
    entry."""
    hubenv.server.add_repo(REPO, {"smol-Q4_1.gguf": bundled_model_file()})
    user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{REPO}"\nquant = "Q4_1"\n')
    pulled = run_cli(hubenv.env, "pull", "mine")
    assert pulled.returncode == 0, pulled.stderr
    return hubenv.snapshot_files(REPO)[0]


def _json(env: dict[str, str], *args: str) -> dict | list:
    """A command's --json record."""
    ran = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, *args, "--json")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_run_of_a_cache_file_by_its_path_names_it_as_models_list_does(hubenv: HubEnv, tmp_path: Path) -> None:
    """`run -m HUB/models--test--Smol-GGUF/snapshots/C/smol-Q4_1.gguf --json` gave the path as its model, and its
    conversation was recorded by that path, where models list and `run -m mine` name the file mine; a copy of the file
    outside the cache is still named by its path."""
    entry = _pulled_entry(hubenv)
    listed = {row["path"]: row["name"] for row in _json(hubenv.env, "models", "list")}
    ran = _json(hubenv.env, "run", "-m", str(entry), "-n", "1", "--conversation", "bypath", "hi")
    by_name = _json(hubenv.env, "run", "-m", "mine", "-n", "1", "hi")
    conversations = {row["name"]: row["model"] for row in _json(hubenv.env, "conversations", "list")}
    assert listed[str(entry)] == ran["model"] == by_name["model"] == conversations["bypath"] == "mine", (
        listed, ran, by_name, conversations)
    outside = tmp_path / "elsewhere" / entry.name
    outside.parent.mkdir()
    os.link(os.path.realpath(entry), outside)  # the same data, outside the cache
    copied = _json(hubenv.env, "run", "-m", str(outside), "-n", "1", "hi")
    assert copied["model"] == str(outside), copied


def test_fit_of_a_cache_file_by_its_path_names_it_as_models_list_does(hubenv: HubEnv, tmp_path: Path) -> None:
    """fit --json gave the path of a downloaded file given by its path as its model, and models show its source as
    local; a file elsewhere keeps its path, and is local."""
    entry = _pulled_entry(hubenv)
    outside = tmp_path / entry.name
    os.link(os.path.realpath(entry), outside)
    assert [_json(hubenv.env, "fit", str(path))["model"] for path in (entry, outside)] == ["mine", str(outside)]
    shown = [_json(hubenv.env, "models", "show", str(path)) for path in (entry, outside)]
    assert [(row["name"], row["source"], row["verified"]) for row in shown] == [
        ("mine", "hub", True), (str(outside), "local", False)], shown


def test_bench_of_a_cache_file_by_its_path_names_it_as_models_list_does(hubenv: HubEnv) -> None:
    """bench's --json gave the path of a downloaded file given by its path as its model, where models list names it
    mine."""
    entry = _pulled_entry(hubenv)
    benched = _json(hubenv.env, "bench", "-m", str(entry), "-p", "8", "-n", "4", "-r", "1")
    assert (benched["model"], benched["model_path"]) == ("mine", str(entry)), benched


def test_chat_with_a_cache_file_by_its_path_names_it_as_models_list_does(hubenv: HubEnv) -> None:
    """The chat's banner and /show named the model by the path it was given as, and its toolbar by the file's name;
    /show said it came from a file of one's own (local)."""
    entry = _pulled_entry(hubenv)
    chat = Chat(hubenv.localgen_home, "-m", str(entry), "--offline", "--no-markdown", "-n", "1", columns=250, cpr=True)
    try:
        assert entry.name not in chat.transcript.getvalue(), chat.transcript.getvalue()  # the banner and toolbar
        chat.command("/show", "model: ")
        said = " ".join(chat.transcript.getvalue().split())
        assert "localgen chat with mine:" in said and "model: mine (hub)" in said, said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def _conversation_model(env: dict[str, str], name: str) -> str:
    """The model a saved conversation records."""
    return next(row["model"] for row in _json(env, "conversations", "list") if row["name"] == name)


def test_a_cache_file_localgen_has_not_verified_keeps_its_path_and_its_conversation_goes_on_offline(
        hubenv: HubEnv) -> None:
    """A file another tool downloaded, given by its path, was recorded as test/Smol-GGUF/smol-Q4_1.gguf, which -m
    refuses offline (localgen has not verified it), so the conversation could not go on."""
    from huggingface_hub import hf_hub_download

    hubenv.server.add_repo(REPO, {"smol-Q4_1.gguf": bundled_model_file()})
    entry = hf_hub_download(REPO, "smol-Q4_1.gguf", cache_dir=str(hubenv.hf_cache))
    ran = _json(hubenv.env, "run", "-m", entry, "-n", "1", "--conversation", "theirs", "hi")
    assert ran["model"] == _conversation_model(hubenv.env, "theirs") == entry, ran
    went_on = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "run", "--conversation", "theirs", "-n", "1", "more")
    assert went_on.returncode == 0 and went_on.stdout.strip(), went_on.stderr


def test_an_older_snapshot_s_file_keeps_its_path_where_its_name_loads_the_newest(hubenv: HubEnv) -> None:
    """A file of an older snapshot, given by its path, was named mine, which loads the newest snapshot's file: its
    conversation went on with that file."""
    entry = _pulled_entry(hubenv)
    older = entry.parent.parent / ("0" * 40) / entry.name
    older.parent.mkdir()
    os.link(os.path.realpath(entry), older)
    ran = _json(hubenv.env, "run", "-m", str(older), "-n", "1", "--conversation", "older", "hi")
    assert ran["model"] == _conversation_model(hubenv.env, "older") == str(older), ran
    went_on = _json(hubenv.env, "run", "--conversation", "older", "-n", "1", "more")
    assert went_on["model_path"] == str(older), went_on


def test_pull_of_a_cache_file_by_its_path_calls_the_file_by_its_name(hubenv: HubEnv) -> None:
    """`pull PATH` of a downloaded file said `mine is a file on this machine`: a registry name called a file."""
    entry = _pulled_entry(hubenv)
    pulled = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "pull", str(entry))
    assert (pulled.returncode, pulled.stderr) == (
        0, f"localgen: {entry.name} is a file on this machine (93.8 MiB): nothing to download\n"), pulled.stderr
