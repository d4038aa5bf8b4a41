"""localgen where file permissions bind: folders and files of its own that may not be read, entered or written.

As root, permissions never bind, so the command runs as root without its capabilities (setpriv), which file
permissions bind as they bind any other user (uid 65534 could not reach an interpreter installed under /root);
as another user, it runs as that user.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.conftest import REPO_ROOT, run_localgen, seed_bundled_verified
from tests.hub_server import HubServer, make_gguf_bytes, run_cli
from tests.test_repl import TIMEOUT, _env

COLUMNS = 400  # a chat's terminal as wide as a path under pytest's temporary folder, and its warning, on a line
PROMPT_CACHED = "The quick brown fox. " * 60  # 336 tokens as run here: past the 256 new ones a prompt cache entry takes


def unprivileged(command: list[str]) -> list[str]:
    """command, run where file permissions bind: as is for a user other than root, else under setpriv without
    any capability (skipped where setpriv is not installed)."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed: as root, file permissions never bind")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]


def run_unprivileged(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m localgen ARGS` offline with LOCALGEN_HOME home, where file permissions bind."""
    return run_unprivileged_in({**os.environ, "LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", **env}, *args)


def run_unprivileged_in(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m localgen ARGS` with env as its whole environment, where file permissions bind."""
    seed_bundled_verified(env)
    return subprocess.run(unprivileged([sys.executable, "-m", "localgen", *args]), env=env, text=True,
                          capture_output=True, timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)


def spawn_unprivileged_chat(home: Path, *args: str) -> pexpect.spawn:
    """`localgen chat ARGS` offline in a pty with LOCALGEN_HOME home, where file permissions bind."""
    command = unprivileged([sys.executable, "-m", "localgen", "chat", *args])
    env = {**_env(home, columns=COLUMNS), "LOCALGEN_OFFLINE": "1"}
    seed_bundled_verified(env)
    return pexpect.spawn(command[0], command[1:], env=env, cwd=str(REPO_ROOT), encoding="utf-8",
                         codec_errors="replace", timeout=TIMEOUT, dimensions=(30, COLUMNS))


def test_permissions_bind_on_the_command(tmp_path: Path) -> None:
    """The commands these tests run cannot read a file its mode forbids them (else no test here could fail)."""
    secret = tmp_path / "secret"
    secret.write_text("x")
    secret.chmod(0)
    done = subprocess.run(unprivileged([sys.executable, "-c", f"open({str(secret)!r})"]), capture_output=True,
                          text=True, timeout=60)
    assert "PermissionError" in done.stderr


def test_config_folder_that_cannot_be_entered_is_said_not_an_internal_error(tmp_path: Path) -> None:
    """A config folder that may not be entered: its models.toml cannot be read, said so, where whether it was there
    was an internal error (PermissionError)."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "models.toml").write_text("")
    config.chmod(0)
    try:
        done = run_unprivileged(tmp_path, "models")
    finally:
        config.chmod(0o755)
    assert done.returncode == 1
    assert f"{config / 'models.toml'}: cannot be read (Permission denied)" in done.stderr
    assert "check the permissions of its folder" in done.stderr
    assert "internal error" not in done.stderr


def test_chat_whose_data_folder_cannot_be_entered_says_at_its_start_it_cannot_be_saved(tmp_path: Path) -> None:
    """A data folder that may not be entered: the chat starts, saying it cannot be saved and why, where its start
    was an internal error (PermissionError) looking for a file in the way of the conversations folder."""
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0)
    try:
        chat = spawn_unprivileged_chat(tmp_path, "-n", "4")
        said = chat.expect_exact(["this chat cannot be saved", "internal error"])
        chat.expect_exact("Ctrl-D to quit")
        warning = chat.before
        chat.sendcontrol("d")
        chat.expect(pexpect.EOF)
        chat.close()
    finally:
        data.chmod(0o755)
    assert said == 0, warning
    assert f": could not create {data / 'conversations'}: Permission denied" in warning
    assert chat.exitstatus == 0


def test_conversation_in_a_folder_that_cannot_be_entered_is_said_unreadable_not_missing(tmp_path: Path) -> None:
    """A conversations folder that may not be entered: show, rm and --conversation say its file cannot be read
    (Permission denied), where show and rm said no conversation of that name was saved and --conversation went on to
    start it, failing to make its lock."""
    folder = tmp_path / "data" / "conversations"
    folder.mkdir(parents=True)
    (folder / "notes.json").write_text("{}")
    folder.chmod(0)
    try:
        done = [run_unprivileged(tmp_path, "conversations", "show", "notes"),
                run_unprivileged(tmp_path, "conversations", "rm", "--yes", "notes"),
                run_unprivileged(tmp_path, "run", "--conversation", "notes", "-n", "1", "Hi")]
    finally:
        folder.chmod(0o700)
    for command in done:
        assert command.returncode == 1, command.stderr
        assert f"cannot read {folder / 'notes.json'}: Permission denied" in command.stderr
        assert "check the permissions of its folder" in command.stderr
    assert (folder / "notes.json").read_text() == "{}"


def test_pull_of_a_download_that_cannot_be_read_says_so_and_keeps_it_verified(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """Pulling again a verified download its mode forbids reading: it cannot be read (Permission denied), where the
    hint said the Hub's own file is damaged and downloading it again would not help, and the download stays verified
    for when it can be read again."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny.Q8_0.gguf": make_gguf_bytes("q8")})
    first = run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0")
    assert first.returncode == 0, first.stderr
    blob = Path(first.stdout.strip()).resolve()
    blob.chmod(0)
    try:
        again = run_unprivileged_in(env, "pull", "acme/Tiny-GGUF:Q8_0")
    finally:
        blob.chmod(0o644)
    assert again.returncode == 1
    assert "tiny.Q8_0.gguf: cannot be read (Permission denied)" in again.stderr
    assert "Hub's checksum" not in again.stderr
    listed = run_cli(env, "models")
    assert "\thub\t" in listed.stdout and "unverified" not in listed.stdout


def test_chat_whose_conversations_folder_cannot_be_written_to_says_so_at_its_start(tmp_path: Path) -> None:
    """A conversations folder there but not writable (another user's, say): the chat says at its start that it
    cannot be saved, and why, where it said nothing until its first answer's save failed."""
    folder = tmp_path / "data" / "conversations"
    folder.mkdir(parents=True)
    folder.chmod(0o555)
    try:
        chat = spawn_unprivileged_chat(tmp_path, "-n", "4")
        said = chat.expect_exact(["this chat cannot be saved", "Ctrl-D to quit"])
        chat.expect_exact("Ctrl-D to quit" if said == 0 else "\n")
        warning = chat.before
        chat.sendcontrol("d")
        chat.expect(pexpect.EOF)
        chat.close()
    finally:
        folder.chmod(0o700)
    assert said == 0, "the start said nothing"
    assert f": cannot write to {folder}: Permission denied (check the permissions of {folder}, or set LOCALGEN_HOME " \
        "to a folder you can write to)" in warning
    assert chat.exitstatus == 0
    assert not list(folder.iterdir()), "the check left nothing behind"


def test_run_continuing_a_conversation_its_folder_cannot_save_is_refused_before_it_answers(tmp_path: Path) -> None:
    """run --conversation NAME whose folder cannot be written to (another user's, say): refused before the model
    loads, naming the folder, where it answered and then failed to save the exchange."""
    env = {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    started = run_localgen("run", "--conversation", "notes", "-n", "2", "--temperature", "0", "Hi", env=env)
    assert started.returncode == 0, started.err
    folder = tmp_path / "data" / "conversations"
    saved = (folder / "notes.json").read_bytes()
    folder.chmod(0o555)
    try:
        again = run_unprivileged(tmp_path, "run", "--conversation", "notes", "-n", "2", "--temperature", "0", "Hi")
    finally:
        folder.chmod(0o700)
    assert again.returncode == 1
    assert again.stdout == "", "no answer that could not be saved"
    assert f"conversation 'notes' cannot be saved: cannot write to {folder}: Permission denied" in again.stderr
    assert (folder / "notes.json").read_bytes() == saved


def test_run_whose_prompt_cache_folder_cannot_be_written_to_says_so_after_the_answer(tmp_path: Path) -> None:
    """A prompt cache folder that cannot be written to (another user's, say): a run of a long prompt warns, once
    its answer is out, that the prompt cache is not saved and why, where no run ever said so and each read its
    whole prompt again."""
    document = tmp_path / "doc.txt"
    document.write_text(PROMPT_CACHED)
    folder = tmp_path / "cache" / "prompts"
    folder.mkdir(parents=True)
    folder.chmod(0o555)
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    command = unprivileged([sys.executable, "-m", "localgen", "run", "-f", str(document), "-n", "3",
                            "--temperature", "0", "Summarize."])
    try:
        done = subprocess.run(command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0, done.stdout
    answer, _, warning = done.stdout.partition("\n")  # stdout and stderr in one pipe: the answer's line is whole
    assert answer and "localgen" not in answer
    assert warning.startswith(f"localgen: warning: the prompt cache is not saved: {folder} cannot be written to "
                              "(Permission denied)")
    assert not list(folder.iterdir())


def test_lock_file_that_cannot_be_opened_is_said_so_not_that_it_could_not_be_made(tmp_path: Path) -> None:
    """A conversation's lock file there but not to be opened (another user's, left by a run under sudo): the run
    says it could not open it, where it said it could not create a file that was there."""
    lock = tmp_path / "data" / "conversations" / ".locks" / "notes.lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    lock.chmod(0)
    done = run_unprivileged(tmp_path, "run", "--conversation", "notes", "-n", "1", "Hi")
    assert done.returncode == 1
    assert f"could not open {lock}: Permission denied (hint: check its permissions)" in done.stderr


def test_listing_says_a_conversation_that_cannot_be_read_is_unread_not_damaged(tmp_path: Path) -> None:
    """A saved conversation whose mode forbids reading it is listed as not to be read (Permission denied), where it
    was listed as damaged."""
    env = {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    assert run_localgen("run", "--conversation", "notes", "-n", "1", "Hi", env=env).returncode == 0
    saved = tmp_path / "data" / "conversations" / "notes.json"
    saved.chmod(0)
    listed = run_unprivileged(tmp_path, "conversations")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("notes\t"))
    assert line.endswith(f"\t(cannot read {saved}: Permission denied)")


def test_run_whose_data_folder_cannot_be_entered_answers_and_warns_its_record_is_not_kept(tmp_path: Path) -> None:
    """A data folder that may not be entered (XDG_DATA_HOME's, or LOCALGEN_HOME's data): the run answers and warns
    that it is not kept for --continue, exit 0, where after the answer it failed with an internal error
    (PermissionError) looking for a folder in the record's place."""
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0)
    try:
        done = run_unprivileged(tmp_path, "run", "-n", "2", "--temperature", "0", "Hi")
    finally:
        data.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert f"not kept for `localgen run --continue`: could not write {data / 'last-run.json'}: Permission denied" \
        in done.stderr


def test_run_whose_cache_folder_cannot_be_entered_answers(tmp_path: Path) -> None:
    """A cache folder that may not be entered (XDG_CACHE_HOME's, or LOCALGEN_HOME's cache): the run of a registry
    model answers, where looking for the Hub listing it keeps there was an internal error (PermissionError)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0)
    try:
        done = run_unprivileged(tmp_path, "run", "-m", "smollm2-135m", "-n", "2", "--temperature", "0", "Hi")
    finally:
        cache.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def _hub_cache_not_to_be_entered(hub: tuple[HubServer, dict[str, str]]) -> tuple[dict[str, str], Path]:
    """The loopback Hub's environment once acme/Tiny-GGUF:Q8_0 is pulled, and its cache's repo folder (to take the
    permissions of the folder holding it away)."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny.Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    return env, Path(env["HF_HUB_CACHE"]) / "models--acme--Tiny-GGUF"


def test_hub_cache_that_cannot_be_entered_is_said_so_not_an_internal_error(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A Hugging Face cache that may not be entered: run, fit and models rm say the cache cannot be used (Permission
    denied) and to set HF_HUB_CACHE or fix its permissions, where each was an internal error asking for a bug report."""
    env, repo_folder = _hub_cache_not_to_be_entered(hub)
    repo_folder.parent.chmod(0)
    try:
        done = [run_unprivileged_in(env, *args) for args in (("run", "-m", "acme/Tiny-GGUF:Q8_0", "Hi"),
                                                                ("fit", "acme/Tiny-GGUF"),
                                                                ("models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0"))]
    finally:
        repo_folder.parent.chmod(0o755)
    for command in done:
        assert command.returncode == 1
        assert f"cannot use the Hugging Face cache ({repo_folder.parent}): Permission denied (hint: set HF_HUB_CACHE" \
            in command.stderr, command.stderr
        assert "internal error" not in command.stderr
    assert run_cli(env, "models", "show", "acme/Tiny-GGUF:Q8_0").returncode == 0, "nothing removed"


def test_chat_command_meeting_a_folder_it_cannot_enter_says_so_not_an_internal_error(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The chat's /model of a model in a Hugging Face cache that may not be entered says the cache cannot be used
    (Permission denied), where it was an internal error; the chat goes on."""
    env, repo_folder = _hub_cache_not_to_be_entered(hub)
    command = unprivileged([sys.executable, "-m", "localgen", "chat", "-n", "4"])
    chat = pexpect.spawn(command[0], command[1:], env={**env, **_env(Path(env["LOCALGEN_HOME"]), columns=COLUMNS)},
                         cwd=str(REPO_ROOT), encoding="utf-8", codec_errors="replace", timeout=TIMEOUT,
                         dimensions=(30, COLUMNS))
    repo_folder.parent.chmod(0)
    try:
        chat.expect_exact("Ctrl-D to quit")
        chat.sendline("/model acme/Tiny-GGUF:Q8_0")
        said = chat.expect_exact(["Permission denied", "internal error"])
        line = chat.before
        chat.expect_exact("\n")
        hint = chat.before
        chat.sendcontrol("d")
        chat.expect(pexpect.EOF)
        chat.close()
    finally:
        repo_folder.parent.chmod(0o755)
    assert said == 0, line
    assert line.endswith(f"cannot use the Hugging Face cache ({repo_folder.parent}): ")
    assert "set HF_HUB_CACHE (or HF_HOME) to a folder you can write to" in hint
    assert chat.exitstatus == 0


@pytest.mark.first_use
def test_offline_run_says_a_verification_record_it_cannot_read_is_there(hub: tuple[HubServer, dict[str, str]]) -> None:
    """An offline run of a download whose verification record cannot be read (another user's: a pull under sudo)
    says the record is there and cannot be read, naming it, where it said localgen had not verified the file."""
    env, _ = _hub_cache_not_to_be_entered(hub)
    records = list((Path(env["LOCALGEN_HOME"]) / "cache" / "verified").iterdir())
    assert len(records) == 1
    records[0].chmod(0)
    done = run_unprivileged_in({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "acme/Tiny-GGUF:Q8_0", "Hi")
    assert done.returncode == 1
    assert f"localgen's record that it was verified cannot be read ({records[0]}: Permission denied)" in done.stderr
    assert "not verified" not in done.stderr


def test_folder_its_parent_refuses_to_hold_names_that_parent_not_free_disk_space(tmp_path: Path) -> None:
    """A LOCALGEN_HOME to be made in a folder that refuses it (a HOME of /nonexistent, another user's folder): the
    hint names the folder that refused and LOCALGEN_HOME, where it said to check free disk space and permissions."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    home = locked / "home"
    try:
        done = run_unprivileged(home, "run", "--conversation", "notes", "-n", "1", "Hi")
    finally:
        locked.chmod(0o755)
    assert done.returncode == 1
    assert f"could not create {home / 'data' / 'conversations'}: Permission denied (hint: check the permissions of " \
        f"{locked}, or set LOCALGEN_HOME to a folder you can write to)" in done.stderr


def test_lock_file_its_folder_refuses_names_that_folder_not_free_disk_space(tmp_path: Path) -> None:
    """A conversation's lock file that its folder refuses to hold (another user's .locks): the hint names that
    folder, where it said to check free disk space and permissions."""
    locks = tmp_path / "data" / "conversations" / ".locks"
    locks.mkdir(parents=True)
    locks.chmod(0o555)
    try:
        done = run_unprivileged(tmp_path, "run", "--conversation", "notes", "-n", "1", "Hi")
    finally:
        locks.chmod(0o700)
    assert done.returncode == 1
    assert f"could not create {locks / 'notes.lock'}: Permission denied (hint: check the permissions of {locks}, or " \
        "set LOCALGEN_HOME to a folder you can write to)" in done.stderr


def test_hub_cache_that_cannot_be_entered_is_said_so_not_that_the_model_is_not_downloaded(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A Hugging Face cache that may not be entered: models show of a pulled model says it cannot be used (Permission
    denied), where it said the model was not downloaded and hinted a pull, which failed; the listing warns that the
    cache cannot be read, where it said nothing of the models it did not list, and lists the rest, exit 0."""
    env, repo_folder = _hub_cache_not_to_be_entered(hub)
    cache = repo_folder.parent
    cache.chmod(0)
    try:
        done = [run_unprivileged_in(env, "models", "show", "acme/Tiny-GGUF:Q8_0"), run_unprivileged_in(env, "models")]
    finally:
        cache.chmod(0o755)
    for command, code in zip(done, (1, 0), strict=True):
        assert command.returncode == code, command.stdout + command.stderr
        assert f"{cache}" in command.stderr and "Permission denied" in command.stderr
        assert "not downloaded" not in command.stderr and "internal error" not in command.stderr


def test_blobs_folder_that_cannot_be_entered_is_named_not_the_snapshot_link_leading_there(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A repo's blobs folder that may not be entered: each command names that folder as the Hugging Face cache's that
    refuses, with the hint to set HF_HUB_CACHE, where it named the snapshot's link, whose folders above it could all
    be entered, and hinted to check their permissions (the listing warns of it: test_nonroot_mend)."""
    env, repo_folder = _hub_cache_not_to_be_entered(hub)
    blobs = repo_folder / "blobs"
    blobs.chmod(0)
    try:
        done = [run_unprivileged_in(env, *args) for args in (
            ("models", "show", "acme/Tiny-GGUF:Q8_0"), ("run", "-m", "acme/Tiny-GGUF:Q8_0", "Hi"),
            ("pull", "acme/Tiny-GGUF:Q8_0"), ("fit", "acme/Tiny-GGUF"),
            ("models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0"))]
    finally:
        blobs.chmod(0o755)
    for command in done:
        assert command.returncode == 1, command.args
        assert command.stderr == f"localgen: error: cannot use the Hugging Face cache ({blobs}): Permission denied " \
            "(hint: set HF_HUB_CACHE (or HF_HOME) to a folder you can write to, or fix its permissions)\n", command.args
    assert run_cli(env, "models", "show", "acme/Tiny-GGUF:Q8_0").returncode == 0, "nothing removed"


@pytest.mark.parametrize("filename, filename2, said", [
    ("/srv/notes", None, "cannot use /srv/notes: Permission denied"),
    (Path("/srv/a"), "/srv/b", "cannot use /srv/a or /srv/b: Permission denied"),
    (3, None, None), (b"/srv/notes", None, None), ("/srv/a", 4, None)], ids=["path", "rename", "fd", "bytes", "odd2"])
def test_permission_error_no_module_foresaw_names_its_paths_and_how_to_tell_where_it_came_from(
        filename: object, filename2: object, said: str | None) -> None:
    """A PermissionError no module mapped names its file (both of a rename's) and hints LOCALGEN_DEBUG=1 for one
    that is not the user's, to report, where the hint never asked for a report; a name that is no path (a
    descriptor's number, bytes) stays an internal error, where it was said as `cannot use 3`."""
    from localgen.refusals import permission_failure

    error = permission_failure(PermissionError(errno.EACCES, "Permission denied", filename, None, filename2))
    assert (error.message if error is not None else None) == said
    if error is not None:
        assert "LOCALGEN_DEBUG=1 shows where it came from" in (error.hint or "")


def test_offline_run_whose_verification_folder_cannot_be_entered_cannot_tell_not_that_a_record_is_there(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """An offline run of a download whose verification folder may not be entered, its record deleted: it cannot tell
    whether the file was verified, naming that folder, where it said a record that is not there could not be read."""
    env, _ = _hub_cache_not_to_be_entered(hub)
    verified = Path(env["LOCALGEN_HOME"]) / "cache" / "verified"
    for record in verified.iterdir():
        record.unlink()
    verified.chmod(0)
    try:
        done = run_unprivileged_in({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "acme/Tiny-GGUF:Q8_0", "Hi")
    finally:
        verified.chmod(0o755)
    assert done.returncode == 1
    assert f"localgen cannot tell whether it was verified ({verified}: Permission denied)" in done.stderr
    assert f"check the permissions of {verified} " in done.stderr and "record" not in done.stderr


def test_verified_download_whose_header_is_too_large_to_read_is_no_longer_verified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verified Hub file whose header is too large to read into memory: its verification is forgotten and the hint
    says the Hub's own copy is at fault, as for any header llama.cpp cannot load; only one that may not be read (its
    permissions) stays verified, where any header not read did."""
    import gguf_builders as gb

    from localgen import gguf_reader
    from localgen.errors import GGUFError
    from localgen.hub_types import HubFile
    from localgen.hub_verify import _check_usable
    from localgen.verify import is_verified, record_verified, sha256_file

    path = gb.tiny_model(tmp_path / "m.gguf")
    sha = sha256_file(path)
    record_verified(path, sha)

    def short_of_memory(*args: object, **kwargs: object) -> object:
        raise MemoryError

    monkeypatch.setattr(gguf_reader, "_parse", short_of_memory)
    with pytest.raises(GGUFError, match="header too large to read into memory") as refused:
        _check_usable(path, HubFile("acme/Tiny-GGUF", "m.gguf", path.stat().st_size, sha, "Q8_0", None, None))
    assert "matches the Hub's checksum" in (refused.value.hint or "")
    assert not is_verified(path, sha)


def test_prompt_cache_warning_names_the_folder_that_refuses_and_the_lasting_switch(tmp_path: Path) -> None:
    """A prompt cache folder to be made in a folder that refuses it (a HOME of /nonexistent, another user's folder):
    the warning's hint names the folder that refused, LOCALGEN_HOME, and LOCALGEN_PROMPT_CACHE_BYTES=0, which turns
    the cache off for good, where it named a folder not there and --no-cache, for one run; with the cache off, no
    warning."""
    document = tmp_path / "doc.txt"
    document.write_text(PROMPT_CACHED)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    args = ("run", "-f", str(document), "-n", "2", "--temperature", "0", "Summarize.")
    try:
        done = run_unprivileged(locked / "home", *args)
        off = run_unprivileged(locked / "home", *args, LOCALGEN_PROMPT_CACHE_BYTES="0")
    finally:
        locked.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert f"the prompt cache is not saved: {locked / 'home' / 'cache' / 'prompts'} cannot be written to (Permission " \
        f"denied) (check the permissions of {locked}, or set LOCALGEN_HOME to a folder you can write to; " \
        "LOCALGEN_PROMPT_CACHE_BYTES=0 turns the prompt cache off, and warns no more)" in done.stderr, done.stderr
    assert off.returncode == 0 and "prompt cache" not in off.stderr, off.stderr
