"""localgen where file permissions bind, more of it: places of the Hugging Face cache a listing cannot read, files
whose mode a rewrite keeps, a prompt cache folder that cannot be listed, and files in a folder where only their owner
may replace them (commands run as test_nonroot runs them: as root without capabilities, or as another user)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_localgen
from tests.hub_server import HubServer, make_gguf_bytes, run_cli
from tests.test_nonroot import PROMPT_CACHED, run_unprivileged, run_unprivileged_in, unprivileged

OTHER = "acme/Other-GGUF"


def _two_repos_pulled(hub: tuple[HubServer, dict[str, str]]) -> tuple[dict[str, str], Path]:
    """The loopback Hub's environment once acme/Tiny-GGUF:Q8_0 and acme/Other-GGUF:Q8_0 are pulled, and the cache's
    folder of the first (to take the permissions of a place in it away)."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny.Q8_0.gguf": make_gguf_bytes("q8")})
    server.add_repo(OTHER, {"other.Q8_0.gguf": make_gguf_bytes("q8", 70_000)})
    for reference in ("acme/Tiny-GGUF:Q8_0", f"{OTHER}:Q8_0"):
        pulled = run_cli(env, "pull", reference)
        assert pulled.returncode == 0, pulled.stderr
    return env, Path(env["HF_HUB_CACHE"]) / "models--acme--Tiny-GGUF"


def _unread_warning(place: Path) -> str:
    """A listing's warning of a place of the Hugging Face cache it cannot read."""
    return f"localgen: warning: cannot read the Hugging Face cache ({place}): Permission denied; the models there " \
        "are not listed (hint: set HF_HUB_CACHE (or HF_HOME) to a folder you can write to, or fix its permissions)\n"


def _listings_and_completion(env: dict[str, str], walled: Path) -> list[tuple[str, str, int]]:
    """stdout, stderr and exit code of `models`, `models --all` and the shell's completion of `run -m `, walled's
    permissions taken away as they run."""
    completion = {**env, "_LOCALGEN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "localgen run -m "}
    walled.chmod(0)
    try:
        done = [run_unprivileged_in(env, "models"), run_unprivileged_in(env, "models", "--all"),
                run_unprivileged_in(completion)]
    finally:
        walled.chmod(0o755)
    return [(command.stdout, command.stderr, command.returncode) for command in done]


@pytest.mark.parametrize("place", ["repo", "blobs"])
def test_listing_where_a_repo_or_its_blobs_cannot_be_entered_warns_and_lists_the_rest(
        hub: tuple[HubServer, dict[str, str]], place: str) -> None:
    """A repo folder of the Hugging Face cache (models--ORG--NAME), or its blobs, that may not be entered: `models` and
    `models --all` warn that it cannot be read, naming it, and list the rest (the bundled model, the other repo's),
    exit 0, where both failed, exit 1; the completion of -m offers the rest, where it offered nothing."""
    env, repo_folder = _two_repos_pulled(hub)
    walled = repo_folder if place == "repo" else repo_folder / "blobs"
    (listed, listed_warning, listed_code), (every, every_warning, every_code), (offered, _, offered_code) = \
        _listings_and_completion(env, walled)
    assert (listed_code, every_code, offered_code) == (0, 0, 0), listed_warning + every_warning
    assert listed_warning == every_warning == _unread_warning(walled)
    for stdout in (listed, every, offered):
        assert "smollm2-135m" in stdout and f"{OTHER}:Q8_0" in stdout, stdout
        assert "Tiny-GGUF" not in stdout, stdout


def test_listing_where_the_default_models_snapshots_cannot_be_entered_warns_and_lists_the_rest(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The default model's repo (models default ORG/REPO:QUANT) whose snapshots folder may not be entered: `models`
    and `models --all` warn that it cannot be read and list the rest, exit 0, where both failed, exit 1."""
    env, repo_folder = _two_repos_pulled(hub)
    made_default = run_cli(env, "models", "default", "acme/Tiny-GGUF:Q8_0")
    assert made_default.returncode == 0, made_default.stderr
    snapshots = repo_folder / "snapshots"
    (listed, listed_warning, listed_code), (every, every_warning, every_code), _ = \
        _listings_and_completion(env, snapshots)
    assert (listed_code, every_code) == (0, 0), listed_warning + every_warning
    assert listed_warning == every_warning == _unread_warning(snapshots)
    for stdout in (listed, every):
        assert "smollm2-135m" in stdout and f"{OTHER}:Q8_0" in stdout, stdout


@pytest.mark.parametrize("default", [False, True], ids=["other", "default"])
def test_rm_of_a_model_beside_a_repo_whose_snapshots_cannot_be_entered_removes_it(
        hub: tuple[HubServer, dict[str, str]], default: bool) -> None:
    """models rm of a model where another repo's snapshots folder may not be entered (that of the default model too)
    removes it, exit 0, where it failed saying the other repo's folder could not be used, and nothing was removed."""
    env, repo_folder = _two_repos_pulled(hub)
    if default:
        assert run_cli(env, "models", "default", "acme/Tiny-GGUF:Q8_0").returncode == 0
    snapshots = repo_folder / "snapshots"
    snapshots.chmod(0)
    try:
        removed = run_unprivileged_in(env, "models", "rm", "--yes", f"{OTHER}:Q8_0")
    finally:
        snapshots.chmod(0o755)
    assert removed.returncode == 0, removed.stderr
    assert removed.stderr.startswith(f"localgen: removed {OTHER}:Q8_0: freed "), removed.stderr
    listed = run_cli(env, "models")
    assert "acme/Tiny-GGUF:Q8_0" in listed.stdout and OTHER not in listed.stdout, listed.stdout


def test_listing_where_a_commit_folder_cannot_be_read_warns_and_lists_the_rest(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A snapshot's commit folder (snapshots/COMMIT) that may not be read: `models` and `models --all` warn that it
    cannot be read, naming it, and list the rest, exit 0, where its models were passed over unsaid; models rm of its
    model says it cannot be used, where it said the model was not in the cache."""
    env, repo_folder = _two_repos_pulled(hub)
    (commit,) = (repo_folder / "snapshots").iterdir()
    (listed, listed_warning, listed_code), (every, every_warning, every_code), (offered, _, _) = \
        _listings_and_completion(env, commit)
    assert (listed_code, every_code) == (0, 0), listed_warning + every_warning
    assert listed_warning == every_warning == _unread_warning(commit)
    for stdout in (listed, every, offered):
        assert "smollm2-135m" in stdout and f"{OTHER}:Q8_0" in stdout, stdout
    commit.chmod(0)
    try:
        removed = run_unprivileged_in(env, "models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0")
    finally:
        commit.chmod(0o755)
    assert removed.returncode == 1
    assert removed.stderr.startswith(f"localgen: error: cannot use the Hugging Face cache ({commit}): Permission "
                                     "denied"), removed.stderr


def test_model_not_downloaded_beside_a_repo_whose_snapshots_cannot_be_entered_is_said_not_downloaded(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A quant not downloaded of a repo whose other quant is, where another repo's snapshots folder may not be
    entered: models show and an offline run say it is not downloaded, with the quants there are, where they said the
    other repo's folder could not be used."""
    env, repo_folder = _two_repos_pulled(hub)
    snapshots = repo_folder / "snapshots"
    snapshots.chmod(0)
    try:
        done = [run_unprivileged_in(env, "models", "show", f"{OTHER}:Q4_K_M"),
                run_unprivileged_in({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", f"{OTHER}:Q4_K_M", "Hi")]
    finally:
        snapshots.chmod(0o755)
    for command in done:
        assert command.returncode == 1
        assert command.stderr.startswith(f"localgen: error: model '{OTHER}:Q4_K_M' is not downloaded, and {OTHER} "), \
            command.stderr
        assert "quants in this repo: Q8_0" in command.stderr


def _home_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a localgen whose LOCALGEN_HOME is tmp_path, offline."""
    return {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}


def test_rewritten_conversation_last_run_and_history_keep_the_mode_the_user_gave(tmp_path: Path) -> None:
    """A conversation, the last run's record and the chat's input history at mode 640 (or any mode the user set)
    keep it once localgen writes them again (the history's trim; a chat's start makes it private first), where the
    rename of the new file made them 600."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES, check_and_trim_history

    env = _home_env(tmp_path)
    args = ("-n", "1", "--temperature", "0", "Hi")
    assert run_localgen("run", "--conversation", "notes", *args, env=env).returncode == 0
    assert run_localgen("run", *args, env=env).returncode == 0
    conversation, last_run = tmp_path / "data" / "conversations" / "notes.json", tmp_path / "data" / "last-run.json"
    history = tmp_path / "history"
    history.write_bytes(b"".join(b"\n# 2026-01-01 00:00:00\n+entry %d\n" % n for n in range(MAX_HISTORY_ENTRIES * 2)))
    for path in (conversation, last_run, history):
        path.chmod(0o640)
    again = [run_localgen("run", "--conversation", "notes", *args, env=env), run_localgen("run", *args, env=env)]
    assert [done.returncode for done in again] == [0, 0], [done.err for done in again]
    check_and_trim_history(history)
    assert history.read_bytes().count(b"\n+") == MAX_HISTORY_ENTRIES, "trimmed"
    assert conversation.read_text().count('"user": "Hi"') == 2, "saved again"
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in (conversation, last_run, history)} == \
        {"notes.json": "0o640", "last-run.json": "0o640", "history": "0o640"}


def test_read_only_conversation_and_last_run_are_kept_as_they_are(tmp_path: Path) -> None:
    """A conversation made read-only (mode 444) is refused by run --conversation before the model loads, saying so
    with the chmod that lets it be written, and the last run's record at 444 is not kept (a warning, the answer
    given), both files left as they were, where the rename replaced each with a file of mode 600."""
    env = _home_env(tmp_path)
    args = ("-n", "1", "--temperature", "0", "Hi")
    assert run_localgen("run", "--conversation", "notes", *args, env=env).returncode == 0
    assert run_localgen("run", *args, env=env).returncode == 0
    conversation, last_run = tmp_path / "data" / "conversations" / "notes.json", tmp_path / "data" / "last-run.json"
    before = {path: path.read_bytes() for path in (conversation, last_run)}
    for path in before:
        path.chmod(0o444)
    continued = run_unprivileged(tmp_path, "run", "--conversation", "notes", *args)
    plain = run_unprivileged(tmp_path, "run", *args)
    assert continued.returncode == 1 and continued.stdout == "", continued.stderr
    assert continued.stderr == f"localgen: error: conversation 'notes' cannot be saved: could not write " \
        f"{conversation}: it is read-only (mode 444) (hint: it is kept as it is; `chmod u+w {conversation}` lets " \
        "localgen write it)\n"
    assert plain.returncode == 0 and plain.stdout.strip(), plain.stderr
    assert f"this run is not kept for `localgen run --continue`: could not write {last_run}: it is read-only (mode " \
        "444)" in plain.stderr
    assert {path: path.read_bytes() for path in before} == before
    assert {oct(path.stat().st_mode & 0o777) for path in before} == {"0o444"}


def test_conversation_of_another_user_in_a_sticky_folder_is_refused_before_it_answers(tmp_path: Path) -> None:
    """A conversation another user owns (uid 65534), writable by all (mode 666), in a sticky folder (mode 1777, as
    /tmp is) of another user's: run --conversation refuses it before the model loads, saying only its owner may
    replace it there, where it answered and then failed to save the exchange (exit 1)."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    env = _home_env(tmp_path)
    args = ("-n", "1", "--temperature", "0", "Hi")
    assert run_localgen("run", "--conversation", "notes", *args, env=env).returncode == 0
    folder = tmp_path / "data" / "conversations"
    conversation = folder / "notes.json"
    saved = conversation.read_bytes()
    for path in (conversation, folder):
        os.chown(path, 65534, 65534)
    conversation.chmod(0o666)
    folder.chmod(0o1777)
    try:
        continued = run_unprivileged(tmp_path, "run", "--conversation", "notes", *args)
        kept = conversation.read_bytes()
        as_root = run_localgen("run", "--conversation", "notes", *args, env=env) if os.geteuid() == 0 else None
    finally:
        folder.chmod(0o700)
    assert as_root is None or as_root.returncode == 0, "root, who may replace any file there, saves it"
    assert continued.returncode == 1 and continued.stdout == "", continued.stderr
    assert continued.stderr == f"localgen: error: conversation 'notes' cannot be saved: could not write " \
        f"{conversation}: it is another user's (uid 65534), in a folder where only a file's owner may replace it " \
        "(sticky, as /tmp is) (hint: it is kept as it is; copy it to a name of your own, or set LOCALGEN_HOME to a " \
        "folder of your own)\n"
    assert kept == saved


def test_prompt_cache_folder_that_cannot_be_listed_is_warned_of_once_and_written_no_more(tmp_path: Path) -> None:
    """A prompt cache folder that may be written to but not listed (mode 300): a run of a long prompt answers and
    warns, once its answer is out, that the prompt cache is not used, with the switch that turns it off, and writes no
    entry it could never find nor evict, where each run wrote its entry again, unwarned."""
    document = tmp_path / "doc.txt"
    document.write_text(PROMPT_CACHED)
    folder = tmp_path / "cache" / "prompts"
    folder.mkdir(parents=True)
    folder.chmod(0o300)
    args = ("run", "-f", str(document), "-n", "2", "--temperature", "0", "Summarize.")
    try:
        done = [run_unprivileged(tmp_path, *args), run_unprivileged(tmp_path, *args)]
        off = run_unprivileged(tmp_path, *args, LOCALGEN_PROMPT_CACHE_BYTES="0")
    finally:
        folder.chmod(0o755)
    for run in done:
        assert run.returncode == 0 and run.stdout.strip(), run.stderr
        assert run.stderr == f"localgen: warning: the prompt cache is not used: {folder} cannot be listed " \
            f"(Permission denied) (check the permissions of {folder}, or set LOCALGEN_HOME to a folder you can write " \
            "to; LOCALGEN_PROMPT_CACHE_BYTES=0 turns the prompt cache off, and warns no more)\n"
    assert off.returncode == 0 and off.stderr == "", off.stderr
    assert not list(folder.iterdir()), "no entry written"


def test_moved_conversation_keeps_its_mode(tmp_path: Path) -> None:
    """conversations mv of a conversation at mode 640 (or 444) leaves it at that mode under its new name, where the
    file written there was made 600."""
    env = _home_env(tmp_path)
    for name, mode in (("notes", 0o640), ("kept", 0o444)):
        assert run_localgen("run", "--conversation", name, "-n", "1", "Hi", env=env).returncode == 0
        (tmp_path / "data" / "conversations" / f"{name}.json").chmod(mode)
        moved = run_localgen("conversations", "mv", name, f"{name}-2", env=env)
        assert moved.returncode == 0, moved.err
        assert oct((tmp_path / "data" / "conversations" / f"{name}-2.json").stat().st_mode & 0o777) == oct(mode)


def test_another_users_files_in_a_folder_of_ones_own_are_written_again(tmp_path: Path) -> None:
    """A conversation and the last run's record another user owns (as `sudo localgen` leaves them: uid 65534 here,
    mode 644) in a folder of the user's own, which a rename may replace: run --conversation saves the exchange and a
    plain run keeps its record, each file's mode kept, where both were refused as another user's the user may not
    write."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    env = _home_env(tmp_path)
    args = ("-n", "1", "--temperature", "0", "Hi")
    assert run_localgen("run", "--conversation", "notes", *args, env=env).returncode == 0
    assert run_localgen("run", *args, env=env).returncode == 0
    conversation, last_run = tmp_path / "data" / "conversations" / "notes.json", tmp_path / "data" / "last-run.json"
    for path in (conversation, last_run):
        os.chown(path, 65534, 65534)
        path.chmod(0o644)
    done = [run_unprivileged(tmp_path, "run", "--conversation", "notes", *args),
            run_unprivileged(tmp_path, "run", *args)]
    assert [(run.returncode, run.stderr) for run in done] == [(0, ""), (0, "")]
    assert conversation.read_text().count('"user": "Hi"') == 2
    assert {(path.stat().st_uid, oct(path.stat().st_mode & 0o777)) for path in (conversation, last_run)} == \
        {(os.geteuid(), "0o644")}


def test_rm_stopped_part_way_by_a_folder_it_cannot_write_says_the_data_is_deleted(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """models rm whose snapshot's commit folder may not be written to (mode 555): it deletes the model's data, then
    fails on the link to it, saying so, that the data is deleted already, and which folder's permissions to check,
    where it named the link alone with the Hugging Face cache folder to check, as if nothing had gone; once that
    folder is writable again, the same command removes the rest."""
    env, repo_folder = _two_repos_pulled(hub)
    (commit,) = (repo_folder / "snapshots").iterdir()
    commit.chmod(0o555)
    try:
        stopped = run_unprivileged_in(env, "models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0")
    finally:
        commit.chmod(0o755)
    assert stopped.returncode == 1
    assert stopped.stderr == f"localgen: error: could not delete {commit / 'tiny.Q8_0.gguf'} (its data is deleted " \
        f"already): Permission denied (hint: check the permissions of {commit}, then run the command again)\n"
    again = run_unprivileged_in(env, "models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0")
    assert again.returncode == 0, again.stderr
    assert not repo_folder.exists()


def test_read_only_models_toml_and_history_are_kept_as_they_are(tmp_path: Path) -> None:
    """models default with a models.toml made read-only (mode 444) says so and leaves it as it is, exit 1, and a chat's
    start does not trim an input history made read-only, where both were replaced (the history by a file of mode
    600)."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES

    config = tmp_path / "config"
    config.mkdir()
    toml = config / "models.toml"
    toml.write_text("# mine\n")
    history = tmp_path / "history"
    history.write_bytes(b"".join(b"\n# 2026-01-01 00:00:00\n+entry %d\n" % n for n in range(MAX_HISTORY_ENTRIES * 2)))
    before = {path: path.read_bytes() for path in (toml, history)}
    for path in before:
        path.chmod(0o444)
    made_default = run_unprivileged(tmp_path, "models", "default", "smollm2-135m")
    trim = f"from localgen.history_bound import check_and_trim_history; check_and_trim_history(__import__('pathlib')" \
        f".Path({str(history)!r}))"
    trimmed = subprocess.run(unprivileged([sys.executable, "-c", trim]), capture_output=True, text=True, timeout=60,
                             cwd=REPO_ROOT)
    assert made_default.returncode == 1
    assert made_default.stderr == f"localgen: error: could not write {toml}: it is read-only (mode 444) (hint: it is " \
        f"kept as it is; `chmod u+w {toml}` lets localgen write it)\n"
    assert trimmed.returncode == 0, trimmed.stderr
    assert {path: path.read_bytes() for path in before} == before
    assert {oct(path.stat().st_mode & 0o777) for path in before} == {"0o444"}
