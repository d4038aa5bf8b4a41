"""localgen where file permissions bind, mended a fourth time: a moved conversation's group, an input history made
read-only said once, at the chat's start, and a download that may not be read told so, not sent to a pull (commands
run as test_nonroot runs them: as root without capabilities, or as another user)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.hub_server import HubServer, make_gguf_bytes, run_cli
from tests.test_nonroot import run_unprivileged, run_unprivileged_in
from tests.test_nonroot_mend3 import _chat_sending_lines

ARGS = ("-n", "1", "--temperature", "0", "Hi")
GROUP = 65534  # a group this process is not in, which only root with its capabilities may give a file


def _saved(home: Path, name: str) -> Path:
    """Conversation name, saved by a run under LOCALGEN_HOME home at group GROUP and mode 640; its file."""
    assert run_localgen("run", "--conversation", name, *ARGS,
                        env={"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1"}).returncode == 0
    path = home / "data" / "conversations" / f"{name}.json"
    os.chown(path, -1, GROUP)
    path.chmod(0o640)
    return path


def _group_and_mode(path: Path) -> tuple[int, str]:
    """The group and permission bits of the file at path."""
    return path.stat().st_gid, oct(path.stat().st_mode & 0o7777)


@pytest.mark.parametrize("over", [False, True])
def test_move_of_a_conversation_keeps_its_group(tmp_path: Path, over: bool) -> None:
    """conversations mv, to a new name or --force over another, of a conversation at group 65534 and mode 640, by
    root (who may give any group): the moved file keeps its group, as a rewrite does, where it got the process's (0)
    and kept the mode alone."""
    if os.geteuid() != 0:
        pytest.skip("giving a file a group this process is not in needs root")
    source = _saved(tmp_path, "c")
    if over:
        _saved(tmp_path, "d").chmod(0o600)
    moved = run_localgen("conversations", "mv", *(("--force",) if over else ()), "c", "d",
                         env={"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"})
    assert moved.returncode == 0, moved.err
    assert not source.exists()
    assert _group_and_mode(tmp_path / "data" / "conversations" / "d.json") == (GROUP, "0o640")


def test_move_that_may_not_give_the_group_keeps_its_own(tmp_path: Path) -> None:
    """conversations mv, where file permissions bind, of a conversation at a group the process is not in (65534): the
    move is done, the file at the process's group with its mode kept, the group it could not give passed over."""
    if os.geteuid() != 0:
        pytest.skip("giving a file a group this process is not in needs root")
    _saved(tmp_path, "c")
    moved = run_unprivileged(tmp_path, "conversations", "mv", "c", "d")
    assert moved.returncode == 0 and moved.stderr == "localgen: renamed c to d\n", moved.stderr
    assert _group_and_mode(tmp_path / "data" / "conversations" / "d.json") == (os.getegid(), "0o640")


@pytest.mark.parametrize("as_root", [False, True])
def test_read_only_history_is_said_once_at_the_chats_start(tmp_path: Path, as_root: bool) -> None:
    """An input history made read-only (444), by a user or root: the chat's start says in one warning that it is not
    saved, with what lets it be, and the lines sent say nothing of it, where the start said nothing and the first line
    sent said it could not be saved."""
    if as_root and os.geteuid() != 0:
        pytest.skip("root's writes are what this checks")
    history = tmp_path / "data" / "history"
    history.parent.mkdir(parents=True)
    history.write_bytes(b"\n# 2026-01-01 00:00:00\n+entry\n")
    history.chmod(0o444)
    start, rest = _chat_sending_lines(tmp_path, "hello", "again", as_root=as_root)
    assert (f"localgen: warning: input history is not saved to {history}: it is read-only (mode 444) (hint: it is "
            f"kept as it is; `chmod u+w {history}` lets a chat save it)") in start, start
    assert "input history" not in rest and "read-only" not in rest, rest
    assert history.read_bytes() == b"\n# 2026-01-01 00:00:00\n+entry\n"


def test_a_download_that_may_not_be_read_keeps_its_own_hint(hub: tuple[HubServer, dict[str, str]]) -> None:
    """A download changed since its pull and made unreadable (mode 000): models show and a run offline say it cannot
    be read, with the hint to check its permissions, where they hinted the pull that checks it against the Hub, which
    the file's mode would refuse all the same."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    path = Path(pulled.stdout.strip()).resolve()
    path.write_bytes(path.read_bytes())  # changed since the pull: localgen has not verified it
    path.chmod(0)
    refused = [run_unprivileged_in({**env, "LOCALGEN_OFFLINE": offline}, *args)
               for offline, args in (("0", ("models", "show", "acme/Tiny-GGUF:Q8_0")),
                                     ("1", ("run", "-m", "acme/Tiny-GGUF:Q8_0", "hi")))]
    said = ("localgen: error: tiny-Q8_0.gguf: cannot be read (Permission denied) (hint: check the file's "
            "permissions)\n")
    assert [(result.returncode, result.stderr) for result in refused] == [(1, said)] * 2, refused
