"""What a listing of the models here reads, so that it stays quick over a Hugging Face cache of hundreds of repos: the
cache folder's place resolved once for each setting, the folder itself read once, each repo's listing read once for
all its models, and `localgen cache` naming its entries' models alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import catalog, hub, hub_cache
from localgen.config import settings
from localgen.registry import load_registry

LISTED = "org/listed-GGUF"  # localgen's download: its listing is kept
OTHERS = ("org/other-GGUF", "Acme/Another-GGUF")  # another tool's downloads: no listing
QUANTS = ("Q4_K_M", "Q8_0", "Q4_0")


def _repo_files(name: str) -> dict[str, bytes | Path]:
    """A repo of three quants of one model."""
    return {f"{name}-{quant}.gguf": make_gguf_bytes(f"{name}{quant}", 2_000) for quant in QUANTS}


def _another_tool_downloads(hubenv: HubEnv, repo: str) -> None:
    """Download every file of a repo as another Hugging Face tool does: no listing of localgen's."""
    from huggingface_hub import hf_hub_download

    for filename in _repo_files(repo.split("/")[1]):
        hf_hub_download(repo, filename, cache_dir=str(hubenv.hf_cache))


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[Any]) -> None:
    """Replace owner.name by a wrapper that notes each call's first argument in calls."""
    original: Callable[..., Any] = getattr(owner, name)

    def counted(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return original(first, *args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


@pytest.fixture
def cache_of_three(hubenv: HubEnv) -> HubEnv:
    """One repo localgen downloaded (its three quants), two another tool downloaded."""
    for repo in (LISTED, *OTHERS):
        hubenv.server.add_repo(repo, _repo_files(repo.split("/")[1]))
    for quant in QUANTS:
        hub.download_model(LISTED, quant=quant, filename=None, quiet=True)
    for repo in OTHERS:
        _another_tool_downloads(hubenv, repo)
    return hubenv


def test_the_cache_folder_is_resolved_once_for_each_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing asks where the cache is for every repo: the answer is resolved once, and afresh for another
    HF_HUB_CACHE, another working folder (a relative one), or a folder made since (through a link too)."""
    from huggingface_hub import constants

    first, second = tmp_path / "a" / "hub", tmp_path / "b" / "hub"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    (tmp_path / "link").symlink_to(first)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "link"))
    assert hub_cache.hub_cache_dir() == first
    resolved: list[Path] = []
    _counting(monkeypatch, Path, "resolve", resolved)
    assert hub_cache.hub_cache_dir() == first and not resolved, "resolved once"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(second))
    assert hub_cache.hub_cache_dir() == second
    monkeypatch.setattr(constants, "HF_HUB_CACHE", "hub")
    monkeypatch.chdir(tmp_path / "a")
    assert hub_cache.hub_cache_dir() == first
    monkeypatch.chdir(tmp_path / "b")
    assert hub_cache.hub_cache_dir() == second
    later = tmp_path / "c" / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(later))
    assert hub_cache.hub_cache_dir() == later, "not there yet"
    later.parent.mkdir()
    later.symlink_to(first)
    assert hub_cache.hub_cache_dir() == first, "made since, as a link"
    later.unlink()
    later.symlink_to(second)
    assert hub_cache.hub_cache_dir() == second, "the link pointed elsewhere since"


def test_a_listing_reads_the_cache_folder_once(cache_of_three: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each repo another tool downloaded had the whole cache folder read again to find its spelling, twice and more
    (hundreds of repos: hundreds of thousands of entries); `models list --all` and Tab read it once."""
    listed: list[Path] = []
    _counting(monkeypatch, Path, "iterdir", listed)
    rows = catalog.list_all_models(load_registry(settings().user_registry))
    names = {row.name for row in rows if row.downloaded}
    assert {f"{LISTED}:{quant}" for quant in QUANTS} <= names
    assert {f"{repo}/{repo.split('/')[1]}-Q8_0.gguf" for repo in OTHERS} <= names
    assert listed.count(hub_cache.hub_cache_dir()) == 1, listed


def test_a_repo_s_listing_is_read_once_for_all_its_models(cache_of_three: HubEnv,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing was read again to name each of the repo's models: as often as it had models, and over again for
    each repo another tool downloaded, whose files were looked for verification markers as often."""
    registry = load_registry(settings().user_registry)
    loaded: list[str] = []
    verified: list[str] = []
    _counting(monkeypatch, hub_cache, "load_listing", loaded)
    _counting(monkeypatch, hub_cache, "_verified_listing", verified)
    names = [model.name for model in catalog.list_models(registry) if model.source == catalog.SOURCE_HUB]
    assert len(names) == 9, names
    assert loaded.count(LISTED) == 2, loaded  # its files' verification, then their names
    assert all(loaded.count(repo) == 2 for repo in OTHERS), loaded  # looked for, for each
    assert sorted(verified) == sorted(OTHERS), verified


def test_cache_names_its_entries_models_alone(cache_of_three: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """`localgen cache` named every model in the Hugging Face cache to find the names of its entries' models: seconds
    over hundreds of repos for a few entries."""
    from localgen.catalog import touch_last_used
    from localgen.promptcache import prompt_cache_for
    from localgen.promptcache_models import describe_cache

    (model,) = hub_cache.cached_model(LISTED, quant="Q8_0", filename=None)
    touch_last_used(model)
    prompt_cache_for(model, "state").store(list(range(300)), b"kv" * 100)
    named: list[Any] = []
    _counting(monkeypatch, catalog, "display_names", named)
    _, rows = describe_cache()
    assert [row[3] for row in rows] == [f"{LISTED}:Q8_0"]
    assert len(named) == 1, named


def test_a_download_between_two_listings_is_in_the_second(cache_of_three: HubEnv) -> None:
    """The chat lives long, and its /model pulls: each listing reads the cache folder afresh, none keeps it."""
    registry = load_registry(settings().user_registry)
    before = {row.name for row in catalog.list_all_models(registry) if row.downloaded}
    for repo in ("late/Comer-GGUF", "Late/Other-GGUF"):
        cache_of_three.server.add_repo(repo, _repo_files(repo.split("/")[1]))
    hub.download_model("late/Comer-GGUF", quant="Q8_0", filename=None, quiet=True)
    _another_tool_downloads(cache_of_three, "Late/Other-GGUF")
    after = {row.name for row in catalog.list_all_models(registry) if row.downloaded}
    assert after - before == {"late/Comer-GGUF:Q8_0", *(f"Late/Other-GGUF/Other-GGUF-{quant}.gguf" for quant in QUANTS)}
