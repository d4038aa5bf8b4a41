"""`localgen pull`: download a model and print its path, and say so where nothing was there to download."""

from __future__ import annotations

from pathlib import Path

from localgen import console
from localgen.resolve import ResolvedModel
from localgen.units import binary_size


def pull_model(reference: str, *, force: bool) -> Path:
    """Download (or find) one model, check every shard as run would, say where nothing had to be downloaded, and return
    its first file's absolute path."""
    from localgen.cli_model import say_note
    from localgen.gguf_split import validate_split
    from localgen.hardware import probe_hardware
    from localgen.model_file_errors import named_as_typed
    from localgen.resolve import refuse_own_file
    from localgen.runner import ModelOptions, resolve_fitting

    refuse_own_file(reference)  # a models.toml entry's file of one's own is not localgen's to download
    with named_as_typed(reference):
        resolved = resolve_fitting(ModelOptions(model=reference), probe_hardware(), say_note, force=force,
                                   download_only=True)
        _, paths = validate_split(resolved.path)  # checked, every shard, as run would check it
    said = already_here(resolved, sum(path.stat().st_size for path in paths))
    if said is not None:
        console.say(said)
    return resolved.path.absolute()


def already_here(resolved: ResolvedModel, size: int) -> str | None:
    """What pull says of a model it had nothing to download for (size: of all its files): bundled with a package, a
    file on this machine, or a copy downloaded before that it did not check against the Hub; None where the Hub was
    asked, whose own line says what came of it."""
    from localgen.config import settings

    name = resolved.display_name
    if resolved.source == "bundled":
        package = _bundling_package(resolved.path)
        return (f"localgen: {name} is already here, bundled with the {package} Python package ({binary_size(size)}): "
                "nothing to download")
    if resolved.source == "local":
        return f"localgen: {resolved.short_name} is a file on this machine ({binary_size(size)}): nothing to download"
    if resolved.source == "cache":
        offline = "; offline, so not checked against the Hub" if settings().offline else ""
        return f"localgen: {name} is already downloaded ({binary_size(size)}){offline}"
    return None


def _bundling_package(path: Path) -> str:
    """The pip name of the package that ships a bundled model file (that of the registry entry whose file it is)."""
    from localgen.catalog import bundled_file
    from localgen.config import settings
    from localgen.registry import load_registry

    specs = load_registry(settings().user_registry).models.values()
    return next((spec.distribution for spec in specs if spec.package and bundled_file(spec) == path), "its")
