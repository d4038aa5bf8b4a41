"""The downloads writing a model's files now (each holds huggingface_hub's lock on its blob): `models rm` refuses
such a model whole, as the download would put back what it removed, or finish a model it had half removed."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Sequence

from localgen import hub_cache, lock_activity
from localgen.blob_locks import Waited
from localgen.catalog import display_name
from localgen.errors import LocalgenError
from localgen.file_locks import lock_holder
from localgen.hub_choice import choose_model, quant_of, shard_group_key
from localgen.hub_types import HubFile
from localgen.registry import Registry
from localgen.units import binary_size


class ModelDownloadingError(LocalgenError):
    """A download (a pull, or a run fetching its model) is writing a file of the model to remove."""


def refuse_model_while_downloading(registry: Registry, reference: str,
                                   cached: list[hub_cache.CachedHubFile] | None, repo: str, quant: str | None,
                                   pattern: str | None) -> None:
    """Refuse to remove the model selected (the cached one, else the one listed) while a download writes any of its
    files."""
    if cached is not None:
        repo, names = cached[0].repo, model_files(cached)
        listing = hub_cache.load_listing(repo)
        models = [[f for f in listing.files if f.filename in names]] if listing else []
    else:
        repo = hub_cache.cached_spelling(repo)
        models = [listed_model(repo, quant, pattern)]
    _refuse_any(registry, reference, repo, models)


def refuse_repo_while_downloading(registry: Registry, reference: str, repo: str) -> None:
    """Refuse to remove a repo named alone that has nothing of it to remove while a download writes any of its
    models: the one a run takes first, then the others."""
    repo = hub_cache.cached_spelling(repo)
    _refuse_any(registry, reference, repo, [listed_model(repo, None, None), *_listed_models(repo)])


def _refuse_any(registry: Registry, reference: str, repo: str, models: list[list[HubFile]]) -> None:
    """Refuse where a download writes a file of any of these models of repo (as the cache spells it)."""
    for files in filter(None, models):
        name = display_name(registry, repo, quant_of(files[0].filename), files[0].filename)
        refuse_while_downloading(name, repo, files, reference)


def _listed_models(repo: str) -> list[list[HubFile]]:
    """Every model of a repo (each a file, or a split model's shards) as localgen last listed it."""
    listing = hub_cache.load_listing(repo)
    models: dict[str, list[HubFile]] = {}
    for f in listing.files if listing else ():
        models.setdefault(shard_group_key(f.filename), []).append(f)
    return list(models.values())


def listed_model(repo: str, quant: str | None, pattern: str | None) -> list[HubFile]:
    """The files of the model a quant or file name selects in a repo (as the cache spells it), as localgen last
    listed the repo (none where it never did, or the listing has no such model)."""
    listing = hub_cache.load_listing(repo)
    try:
        return choose_model(list(listing.files), quant=quant, filename=pattern, repo=repo) if listing else []
    except LocalgenError:
        return []


def model_files(files: list[hub_cache.CachedHubFile]) -> set[str]:
    """The names of every file of the model these cached files are of: a split model's shards that are not there too
    (as localgen last listed the repo), whose parts a pull left are the model's to remove."""
    keys = {shard_group_key(f.filename) for f in files}
    listing = hub_cache.load_listing(files[0].repo)
    listed = {f.filename for f in listing.files if shard_group_key(f.filename) in keys} if listing else set()
    return {f.filename for f in files} | listed


def refuse_while_downloading(name: str, repo: str, files: Sequence[HubFile], reference: str) -> None:
    """Raise ModelDownloadingError where a download is writing one of files (every file of the model named name, as
    localgen last listed repo, spelled as the cache spells it), naming its process where the system tells it;
    nothing where none is, where that cannot be told (no flock, or a lock that cannot be tested), or where the
    download ends as the message is made."""
    blobs = [blob for f in files if (blob := f.blob)]
    writing = [blob for blob in blobs if _being_written(repo, blob)]
    if not writing:
        return
    holder = next(filter(None, (lock_holder(hub_cache.blob_lock_path(repo, blob)) for blob in writing)), None)
    refusal = _refusal(name, repo, files, reference, holder, writing)
    if any(_being_written(repo, blob) for blob in writing):
        raise refusal


def refuse_model_held(registry: Registry, reference: str, cached: list[hub_cache.CachedHubFile],
                      waited: Waited) -> None:
    """Refuse to remove a model a process held a lock of past rm's wait for it where it recorded checking, loading or
    removing the model (rm would pull a file from under the check or the load), and a split model a download held a
    shard's lock of, where that download may go on to a shard after it, which it would leave with none before, or
    where a shard was not there as rm found the model's files (one a download linked as rm waited would stay). A lock
    let go as rm waited was a pull's that ended: a pull holds the lock of each file it fetched until it has checked
    the model whole (a run, until llama.cpp has opened it); a run loading a model it found here holds its loading
    locks until then (load_locks.py)."""
    repo, names = cached[0].repo, model_files(cached)
    listing = hub_cache.load_listing(repo)
    files = [f for f in listing.files if f.filename in names] if listing else []
    holders = (lock_activity.holder(hub_cache.blob_lock_path(repo, blob)) for blob in waited.given_up)
    busy = next((h for h in holders if h is not None and h.done_downloading), None)
    if busy is None and waited.loader is not None:  # a run that found the model here and loads it: load_locks.py
        busy = lock_activity.Holder(waited.loader.pid, "loading")
    if busy is not None:
        shown = files[0].filename if files else cached[0].filename
        name = display_name(registry, repo, quant_of(shown), shown)
        loader = waited.loader if waited.loader is not None and waited.loader.pid == busy.pid else None
        through = loader.file if loader is not None else None  # the file that run said it loads the blob as
        other = None if through is None or through in names else display_name(registry, repo, quant_of(through),
                                                                               through)
        raise _busy_refusal(name, reference, busy, other)
    if len(names) < 2:
        return
    held = [f.shard_index or 0 for f in files if f.blob in waited.given_up]  # 0: not known
    found = {c.filename for c in cached if c.path.is_file()}  # a shard linked as rm waited is not among its files
    if any((held and (f.shard_index or 0) > min(held)) or f.filename not in found for f in files):
        name = display_name(registry, repo, quant_of(files[0].filename), files[0].filename)
        raise _refusal(name, repo, files, reference, waited.holder, [])


def _refusal(name: str, repo: str, files: Sequence[HubFile], reference: str, holder: int | None,
             writing: list[str]) -> ModelDownloadingError:
    """The refusal of a model a download is fetching (holder: its process, where known; writing: the blobs it writes
    the parts of now), with the bytes of it on disk so far."""
    so_far = sum(_received(repo, f, writing) for f in files)
    who = f"process {holder}" if holder else "another process"
    rerun = shlex.join(["localgen", "models", "rm", reference])
    return ModelDownloadingError(f"{name} is being downloaded by {who} ({binary_size(so_far)} of "
                                 f"{binary_size(sum(f.size for f in files))} so far)",
                                 hint=f"wait for that download to end, or stop it with Ctrl-C where it runs, then "
                                      f"`{rerun}` again")


def _busy_refusal(name: str, reference: str, busy: lock_activity.Holder,
                  other: str | None = None) -> ModelDownloadingError:
    """The refusal of a model a process that downloaded it checks or loads now (other: the model sharing its file that
    a run loads it as, where the run said so), or another models rm removes."""
    rerun = f"`{shlex.join(['localgen', 'models', 'rm', reference])}`"
    if busy.doing == "loading":
        loaded = f"the file of {name} is being loaded by {busy.who}, as {other} (a model with the same file)" \
            if other else f"{name} is being loaded by {busy.who}"
        return ModelDownloadingError(loaded, hint=f"run {rerun} again once it has started (llama.cpp has the model "
                                                  "open then), or stop it with Ctrl-C where it runs")
    if busy.doing == "removing":
        return ModelDownloadingError(f"{name} is being removed by {busy.who}",
                                     hint="see `localgen models list` once that has ended")
    which = ", which downloaded it" if busy.downloaded else ""
    return ModelDownloadingError(f"{name} is being checked by {busy.who}{which}",
                                 hint=f"run {rerun} again once that check has ended")


def _being_written(repo: str, blob: str) -> bool:
    """Whether a download is writing a blob now: a part of it is on disk and a process holds its lock (one that
    cannot be tested is taken as no download's: a complete model is never refused for it), and has not recorded that
    it is done downloading (a part a killed download left beside a model a run loads)."""
    if _part_size(repo, blob) is None or hub_cache.download_running(repo, blob) is not True:
        return False
    held = lock_activity.holder(hub_cache.blob_lock_path(repo, blob))
    return held is None or not held.done_downloading


def _part_size(repo: str, blob: str) -> int | None:
    """The bytes of the largest part of a blob on disk (localgen's ETAG.incomplete, or huggingface_hub's
    ETAG.RANDOM.incomplete); None where there is none."""
    blobs = hub_cache.blobs_dir(repo)
    sizes = []
    for part in (hub_cache.partial_path(repo, blob), *blobs.glob(f"{blob}.*.incomplete")):
        with contextlib.suppress(OSError):
            sizes.append(part.stat().st_size)
    return max(sizes, default=None)


def _received(repo: str, f: HubFile, writing: list[str]) -> int:
    """The bytes of a file of the model on disk so far: the part a download is writing, or the whole file."""
    blob = f.blob
    if not blob:
        return 0
    if blob in writing:
        return _part_size(repo, blob) or 0
    if (hub_cache.blobs_dir(repo) / blob).is_file():
        return f.size
    return hub_cache.partial_size(repo, blob)
