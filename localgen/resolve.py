"""Turn a model reference into a verified GGUF file on disk: cache, bundled package, then the Hub."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from localgen.config import settings
from localgen.errors import ModelNotFoundError
from localgen.registry import ModelRef, ModelSpec, Registry, load_registry, normalize_quant, parse_reference
from localgen.verify import verify_file


@dataclass(frozen=True)
class ResolvedModel:
    """A model reference resolved to files: the first (or only) shard is `path`."""

    ref: ModelRef
    path: Path
    spec: ModelSpec | None
    source: str  # "local", "cache", "bundled" or "hub"

    @property
    def display_name(self) -> str:
        """The name to show users: the registry name, else the reference as typed."""
        return self.spec.name if self.spec is not None else self.ref.text

    @property
    def context(self) -> int | None:
        """The registry's default context for this model, if any."""
        return self.spec.context if self.spec is not None else None

    @property
    def template_override(self) -> str | None:
        """The registry's chat template override, if any."""
        return self.spec.template if self.spec is not None else None


def bundled_file(spec: ModelSpec) -> Path | None:
    """The GGUF a Python package ships for this spec, when that package is installed."""
    if not (spec.package and spec.package_file):
        return None
    try:
        candidate = resources.files(spec.package).joinpath(spec.package_file)
    except ModuleNotFoundError:
        return None
    path = Path(str(candidate))
    return path if path.is_file() else None


def resolve_model(text: str | None, *, offline: bool | None = None, registry: Registry | None = None,
                  pull: bool = True) -> ResolvedModel:
    """Resolve a reference (None = the default model) to a verified local file, pulling if allowed."""
    registry = registry or load_registry(settings().user_registry)
    ref = parse_reference(text if text is not None else registry.default_model)
    offline = settings().offline if offline is None else offline
    if ref.path is not None:
        return ResolvedModel(ref=ref, path=_local_file(ref.path), spec=None, source="local")
    spec = registry.get(ref.name) if ref.name is not None else None
    repo = spec.repo if spec is not None else ref.repo
    quant = ref.quant or (spec.quant if spec is not None else None)
    filename = ref.filename or (spec.file if spec is not None and ref.quant is None else None)
    assert repo is not None
    from localgen import hub

    cached = hub.cached_model(repo, quant=quant, filename=filename)
    if cached:
        return ResolvedModel(ref=ref, path=cached[0], spec=spec, source="cache")
    if spec is not None and normalize_quant(quant or "") == normalize_quant(spec.quant):
        bundled = bundled_file(spec)
        if bundled is not None:
            if spec.sha256:
                verify_file(bundled, sha256=spec.sha256, size=spec.size, label=f"bundled {spec.name}")
            return ResolvedModel(ref=ref, path=bundled, spec=spec, source="bundled")
    if offline or not pull:
        raise ModelNotFoundError(
            f"model '{ref.text}' is not downloaded" + (" and localgen is offline" if offline else ""),
            hint=f"run `localgen pull {ref.text}` while online",
        )
    paths = hub.download_model(repo, quant=quant, filename=filename)
    return ResolvedModel(ref=ref, path=paths[0], spec=spec, source="hub")


def _local_file(path: Path) -> Path:
    """Check that a local model path is a readable file."""
    if not path.exists():
        raise ModelNotFoundError(f"no such model file: {path}", hint="check the path, or pass a registry name")
    if not path.is_file():
        raise ModelNotFoundError(f"{path} is not a file", hint="pass the path of a .gguf file")
    return path
