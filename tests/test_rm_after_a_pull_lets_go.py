"""A `models rm` of a split model that gave up waiting on a shard's lock, which the pull holding it let go of just
after: rm takes that lock after all and removes the model whole, as no download holds it any longer."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import blob_locks, hub, hub_cache
from localgen.model_removal import remove_model
from localgen.registry import load_registry

REPO = "org/letgo-GGUF"
S1, S2 = "letgo-Q4_K_M-00001-of-00002.gguf", "letgo-Q4_K_M-00002-of-00002.gguf"


def _let_go_once_given_up(monkeypatch: pytest.MonkeyPatch, lock: Path, fd: int) -> None:
    """Close fd (the lock held on lock) once rm has given up waiting on it, before it takes any lock after it."""
    real: Callable[..., int | None] = blob_locks._taken

    def taken(path: Path, *args: object) -> int | None:
        got = real(path, *args)
        if path == lock and got is None:
            os.close(fd)
        return got

    monkeypatch.setattr(blob_locks, "_taken", taken)


def test_rm_giving_up_on_the_first_shard_s_lock_let_go_just_after_removes_the_split_model_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pull checking the model held the first shard's lock past rm's wait and let go of it as rm gave up: rm
    refused the model as being downloaded by that process, which had ended with the whole model."""
    hubenv.server.add_repo(REPO, {S1: make_gguf_bytes("a", shard=(1, 2)), S2: make_gguf_bytes("b", shard=(2, 2))})
    paths = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    blob = next(p for p in paths if p.name == S1).resolve().name
    lock = hub_cache.blob_lock_path(REPO, blob)
    fd = os.open(lock, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file's lock: rm's is refused, as another process's
    monkeypatch.setattr(blob_locks, "HELD_WAIT_S", 0.0)
    _let_go_once_given_up(monkeypatch, lock, fd)
    assert remove_model(load_registry(), f"{REPO}:Q4_K_M").name
    assert hubenv.snapshot_files(REPO) == [] and hubenv.blobs(REPO) == []
