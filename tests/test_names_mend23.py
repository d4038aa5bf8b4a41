"""A model's one printed name where several registry entries share its repo, where its file's folder is named
snapshots, and where a conversation saved under an older spelling of it is loaded; the completion hint's shell where
run or chat takes a -s. Real processes, the real bundled model, the loopback Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import bundled_model_file, run_localgen, user_registry
from tests.hub_server import HubServer, child_env, run_cli
from tests.test_output_mend23 import FISH_HINT, ZSH_HINT
from tests.test_repl import Chat

SMOL_REPO = "test/Smol-GGUF"


def _pulled(tmp_path: Path, files: tuple[str, ...], registry: str, *models: str) -> dict[str, str]:
    """The offline environment of a cache where SMOL_REPO, serving the bundled file under each of files' names, had
    these models pulled, the user's models.toml being registry."""
    with HubServer() as server:
        server.add_repo(SMOL_REPO, dict.fromkeys(files, bundled_model_file()))
        env = child_env(server, tmp_path)
        user_registry(Path(env["LOCALGEN_HOME"]), registry)
        pulled = run_cli(env, "pull", *models)
        assert pulled.returncode == 0, pulled.stderr
    return {**env, "LOCALGEN_OFFLINE": "1"}


def _listed(env: dict[str, str]) -> dict[str, str]:
    """models list --json's name of each file, by its path."""
    listed = run_cli(env, "models", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["path"]: row["name"] for row in json.loads(listed.stdout)}


def _json(env: dict[str, str], *args: str) -> dict[str, object]:
    """A command's --json record."""
    ran = run_cli(env, *args, "--json")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_a_file_no_entry_picks_by_name_is_named_alike_whichever_entry_of_its_repo_was_typed(tmp_path: Path) -> None:
    """Entries aa and bb (Q8_0) and cc (Q4_1) of one repo: its Q5_0 file, pulled as cc:Q5_0, is aa:Q5_0 to models list
    and models show, and was cc:Q5_0 to `run -m cc:Q5_0 --json` and its conversation record: two names for one file."""
    registry = "".join(f'[models.{name}]\nrepo = "{SMOL_REPO}"\nquant = "{quant}"\n\n'
                       for name, quant in (("aa", "Q8_0"), ("bb", "Q8_0"), ("cc", "Q4_1")))
    env = _pulled(tmp_path, ("smol-Q4_1.gguf", "smol-Q5_0.gguf", "smol-Q8_0.gguf"), registry, "cc:Q5_0")
    names = _listed(env)
    shown = _json(env, "models", "show", f"{SMOL_REPO}:Q5_0")
    ran = _json(env, "run", "-m", "cc:Q5_0", "-n", "1", "--conversation", "c5", "hi")
    conversations = _json(env, "conversations", "list")
    assert names[str(ran["model_path"])] == shown["name"] == ran["model"] == conversations[0]["model"] == "aa:Q5_0", (
        names, shown, ran, conversations)


@pytest.mark.parametrize(("args", "hint"), [
    (["chat", "-s", "pirate", "--install-completion=zsh"], ZSH_HINT),
    (["run", "-s", "pirate", "--install-completion"], ZSH_HINT),
    (["run", "-s", "pirate", "--show-completion=fish"], FISH_HINT)])
def test_completion_s_hint_reads_no_system_prompt_for_a_shell(args: list[str], hint: str) -> None:
    """run's and chat's -s is --system, no shell: `chat -s pirate --install-completion=zsh` was hinted that localgen
    completes in bash, zsh and fish, not pirate, with bash's line; an --install-completion= or --show-completion=
    value is read before any -s."""
    refused = run_localgen(*args, env={"SHELL": "/bin/zsh"})
    assert refused.returncode == 2
    assert refused.err.endswith(f" (hint: {hint})\n"), refused.err


def test_a_repo_s_own_folder_named_snapshots_is_a_file_of_the_repo(tmp_path: Path) -> None:
    """A repo's snapshots/smol-Q4_0.gguf, pulled, is mine:Q4_0 to `models show test/Smol-GGUF:Q4_0` and `run -m
    test/Smol-GGUF:Q4_0 --json` as to models list, where the repo's folder was taken for no file of the cache's and the
    file named by the reference typed."""
    registry = f'[models.mine]\nrepo = "{SMOL_REPO}"\nquant = "Q8_0"\n'
    env = _pulled(tmp_path, ("snapshots/smol-Q4_0.gguf", "smol-Q8_0.gguf"), registry, "mine:Q4_0")
    names = _listed(env)
    shown = _json(env, "models", "show", f"{SMOL_REPO}:Q4_0")
    ran = _json(env, "run", "-m", f"{SMOL_REPO}:Q4_0", "-n", "1", "hi")
    assert names[str(ran["model_path"])] == shown["name"] == ran["model"] == "mine:Q4_0", (names, shown, ran)


def test_load_of_a_conversation_saved_under_another_name_of_the_file_in_use_notes_no_other_model(
        tmp_path: Path) -> None:
    """A conversation saved as smollm2-135m:q4_1, a name of the file now named smollm2-135m, was said on /load to be
    saved with smollm2-135m:q4_1 and go on with smollm2-135m (/model smollm2-135m:q4_1 to switch), the file in use;
    one saved with a model not here (smollm2-135m:Q8_0 offline) still is."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    for name, model in (("spelt", "smollm2-135m:q4_1"), ("other", "smollm2-135m:Q8_0")):
        record = {"format": 1, "name": name, "model": model, "turns": [{"user": "Hi", "answer": "Hello."}]}
        (folder / f"{name}.json").write_text(json.dumps(record))
    chat = Chat(home, "--no-markdown", "-n", "1")
    try:
        chat.command_words("/load spelt", "loaded spelt:")
        chat.command_words("/load other", "(/model smollm2-135m:Q8_0 to switch)")
        said = " ".join(chat.transcript.getvalue().split())
        assert "saved with" not in said.partition("/load spelt")[2].partition("/load other")[0], said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
