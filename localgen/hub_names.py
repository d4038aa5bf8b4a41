"""How every command names a Hub model: ORG/REPO[:QUANT] or ORG/REPO/FILE, spelled as the cache spells the repo and
its listing the file, however it was typed (an address, hf://, another case); and how `[defaults] model` keeps one."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from localgen import hub_cache
from localgen.hub_choice import listed_filename
from localgen.references import ModelRef, hub_prefixes, looks_like_path

if TYPE_CHECKING:
    from pathlib import Path


def reference_name(ref: ModelRef) -> str:
    """A reference as every command names it: a Hub model as ORG/REPO[:QUANT] or ORG/REPO/FILE, its repo spelled as
    its folder in the cache spells it (the Hub's own spelling, where localgen downloaded it) however it was typed, and
    a file typed in another case as the repo's listing spells it (the file -m takes); a registry name or a path as
    typed."""
    if ref.repo is None or ref.path is not None:
        return ref.text
    repo = hub_cache.cached_spelling(ref.repo)
    return replace(ref, repo=repo, filename=_listed_spelling(repo, ref.filename)).canonical


def _listed_spelling(repo: str, filename: str | None) -> str | None:
    """A file name as localgen last listed the repo spelling it (the file -m takes for it); else as typed."""
    if filename is None:
        return None
    return listed_filename(hub_cache.cached_listing(repo) or (), filename) or filename


def kept_hub_reference(ref: ModelRef, base: Path | None = None) -> str:
    """A Hub model as `[defaults] model` keeps it and every command shows it: as every command names it
    (reference_name: acme/tiny-gguf:q8_0 and https://huggingface.co/acme/tiny-gguf:q8_0, or a mirror's address of it,
    as acme/Tiny-GGUF:Q8_0 once downloaded), but as hf.co/ORG/REPO/FILE for a file given by its address, and as
    hf.co/... where that name would be read as a file in base (the models.toml's folder; None: the current one)."""
    named = reference_name(ref)
    addressed = ref.filename is not None and ref.text.lower().startswith(hub_prefixes())
    return f"hf.co/{named}" if addressed or looks_like_path(named, base) else named
