"""`models rm` of a model a pull is downloading now: refused whole, naming the download and its process, and the
pull goes on to finish its model."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hub_server import HubEnv, HubServer, child_env, make_gguf_bytes, run_cli

from localgen import blob_locks, hub, hub_cache
from localgen.model_removal import remove_model
from localgen.registry import load_registry
from tests.conftest import REPO_ROOT, popen_localgen

REPO = "org/big-GGUF"
SIZE = 6_000_000


def _pull_held(server: HubServer, env: dict[str, str], reference: str, part: Path) -> subprocess.Popen[bytes]:
    """A pull of reference, once the file whose part is part has 5 MiB on disk, its body held there (the test
    releases it)."""
    proc = popen_localgen([sys.executable, "-m", "localgen", "pull", reference], cwd=REPO_ROOT, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30  # written in 1 MiB pieces: five are on disk before the held byte
    while (not part.exists() or part.stat().st_size < 5 * 2**20) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert part.exists() and proc.poll() is None
    return proc


def _finished(server: HubServer, proc: subprocess.Popen[bytes]) -> str:
    """The held pull let go on: its stderr, once it ends having downloaded and verified its model."""
    server.body_released.set()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert "sha256 verified" in err.decode()
    return err.decode()


def test_rm_while_a_pull_downloads_the_model_is_refused_and_the_pull_finishes(loopback_hub: HubServer,
                                                                              tmp_path: Path) -> None:
    name = "big-Q4_K_M.gguf"
    repo = loopback_hub.add_repo(REPO, {name: make_gguf_bytes("big", SIZE)})
    loopback_hub.hold_body_at[(REPO, name)] = 5_500_000  # past the header the pull reads first
    env = child_env(loopback_hub, tmp_path)
    blobs = tmp_path / "hf" / "hub" / "models--org--big-GGUF" / "blobs"
    part = blobs / f"{repo.sha256(name)}.incomplete"
    proc = _pull_held(loopback_hub, env, REPO, part)
    try:
        for reference in (REPO, f"{REPO}:Q4_K_M"):
            refused = run_cli(env, "models", "rm", "--yes", reference)
            assert refused.returncode == 1
            holder = f"process {proc.pid}" if Path("/proc/locks").exists() else "another process"
            assert refused.stderr == (
                f"localgen: error: {REPO}:Q4_K_M is being downloaded by {holder} (5.0 MiB of 5.7 MiB so far) "
                "(hint: wait for that download to end, or stop it with Ctrl-C where it runs, then "
                f"`localgen models rm {reference}` again)\n")
            assert part.stat().st_size == 5 * 2**20
    finally:
        err = _finished(loopback_hub, proc)
    assert f"downloaded {REPO}/{name}" in err
    assert (blobs / repo.sha256(name)).stat().st_size == SIZE
    removed = run_cli(env, "models", "rm", "--yes", REPO)  # once it is over, rm removes it
    assert removed.returncode == 0 and removed.stderr.startswith(f"localgen: removed {REPO}:Q4_K_M"), removed.stderr


def test_rm_of_a_split_model_a_pull_is_finishing_removes_none_of_its_shards(loopback_hub: HubServer,
                                                                            tmp_path: Path) -> None:
    """Its first shard downloaded, its second being written: neither goes, as the pull would finish a model whose
    first shard rm took."""
    first, second = (f"Q4_K_M/big-Q4_K_M-0000{i}-of-00002.gguf" for i in (1, 2))
    repo = loopback_hub.add_repo(REPO, {first: make_gguf_bytes("one", 2**17, shard=(1, 2)),
                                        second: make_gguf_bytes("two", SIZE, shard=(2, 2))})
    loopback_hub.hold_body_at[(REPO, second)] = 5_500_000
    env = child_env(loopback_hub, tmp_path)
    blobs = tmp_path / "hf" / "hub" / "models--org--big-GGUF" / "blobs"
    proc = _pull_held(loopback_hub, env, f"{REPO}:Q4_K_M", blobs / f"{repo.sha256(second)}.incomplete")
    try:
        assert (blobs / repo.sha256(first)).is_file()
        refused = run_cli(env, "models", "rm", "--yes", f"{REPO}:Q4_K_M")
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"localgen: error: {REPO}:Q4_K_M is being downloaded by "), refused.stderr
        assert "(5.1 MiB of 5.8 MiB so far)" in refused.stderr
        assert (blobs / repo.sha256(first)).is_file()
    finally:
        _finished(loopback_hub, proc)
    assert (blobs / repo.sha256(second)).stat().st_size == SIZE


def _downloaded(hubenv: HubEnv) -> Path:
    """REPO's one model, downloaded: its blob."""
    name = "big-Q4_K_M.gguf"
    repo = hubenv.server.add_repo(REPO, {name: make_gguf_bytes("big")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    return hub_cache.blobs_dir(REPO) / repo.sha256(name)


def _removed(blob: Path) -> None:
    """rm of REPO removes its model, blob and all."""
    removed = remove_model(load_registry(), REPO)
    assert removed.name == f"{REPO}:Q4_K_M" and blob in removed.paths and not blob.exists()


@pytest.mark.parametrize("lock", ["a folder", "on a file system without locks"])
def test_rm_of_a_downloaded_model_whose_lock_cannot_be_tested_removes_it(
        lock: str, hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock file that cannot be tested (one that cannot be opened, as another user's in a shared cache, or on a file
    system without locks) is no download's, even beside a part a killed download left: rm refused such a model for
    good as being downloaded by another process."""
    blob = _downloaded(hubenv)
    (blob.parent / f"{blob.name}.1a2b3c4d.incomplete").write_bytes(b"\0" * 10)  # a killed hf_hub_download's
    lock_file = hub_cache.blob_lock_path(REPO, blob.name)
    if lock == "a folder":
        lock_file.unlink()
        lock_file.mkdir()
    else:
        monkeypatch.setattr(hub_cache, "try_flock", lambda fd: None)
    _removed(blob)


def test_rm_of_a_downloaded_model_whose_lock_a_process_holds_with_no_part_written_removes_it(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock held with no part of the blob on disk, longer than rm waits for it (a download linking its finished
    blob, or one about to write, lets go or writes within that), writes nothing: rm refused the model, calling it
    downloaded 0 B so far."""
    monkeypatch.setattr(blob_locks, "HELD_WAIT_S", 0.2)
    blob = _downloaded(hubenv)
    with open(hub_cache.blob_lock_path(REPO, blob.name), "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another open file: its lock keeps this process's own check out
        _removed(blob)


def test_rm_goes_ahead_where_the_download_it_would_refuse_ends_as_the_refusal_is_made(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The download seen writing the model once, then no more: rm removes it, where it refused it."""
    blob = _downloaded(hubenv)
    hub_cache.partial_path(REPO, blob.name).write_bytes(b"\0" * 10)
    answers = iter([True])
    monkeypatch.setattr(hub_cache, "download_running", lambda repo, etag: next(answers, False))
    _removed(blob)
