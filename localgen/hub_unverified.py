"""GGUF files in the local Hugging Face cache that localgen has not verified (another tool downloaded them): which
of them a download would take, and how to name the others."""

from __future__ import annotations

from pathlib import Path

from localgen.hub_cache import CachedHubFile, cached_gguf_files, folders_of
from localgen.hub_choice import carries_tag, is_auxiliary_name, pick_order, quant_of, shard_of
from localgen.hub_types import lookalike_note


def unverified_file(repo: str, *, quant: str | None, filename: str | None,
                    incomplete: bool = False) -> Path | None:
    """A GGUF file of repo in the local cache that localgen has not verified (another tool downloaded it): the first
    of unverified_files, the one a download would take."""
    found = unverified_files(repo, quant=quant, filename=filename, incomplete=incomplete)
    return found[0].path if found else None


def unverified_files(repo: str, *, quant: str | None, filename: str | None,
                     incomplete: bool = False) -> list[CachedHubFile]:
    """The GGUF files of repo in the local cache that localgen has not verified (another tool downloaded them), in
    the order a download would take them (hub_choice.pick_order: m-Q4_K_M.gguf before m-instruct-Q4_K_M.gguf).

    They match the exact filename when one is given, else the quant when one is given, else any file; the first
    shard of a split model stands for it (incomplete: a verified first shard too, when other shards are missing, as
    a pull that stopped part way leaves it).
    """
    found = []
    for f in cached_gguf_files(folders=folders_of(repo)):
        if f.repo.lower() != repo.lower() or (shard_of(f.filename)[0] or 1) != 1:
            continue
        if f.verified and not (incomplete and _shards_missing(f.path)):
            continue
        if filename is not None and f.filename != filename:
            continue
        if filename is None and quant is not None and not carries_tag(f.filename, quant):
            continue
        found.append(f)
    return sorted(found, key=lambda f: pick_order(f.filename, split=shard_of(f.filename)[0] is not None))


def unverified_lookalikes_note(repo: str, *, quant: str | None, filename: str | None) -> str:
    """What follows `-m PATH` of the unverified file unverified_file names, where other unverified models of the
    repo in the cache carry its quant tag: how to name each other one, and the -m PATH that uses it as it is ("" where
    none does, or a file was named)."""
    found = [] if filename is not None else unverified_files(repo, quant=quant, filename=None)
    taken = quant_of(found[0].filename) if found else None
    others = [f for f in found[1:] if quant_of(f.filename) == taken and not is_auxiliary_name(f.filename)]
    if taken is None or not others:
        return ""
    split = any(shard_of(f.filename)[1] for f in (found[0], *others))
    return lookalike_note(found[0].repo, taken, [_named_with_path(f) for f in others], split=split,
                          where=" in the Hugging Face cache")


def _named_with_path(file: CachedHubFile) -> str:
    """A cached model as a reference names it, with the -m PATH that uses it as it is (a split model's first shard:
    which of how many it is)."""
    count = shard_of(file.filename)[1]
    shard = f"shard 1 of {count}, " if count else ""
    return f"{file.repo}/{file.filename} ({shard}-m {file.path})"


def _shards_missing(first_shard: Path) -> bool:
    """True when some shard of a split model is not on disk."""
    from localgen.gguf_split import present_shards

    return bool(present_shards(first_shard)[1])
