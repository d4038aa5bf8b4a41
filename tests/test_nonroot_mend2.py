"""localgen where file permissions bind, mended further: a moved conversation's own mode, the bits a rewrite keeps,
the input history's mode at a chat's start, models rm beside a repo it cannot read, and the refusals of files that
cannot be written (commands run as test_nonroot runs them: as root without capabilities, or as another user)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.hub_server import HubServer, file_sha256, make_gguf_bytes, run_cli
from tests.test_nonroot import run_unprivileged, run_unprivileged_in
from tests.test_nonroot_mend import OTHER, _two_repos_pulled

ARGS = ("-n", "1", "--temperature", "0", "Hi")


def _home_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a localgen whose LOCALGEN_HOME is tmp_path, offline."""
    return {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}


def _conversation(tmp_path: Path, name: str) -> Path:
    """The file of conversation name under LOCALGEN_HOME tmp_path."""
    return tmp_path / "data" / "conversations" / f"{name}.json"


def test_conversation_moved_over_another_keeps_its_own_mode(tmp_path: Path) -> None:
    """conversations mv --force of a private conversation (600) over one readable by all (644) leaves the moved one
    private, where it took the mode of the file it replaced (644: readable by every user)."""
    env = _home_env(tmp_path)
    for name, mode in (("secret", 0o600), ("public", 0o644)):
        assert run_localgen("run", "--conversation", name, *ARGS, env=env).returncode == 0
        _conversation(tmp_path, name).chmod(mode)
    moved = run_localgen("conversations", "mv", "--force", "secret", "public", env=env)
    assert moved.returncode == 0, moved.err
    assert not _conversation(tmp_path, "secret").exists()
    assert oct(_conversation(tmp_path, "public").stat().st_mode & 0o777) == "0o600"


def test_sudo_rewrite_of_a_users_set_id_files_keeps_no_set_id_nor_write_for_others(tmp_path: Path) -> None:
    """A conversation and the last run's record of another user's (uid 65534) at mode 6777, written again by root (as
    `sudo localgen` is): each new file, root's, gets the permission bits alone, without write for its group or
    others (755), where it kept all twelve bits (-rwsrwsrwx root root)."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    env = _home_env(tmp_path)
    assert run_localgen("run", "--conversation", "notes", *ARGS, env=env).returncode == 0
    assert run_localgen("run", *ARGS, env=env).returncode == 0
    files = (_conversation(tmp_path, "notes"), tmp_path / "data" / "last-run.json")
    for path in files:
        os.chown(path, 65534, 65534)
        path.chmod(0o6777)
    again = [run_localgen("run", "--conversation", "notes", *ARGS, env=env), run_localgen("run", *ARGS, env=env)]
    assert [(done.returncode, done.err) for done in again] == [(0, ""), (0, "")]
    assert {(path.stat().st_uid, oct(path.stat().st_mode & 0o7777)) for path in files} == {(0, "0o755")}


def _history_at(path: Path, mode: int) -> bytes:
    """An input history at path past its bound of entries (a chat's start trims it), at mode; its bytes."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(b"\n# 2026-01-01 00:00:00\n+entry %d\n" % n for n in range(MAX_HISTORY_ENTRIES * 2)))
    path.chmod(mode)
    return path.read_bytes()


def _chat_started_and_left(home: Path) -> None:
    """A chat started in a pseudo-terminal (its prompt drawn: the input history opened), then left with Ctrl-D."""
    import pexpect

    from tests.test_nonroot import spawn_unprivileged_chat
    from tests.test_repl import PROMPT

    chat = spawn_unprivileged_chat(home, "-n", "4")
    chat.expect_exact(PROMPT)
    chat.sendcontrol("d")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0, chat.before


def test_chat_start_keeps_the_input_history_private_and_leaves_a_read_only_one_as_it_is(tmp_path: Path) -> None:
    """A chat's start trims an input history at mode 640 and leaves it private (600), as it holds everything typed,
    and leaves one made read-only (444) as it is, untrimmed, where it made that one 600 (writable), then trimmed
    it."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES

    history = tmp_path / "data" / "history"
    _history_at(history, 0o640)
    _chat_started_and_left(tmp_path)
    assert history.read_bytes().count(b"\n+") == MAX_HISTORY_ENTRIES, "trimmed"
    assert oct(history.stat().st_mode & 0o777) == "0o600"
    before = _history_at(history, 0o444)
    _chat_started_and_left(tmp_path)
    assert history.read_bytes() == before
    assert oct(history.stat().st_mode & 0o777) == "0o444"


def _hub_pulled(hub: tuple[HubServer, dict[str, str]]) -> tuple[dict[str, str], Path, Path]:
    """The loopback Hub's environment once acme/Tiny-GGUF:Q8_0 and acme/Other-GGUF:Q8_0 are pulled, and the cache's
    folders of the two."""
    env, tiny = _two_repos_pulled(hub)
    return env, tiny, tiny.with_name("models--acme--Other-GGUF")


@pytest.mark.parametrize(("place", "mode"), [("repo", 0), ("repo", 0o644), ("commit", 0o644), ("commit", 0)])
def test_rm_beside_another_repo_it_cannot_read_removes_the_model(
        hub: tuple[HubServer, dict[str, str]], place: str, mode: int) -> None:
    """models rm of a model where another repo's folder, or a commit folder of it, may not be read (mode 0, or 644:
    listed but not entered) removes the model, exit 0, the other left as it is, where it failed naming the other
    repo's place (the blobs a model's entries lead to are its own repo's)."""
    env, tiny, other = _hub_pulled(hub)
    walled = other if place == "repo" else next((other / "snapshots").iterdir())
    walled.chmod(mode)
    try:
        removed = run_unprivileged_in(env, "models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0")
    finally:
        walled.chmod(0o755)
    assert removed.returncode == 0, removed.stderr
    assert removed.stderr.startswith("localgen: removed acme/Tiny-GGUF:Q8_0: freed "), removed.stderr
    assert not tiny.exists()
    assert f"{OTHER}:Q8_0" in run_cli(env, "models").stdout


def test_rm_keeps_shared_store_data_another_repo_it_cannot_read_may_use(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """models rm of a model whose blob links to Xet's cache-wide shared store, where another repo linking to the same
    data may not be entered: the model's entry goes, the shared data stays (that repo may use it), where rm
    failed naming that repo (and, passing it over unchecked, would delete data it uses)."""
    from localgen import hub_cache

    _server, env = hub
    cache = Path(env["HF_HUB_CACHE"])
    data = make_gguf_bytes("shared", 30_000)
    store = cache / "blobs" / "ab" / ("ab" + "0" * 62)
    store.parent.mkdir(parents=True)
    store.write_bytes(data)
    sha = file_sha256(data)
    for repo in ("a/one", "b/two"):
        folder = cache / hub_cache.repo_folder(repo)
        (folder / "blobs").mkdir(parents=True)
        (folder / "blobs" / sha).symlink_to(os.path.relpath(store, folder / "blobs"))
        snapshot = folder / "snapshots" / ("1" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "m-Q8_0.gguf").symlink_to(f"../../blobs/{sha}")
    walled = cache / hub_cache.repo_folder("b/two")
    walled.chmod(0)
    try:
        removed = run_unprivileged_in(env, "models", "rm", "--yes", "a/one:Q8_0")
    finally:
        walled.chmod(0o755)
    assert removed.returncode == 0, removed.stderr
    assert not os.path.lexists(cache / hub_cache.repo_folder("a/one") / "snapshots" / ("1" * 40) / "m-Q8_0.gguf")
    assert store.read_bytes() == data


def test_rewritten_conversation_keeps_its_group(tmp_path: Path) -> None:
    """A conversation given another group (65534) at mode 640 keeps that group once a run saves it again (as root,
    who may give a file any group; a user, any group of theirs), where the new file took the process's (0)."""
    if os.geteuid() != 0:
        pytest.skip("giving a file any group needs root")
    env = _home_env(tmp_path)
    assert run_localgen("run", "--conversation", "notes", *ARGS, env=env).returncode == 0
    conversation = _conversation(tmp_path, "notes")
    os.chown(conversation, -1, 65534)
    conversation.chmod(0o640)
    again = run_localgen("run", "--conversation", "notes", *ARGS, env=env)
    assert again.returncode == 0, again.err
    assert conversation.read_text().count('"user": "Hi"') == 2
    assert (conversation.stat().st_gid, oct(conversation.stat().st_mode & 0o777)) == (65534, "0o640")


def test_immutable_conversation_is_refused_with_the_real_error(tmp_path: Path) -> None:
    """A conversation made immutable (chattr +i) at mode 600: run --conversation refuses it before the model loads
    with the error writing it meets (Operation not permitted) and how to see and undo the flag, where it said it was
    read-only (mode 600) with a `chmod u+w` that cannot help."""
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    env = _home_env(tmp_path)
    assert run_localgen("run", "--conversation", "notes", *ARGS, env=env).returncode == 0
    conversation = _conversation(tmp_path, "notes")
    if subprocess.run(["chattr", "+i", str(conversation)], capture_output=True).returncode != 0:
        pytest.skip("this file system, or this user, cannot make a file immutable")
    try:
        continued = run_unprivileged(tmp_path, "run", "--conversation", "notes", *ARGS)
    finally:
        subprocess.run(["chattr", "-i", str(conversation)], check=True)
    assert continued.returncode == 1 and continued.stdout == "", continued.stderr
    assert continued.stderr == f"localgen: error: conversation 'notes' cannot be saved: could not write " \
        f"{conversation}: Operation not permitted (hint: it is kept as it is; `lsattr {conversation}` shows whether " \
        f"it is immutable or append-only, which `chattr -i -a {conversation}` as root undoes)\n"


@pytest.mark.parametrize("file", ["last-run", "models.toml"])
def test_read_only_file_in_a_folder_that_cannot_be_written_names_the_folder(tmp_path: Path, file: str) -> None:
    """The last run's record, or models.toml, made read-only (444) in a folder that may not be written to (555): a
    plain run's warning, and models default's error, name the folder's permissions to check, as that of a
    conversation does, where they said the file was read-only with a `chmod u+w` that cannot help."""
    env = _home_env(tmp_path)
    if file == "last-run":
        assert run_localgen("run", *ARGS, env=env).returncode == 0
        path = tmp_path / "data" / "last-run.json"
    else:
        path = tmp_path / "config" / "models.toml"
        path.parent.mkdir()
        path.write_text("# mine\n")
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        done = run_unprivileged(tmp_path, *(("run", *ARGS) if file == "last-run" else
                                            ("models", "default", "smollm2-135m")))
    finally:
        path.parent.chmod(0o755)
    said = f"could not write {path}: Permission denied ("
    assert said in done.stderr and f"check the permissions of {path.parent}" in done.stderr, done.stderr
    assert "read-only" not in done.stderr, done.stderr
    assert done.returncode == (0 if file == "last-run" else 1)


def test_read_only_verification_record_is_replaced(hub: tuple[HubServer, dict[str, str]]) -> None:
    """A verification record of localgen's own made read-only (444), its file changed since (checked again): a pull
    writes the record anew, unwarned, where it kept it and warned that offline runs would refuse the model."""
    env, tiny, _other = _hub_pulled(hub)
    markers = list((Path(env["LOCALGEN_HOME"]) / "cache" / "verified").iterdir())
    assert markers
    for marker in markers:
        marker.chmod(0o444)
    os.utime(next((tiny / "blobs").iterdir()), ns=(1, 1))  # checked again: its identity changed
    again = run_unprivileged_in(env, "pull", "acme/Tiny-GGUF:Q8_0")
    assert again.returncode == 0, again.stderr
    assert "could not be written" not in again.stderr, again.stderr
    offline = run_unprivileged_in({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "acme/Tiny-GGUF:Q8_0")
    assert offline.returncode == 0, offline.stderr


def test_chat_resuming_a_read_only_conversation_says_at_its_start_it_cannot_be_saved(tmp_path: Path) -> None:
    """chat --resume of a conversation made read-only (444) says at its start that it cannot be saved, naming the
    file and the chmod that lets it be written, as run --conversation does, where it said nothing until its first
    answer's save failed."""
    import pexpect

    from tests.test_nonroot import spawn_unprivileged_chat

    assert run_localgen("run", "--conversation", "notes", *ARGS, env=_home_env(tmp_path)).returncode == 0
    conversation = _conversation(tmp_path, "notes")
    conversation.chmod(0o444)
    chat = spawn_unprivileged_chat(tmp_path, "--resume", "notes", "-n", "4")
    said = chat.expect_exact(["this chat cannot be saved", "Ctrl-D to quit"])
    chat.expect_exact("Ctrl-D to quit" if said == 0 else "\n")
    warning = " ".join(chat.before.split())
    chat.sendcontrol("d")
    chat.expect(pexpect.EOF)
    chat.close()
    assert said == 0, "the start said nothing"
    assert f": could not write {conversation}: it is read-only (mode 444) (it is kept as it is; `chmod u+w " \
        f"{conversation}` lets localgen write it)" in warning, warning
    assert chat.exitstatus == 0


def test_conversation_made_read_only_while_a_run_answers_says_the_exchange_is_saved_nowhere(tmp_path: Path) -> None:
    """A conversation made read-only (444) after run --conversation checked it, while the run waits for a pipe it
    attaches: the answer is printed, then the error says the file is read-only and that the exchange is saved
    nowhere, the answer printed its only copy, exit 1, where it said only that the file could not be written."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from tests.test_nonroot import unprivileged

    assert run_localgen("run", "--conversation", "notes", *ARGS, env=_home_env(tmp_path)).returncode == 0
    conversation = _conversation(tmp_path, "notes")
    saved = conversation.read_bytes()
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    env = {**os.environ, **_home_env(tmp_path)}
    run = subprocess.Popen(unprivileged([sys.executable, "-m", "localgen", "run", "--conversation", "notes", "-f",
                                         str(pipe), *ARGS]), env=env, cwd=REPO_ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    with open(pipe, "w") as writer:  # opened once the run reads it: past its check of the conversation
        conversation.chmod(0o444)
        writer.write("some notes\n")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1 and out.strip(), err
    assert err == f"localgen: error: could not write {conversation}: it is read-only (mode 444); this exchange is " \
        f"saved nowhere (hint: it is kept as it is; `chmod u+w {conversation}` lets localgen write it; the answer " \
        "printed is its only copy)\n"
    assert conversation.read_bytes() == saved
