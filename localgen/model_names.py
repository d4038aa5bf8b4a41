"""A model's name wherever it is printed (run's and bench's --json, the chat's banner, models show, a conversation's
record): as `models list` names its file, one name that -m takes back for that file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen.catalog import display_name
from localgen.config import settings
from localgen.hub_choice import quant_of
from localgen.hub_names import reference_name
from localgen.hub_settings import snapshot_entry
from localgen.registry import load_registry

if TYPE_CHECKING:
    from localgen.resolve import ResolvedModel


def named_by_path(resolved: ResolvedModel) -> bool:
    """Whether a model is named by the path it was given by: a file given by path, no models.toml entry's, outside
    localgen's Hub cache (a download given by its path is named as models list names it)."""
    return resolved.ref.path is not None and resolved.spec is None and snapshot_entry(resolved.path) is None


def model_name(resolved: ResolvedModel) -> str:
    """The name `models list` gives a resolved model's file: a file of one's own by its entry's name or as typed; the
    bundled file by the entry that ships it; a download, given by reference or by its path in the cache, by the
    registry entry that picks it (the one the reference named first), else NAME:QUANT, ORG/REPO:QUANT or ORG/REPO/FILE
    (catalog.display_name)."""
    from localgen.resolve import bundled_entry

    ref, spec = resolved.ref, resolved.spec
    if named_by_path(resolved):
        return reference_name(ref)
    if ref.path is not None and spec is not None:
        return spec.name
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
