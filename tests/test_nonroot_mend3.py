"""localgen where file permissions bind, mended once more: a moved conversation's mode from another user's file, a
conversation linked to a file in a folder that cannot be written, models rm of a repo whose blobs live elsewhere,
and an input history made read-only as root sees it (commands run as test_nonroot runs them: as root without
capabilities, or as another user)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.hub_server import HubServer, run_cli
from tests.test_nonroot import run_unprivileged, run_unprivileged_in
from tests.test_nonroot_mend2 import OTHER, _hub_pulled

ARGS = ("-n", "1", "--temperature", "0", "Hi")


def _home_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a localgen whose LOCALGEN_HOME is tmp_path, offline."""
    return {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}


def _conversation(tmp_path: Path, name: str) -> Path:
    """The file of conversation name under LOCALGEN_HOME tmp_path."""
    return tmp_path / "data" / "conversations" / f"{name}.json"


@pytest.mark.parametrize("over", [False, True])
def test_sudo_move_of_a_users_set_id_conversation_keeps_no_set_id_nor_write_for_others(tmp_path: Path,
                                                                                       over: bool) -> None:
    """conversations mv, to a new name or --force over another, of another user's (uid 65534) conversation at mode
    6777, run by root (as `sudo localgen` is): the moved file, root's, gets the permission bits alone, without write
    for its group or others (755), as a rewrite does, where it kept all twelve bits (-rwsrwsrwx root root)."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    env = _home_env(tmp_path)
    for name in ("c", "d") if over else ("c",):
        assert run_localgen("run", "--conversation", name, *ARGS, env=env).returncode == 0
    source = _conversation(tmp_path, "c")
    os.chown(source, 65534, 65534)
    source.chmod(0o6777)
    moved = run_localgen("conversations", "mv", *(("--force",) if over else ()), "c", "d", env=env)
    assert moved.returncode == 0, moved.err
    target = _conversation(tmp_path, "d")
    assert not source.exists()
    assert (target.stat().st_uid, oct(target.stat().st_mode & 0o7777)) == (0, "0o755")


def test_conversation_linked_to_a_file_in_a_folder_that_cannot_be_written_is_refused_before_it_answers(
        tmp_path: Path) -> None:
    """run --conversation of a conversation whose file is a link to one in a folder that may not be written to
    (555): refused before the model loads, naming that folder, the file left as it is, where the run answered,
    then failed saying the exchange was saved nowhere."""
    assert run_localgen("run", "--conversation", "notes", *ARGS, env=_home_env(tmp_path)).returncode == 0
    conversation = _conversation(tmp_path, "notes")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    conversation.rename(elsewhere / "notes.json")
    conversation.symlink_to(elsewhere / "notes.json")
    saved = conversation.read_bytes()
    elsewhere.chmod(0o555)
    try:
        continued = run_unprivileged(tmp_path, "run", "--conversation", "notes", *ARGS)
    finally:
        elsewhere.chmod(0o755)
    assert continued.returncode == 1 and continued.stdout == "", continued.stderr
    assert continued.stderr.startswith(f"localgen: error: conversation 'notes' cannot be saved: cannot write to "
                                       f"{elsewhere}: Permission denied (hint: check the permissions of {elsewhere}"), \
        continued.stderr
    assert conversation.read_bytes() == saved


def test_rm_of_a_model_whose_blobs_folder_links_to_another_disk_beside_a_repo_it_cannot_read_frees_its_data(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """models rm of a model whose blobs folder is a link to a folder elsewhere (another disk), beside another repo
    that may not be entered: its blob is deleted and freed, as only a file of Xet's shared store (the cache's own
    blobs folder) may be another repo's, where rm took the blob, outside the repo's folder, for that store's, kept
    it ("freed 0 B, kept 1 file another model uses") and left it with no entry leading to it."""
    env, tiny, other = _hub_pulled(hub)
    elsewhere = tmp_path / "other-disk" / "blobs"
    elsewhere.parent.mkdir()
    (tiny / "blobs").rename(elsewhere)
    (tiny / "blobs").symlink_to(elsewhere)
    other.chmod(0)
    try:
        removed = run_unprivileged_in(env, "models", "rm", "--yes", "acme/Tiny-GGUF:Q8_0")
    finally:
        other.chmod(0o755)
    assert removed.returncode == 0, removed.stderr
    assert "freed 0 B" not in removed.stderr and "kept 1 file" not in removed.stderr, removed.stderr
    assert list(elsewhere.iterdir()) == []
    assert f"{OTHER}:Q8_0" in run_cli(env, "models").stdout


def _history_of(path: Path, entries: int, mode: int, damaged: bool = False) -> bytes:
    """An input history at path of entries (a damaged one: with a NUL byte in its last), at mode; its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(b"\n# 2026-01-01 00:00:00\n+entry %d\n" % n for n in range(entries))
                     + (b"+a \0 in it\n" if damaged else b""))
    path.chmod(mode)
    return path.read_bytes()


def _chat_sending_lines(home: Path, *lines: str, as_root: bool) -> tuple[str, str]:
    """A chat started in a pseudo-terminal (as root with every capability, or where permissions bind), sent lines,
    then left with Ctrl-D: what it wrote up to its first prompt, and after it, each with its spacing made single."""
    import io
    import sys

    import pexpect

    from tests.conftest import REPO_ROOT
    from tests.test_nonroot import COLUMNS, unprivileged
    from tests.test_repl import PROMPT, TIMEOUT, _env

    command = [sys.executable, "-m", "localgen", "chat", "-n", "4"]
    command = command if as_root else unprivileged(command)
    chat = pexpect.spawn(command[0], command[1:], env={**_env(home, columns=COLUMNS), "LOCALGEN_OFFLINE": "1"},
                         cwd=str(REPO_ROOT), encoding="utf-8", codec_errors="replace", timeout=TIMEOUT,
                         dimensions=(30, COLUMNS))
    chat.logfile_read = io.StringIO()
    chat.expect_exact(PROMPT)
    start = chat.logfile_read.getvalue()
    for line in lines:
        chat.sendline(line)
        chat.expect_exact(PROMPT)
    chat.sendcontrol("d")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0, chat.before
    return " ".join(start.split()), " ".join(chat.logfile_read.getvalue()[len(start):].split())


def test_read_only_history_is_left_as_it_is_by_root_too(tmp_path: Path) -> None:
    """An input history made read-only (444) past its bound of entries, and a chat run by root, whose writes no mode
    refuses: the history is left as it is, untrimmed, the line sent not added, and the chat says it is not saved, as
    for a user, where root trimmed it and appended to it."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES

    if os.geteuid() != 0:
        pytest.skip("root's writes are what this checks")
    history = tmp_path / "data" / "history"
    before = _history_of(history, MAX_HISTORY_ENTRIES * 2, 0o444)
    said = " ".join(_chat_sending_lines(tmp_path, "hello", as_root=True))
    assert history.read_bytes() == before
    assert oct(history.stat().st_mode & 0o777) == "0o444"
    assert f"input history is not saved to {history}: it is read-only (mode 444)" in said, said


def test_damaged_read_only_history_is_left_as_it_is(tmp_path: Path) -> None:
    """A damaged input history (a NUL byte) made read-only (444): a chat's start leaves it as it is, in its place,
    where it moved it to history.damaged and started a new 600 history the user had not asked for."""
    history = tmp_path / "data" / "history"
    before = _history_of(history, 3, 0o444, damaged=True)
    said = " ".join(_chat_sending_lines(tmp_path, "hello", as_root=False))
    assert history.read_bytes() == before
    assert oct(history.stat().st_mode & 0o777) == "0o444"
    assert not history.with_name("history.damaged").exists()
    assert "is damaged" not in said, said
