"""Why `models rm` removes nothing: a path (never removed), a bundled model, a model not in the cache or gone."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from localgen import hub_cache
from localgen.catalog import bundled_file, display_name, hub_groups
from localgen.errors import LocalgenError, ModelNotFoundError, UsageError
from localgen.hub_choice import quant_of
from localgen.hub_names import reference_name
from localgen.hub_slips import with_downloaded_repo
from localgen.model_file_errors import path_not_removed
from localgen.partial_downloads import are_partly_downloaded, partial_downloads
from localgen.references import EMPTY_REFERENCE, ModelRef
from localgen.registry import ModelSpec, Registry


def refuse_empty(reference: str) -> None:
    """Refuse an empty reference naming what rm takes: a downloaded model by its name, never a path."""
    if not reference.strip():
        raise UsageError(EMPTY_REFERENCE, hint="name a downloaded model: NAME[:QUANT], ORG/REPO[:QUANT] or "
                                               "ORG/REPO/FILE.gguf; `localgen models list` lists them")


def refuse_gone(name: str, files: list[hub_cache.CachedHubFile]) -> None:
    """Refuse a model none of whose files is there any longer (another models rm removed it as this one waited)."""
    if not any(os.path.lexists(f.path) for f in files):
        raise ModelNotFoundError(f"{name} is no longer in the cache",
                                 hint="another command removed it meanwhile; see `localgen models list`")


def not_in_cache(registry: Registry, reference: str, ref: ModelRef, repo: str,
                 groups: list[list[hub_cache.CachedHubFile]]) -> ModelNotFoundError:
    """The refusal of a model not in the cache (reference: as typed, ref: parsed): what the cache holds of its repo
    (groups), and which of the repo's models are partly downloaded, else where to look."""
    names = sorted(display_name(registry, fs[0].repo, quant_of(fs[0].filename), fs[0].filename) for fs in groups)
    parts = [part.name for part in partial_downloads(registry) if part.repo.lower() == repo.lower()]
    held = []
    if names:
        held.append(f"the cache holds {', '.join(names)}")
    if parts:
        held.append(are_partly_downloaded(parts))
    if not held:
        return ModelNotFoundError(f"{reference} is not in the cache",
                                  hint=with_downloaded_repo("see `localgen models list`", reference, repo))
    # named as the cache spells the repo
    return ModelNotFoundError(f"{reference_name(ref)} is not in the cache", hint=f"of that repo, {'; '.join(held)}")


def refuse_path(registry: Registry, ref: ModelRef) -> None:
    """A file path is never removed: the bundled file gets its own message."""
    target = Path(os.path.realpath(ref.path)) if ref.path else None  # Path.resolve raises for a loop of links
    for spec in registry.models.values():
        bundled = bundled_file(spec)
        if bundled is not None and target == bundled.resolve():
            raise bundled_not_removable(spec, f"{ref.text} is the bundled {spec.name} model", UsageError)
    model = _cached_model_of(registry, ref.path) if ref.path is not None else None
    if model is not None:  # a path into the Hugging Face cache (in any snapshot): its model goes by its name
        raise UsageError(f"{ref.text} is a file of the cached model {model}",
                         hint=f"remove the whole model, every shard and its blobs: `localgen models rm "
                              f"{shlex.quote(model)}`")
    raise path_not_removed(ref.text, ref.path)


def _cached_model_of(registry: Registry, path: Path) -> str | None:
    """The name of the cached model a path is a file of, in the newest snapshot or an older one (None: of none)."""
    try:
        target = path.resolve()
    except (OSError, RuntimeError):
        return None
    for (repo, _key), files in hub_groups(dangling=True).items():
        for f in files:
            if path == f.path or target == f.path.resolve() or target == f.path.parent.resolve() / f.path.name:
                return display_name(registry, repo, quant_of(f.filename), f.filename)
    return None


def bundled_not_removable(spec: ModelSpec, what: str, kind: type[LocalgenError]) -> LocalgenError:
    """The refusal to remove a bundled model's file (what names it), with the command that does: a kind of
    ModelNotFoundError for a name that has nothing in the cache, UsageError for a path (never removed)."""
    return kind(f"{what} and cannot be removed", hint=f"`pip uninstall {spec.distribution}` removes it")
