"""What a `models rm` refused for a run loading its file says of that run, and what a pull refusing the Hub's newer
version of a model leaves in the cache's refs/main."""

from __future__ import annotations

from hub_server import HubEnv, make_gguf_bytes, run_cli

from localgen import hub_cache

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
