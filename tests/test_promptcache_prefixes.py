"""Entries for prefixes of a prompt saved later: gone where the longer one serves every usual context, kept for a
usual context (8,192 tokens, doubled) that the longer one does not fit in, so a run given it still restores them."""

from __future__ import annotations

from pathlib import Path

from localgen.config import DEFAULT_CONTEXT_CAP
from localgen.promptcache import PromptCache, list_entries


def _cache(tmp_path: Path) -> PromptCache:
    return PromptCache(tmp_path, "model-a", max_bytes=1 << 20, min_new_tokens=1, min_gain_tokens=1)


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
    assert _held(tmp_path) == [7000], "within one usual context only the longest stays"
    cache.store(range(9000), b"x")
    cache.store(range(10000), b"x")
    assert _held(tmp_path) == [7000, 10000], "9,000 tokens served no context that 10,000 does not"
    cache.store(range(17000), b"x")
    assert _held(tmp_path) == [7000, 10000, 17000]
    for most, restored in ((8192, 7000), (16384, 10000), (32768, 17000), (12000, 10000)):
        found = cache.find(range(20000), most=most)
        assert found is not None and len(found.tokens) == restored
    cache.store([*range(9500), 5], b"x")
    assert _held(tmp_path) == [7000, 9501, 10000, 17000], "a prompt that parts from an entry leaves it"
