"""A repo's own folder named snapshots (its file snapshots/x/FILE) read as a file of the repo wherever localgen reads a
path in the Hub cache: the lock a run of it takes and records, and the copy a pull of a newer commit replaces. Real
processes, a model llama.cpp loads, the loopback Hub."""

from __future__ import annotations

import os
from pathlib import Path

from hub_server import HubEnv, run_cli

from localgen import load_locks
from tests.test_load_lock import _beside_a_slow_run
from tests.test_pull_lock_mend import SOLO

NESTED_FILE = "snapshots/x/solo-Q4_K_M.gguf"  # in the repo: a folder of its own named snapshots


def _pulled_nested(hubenv: HubEnv, tmp_path: Path) -> list[Path]:
    """SOLO serving a model llama.cpp loads as NESTED_FILE, pulled: its snapshot entries."""
    from gguf_builders import tiny_model

    hubenv.server.add_repo(SOLO, {NESTED_FILE: tiny_model(tmp_path / "tiny.gguf")})
    pulled = run_cli(hubenv.env, "pull", SOLO)
    assert pulled.returncode == 0, pulled.stderr
    return hubenv.snapshot_files(SOLO)


def test_a_run_of_a_file_in_a_repo_s_own_snapshots_folder_records_the_entry_it_loads(hubenv: HubEnv,
                                                                                    tmp_path: Path) -> None:
    """The nearest folder named snapshots was taken for the cache's: the run locked the blob but recorded no entry
    beside the lock (models rm then could not name the model it loads)."""
    entry = _pulled_nested(hubenv, tmp_path)[0]
    lock = load_locks.run_loading_lock(entry)
    assert lock is not None
    with load_locks.held_for_loading([entry]) as there:
        assert there
        recorded = load_locks.loading_record(lock, os.getpid()).read_text()
    assert recorded == f"{entry.parents[2].name}/{NESTED_FILE}", recorded


def test_a_pull_replacing_a_copy_in_a_repo_s_own_snapshots_folder_waits_on_a_run_loading_it(hubenv: HubEnv,
                                                                                         tmp_path: Path) -> None:
    """The pull of a newer commit took the snapshot folder for the repo's and the repo's folder x for the snapshot:
    it took the wrong loading lock and deleted the copy a run loaded, and a later pull kept it for good."""
    from gguf_builders import tiny_model

    old = _pulled_nested(hubenv, tmp_path)
    hubenv.server.add_repo(SOLO, {NESTED_FILE: tiny_model(tmp_path / "newer.gguf", seed=1)})  # a new commit
    pid, pulled = _beside_a_slow_run(hubenv, tmp_path, SOLO, "pull", SOLO)  # the pull waits 2 s on the run's load
    assert pulled.returncode == 0, pulled.stderr
    assert f"the copy the new one replaces is still in the cache: process {pid} is loading it" in pulled.stderr, \
        pulled.stderr
    assert all(path.is_file() for path in old) and len(hubenv.snapshot_files(SOLO)) == 2
    again = run_cli(hubenv.env, "pull", SOLO)  # the run has ended: the copy kept goes
    assert again.returncode == 0 and "freed" in again.stderr, again.stderr
    assert not any(os.path.lexists(path) for path in old) and len(hubenv.snapshot_files(SOLO)) == 1
    assert not old[0].parents[2].exists()  # its emptied snapshot folder with it
