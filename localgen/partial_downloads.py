"""Models a pull downloaded in part: the parts it kept in the Hugging Face cache (blobs/ETAG.incomplete, see
hub_resume.py) for the next pull to resume, found with no network. A part is never a downloaded model: `models list`
shows it as such, with the pull that resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localgen import hub_cache
from localgen.catalog import bundled_file, display_name
from localgen.hub_choice import shard_group_key, shard_of
from localgen.hub_types import HubFile, HubListing, HubModel
from localgen.offline_words import pull_command
from localgen.registry import Registry

PARTLY_DOWNLOADED = "partly downloaded"  # what localgen calls a model of which a stopped pull kept a part


@dataclass(frozen=True)
class PartialDownload:
    """A model of which a stopped (or running) pull kept a part: what of it is on disk, and where."""

    name: str  # the reference that `localgen pull` resumes it by
    repo: str
    quant: str | None
    kept: int  # its bytes on disk: its complete files and the parts
    size: int  # its size once downloaded
    parts: tuple[Path, ...]
    missing_shards: int  # of a split model, the shards not complete (0 for a whole one)
    running: bool  # a pull is writing a part of it now


def partial_downloads(registry: Registry) -> list[PartialDownload]:
    """Every model of which a pull kept a part to resume, as localgen last listed its repo, by name (a repo folder its
    permissions keep from being read holds none: the listing of models, which reads it too, warns of it)."""
    found = []
    for repo in _repos_with_parts():
        listing = hub_cache.load_listing(repo)
        if listing is None:  # no pull of it listed the repo here: not a part localgen resumes
            continue
        models: dict[str, list[HubFile]] = {}
        for f in listing.files:
            models.setdefault(shard_group_key(f.filename), []).append(f)
        for files in models.values():
            files.sort(key=lambda f: shard_of(f.filename)[0] or 0)
            partial = _partial(registry, repo, listing, files)
            if partial is not None:
                found.append(partial)
    return sorted(found, key=lambda p: p.name.lower())


def _repos_with_parts() -> list[str]:
    """The repos in the cache whose blobs folder holds a resumable part (ETAG.incomplete); a repo folder its
    permissions keep from being entered is passed over."""
    try:
        folders = sorted(p for p in hub_cache.hub_cache_dir().iterdir() if p.name.startswith("models--"))
    except OSError:
        return []
    repos = []
    for folder in folders:
        parts = folder.name.split("--")
        try:
            if len(parts) == 3 and any(p.name.count(".") == 1 for p in (folder / "blobs").glob("*.incomplete")):
                repos.append(f"{parts[1]}/{parts[2]}")
        except PermissionError:
            continue
    return repos


def _partial(registry: Registry, repo: str, listing: HubListing, files: list[HubFile]) -> PartialDownload | None:
    """The model of these files (one, or a split model's shards) when a part of one is kept in repo's folder; None
    when none is, or the file it is a part of is complete (a part a pull --force left, which the next pull deletes)."""
    from localgen.hub import is_cached

    model = HubModel(repo=repo, quant=files[0].quant, files=tuple(files), revision=listing.revision)
    parts: list[Path] = []
    kept, complete, running = 0, 0, False
    for f in files:
        blob = f.blob
        if is_cached(model, f):
            kept, complete = kept + f.size, complete + 1
        elif blob and 0 < (size := hub_cache.partial_size(model.repo, blob)) <= f.size:  # a longer one starts over
            parts.append(hub_cache.partial_path(model.repo, blob))
            kept += size
            running |= hub_cache.download_may_run(model.repo, blob)
    if not parts:
        return None
    return PartialDownload(name=_pull_reference(registry, model.repo, model.quant, files[0].filename), repo=model.repo,
                           quant=model.quant, kept=kept, size=model.size, parts=tuple(parts),
                           missing_shards=len(files) - complete if len(files) > 1 else 0, running=running)


def _pull_reference(registry: Registry, repo: str, quant: str | None, filename: str) -> str:
    """The name `models list` gives the model, unless that entry ships a bundled copy, which `pull NAME` takes for
    the model: ORG/REPO/FILE then."""
    name = display_name(registry, repo, quant, filename)
    spec = registry.models.get(name)
    return f"{repo}/{filename}" if spec is not None and bundled_file(spec) is not None else name


def resuming_name(model: HubModel) -> str:
    """The name the `localgen pull` that resumes what a stopped download kept of model gives it, as `models list`
    does (ORG/REPO:QUANT, or ORG/REPO/FILE, where the models.toml cannot be read)."""
    from localgen.config import settings
    from localgen.errors import LocalgenError
    from localgen.references import hub_model_named
    from localgen.registry import load_registry

    first = model.files[0]
    try:
        return _pull_reference(load_registry(settings().user_registry), model.repo, first.quant, first.filename)
    except LocalgenError:
        return hub_model_named(model.repo, first.quant, first.filename)


def carry_stopped_part(stop: BaseException, name: str) -> None:
    """Carry name, the pull name of the part a download stopped by stop (Ctrl-C or a signal) kept, on stop itself,
    for the summary of a pull of several (stopped_part_name)."""
    stop.stopped_part = name  # type: ignore[attr-defined]


def stopped_part_name(stop: BaseException) -> str | None:
    """The name carry_stopped_part carried on stop, or on what it wraps (an import that took a Ctrl-C); None: none."""
    from localgen.hub_errors import error_chain

    return next((name for error in error_chain(stop) if (name := getattr(error, "stopped_part", None))), None)


def partial_json(part: PartialDownload | None, reference: str | None = None) -> dict[str, object] | None:
    """What a stopped pull kept of a model, as `models list --json` and `models show --json` give it, with the command
    that resumes it (reference: as that pull names the model, part.name where None); None: nothing kept."""
    if part is None:
        return None
    return {"kept_bytes": part.kept, "size": part.size, "running": part.running,
            "resume": pull_command(reference or part.name), "paths": [str(path) for path in part.parts]}


def parts_left_note(registry: Registry, repo: str) -> str | None:
    """What `models rm ORG/REPO` says of the parts that stopped pulls kept of the repo's other quants, which it leaves
    (None: none is kept)."""
    import shlex

    from localgen.units import alternatives, binary_size

    parts = [part for part in partial_downloads(registry) if part.repo.lower() == repo.lower() and not part.running]
    if not parts:
        return None
    left = alternatives([f"{part.name} ({binary_size(part.kept)}, {PARTLY_DOWNLOADED})" for part in parts], "and")
    return (f"localgen: left {left}: `{shlex.join(['localgen', 'models', 'rm', *(part.name for part in parts)])}` "
            f"removes {'it' if len(parts) == 1 else 'them'}")


def repo_parts_said(repo: str) -> str | None:
    """What stopped (or running) pulls kept of each quant of a repo, each named by the pull that resumes it, for a
    refusal of the repo named without a quant (None: nothing kept)."""
    from localgen.config import settings
    from localgen.registry import load_registry

    parts = [part for part in partial_downloads(load_registry(settings().user_registry))
             if part.repo.lower() == repo.lower()]
    return "; ".join(part_said(part.name, part) for part in parts) or None


def part_of_files(files: tuple[HubFile, ...]) -> PartialDownload | None:
    """What a stopped (or running) pull kept of the model of these files, as `models list` finds it (None: nothing)."""
    from localgen.config import settings
    from localgen.registry import load_registry

    paths = {hub_cache.partial_path(f.repo, f.blob) for f in files if f.blob}
    return next((part for part in partial_downloads(load_registry(settings().user_registry))
                 if paths.intersection(part.parts)), None)


def kept_said(part: PartialDownload) -> str:
    """How much of a model a running pull has so far, or a stopped one kept: 'partly downloaded: 4.0 MiB of 94.0
    MiB', for a cell or a field."""
    kept = kept_of_size(part)
    return f"being downloaded: {kept} so far" if part.running else f"{PARTLY_DOWNLOADED}: {kept}"


def part_said(subject: str, part: PartialDownload) -> str:
    """The same said of subject in a sentence: 'NAME is partly downloaded (4.0 MiB of 94.0 MiB)'."""
    if part.running:
        return f"{subject} is {kept_said(part)}"
    return f"{are_partly_downloaded([subject])} ({kept_of_size(part)})"


def are_partly_downloaded(names: list[str]) -> str:
    """'A is partly downloaded', 'A and B are partly downloaded'."""
    from localgen.units import alternatives

    return f"{alternatives(names, 'and')} {'is' if len(names) == 1 else 'are'} {PARTLY_DOWNLOADED}"


def kept_of_size(part: PartialDownload) -> str:
    """'4.0 MiB of 94.0 MiB': how much of a model is kept, of its size once downloaded."""
    from localgen.units import binary_size

    return f"{binary_size(part.kept)} of {binary_size(part.size)}"


def listed_part(repo: str, quant: str | None, filename: str | None) -> PartialDownload | None:
    """What a stopped (or running) pull kept of the model of these quant or file, as localgen last listed the repo
    (None: nothing, or the repo never listed)."""
    from localgen.errors import LocalgenError
    from localgen.hub_choice import choose_model

    listing = hub_cache.load_listing(repo)
    if listing is None:
        return None
    try:
        files = choose_model(list(listing.files), quant=quant, filename=filename, repo=listing.repo)
    except LocalgenError:
        return None
    return part_of_files(tuple(files))
