"""A pull whose model a `models rm` beside it removes as the pull ends (its last file linked, or its files being
checked): the pull downloads the model again whole and says so, or says that it could not keep it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import gguf_split, hub
from localgen.cli import app
from localgen.cli_exit import run_app
from localgen.model_removal import remove_model
from localgen.registry import load_registry

REPO = "org/ends-GGUF"
S1, S2 = "ends-Q4_K_M-00001-of-00002.gguf", "ends-Q4_K_M-00002-of-00002.gguf"
ONE = "ends-Q8_0.gguf"


def _pulled_split(hubenv: HubEnv) -> None:
    """REPO's split Q4_K_M, served and downloaded once."""
    hubenv.server.add_repo(REPO, {S1: make_gguf_bytes("a", shard=(1, 2)), S2: make_gguf_bytes("b", shard=(2, 2)),
                                  ONE: make_gguf_bytes("one")})
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)


def _removed_as_shards_are_read(monkeypatch: pytest.MonkeyPatch, times: int) -> list[str]:
    """Remove REPO's Q4_K_M (as models rm does) as a pull's check that its shards agree begins, the first times
    checks: the names removed."""
    real, removed = gguf_split.validate_split, list[str]()

    def removed_first(first_shard: Path) -> Any:
        if len(removed) < times:
            removed.append(remove_model(load_registry(), f"{REPO}:Q4_K_M").name)
        return real(first_shard)

    monkeypatch.setattr(gguf_split, "validate_split", removed_first)
    return removed


def _removed_once_linked(monkeypatch: pytest.MonkeyPatch, name: str, reference: str) -> list[str]:
    """Remove the model reference names (as models rm does) once a pull has linked its file name into the snapshot
    and let go of its lock, before the pull checks it, the first time: the names removed."""
    real, removed = hub.fetch_blob, list[str]()

    def removed_once_linked(repo: str, revision: str, f: Any, *args: Any, **kwargs: Any) -> Any:
        fetched = real(repo, revision, f, *args, **kwargs)
        if f.filename == name and not removed:
            removed.append(remove_model(load_registry(), reference).name)
        return fetched

    monkeypatch.setattr(hub, "fetch_blob", removed_once_linked)
    return removed


def _whole(hubenv: HubEnv, paths: list[Path], names: list[str]) -> None:
    """The pull's paths are the model's files, there, and the only entries of REPO's snapshot."""
    assert [p.name for p in paths] == names and all(p.is_file() for p in paths)
    assert [p.name for p in hubenv.snapshot_files(REPO)] == names


def test_a_split_model_removed_as_the_pull_checks_its_shards_is_downloaded_again_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """rm removing the model after the pull found every shard there, as it read them to check they agree: the pull
    failed with 'ends-Q4_K_M-00001-of-00002.gguf: file not found' and left nothing."""
    _pulled_split(hubenv)
    removed = _removed_as_shards_are_read(monkeypatch, 1)
    paths = hub.download_model(REPO, quant="Q4_K_M", filename=None, force=True, quiet=True)
    assert removed == [f"{REPO}:Q4_K_M"]
    _whole(hubenv, paths, [S1, S2])
    err = capfd.readouterr().err
    for name in (S1, S2):
        assert f"localgen: {REPO}/{name} was removed as this pull ended; it was downloaded again\n" in err, err


def test_a_split_model_removed_once_the_pull_linked_its_last_shard_is_downloaded_again_whole(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """rm waiting on the last shard's lock removed the model as soon as the pull let go of it, before the pull checked
    that shard: the pull failed with 'ends-Q4_K_M-00002-of-00002.gguf: file not found'."""
    _pulled_split(hubenv)
    removed = _removed_once_linked(monkeypatch, S2, f"{REPO}:Q4_K_M")
    paths = hub.download_model(REPO, quant="Q4_K_M", filename=None, force=True, quiet=True)
    assert removed == [f"{REPO}:Q4_K_M"]
    _whole(hubenv, paths, [S1, S2])
    err = capfd.readouterr().err
    assert f"localgen: {REPO}/{S2} was removed as this pull ended; it was downloaded again\n" in err, err
    assert f"localgen: {REPO}/{S1} was removed while this pull fetched the model's other shards; it was " \
           "downloaded again\n" in err, err


def test_a_single_file_removed_once_the_pull_linked_it_is_downloaded_again(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The pull failed with 'ends-Q8_0.gguf: file not found' where rm removed the file between its link and its
    check."""
    hubenv.server.add_repo(REPO, {ONE: make_gguf_bytes("one")})
    removed = _removed_once_linked(monkeypatch, ONE, f"{REPO}:Q8_0")
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    assert removed == [f"{REPO}:Q8_0"] and path.is_file()
    assert f"localgen: {REPO}/{ONE} was removed as this pull ended; it was downloaded again\n" in capfd.readouterr().err


def test_a_pull_whose_model_is_removed_each_time_it_is_downloaded_again_gives_up_saying_so(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Removed again as each download again ended, the model was said to have a shard 'file not found'."""
    _pulled_split(hubenv)
    removed = _removed_as_shards_are_read(monkeypatch, hub.REMOVALS_AT_MOST)
    capfd.readouterr()
    code = run_app(app, ["pull", "--force", f"{REPO}:Q4_K_M"])
    err = capfd.readouterr().err
    assert len(removed) == hub.REMOVALS_AT_MOST and code == 1, err
    assert err.endswith(f"localgen: error: {REPO}/{S1} was removed {hub.REMOVALS_AT_MOST} times as this pull fetched "
                        "it (hint: let the `localgen models rm` of its model end, then pull it again)\n"), err
