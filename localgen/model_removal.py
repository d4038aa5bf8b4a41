"""`models rm`: delete a downloaded model's files from the Hugging Face cache (and the copy a pull replaced).

A snapshot entry links to a blob that other entries may share (the same file at two commits, two names with the same
content, or Xet's cache-wide shared blob store). Removing a model deletes its snapshot entries and only the blobs
that nothing else in the cache still links to; an entry linked to a file of the user's outside the cache, or to
another model's file in it, loses the link alone (hub_entry_data.py), and a link of the user's between an entry and
the model's own blob is theirs, left as it is. No network, no printing: frozen results only.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import shlex
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from localgen import hub_cache
from localgen.blob_locks import HELD_WAIT_S, Waited, holding_blob_locks
from localgen.catalog import (
    bundled_use,
    display_name,
    display_names,
    entry_models,
    forget_model_file,
    hub_groups,
)
from localgen.downloads_under_way import (
    listed_model,
    model_files,
    refuse_model_held,
    refuse_model_while_downloading,
    refuse_repo_while_downloading,
)
from localgen.errors import LocalgenError, ModelNotFoundError, UsageError, os_reason
from localgen.file_users import processes_mapping
from localgen.hub_choice import carries_tag, choose_model, quant_of
from localgen.hub_data_users import data_users
from localgen.hub_entry_data import blob_data, data_behind, linked_file, model_blobs
from localgen.hub_names import reference_name
from localgen.hub_settings import cache_place
from localgen.load_locks import loading_locks_of_links, taken_for_removal
from localgen.promptcache import CacheEntry, remove_entries
from localgen.promptcache_models import entries_of, identity_keys
from localgen.references import ModelRef, normalize_quant
from localgen.registry import ModelSpec, Registry, hub_target, own_file_refusal
from localgen.removal_refusals import bundled_not_removable, not_in_cache, refuse_empty, refuse_gone, refuse_path
from localgen.storage import unwritable_hint


@dataclass(frozen=True)
class RemovedModel:
    """What removing a model deleted (or would delete, for a dry run)."""

    name: str
    paths: tuple[Path, ...]
    bytes_freed: int
    kept_shared: tuple[Path, ...]
    dry_run: bool = False
    repo: str = ""  # the Hub repository the files came from
    entries: tuple[Path, ...] = ()  # its snapshot entries (links to the data), in every snapshot
    shared_later: tuple[str, ...] = ()  # the models removed later in the same command that its kept data goes with
    also_named: tuple[str, ...] = ()  # the other models.toml names of its file, which go with it
    prompt_states: int = 0  # the prompt cache entries of its file deleted with it (or to be, for a dry run)
    prompt_states_bytes: int = 0
    kept_outside: tuple[Path, ...] = ()  # files of the user's outside the cache its entries linked to: only links go
    links_left: tuple[Path, ...] = ()  # links of the user's its entries led through to the data it deleted: left
    loaded_by: tuple[int, ...] = ()  # the processes that had its data loaded as it was deleted: it is freed as they end
    sharers: tuple[Path, ...] = ()  # the snapshot entries of other models that lead to the data it keeps
    kept_for: tuple[str, ...] = ()  # the models those entries are, by name
    in_part: bool = False  # only what a pull that stopped part way kept of it

    @property
    def described(self) -> str:
        """The name, with the repository when the name is a registry name (which the bundled copy may share), and the
        other names of its file."""
        named = self.name if self.name.startswith(self.repo) else f"{self.name} from {self.repo}"
        return named + (f", also named {' and '.join(self.also_named)}" if self.also_named else "")


@dataclass(frozen=True)
class Removals:
    """What the models removed before and after one in the same command (`models rm A B`) take: the paths the ones
    before delete, and the snapshot entries of the ones after, by the name of their model."""

    gone: frozenset[Path] = frozenset()
    later: tuple[tuple[Path, str], ...] = ()


def remove_model(registry: Registry, reference: str, *, dry_run: bool = False,
                 others: Removals = Removals()) -> RemovedModel:
    """Delete a downloaded model's files from the HF cache, keeping blobs other models still use (others: what the
    models removed with it in the same command take, so that data shared with one removed later goes with that one,
    and a dry run does not count what one removed before deletes)."""
    refuse_empty(reference)
    own = registry.own_file_entry(reference)
    if own is not None:
        raise own_file_refusal(own, "delete")
    ref = registry.reference(reference)
    if ref.kind == "path":
        refuse_path(registry, ref)
    repo, quant, pattern, spec = _target(registry, ref)
    groups = [fs for (r, _k), fs in hub_groups(dangling=True, folders=hub_cache.folders_of(repo)).items()  # data
              if r.lower() == repo.lower()]  # deleted by hand: its links go too
    matches = _picked([fs for fs in groups if _group_matches(fs, quant, pattern)], repo, quant, pattern)
    if len(matches) < 2:  # one a download is writing now is refused whole: it would put back what went
        refuse_model_while_downloading(registry, reference, matches[0] if matches else None, repo, quant, pattern)
    if not matches and (parts := _kept_parts(registry, reference, repo, quant, pattern, dry_run=dry_run)) is not None:
        return parts
    if not matches and quant is None and pattern is None:  # nothing of the repo to remove: a download of any quant
        refuse_repo_while_downloading(registry, reference, repo)
    if not matches and (used := bundled_use(registry, ref, spec)) is not None:
        # nothing of it in the cache (a download of it would go): a model not found, not a usage mistake
        entry = used[0]
        what = f"{entry.name} is" if entry is spec else f"{reference} names the {entry.name} model"
        raise bundled_not_removable(entry, f"{what} bundled with the {entry.distribution} Python package",
                                     ModelNotFoundError)
    if not matches:
        raise not_in_cache(registry, reference, ref, repo, groups)
    if len(matches) > 1:
        names = sorted(display_name(registry, repo, quant_of(fs[0].filename), fs[0].filename) for fs in matches)
        raise UsageError(f"several cached models match {reference_name(ref)}: {', '.join(names)}",
                         hint=f"name the one to remove, or each: `{shlex.join(['localgen', 'models', 'rm', *names])}`")
    files = matches[0]
    names = display_names(registry, files[0].repo, quant_of(files[0].filename), files[0].filename)
    name = spec.name if spec is not None and spec.name in names else names[0]  # the entry named, of several
    refuse = functools.partial(refuse_model_while_downloading, registry, reference, files, repo, quant, pattern)
    with contextlib.nullcontext(Waited()) if dry_run else \
            holding_blob_locks(files[0].repo, _blob_names(files), refuse=refuse,
                               loading=loading_locks_of_links(files[0].repo, _entries(files))) as waited:
        if not dry_run:  # as found under the locks
            refuse_gone(name, files)
        if waited.waited:
            refuse_model_held(registry, reference, files, waited)
        removed = _remove_files(name, files, dry_run=dry_run, others=others)  # planned, as deleted, under the locks
    if not dry_run:
        _prune(hub_cache.hub_cache_dir() / hub_cache.repo_folder(files[0].repo))
    return replace(removed, also_named=tuple(other for other in names if other != name),
                   kept_for=tuple(other for other in entry_models(registry, removed.sharers) if other not in names))


def _kept_parts(registry: Registry, reference: str, repo: str, quant: str | None, pattern: str | None, *,
                dry_run: bool) -> RemovedModel | None:
    """Delete what a pull of a model that stopped part way kept for the next one to resume (its files' ETAG.incomplete,
    as localgen last listed the repo), and the repo's folder where that leaves it empty; None when it kept nothing."""
    repo = hub_cache.cached_spelling(repo)
    files = listed_model(repo, quant, pattern)
    parts = [hub_cache.partial_path(repo, blob) for f in files if (blob := f.blob)
             and hub_cache.partial_path(repo, blob).is_file() and hub_cache.download_running(repo, blob) is False]
    if not parts:
        return None
    freed = sum(part.stat().st_size for part in parts)
    if not dry_run:
        refuse = functools.partial(refuse_model_while_downloading, registry, reference, None, repo, quant, pattern)
        with holding_blob_locks(repo, [part.name.removesuffix(".incomplete") for part in parts], refuse=refuse):
            for part in parts:
                _unlink(part)
        _prune(hub_cache.hub_cache_dir() / hub_cache.repo_folder(repo))
    name = display_name(registry, repo, quant_of(files[0].filename), files[0].filename)
    return RemovedModel(name=name, paths=tuple(parts), bytes_freed=freed, kept_shared=(), dry_run=dry_run, repo=repo,
                        in_part=True)


def _target(registry: Registry, ref: ModelRef) -> tuple[str, str | None, str | None, ModelSpec | None]:
    """(repo, quant, file name or glob, registry spec) for a reference to a Hub model."""
    spec = registry.spec_for(ref)
    repo, quant, filename = hub_target(ref, spec)
    return repo, normalize_quant(quant) if quant else None, filename, spec


def _group_matches(files: list[hub_cache.CachedHubFile], quant: str | None, pattern: str | None) -> bool:
    """True when a cached model is the one a quant or file name selects (neither: any model)."""
    if pattern:
        low = pattern.lower()
        if "/" in low:  # a path inside the repo: only that path
            return any(f.filename.lower() == low or fnmatch.fnmatch(f.filename.lower(), low) for f in files)
        base_names = (f.filename.rsplit("/", 1)[-1].lower() for f in files)
        return any(base == low or fnmatch.fnmatch(base, low) for base in base_names)
    if quant:
        return carries_tag(files[0].filename, quant)
    return True


def _picked(matches: list[list[hub_cache.CachedHubFile]], repo: str, quant: str | None,
            pattern: str | None) -> list[list[hub_cache.CachedHubFile]]:
    """Of several cached models a quant alone selects, the one a run of ORG/REPO:QUANT takes, as `models list` names
    it (m-Q4_K_M.gguf over m-UD-Q4_K_M.gguf, whose longer tag carries the quant too); all of them where it is none."""
    if len(matches) < 2 or not quant or pattern:
        return matches
    try:
        chosen = {f.filename for f in choose_model(hub_cache.cached_listing(repo) or [], quant=quant, filename=None,
                                                   repo=repo)}
    except LocalgenError:
        return matches
    return [fs for fs in matches if fs[0].filename in chosen] or matches


def _blob_names(files: list[hub_cache.CachedHubFile]) -> set[str]:
    """The blobs of every file of the model these cached files are of: as localgen listed them, and as their entries
    in every snapshot link to them."""
    names = model_files(files)
    listing = hub_cache.load_listing(files[0].repo)
    listed = {etag for f in listing.files if f.filename in names and (etag := f.blob)} if listing else set()
    return listed | {hub_cache.blob_of(entry).name for entry in _entries(files) if entry.is_symlink()}


def _entries(files: list[hub_cache.CachedHubFile]) -> list[Path]:
    """The entries of every file of the model these cached files are of, in every snapshot."""
    names = model_files(files)
    snapshots = hub_cache.hub_cache_dir() / hub_cache.repo_folder(files[0].repo) / "snapshots"
    return [snapshot / name for snapshot in sorted(snapshots.glob("*")) for name in sorted(names)]


def _remove_files(name: str, files: list[hub_cache.CachedHubFile], *, dry_run: bool,
                  others: Removals) -> RemovedModel:
    """Delete the snapshot entries of these files in every snapshot, then the blobs nobody else uses."""
    repo_dir = hub_cache.hub_cache_dir() / hub_cache.repo_folder(files[0].repo)
    plan = _removal_plan(repo_dir, files, others)
    data_keys = identity_keys(path for path in plan.deleted if not path.is_symlink())  # while the files are there
    loaded = () if dry_run else processes_mapping(path for path in plan.deleted if not path.is_symlink())
    if dry_run:
        states = entries_of(data_keys)
    else:
        try:
            for path in reversed(plan.deleted):  # data before the links to it: a failure leaves a model rm can retry
                data = not path.is_symlink()
                _unlink(path)
                if data:
                    forget_model_file(path)
                manifest = path.with_name(path.name + ".refs")
                if path.parent.parent.name == "blobs" and manifest.is_file():
                    _unlink(manifest)  # Xet shared-store reference list of a deleted store blob
        finally:  # the states of the data deleted, even where a later file could not be: never of data still there
            states = _forget_states(data_keys)
    return RemovedModel(name=name, paths=tuple(plan.deleted), bytes_freed=plan.freed,
                        kept_shared=tuple(dict.fromkeys(plan.kept)), dry_run=dry_run, repo=files[0].repo,
                        entries=tuple(plan.entries), shared_later=tuple(dict.fromkeys(plan.shared_later)),
                        prompt_states=len(states), prompt_states_bytes=sum(entry.size for entry in states),
                        kept_outside=tuple(dict.fromkeys(plan.outside)), links_left=tuple(dict.fromkeys(plan.links)),
                        loaded_by=loaded, sharers=tuple(dict.fromkeys(plan.sharers)))


def _forget_states(data_keys: dict[str, Path]) -> list[CacheEntry]:
    """Delete the prompt cache entries of the data of data_keys (its identity key: its path) that is gone now; those
    deleted."""
    return remove_entries(entries_of({key for key, path in data_keys.items() if not os.path.lexists(path)}))


@dataclass
class _Plan:
    """What removing a model's files does: the paths deleted (links first, then the data they lead to), the data
    kept because a model that stays uses it, the user's files outside the cache that its links led to (kept), the
    user's links its entries led through to its own blobs (kept), the models removed later in the command that data
    kept goes with, its snapshot entries and the bytes freed."""

    entries: list[Path]
    deleted: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    outside: list[Path] = field(default_factory=list)
    links: list[Path] = field(default_factory=list)
    shared_later: list[str] = field(default_factory=list)
    sharers: list[Path] = field(default_factory=list)
    freed: int = 0


def _removal_plan(repo_dir: Path, files: list[hub_cache.CachedHubFile], removals: Removals) -> _Plan:
    """What removing these files deletes, keeps and frees, with what others removed in the same command take."""
    filenames = {f.filename for f in files}
    plan = _Plan(entries=[repo_dir / "snapshots" / s.name / n
                          for s in sorted((repo_dir / "snapshots").glob("*")) for n in sorted(filenames)
                          if os.path.lexists(repo_dir / "snapshots" / s.name / n)])
    users = data_users(set(plan.entries) | removals.gone, repo_dir)
    own = {Path(os.path.realpath(blob)): blob for blob in _own_blobs(repo_dir, files)}
    later = dict(removals.later)
    resumable = hub_cache.listed_blobs(files[0].repo, leaving=model_files(files))  # other files' parts, a pull resumes
    for partial in hub_cache.orphaned_partials(files[0].repo, keep=resumable):  # a killed download's, or these files'
        with contextlib.suppress(OSError):
            if partial not in removals.gone:
                plan.freed += partial.stat().st_size
                plan.deleted.append(partial)
    for entry in plan.entries:
        chain = [entry]
        if entry.is_symlink():
            blob = hub_cache.blob_of(entry)
            sharing = users.of(blob)
            if sharing and all(other in later for other in sharing):
                plan.shared_later += [name for other, name in removals.later if other in sharing]  # in order
            elif sharing:
                plan.kept.append(Path(os.path.realpath(blob)))
                plan.sharers += sorted(other for other in sharing if other not in later)  # those that stay
            else:
                chain += data_behind(entry)
                linked = linked_file(entry, own)
                if linked is not None and linked.whose == "the model's":  # the data goes, the user's link stays
                    plan.links.append(linked.link)
                elif linked is not None:  # only the link goes
                    (plan.kept if linked.whose == "another model's" else plan.outside).append(linked.path)
        _delete(plan, chain, removals)
    for real, blob in own.items():  # left unlinked by an entry that leads elsewhere (the cache's garbage), or linked
        # through a link of the user's; never one kept as another model's or as the user's
        if blob not in plan.deleted and real not in plan.kept + plan.outside and not users.of(blob):
            _delete(plan, blob_data(blob), removals)
    return plan


def _delete(plan: _Plan, chain: list[Path], removals: Removals) -> None:
    """Plan to delete a snapshot entry or blob and the data behind it (what is there and no earlier model deletes),
    counting the bytes freed."""
    for path in chain:
        if path in plan.deleted or path in removals.gone or not os.path.lexists(path):
            continue
        if not path.is_symlink():
            plan.freed += path.stat().st_size
        plan.deleted.append(path)


def _own_blobs(repo_dir: Path, files: list[hub_cache.CachedHubFile]) -> list[Path]:
    """The blobs of these files in their repo's blobs folder, by the sha256 or git blob id localgen listed or verified
    them to have, where they are there."""
    listing = hub_cache.load_listing(files[0].repo)
    names = {f.filename for f in files}
    listed = {f.blob for f in listing.files if f.filename in names} if listing else set()
    return model_blobs(repo_dir / "blobs", listed | {f.sha256 for f in files})


def remove_replaced(old: list[Path], new: list[Path]) -> tuple[int, list[CacheEntry]]:
    """After a pull downloaded a newer copy of a model (new, in another snapshot): delete the old copy's snapshot
    entries, and the data only they lead to, with that data's prompt cache entries; the bytes freed and the entries
    deleted. A run loading the old copy (load_locks.py) is waited on as models rm waits, then refused, whether its
    data goes or the new copy's entries keep it (a commit that changed other files)."""
    going = {p for p in old if p not in new and os.path.lexists(p)}
    if not going or (place := cache_place(min(going))) is None:  # nothing left, or no entry of this cache
        return 0, []
    users = data_users(going, place.repo_folder)
    freed = 0
    data_keys: dict[str, Path] = {}
    locks = loading_locks_of_links(place.repo, going)  # a run loading the old copy
    taken, loader = taken_for_removal(locks, time.monotonic() + HELD_WAIT_S)
    try:
        if loader is not None:
            raise LocalgenError(f"{loader.who} is loading it")
        for entry in sorted(going):
            chain = [entry]
            if entry.is_symlink() and not users.of(hub_cache.blob_of(entry)):
                chain += data_behind(entry)
            data_keys |= identity_keys(path for path in chain if os.path.lexists(path) and not path.is_symlink())
            for path in reversed(chain):  # the data before the links to it, as models rm does
                if os.path.lexists(path):
                    freed += 0 if path.is_symlink() else path.stat().st_size
                    _unlink(path)
    finally:
        states = _forget_states(data_keys)
        for fd in taken:
            os.close(fd)
    _prune(place.repo_folder)
    return freed, states


def _unlink(path: Path) -> None:
    """Delete one file of a cached model; a file already gone is fine, any other failure is the user's to fix (a link
    whose data is deleted already, before it, said so: the model is gone in part)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        gone = " (its data is deleted already)" if path.is_symlink() and not path.exists() else ""
        raise LocalgenError(f"could not delete {path}{gone}: {os_reason(exc)}", hint=unwritable_hint(
            exc, path.parent, f"check the permissions of {path.parent}") + ", then run the command again") from exc


_REPO_RECORDS = ("refs", ".no_exist")  # the cache's notes on a repo's commits and missing files: void once it is empty


def _prune(repo_dir: Path) -> None:
    """Remove empty snapshot folders; once the repo folder holds no snapshot and no blob, remove it and the cache's
    notes on the repo in it (refs, .no_exist), at its real place where it was moved to another disk and linked back,
    then the link; a folder that still holds anything else stays, and so does the link to it; nothing goes while a
    download of any of its files holds its lock (it is about to make its blob there and link it into a snapshot)."""
    if hub_cache.downloads_running(repo_dir):
        return
    snapshots = repo_dir / "snapshots"
    for dirpath, _dirs, _names in sorted(os.walk(snapshots), key=lambda t: len(t[0]), reverse=True):
        with contextlib.suppress(OSError):
            Path(dirpath).rmdir()  # only succeeds when empty
    blobs = repo_dir / "blobs"
    if os.path.lexists(snapshots) or (blobs.is_dir() and any(blobs.iterdir())):
        return
    real = Path(os.path.realpath(repo_dir))
    for record in _REPO_RECORDS:
        shutil.rmtree(real / record, ignore_errors=True)  # a link there is refused, and kept
    for folder in (real / "blobs", real):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only succeeds when empty
    if repo_dir.is_symlink() and not os.path.lexists(real):
        _unlink(repo_dir)
