"""What `pull` of a downloaded Hub model finds on asking the Hub about it: the same file, a newer one (downloaded,
checked, and the copy it replaces removed), or none that can be asked about."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from localgen import console, hub
from localgen.config import settings
from localgen.errors import HubError, LocalgenError
from localgen.hub_check import HubCheck, HubOutcome, denied
from localgen.hub_errors import LOGIN, OfflineError, blamed_on_entry, failed_on_disk
from localgen.hub_settings import cache_place
from localgen.hub_types import NotInRepoError, RepoNotFoundError
from localgen.registry import hub_target
from localgen.resolve import ResolvedModel, entry_pin


def pulled_name(found: ResolvedModel) -> str:
    """How pull names a model in what it says: as every command does (hf://org/repo:q4_1 as Org/Repo:Q4_1)."""
    return found.display_name


def refreshed(found: ResolvedModel) -> ResolvedModel:
    """For `pull` of a downloaded Hub model: the Hub's current copy of the same quant or file (one listing request;
    a file changed on the Hub is downloaded, and the copy it replaces removed once it is verified; one that did not is
    kept), or the downloaded copy when the Hub cannot be asked; its `hub_check` says which."""
    if found.source != "cache":
        return found  # a local file or the bundled model is the one
    if settings().offline:
        return replace(found, hub_check=HubCheck(HubOutcome.OFFLINE))
    repo, quant, filename = hub_target(found.ref, found.spec)
    if quant is None and filename is None:  # ORG/REPO alone, no downloaded quant fitting: the one a run takes
        found = _named_by_its_file(found, repo)
        repo, quant, filename = hub_target(found.ref, found.spec)
    pin = entry_pin(found.spec, found.ref)
    if pin is not None and pin.sha256:  # that file and no other: the Hub can have no newer version of it
        return replace(found, hub_check=HubCheck(HubOutcome.PINNED, reason=pin.origin))
    try:
        with blamed_on_entry(found.spec, found.ref):
            model = hub.find_model(repo, quant=quant, filename=filename)
    except HubError as exc:
        if not found.path.exists():  # removed (models rm) since it was found: no copy here to keep
            raise HubError(f"{pulled_name(found)} was removed after this pull found it, and could not be downloaded "
                           f"again: {exc.message}", hint=exc.hint, exit_code=exc.exit_code) from exc
        if isinstance(exc, OfflineError):  # huggingface_hub's offline mode, set where localgen does not read it
            return replace(found, hub_check=HubCheck(HubOutcome.OFFLINE))
        if denied(exc):  # not logged in, or a token the Hub refuses: it would not say what it has
            # a repo downloaded under this name is not misspelt: of a not-found's hint, only how to log in holds
            hint = f"for a private repo, {LOGIN}" if isinstance(exc, RepoNotFoundError) else exc.hint
            return replace(found, hub_check=HubCheck(HubOutcome.NOT_CHECKED, reason=exc.message, hint=hint))
        if isinstance(exc, (NotInRepoError, RepoNotFoundError)):  # the copy here is the last there was
            return replace(found, hub_check=HubCheck(HubOutcome.DROPPED, reason=exc.message))
        return replace(found, hub_check=HubCheck(HubOutcome.NOT_CHECKED, reason=exc.message, hint=exc.hint))
    missing = not all(hub.is_cached(model, f) for f in model.files)
    gone = missing and not found.path.exists()  # removed (models rm) since it was found: no newer version, no copy
    newer = missing and not gone
    try:
        paths = hub.fetch_model(model, quiet=not missing, show_progress=None if missing else False,  # no bar: none
                                pin=pin,  # a size pinned alone
                                accept=_refuse_unloadable if newer else None)  # before the copy it replaces goes
    except LocalgenError as exc:  # a HubError, or the newer file refused by a size its entry pins or by its check
        if gone:  # a download as any other's, with no copy here to keep
            raise
        hub_error = isinstance(exc, HubError)
        if hub_error and not newer and failed_on_disk(exc):  # the same file, at a commit the cache could not take up
            return replace(found, hub_check=HubCheck(HubOutcome.COMMIT_NOT_RECORDED, reason=exc.message))
        if hub_error and not newer:  # the Hub was asked again about the same file (its metadata), and that failed
            return replace(found, hub_check=HubCheck(HubOutcome.NOT_CHECKED, reason=exc.message, hint=exc.hint))
        if not newer:
            raise
        kept = "the copy downloaded before is kept, and runs go on using it"
        hint = f"{exc.hint}; {kept}" if exc.hint else kept
        if not hub_error:
            raise LocalgenError(exc.message, hint=hint, exit_code=exc.exit_code) from exc
        raise HubError(f"the Hub's newer version of {pulled_name(found)} could not be downloaded: {exc.message}",
                       hint=hint, exit_code=exc.exit_code) from exc
    if gone:
        console.say(f"localgen: {pulled_name(found)} was removed after this pull found it; it was downloaded again")
        return ResolvedModel(ref=found.ref, path=paths[0], spec=found.spec, source="hub")
    replaced = _remove_replaced(found, paths)
    if not newer:
        return replace(found, path=paths[0], hub_check=replace(replaced, outcome=HubOutcome.UP_TO_DATE))
    return ResolvedModel(ref=found.ref, path=paths[0], spec=found.spec, source="hub",
                         hub_check=replace(replaced, outcome=HubOutcome.UPDATED))


def _named_by_its_file(found: ResolvedModel, repo: str) -> ResolvedModel:
    """A downloaded model found by its repo alone, named as ORG/REPO:QUANT by its file's quant (ORG/REPO/FILE where
    the file's name has none), as a run of ORG/REPO that finds a quant that fits names it."""
    from localgen.hub_choice import quant_of
    from localgen.references import hub_model_named, parse_reference

    snapshot = _snapshot_of(found.path)
    if snapshot is None:
        return found
    filename = found.path.relative_to(snapshot).as_posix()
    return replace(found, ref=parse_reference(hub_model_named(repo, quant_of(filename), filename)))


def _refuse_unloadable(paths: list[Path]) -> None:
    """Check a newer download as run checks a model, removing it where it fails, so the copy it was to replace
    stays the one found (and refs/main names it still)."""
    from localgen.gguf_split import validate_split
    from localgen.model_removal import remove_replaced

    try:
        validate_split(paths[0])
    except LocalgenError:
        with contextlib.suppress(LocalgenError):
            remove_replaced(paths, [])
        raise


def _remove_replaced(found: ResolvedModel, paths: list[Path]) -> HubCheck:
    """Delete the copy of a model (found) that a pull replaced with paths, at a newer commit, or one an earlier pull
    kept as a run loaded it (and recorded: kept_copies.py); a check (its outcome to be set) that names its commit, the
    bytes that freed and the prompt cache entries deleted with it (nothing where nothing was removed)."""
    from localgen import kept_copies
    from localgen.model_removal import remove_replaced

    nothing = HubCheck(HubOutcome.UP_TO_DATE)
    old, new = _snapshot_of(found.path), _snapshot_of(paths[0])
    if new is None or old is None or (old != new and kept_copies.named_by_ref(old)):
        return nothing
    going = [old / p.relative_to(new) for p in paths]
    if old == new:
        kept = kept_copies.recorded(new)
        if kept is None:
            return nothing
        old, going = kept.snapshot, list(kept.entries)
    try:
        freed, states = remove_replaced(going, paths)
    except LocalgenError as exc:
        kept_copies.record(old, going)
        console.warn(f"the copy the new one replaces is still in the cache: {exc.message}; `localgen pull "
                     f"{pulled_name(found)}` removes it once that process has loaded it")
        return nothing
    kept_copies.drop(old)
    return HubCheck(HubOutcome.UP_TO_DATE, replaced_commit=old.name[:12], freed=freed, prompt_states=len(states),
                    prompt_states_bytes=sum(entry.size for entry in states))


def _snapshot_of(path: Path) -> Path | None:
    """The Hugging Face cache's snapshot folder (snapshots/COMMIT) a downloaded file is in, if any."""
    place = cache_place(path)
    return place.snapshot if place is not None and place.is_entry else None
