"""`localgen models` against the loopback Hub: rm of a split model a pull left part way, and more than one
models.toml name for one file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import REPO_ROOT, HubRepo, HubServer, make_gguf_bytes, run_cli, run_python

from localgen.units import binary_size

SPLIT = "org/split-GGUF"
PART = "org/part-GGUF"
SIZE = 2_500_000


def _hub_folder(repo: str) -> str:
    """A repo's folder in the Hugging Face cache."""
    return "models--" + repo.replace("/", "--")


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
    assert cut.returncode == 1, cut.stderr
    assert f"are on disk, which `localgen pull {SPLIT}:Q4_K_M` resumes" in cut.stderr, cut.stderr
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


@pytest.mark.parametrize("whole_in", ["org/whole-GGUF", "org/part-GGUF"], ids=["another repo", "the same repo"])
def test_rm_of_a_model_a_pull_downloaded_in_part_removes_the_repo_folder_it_empties(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path, whole_in: str) -> None:
    """rm deleted the part and left models--org--part-GGUF with an empty blobs folder (and the cache's refs), where
    rm of a whole model removes its folder; a model downloaded whole stays as it is, in its repo or the same one. Its
    question and its line say "NAME (SIZE, partly downloaded)", as `models list` does, where a list of models to remove
    read "NAME, downloaded in part (SIZE), OTHER (SIZE)", as if three."""
    server, env = hub
    part_file, w = {"p-Q8_0.gguf": make_gguf_bytes("p", 6_000_000)}, make_gguf_bytes("w")  # p: past one header read
    server.add_repo("org/part-GGUF", part_file | ({"w-Q4_K_M.gguf": w} if whole_in == PART else {}))
    server.add_repo("org/whole-GGUF", {"w-Q4_K_M.gguf": w})
    assert run_cli(env, "pull", f"{whole_in}:Q4_K_M").returncode == 0
    cache = tmp_path / "hf" / "hub"
    whole = sorted(p.relative_to(cache) for p in (cache / _hub_folder(whole_in)).rglob("*") if p.is_file())
    server.abort_after[(PART, "p-Q8_0.gguf")] = 5_000_000
    server.down_after_abort = True
    cut = run_cli(env, "pull", f"{PART}:Q8_0")
    assert cut.returncode == 1, cut.stderr
    assert f"are on disk, which `localgen pull {PART}:Q8_0` resumes" in cut.stderr, cut.stderr
    server.down = False
    (part,) = (cache / _hub_folder(PART) / "blobs").glob("*.incomplete")
    kept = part.stat().st_size
    asked = run_cli(env, "models", "rm", f"{PART}:Q8_0", f"{whole_in}:Q4_K_M")  # no terminal: what it would ask is said
    assert asked.returncode == 2 and asked.stderr.startswith(
        f"localgen: error: removing {PART}:Q8_0 ({binary_size(kept)}, partly downloaded), {whole_in}:Q4_K_M "
        f"({binary_size(len(w))}) needs confirmation"), asked.stderr
    removed = run_cli(env, "models", "rm", f"{PART}:Q8_0", "-y")
    assert removed.returncode == 0 and removed.stderr == (
        f"localgen: removed {PART}:Q8_0 (partly downloaded): freed {binary_size(kept)}\n"), removed.stderr
    assert (cache / _hub_folder(PART)).exists() == (whole_in == PART), "an empty folder of a model no longer there"
    assert sorted(p.relative_to(cache) for p in (cache / _hub_folder(whole_in)).rglob("*") if p.is_file()) == whole


PULL_HELD_AT_ITS_LOCK = """
import runpy
import sys

import huggingface_hub.utils

locked = huggingface_hub.utils.WeakFileLock


def held(path, *args, **kwargs):
    print("waiting", flush=True)  # the pull waits on its blob's lock: the test acts, then lets it go on
    sys.stdin.readline()
    return locked(path, *args, **kwargs)


huggingface_hub.utils.WeakFileLock = held
sys.argv = ["localgen", *sys.argv[1:]]
runpy.run_module("localgen", run_name="__main__", alter_sys=True)
"""


def _part_kept(server: HubServer, env: dict[str, str]) -> HubRepo:
    """org/part-GGUF, whose p-Q8_0.gguf a pull cut part way kept in part and whose w-Q4_K_M.gguf is not pulled."""
    repo = server.add_repo(PART, {"p-Q8_0.gguf": make_gguf_bytes("p", 6_000_000),  # past the first read of its header
                                  "w-Q4_K_M.gguf": make_gguf_bytes("w")})
    server.abort_after[(PART, "p-Q8_0.gguf")] = 5_000_000
    server.down_after_abort = True
    cut = run_cli(env, "pull", f"{PART}:Q8_0")
    assert cut.returncode == 1, cut.stderr
    assert f"are on disk, which `localgen pull {PART}:Q8_0` resumes" in cut.stderr, cut.stderr
    server.down = False
    return repo


def test_a_pull_waiting_on_its_lock_as_rm_of_the_repo_s_part_empties_its_folder_still_downloads(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """The pull had made blobs/ before its wait, which rm's removal of the emptied repo folder took away: it failed
    with FileNotFoundError for blobs/SHA.incomplete."""
    server, env = hub
    _part_kept(server, env)
    pull = subprocess.Popen([sys.executable, "-c", PULL_HELD_AT_ITS_LOCK, "pull", f"{PART}:Q4_K_M"], env=env,
                            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert pull.stdout is not None and pull.stdout.readline() == "waiting\n", pull.stderr
        removed = run_cli(env, "models", "rm", f"{PART}:Q8_0", "-y")
        assert removed.returncode == 0, removed.stderr
    finally:
        _out, err = pull.communicate("\n", timeout=120)
    assert pull.returncode == 0, err
    assert [p.name for p in (tmp_path / "hf" / "hub" / _hub_folder(PART)).rglob("*.gguf")] == ["w-Q4_K_M.gguf"]


def test_rm_of_a_part_leaves_the_repo_folder_while_a_download_of_another_of_its_files_holds_its_lock(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """A download that holds its blob's lock is about to write in blobs/: its repo folder is not taken from it."""
    from huggingface_hub.utils import WeakFileLock

    server, env = hub
    repo = _part_kept(server, env)
    repo_dir = tmp_path / "hf" / "hub" / _hub_folder(PART)
    lock = tmp_path / "hf" / "hub" / ".locks" / _hub_folder(PART) / f"{repo.sha256('w-Q4_K_M.gguf')}.lock"
    with WeakFileLock(lock):  # as a pull of w-Q4_K_M.gguf holds it
        removed = run_cli(env, "models", "rm", f"{PART}:Q8_0", "-y")
    assert removed.returncode == 0, removed.stderr
    assert (repo_dir / "blobs").is_dir() and not list((repo_dir / "blobs").iterdir()), "taken from the download"


@pytest.mark.parametrize(("flock", "running"), [(True, False), (False, True), (None, False)])
def test_a_repo_s_downloads_are_running_only_where_a_lock_is_held(
        flock: bool | None, running: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed pull's lock file, free (True: taken at once) or on a file system without locks (None), keeps no
    emptied repo folder; one another process holds (False) does. A blob's own check tells an untestable lock apart
    (None), which a pull and models list still take as a download that may be writing the blob."""
    from localgen import hub_cache

    monkeypatch.setattr(hub_cache, "hub_cache_dir", lambda: tmp_path / "hub")
    repo_dir = tmp_path / "hub" / "models--org--m"
    (tmp_path / "hub" / ".locks" / repo_dir.name).mkdir(parents=True)
    assert not hub_cache.downloads_running(repo_dir), "no lock file at all"
    (tmp_path / "hub" / ".locks" / repo_dir.name / "abc.lock").touch()
    monkeypatch.setattr(hub_cache, "try_flock", lambda fd: flock)
    assert hub_cache.downloads_running(repo_dir) is running
    assert hub_cache.download_running("org/m", "abc") is (None if flock is None else not flock)
    assert hub_cache.download_may_run("org/m", "abc") is (flock is not True)


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
        f"localgen: error: model '{SPLIT}:Q4_K_M' is incomplete (2 shards of 3 missing) and localgen is offline "
        "(hint: offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "
        f"`localgen pull {SPLIT}:Q4_K_M`)\n"), offline.stderr
    server.down = True
    failing = run_cli(env, "run", "-m", f"{SPLIT}:Q4_K_M", "hi")
    assert failing.returncode == 1 and "HTTP 503" in failing.stderr, failing.stderr
    assert "-m " not in failing.stderr and "not verified" not in failing.stderr, failing.stderr


def test_two_models_toml_names_of_one_file_are_each_listed_marked_default_and_named_when_it_is_removed(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """One row stood for the file, under the first name alphabetically (coder): tiny vanished, its default marked no
    row, and rm tiny said it removed coder."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q4_1.gguf": make_gguf_bytes("q4", 20_000),
                                       "tiny-Q8_0.gguf": make_gguf_bytes("q8", 20_000)})
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True)
    (config / "models.toml").write_text('[models.tiny]\nrepo = "acme/Tiny-GGUF"\nquant = "Q4_1"\n\n'
                                        '[models.coder]\nrepo = "acme/Tiny-GGUF"\nquant = "Q4_1"\n'
                                        'system = "You write code."\n')
    assert run_cli(env, "pull", "tiny").returncode == 0
    assert run_cli(env, "models", "default", "tiny").returncode == 0
    listed = run_cli(env, "models", "--json")
    rows = [(m["name"], m["default"]) for m in json.loads(listed.stdout) if m["source"] == "hub"]
    assert rows == [("coder", False), ("tiny", True)], listed.stdout
    table = run_cli(env, "models").stdout.splitlines()
    assert [row.split("\t")[0::6] for row in table if "\thub\t" in row] == [["coder", "no"], ["tiny", "yes"]], table
    every = run_cli(env, "models", "list", "--all", "--json")
    assert [(m["name"], m["downloaded"], m["default"]) for m in json.loads(every.stdout)
            if m["repo"] == "acme/Tiny-GGUF"] == [("coder", True, False), ("tiny", True, True)], every.stdout
    removed = run_cli(env, "models", "rm", "tiny", "coder", "-y")
    assert removed.returncode == 0 and removed.stderr == (
        "localgen: removed tiny from acme/Tiny-GGUF, also named coder: freed 19.5 KiB\n"
        "localgen: tiny is still the default model, so run and chat without -m download it again (`localgen models "
        "default REF` sets another)\n"), removed.stderr
    assert "\thub\t" not in run_cli(env, "models").stdout
