"""What a listing of the models here reads, so that it stays quick over a Hugging Face cache of hundreds of repos: the
cache folder's place resolved once for each setting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from localgen import hub_cache


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[Any]) -> None:
    """Replace owner.name by a wrapper that notes each call's first argument in calls."""
    original: Callable[..., Any] = getattr(owner, name)

    def counted(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return original(first, *args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


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
