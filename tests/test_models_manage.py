"""`localgen models` against the loopback Hub: rm of a split model a pull left part way, and more than one
models.toml name for one file."""

from __future__ import annotations

from pathlib import Path

from hub_server import HubServer, make_gguf_bytes, run_cli, run_python

from localgen.units import binary_size

SPLIT = "org/split-GGUF"
SIZE = 2_500_000


def _split(stem: str, count: int = 3) -> dict[str, bytes]:
    """The shards of a split model named STEM-0000N-of-0000COUNT.gguf, SIZE bytes each."""
    return {f"{stem}-{n:05d}-of-{count:05d}.gguf": make_gguf_bytes(f"{stem}{n}", SIZE, shard=(n, count))
            for n in range(1, count + 1)}


def _pull_cut_in_shard_2(hub: tuple[HubServer, dict[str, str]]) -> None:
    """Pull a 3-shard model that the Hub cuts in its second shard, which keeps what it received for resuming."""
    server, env = hub
    shards = _split("s-Q4_K_M")
    server.add_repo(SPLIT, shards)
    server.abort_after[(SPLIT, sorted(shards)[1])] = 1_500_000
    server.down_after_abort = True
    cut = run_cli(env, "pull", f"{SPLIT}:Q4_K_M")
    assert cut.returncode == 1 and "received are kept: the next pull resumes" in cut.stderr, cut.stderr
    server.down = False


def test_rm_of_a_split_model_cut_part_way_removes_the_shard_it_was_downloading(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """rm deleted the shard there was but kept the part of the one being downloaded, as if another model's, which
    `models list` still listed and a second rm freed."""
    _pull_cut_in_shard_2(hub)
    _server, env = hub
    blobs = tmp_path / "hf" / "hub" / "models--org--split-GGUF" / "blobs"
    kept = sorted(p.name.endswith(".incomplete") for p in blobs.iterdir())
    assert kept == [False, True], "shard 1, and the part of shard 2"
    held = sum(p.stat().st_size for p in blobs.iterdir())
    removed = run_cli(env, "models", "rm", f"{SPLIT}:Q4_K_M", "-y")
    assert removed.returncode == 0 and removed.stderr == (
        f"localgen: removed {SPLIT}:Q4_K_M: freed {binary_size(held)}\n"), removed.stderr
    assert not (tmp_path / "hf" / "hub" / "models--org--split-GGUF").exists()
    listed = run_cli(env, "models")
    assert listed.returncode == 0 and SPLIT not in listed.stdout, listed.stdout
    again = run_cli(env, "models", "rm", f"{SPLIT}:Q4_K_M", "-y")
    assert again.returncode == 1 and again.stderr.startswith(
        f"localgen: error: {SPLIT}:Q4_K_M is not in the cache"), again.stderr


def test_a_split_models_first_shard_alone_is_said_to_be_downloaded_in_part_not_offered_as_is(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """Its first shard alone, which localgen has not verified, was offered as a copy to use as it is (-m PATH), which
    then failed with `missing shard 2 of 3`; offline as with the Hub failing."""
    server, env = hub
    shards = sorted(_split("s-Q4_K_M"))
    server.add_repo(SPLIT, _split("s-Q4_K_M"))
    fetched = run_python(f"from huggingface_hub import hf_hub_download as get; print(get({SPLIT!r}, {shards[0]!r}))",
                         env)  # another tool's download of the first shard alone
    assert fetched.returncode == 0, fetched.stderr
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", f"{SPLIT}:Q4_K_M", "hi")
    assert offline.returncode == 1 and offline.stderr == (
        f"localgen: error: model '{SPLIT}:Q4_K_M' is downloaded only in part (2 shards of 3 missing) and localgen is "
        "offline (hint: offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "
        f"`localgen pull {SPLIT}:Q4_K_M`)\n"), offline.stderr
    server.down = True
    failing = run_cli(env, "run", "-m", f"{SPLIT}:Q4_K_M", "hi")
    assert failing.returncode == 1 and "HTTP 503" in failing.stderr, failing.stderr
    assert "-m " not in failing.stderr and "not verified" not in failing.stderr, failing.stderr

