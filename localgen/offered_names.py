"""The names Tab offers, one list for the shell's completion and the chat's: the models -m and /model take, those pull
and `models rm` take, the saved conversations --resume, --conversation and /load take, and those that
`conversations show|rm|mv` take as listed."""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgen.catalog import ListedModel
    from localgen.registry import ModelSpec, Registry


def models_offered(*, offline: bool, typed: str = "") -> list[tuple[str, bool]]:
    """The models `models list --all` lists, by name, with whether each is downloaded, and where typed names one
    before a colon (smollm2-135m:), its quants (_typed_quants): offline, the downloaded ones alone (nothing else can
    run); none where they cannot be listed (a broken models.toml: a run says why)."""
    rows, registry = _listed_models()
    offered = {row.name: row.downloaded for row in rows if row.downloaded or not offline}
    for name, downloaded in _typed_quants(typed, rows, registry, offline=offline):
        offered[name] = offered.get(name, False) or downloaded
    return sorted(offered.items())


def _typed_quants(typed: str, rows: list[ListedModel], registry: Registry | None, *,
                  offline: bool) -> set[tuple[str, bool]]:
    """NAME:QUANT, with whether it is downloaded, for the model typed before a colon: the quant its downloaded file
    has under its own name (the bundled smollm2-135m's Q4_1), and online the registry's quant and those the entry's
    repo was last listed with, never with the network; none where no listed name is typed before a colon."""
    name, colon, _ = typed.rpartition(":")
    if not colon:
        return set()
    quants = {(f"{row.name}:{row.model.quant}", True) for row in rows if row.name.lower() == name.lower() and
              row.model is not None and row.model.quant}
    spec = None if registry is None or offline else _entry_named(registry, name)
    if spec is not None:
        listed = _entry_quant_names(spec) | ({f"{spec.name}:{spec.quant}"} if spec.quant else set())
        quants.update((quant_name, False) for quant_name in listed)
    return quants


def _entry_named(registry: Registry, name: str) -> ModelSpec | None:
    """The registry entry name names, as a run reads it; None where it names none (a repo, a path, an unknown one)."""
    from localgen.errors import LocalgenError

    try:
        return registry.spec_for(registry.reference(name))
    except LocalgenError:  # an unknown name, or one that cannot be read: none
        return None


def models_to_pull(typed: str = "") -> list[str]:
    """The models pull takes by name: those `models list --all` lists, and the quants each registry model's repo, and
    the Hub repo typed (acme/Tiny-GGUF:Q), was last listed with (qwen2.5-1.5b:Q8_0, where qwen2.5-1.5b was listed),
    never with the network."""
    rows, registry = _listed_models()
    names = {row.name for row in rows}
    for spec in registry.models.values() if registry is not None else ():
        names.update(_entry_quant_names(spec))
    repo, colon, _ = typed.rpartition(":")
    if colon and repo.count("/") == 1:  # ORG/REPO: a repo id, as pull takes it
        names.update(_quant_names(repo))
    return sorted(names)


def _entry_quant_names(spec: ModelSpec) -> set[str]:
    """NAME:QUANT for each model the entry's repo was last listed with (none for an entry of a file)."""
    return _quant_names(spec.repo or "", spec.name)


def _quant_names(repo: str, name: str = "") -> set[str]:
    """NAME:QUANT for each model (a first shard, never an auxiliary file) of repo's last listing, NAME the repo as the
    cache spells it where none is given; none where it was never listed or its cache cannot be read."""
    from localgen.hub_cache import cached_listing, cached_spelling
    from localgen.hub_choice import is_auxiliary_name

    try:
        files = cached_listing(repo) if repo else None
        name = name or cached_spelling(repo)
    except Exception:  # a cache that cannot be read: none
        return set()
    return {f"{name}:{file.quant}" for file in files or () if file.quant and (file.shard_index or 1) == 1 and
            not is_auxiliary_name(file.filename)}


def models_removable(typed: str = "") -> list[str]:
    """The models `models rm` removes: those downloaded from the Hub, whole or in part (never a packaged file nor a
    models.toml entry's own file)."""
    from localgen.catalog import SOURCE_HUB

    return sorted(row.name for row in _listed_models()[0] if row.model is not None and row.model.source == SOURCE_HUB)


def _listed_models() -> tuple[list[ListedModel], Registry | None]:
    """The rows of `models list --all` and the registry they come of (not those of the places of the Hugging Face
    cache its permissions keep from being read: the listing warns of them); none where they cannot be listed."""
    from localgen.catalog import list_all_models
    from localgen.config import settings
    from localgen.registry import load_registry

    try:
        registry = load_registry(settings().user_registry)
        return list_all_models(registry, refused=[]), registry
    except Exception:  # a completion offers nothing rather than fail
        return [], None


def conversations_offered() -> list[str]:
    """The saved conversations' names, newest first (none where their folder cannot be listed: a link to itself)."""
    from localgen.conversation_store import list_conversations

    try:
        return [name for name, _ in list_conversations()]
    except Exception:  # a completion offers nothing rather than fail
        return []


def conversations_listed(typed: str = "") -> list[str]:
    """The names `localgen conversations` lists, newest first, those against the naming rule too (my notes, a pipe),
    which `conversations show|rm|mv` take as listed; one that starts with '-' only where typed does (after `--`, as
    those commands take it)."""
    from localgen.conversation_store import list_conversations

    try:
        return [name for name, _ in list_conversations(unusable=True) if name[:1] != "-" or typed[:1] == "-"]
    except Exception:  # a completion offers nothing rather than fail
        return []


def conversation_identity(name: str) -> Hashable:
    """What tells a conversation typed apart from another: its file, as os.path.samestat compares two (notes and NOTES
    are one on a case-insensitive file system, two elsewhere; notes.json is notes), or its name where it has none."""
    from localgen.conversation_store import given_name, saved_path

    try:
        stat = os.lstat(saved_path(given_name(name)))
    except Exception:  # an invalid name, or none saved: the name alone
        return name
    return stat.st_dev, stat.st_ino


def starting_with(names: Iterable[str], typed: str) -> list[str]:
    """The names that start with typed, in any case (a model's name and quant are read so: smollm2-135m:q is
    smollm2-135m:Q8_0's start)."""
    return [name for name in names if name.lower().startswith(typed.lower())]
