"""What a `models rm` refused for a run loading its file says of that run, and what a pull refusing the Hub's newer
version of a model leaves in the cache's refs/main."""

from __future__ import annotations

from pathlib import Path

from hub_server import HubEnv, make_gguf_bytes, run_cli

from localgen import hub_cache
from tests.test_pull_lock_mend import _loaded, _run_loading_slowly

TWIN = "org/twin-GGUF"
TWIN_Q4, TWIN_Q8 = "twin-Q4_K_M.gguf", "twin-Q8_0.gguf"
HINT = "again once it has started (llama.cpp has the model open then), or stop it with Ctrl-C where it runs)\n"


def test_rm_of_a_model_whose_file_a_run_of_another_model_loads_names_that_model(hubenv: HubEnv,
                                                                                 tmp_path: Path) -> None:
    """Two quants of the same bytes share one blob: rm of the one no run loads said it was being loaded, where the run
    loads the other (the lock, per blob, does not tell them apart)."""
    from gguf_builders import tiny_model

    data = tiny_model(tmp_path / "tiny.gguf").read_bytes()
    hubenv.server.add_repo(TWIN, {TWIN_Q4: data, TWIN_Q8: data})
    for quant in ("Q4_K_M", "Q8_0"):
        assert run_cli(hubenv.env, "pull", f"{TWIN}:{quant}").returncode == 0
    assert len(hubenv.blobs(TWIN)) == 1
    run = _run_loading_slowly(hubenv, tmp_path, f"{TWIN}:Q4_K_M")
    try:
        other = run_cli(hubenv.env, "models", "rm", "--yes", f"{TWIN}:Q8_0")  # each waits 2 s on the run's load
        own = run_cli(hubenv.env, "models", "rm", "--yes", f"{TWIN}:Q4_K_M")
    finally:
        _loaded(tmp_path)
    answer, err = run.communicate(timeout=120)
    assert run.returncode == 0 and answer, err
    assert other.returncode == 1 and other.stderr == (
        f"localgen: error: the file of {TWIN}:Q8_0 is being loaded by process {run.pid}, as {TWIN}:Q4_K_M (a model "
        f"with the same file) (hint: run `localgen models rm {TWIN}:Q8_0` {HINT}"), other.stderr
    assert own.returncode == 1 and own.stderr == (
        f"localgen: error: {TWIN}:Q4_K_M is being loaded by process {run.pid} (hint: run `localgen models rm "
        f"{TWIN}:Q4_K_M` {HINT}"), own.stderr
    assert len(hubenv.snapshot_files(TWIN)) == 2
    assert [path.name for path in hub_cache.lock_folder(TWIN).iterdir() if ".loading." in path.name] == []


SOLO = "org/solo-GGUF"
SOLO_FILE = "solo-Q8_0.gguf"


def test_a_pull_refusing_a_newer_version_as_a_model_leaves_refs_main_naming_the_copy_it_keeps(
        hubenv: HubEnv) -> None:
    """The newer version passed its checksum and failed the check run makes of a model (a shard whose name does not
    say so): the pull removed it, but refs/main named its commit, and huggingface_hub's offline lookup of main found
    nothing where localgen kept the older copy."""
    from huggingface_hub import try_to_load_from_cache

    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("old")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    [old] = hubenv.snapshot_files(SOLO)
    ref = hubenv.hf_cache / hub_cache.repo_folder(SOLO) / "refs" / "main"
    assert ref.read_text() == old.parent.name
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("new", shard=(1, 2))})  # a new commit
    refused = run_cli(hubenv.env, "pull", SOLO)
    assert refused.returncode == 1 and "the copy downloaded before is kept" in refused.stderr, refused.stderr
    assert hubenv.snapshot_files(SOLO) == [old] and ref.read_text() == old.parent.name
    assert try_to_load_from_cache(SOLO, SOLO_FILE, cache_dir=hubenv.hf_cache) == str(old)


def test_rm_deletes_the_records_killed_runs_left_beside_the_loading_locks_it_takes(hubenv: HubEnv) -> None:
    """A run killed as it loaded leaves its record (ETAG.lock.loading.PID) beside the lock it held: the rm that takes
    the lock deletes it, and what is not such a record stays."""
    hubenv.server.add_repo(SOLO, {SOLO_FILE: make_gguf_bytes("solo")})
    assert run_cli(hubenv.env, "pull", SOLO).returncode == 0
    [blob] = hubenv.blobs(SOLO)
    lock = hub_cache.lock_folder(SOLO) / f"{blob.name}.lock.loading"
    left, other = lock.with_name(f"{lock.name}.4242"), lock.with_name(f"{lock.name}.notes")
    for path in (left, other):
        path.write_text(f"{'a' * 40}/{SOLO_FILE}")
    removed = run_cli(hubenv.env, "models", "rm", "--yes", SOLO)
    assert removed.returncode == 0, removed.stderr
    assert not left.exists() and other.exists()
