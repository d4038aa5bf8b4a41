"""Where a model reference points before anything is resolved or downloaded: a local path, or a Hub repo with the
quant or file named, as resolve_model reads it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgen.references import ModelRef
    from localgen.registry import ModelSpec


@dataclass(frozen=True)
class Target:
    """Where a reference points: a local path, or a Hub repo with the quant or file named (if any)."""

    text: str  # the reference as every command names it (a registry entry by its name), or the default model's
    path: Path | None
    repo: str | None
    quant: str | None
    filename: str | None
    default_ctx: int | None
    ref: ModelRef
    spec: ModelSpec | None  # the registry entry named, if one is


def model_target(reference: str | None) -> Target:
    """Parse a reference the way resolve_model does."""
    from localgen.config import settings
    from localgen.hub_cache import cached_spelling
    from localgen.hub_names import reference_name
    from localgen.registry import hub_target, load_registry

    registry = load_registry(settings().user_registry)
    ref = registry.reference(reference if reference is not None else registry.default_reference())
    spec = registry.spec_for(ref)
    text = None  # SmolLM2, smollm2:latest, qwen2.5:0.5b: named by the entry's name, as models list names it
    if ref.name is not None and spec is not None:
        text = f"{spec.name}:{ref.quant}" if ref.quant else spec.name
    if ref.path is not None:  # a path, or an entry's own file (spec)
        return Target(text=text or ref.text, path=ref.path, repo=None, quant=None, filename=None,
                       default_ctx=spec.context if spec is not None else None, ref=ref, spec=spec)
    repo, quant, filename = hub_target(ref, spec)
    return Target(text=text or reference_name(ref), path=None, repo=cached_spelling(repo), quant=quant,
                  filename=filename, default_ctx=spec.context if spec is not None else None, ref=ref, spec=spec)
