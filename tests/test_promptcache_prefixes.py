"""Entries for prefixes of a prompt saved later: gone where the longer one fits the context a run of their own prompt
gets (the model's default, or one sized to the prompt past it), kept where it does not, so such a run restores them."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen.config import DEFAULT_CONTEXT_CAP
from localgen.estimate import padded_context
from localgen.fit import counted_context
from localgen.promptcache import PromptCache, list_entries
from localgen.promptcache_prefixes import run_context


def _cache(tmp_path: Path, default_context: int = DEFAULT_CONTEXT_CAP) -> PromptCache:
    return PromptCache(tmp_path, "model-a", max_bytes=1 << 20, min_new_tokens=1, min_gain_tokens=1,
                       default_context=default_context)


def _held(tmp_path: Path) -> list[int]:
    return sorted(e.tokens or 0 for e in list_entries(tmp_path))


def test_a_run_with_the_default_context_restores_the_prefix_a_longer_context_s_run_extended(tmp_path: Path) -> None:
    """A conversation went past the default context (its run got a larger one) and saved its longer prompt: a run in
    the default context, which cannot load that, restores the prefix saved before it, which was deleted."""
    assert DEFAULT_CONTEXT_CAP == 8192
    cache = _cache(tmp_path)
    cache.store(range(8000), b"within")
    cache.store(range(9000), b"past")
    found = cache.find(range(8100), most=8192)
    assert found is not None and len(found.tokens) == 8000 and bytes(found.state) == b"within"
    found = cache.find(range(9100), most=16384)
    assert found is not None and len(found.tokens) == 9000, "a context that holds the longer entry restores it"


def test_a_growing_conversation_keeps_one_entry_per_usual_context_it_outgrew(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for tokens in (3000, 5000, 7000):
        cache.store(range(tokens), b"x")
    assert _held(tmp_path) == [7000], "within the default context only the longest stays"
    cache.store(range(9000), b"x")
    cache.store(range(9100), b"x")
    assert _held(tmp_path) == [7000, 9100], "a run of 9,000 tokens gets a context of 9,728, which holds 9,100"
    cache.store(range(10000), b"x")
    assert _held(tmp_path) == [7000, 9100, 10000], "a run of 9,100 tokens gets 9,728, which 10,000 does not fit"
    cache.store(range(17000), b"x")
    assert _held(tmp_path) == [7000, 9100, 10000, 17000]
    for most, restored in ((8192, 7000), (9728, 9100), (10752, 10000), (16384, 10000), (17664, 17000)):
        found = cache.find(range(20000), most=most)
        assert found is not None and len(found.tokens) == restored
    cache.store([*range(9500), 5], b"x")
    assert _held(tmp_path) == [7000, 9501, 10000, 17000], "a prompt that parts from an entry leaves it (9,100 is its"\
        " prefix, and 9,501 fits the context of 9,728 a run of it gets)"


def test_a_prompt_past_the_default_context_restores_its_prefix_in_the_context_a_run_gives_it(tmp_path: Path) -> None:
    """Kept were only entries for 8,192 tokens and its doublings: of 9,000 then 10,000 tokens only 10,000 stayed,
    which the 9,728 tokens a 9,050-token prompt gets cannot load."""
    cache = _cache(tmp_path)
    cache.store(range(9000), b"x")
    cache.store(range(10000), b"x")
    assert _held(tmp_path) == [9000, 10000]
    context = run_context(9050, DEFAULT_CONTEXT_CAP)
    assert context == padded_context(counted_context(9050)) == 9728
    found = cache.find(range(9050), most=context)
    assert found is not None and len(found.tokens) == 9000


def test_a_model_whose_default_context_is_smaller_keeps_the_entry_its_runs_restore(tmp_path: Path) -> None:
    """A model run in 4,096 tokens by default lost its entry of 3,000 to one of 5,000, which such a run cannot load."""
    cache = _cache(tmp_path, default_context=4096)
    cache.store(range(3000), b"x")
    cache.store(range(3500), b"x")
    assert _held(tmp_path) == [3500], "the default context holds the longer one"
    cache.store(range(5000), b"x")
    assert _held(tmp_path) == [3500, 5000]
    found = cache.find(range(3600), most=4096)
    assert found is not None and len(found.tokens) == 3500


@pytest.mark.parametrize(("ctx_size", "usual"), [(None, 8192), (1024, 1024)])
def test_a_run_keeps_entries_for_the_model_s_default_context_or_the_smaller_one_it_loaded(
        bundled_model: Path, ctx_size: int | None, usual: int) -> None:
    """The bundled model, trained for 8,192 tokens, runs in that by default; a run given less keeps its entries."""
    from localgen.runner import ModelOptions, disk_prompt_cache, load_model

    loaded = load_model(ModelOptions(model=str(bundled_model), ctx_size=ctx_size, threads=2))
    try:
        cache = disk_prompt_cache(loaded)
        assert cache is not None and cache.default_context == usual
    finally:
        loaded.close()
