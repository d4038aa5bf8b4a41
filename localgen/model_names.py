"""A model's name wherever it is printed (run's and bench's --json, the chat's banner, models show, a conversation's
record): as `models list` names its file, one name that -m takes back for that very file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from localgen.catalog import display_name
from localgen.config import settings
from localgen.errors import LocalgenError
from localgen.hub_choice import quant_of
from localgen.hub_names import reference_name
from localgen.hub_settings import snapshot_entry
from localgen.registry import load_registry

if TYPE_CHECKING:
    from localgen.resolve import ResolvedModel


def named_by_path(resolved: ResolvedModel) -> bool:
    """Whether a model is named by the path it was given by: a file given by path, no models.toml entry's, unless it
    is a snapshot entry of localgen's Hub cache that -m of the name models list gives it loads (cache_file_name)."""
    return resolved.ref.path is not None and resolved.spec is None and resolved.cache_file_name is None


def cache_file_name(resolved: ResolvedModel) -> str | None:
    """The name models list gives a file given to -m by its path in the Hub cache, where -m of that name loads that
    very file; None for any other (a copy localgen has not verified, an older snapshot's, a file elsewhere)."""
    if resolved.ref.path is None or resolved.spec is not None:
        return None
    name = listed_name(resolved.path)
    return name if name is not None and _loads(name, resolved.path) else None


def listed_name(path: Path) -> str | None:
    """The name models list gives a snapshot entry of the Hub cache (the model a pull of it fetches, whether -m of it
    loads this copy or another), None for any other path."""
    file = snapshot_entry(path)
    if file is None:
        return None
    repo, filename = file
    return display_name(load_registry(settings().user_registry), repo, quant_of(filename), filename)


def _loads(name: str, path: Path) -> bool:
    """Whether -m NAME loads the file at path (an absolute path, its folder resolved, as resolve.local_file gives it),
    found without the network as a run finds it."""
    from localgen.default_model import file_run_takes

    registry = load_registry(settings().user_registry)
    try:
        ref = registry.reference(name)
        taken = None if ref.path is not None else file_run_takes(registry, ref, registry.spec_for(ref))
    except (LocalgenError, OSError):
        return False
    return taken is not None and taken.parent.resolve() / taken.name == path


def model_name(resolved: ResolvedModel) -> str:
    """The name `models list` gives a resolved model's file: a file of one's own by its entry's name or as typed; the
    bundled file by the entry that ships it; a download, given by reference or by its path in the cache where -m of
    that name loads it (cache_file_name), by the registry entry that picks it (the one the reference named first),
    else NAME:QUANT, ORG/REPO:QUANT or ORG/REPO/FILE (catalog.display_name)."""
    from localgen.resolve import bundled_entry

    ref, spec = resolved.ref, resolved.spec
    if ref.path is not None:
        return spec.name if spec is not None else resolved.cache_file_name or reference_name(ref)
    registry = load_registry(settings().user_registry)
    if resolved.source == "bundled":
        entry = spec or bundled_entry(registry, ref, spec)
        return entry.name if entry is not None else reference_name(ref)
    file = snapshot_entry(resolved.path)
    if file is None:  # no file of the cache (a test's stand-in): named by the reference
        return _entry_or_reference(resolved)
    repo, filename = file
    return display_name(registry, repo, quant_of(filename), filename, entry=spec.name if spec is not None else None)


def _entry_or_reference(resolved: ResolvedModel) -> str:
    """A model named by its reference alone: its registry entry (NAME:QUANT for a quant other than the entry's), else
    the reference as every command names it (reference_name)."""
    ref, spec = resolved.ref, resolved.spec
    if spec is None:
        return reference_name(ref)
    quant = ref.quant
    return f"{spec.name}:{quant}" if quant and quant.upper() != (spec.quant or "").upper() else spec.name
