"""The model run and chat use without -m: `[defaults] model` in the user's models.toml, any model -m takes (a registry
name, ORG/REPO[:QUANT], ORG/REPO/FILE, a file's path), as `localgen models default REF` sets it, and its file."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import GGUFError, LocalgenError, UsageError
from localgen.own_files import own_file_problem
from localgen.registry import Registry, hub_target, load_registry, user_file_text
from localgen.typed_paths import short_path

if TYPE_CHECKING:
    from localgen.partial_downloads import PartialDownload
    from localgen.references import ModelRef
    from localgen.registry import ModelSpec

DefaultRow = tuple[str | None, Path | None]  # how `models list` finds the default: an entry's name, or its file


def default_setting(text: str, registry: Registry, base: Path) -> tuple[str, bool]:
    """What `[defaults] model` says for a model as -m names it, and whether its file is here: an entry by its name
    (NAME:QUANT for a quant of it), a file by its absolute path, a Hub model as every command names it (as its reader,
    Registry.default_reference, shows it, hf.co/... where it would name a file in base, the models.toml's folder);
    what -m refuses before anything slow (a malformed reference, an unknown name, a file that is not there or is no
    GGUF model) is refused with -m's error."""
    from localgen.gguf_split import validate_split
    from localgen.hub_names import kept_hub_reference
    from localgen.model_file_errors import named_as_typed
    from localgen.resolve import local_file

    ref = registry.reference(text)
    spec = registry.spec_for(ref)
    if ref.path is not None:
        path = local_file(ref, spec)
        if spec is None and not _utf8(str(path)):
            raise UsageError(f"{short_path(path)} cannot be the default model: models.toml holds UTF-8 text, and "
                             "this path is not", hint="rename the file or its folder, or pass it with -m")
        with named_as_typed(text):
            validate_split(path)  # the header check -m makes: a file that is no GGUF model is no default
        return (spec.name if spec is not None else str(path)), True
    setting = kept_hub_reference(ref, base) if spec is None else f"{spec.name}:{ref.quant}" if ref.quant else spec.name
    here = file_run_takes(registry, ref, spec) is not None
    if not here:
        _refuse_lacking(ref, spec)
    return setting, here


def _refuse_lacking(ref: ModelRef, spec: ModelSpec | None) -> None:
    """Refuse as the default a quant or file typed that its repo lacked when localgen last listed it (online, the Hub
    asked again then), naming what it has; a repo never listed is not asked: a default can be set before its pull."""
    from localgen.errors import ModelNotFoundError
    from localgen.hub_errors import entry_error
    from localgen.hub_lack import known_lack

    if ref.quant is None and ref.filename is None:
        return
    lack = known_lack(*hub_target(ref, spec))
    if lack is not None:
        raise ModelNotFoundError(f"{ref.text} cannot be the default model: {lack[1]}",
                                 hint=entry_error(lack[0], spec, ref).hint)


def entries_naming(setting: str, registry: Registry) -> list[str]:
    """The models.toml entries whose own file (path =) is the one a default given as a path names: a run by the path
    takes that file without their settings."""
    try:
        ref = registry.reference(setting)
    except LocalgenError:
        return []
    if ref.name is not None or ref.path is None:
        return []
    target = os.path.realpath(ref.path)
    return [spec.name for spec in sorted(registry.models.values(), key=lambda s: s.name)
            if spec.path is not None and os.path.realpath(spec.path) == target]


def _utf8(text: str) -> bool:
    """Whether a path's text is UTF-8 (a name of undecodable bytes is not, which a TOML file cannot hold)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def set_default_model(text: str, user_file: Path) -> tuple[str, bool]:
    """Make the model text names (as -m takes it) the one used without -m: `[defaults] model` in the user's
    models.toml (made where there is none; a link is followed), the rest of the file kept as it was; what it says,
    and whether the model's file is here."""
    from localgen.registry_toml import with_default_model
    from localgen.storage import atomic_write_text

    setting, here = default_setting(text, load_registry(user_file), user_file.parent)
    current = user_file_text(user_file)
    changed = with_default_model(current or "", setting, user_file)
    target = user_file.resolve()
    if current is not None and b"\r\n" in target.read_bytes():  # read with its line ends made \n: written back
        changed = changed.replace("\n", "\r\n")
    atomic_write_text(target, changed, mode=0o644)  # (a file there keeps its own)
    return setting, here


def blamed_on_default(exc: GGUFError) -> GGUFError:
    """A header error met loading the default model, naming the file as `[defaults] model` gives it and saying that
    setting is where it came from (exc itself where no models.toml sets the default)."""
    from localgen.config import settings
    from localgen.model_file_errors import with_path_named

    registry = load_registry(settings().user_registry)
    if registry.default_source is None:
        return exc
    message = exc.message
    with contextlib.suppress(LocalgenError):
        ref = registry.reference(registry.default_reference())
        if ref.path is not None:
            message = with_path_named(message, ref.path)
    change = "make another model the default with `localgen models default REF`"
    return type(exc)(f"{message} ([defaults] model in {registry.default_source})",
                     hint=f"{exc.hint}; or {change}" if exc.hint else change, exit_code=exc.exit_code)


def default_in_listing(registry: Registry, refused: list[PermissionError]) -> DefaultRow:
    """How `models list` finds the model run and chat use without -m among its rows: by the entry's name where the
    default is an entry's name alone, by its path where it is a path (the row of that file named by it, not an
    entry's that names the file too: a run by the path takes none of the entry's settings), else by its file, found
    without the network ((None, None): not here, or a [defaults] model that names no model, or one in a place of the
    Hugging Face cache its permissions keep from being read, added to refused for the listing to warn of)."""
    try:
        ref = registry.reference(registry.default_reference())
        if ref.name is not None and ref.quant is None:
            return ref.name, None
        if ref.path is not None:
            return str(ref.path), None
        return None, file_run_takes(registry, ref, registry.spec_for(ref))
    except LocalgenError:
        return None, None
    except PermissionError as exc:
        refused.append(exc)
        return None, None


def default_refusal(registry: Registry) -> str | None:
    """What a listing warns of a user's [defaults] model that names no model (a name not in the registry, a
    malformed reference), which run and chat without -m fail on; None where it names one, or none is set."""
    try:
        registry.default_reference()
    except LocalgenError as exc:
        return f"{exc.message}, so run and chat without -m fail" + (f" (hint: {exc.hint})" if exc.hint else "")
    return None


def default_here(registry: Registry, *, whatever_pin: bool = False) -> Path | None:
    """The file run and chat load without -m where it is here, found without the network (None: not here, or a
    [defaults] model that names no model, or one in a place of the Hugging Face cache its permissions keep from being
    read); whatever_pin: a download its entry's pin refuses counts too (the copy models rm removes)."""
    try:
        ref = registry.reference(registry.default_reference())
        if ref.path is not None:  # own_file_problem: is_file() raises for a name too long
            return ref.path if own_file_problem(ref.path) is None else None
        return file_run_takes(registry, ref, registry.spec_for(ref), whatever_pin=whatever_pin)
    except (LocalgenError, PermissionError):
        return None


def default_model_without_quant() -> str | None:
    """The registry name or Hub repo run and chat use without -m, without its quant (None: a file, or unreadable)."""
    from localgen.config import settings

    try:
        registry = load_registry(settings().user_registry)
        ref = registry.reference(registry.default_reference())
    except LocalgenError:
        return None
    return ref.name if ref.kind == "name" else ref.repo if ref.kind == "repo" else None


def file_run_takes(registry: Registry, ref: ModelRef, spec: ModelSpec | None, *,
                   whatever_pin: bool = False) -> Path | None:
    """The file a run takes without a download (not checked yet) for a reference to a registry entry (spec) or a Hub
    model, found without the network: a verified download its entry's pin takes (whatever_pin: any download), else
    the bundled copy it takes (catalog.bundled_use); None when neither is here."""
    from localgen.catalog import bundled_use
    from localgen.hub_cache import cached_model
    from localgen.resolve import entry_pin, refused_by_pin

    repo, quant, filename = hub_target(ref, spec)
    paths = cached_model(repo, quant=quant, filename=filename)
    if paths and not whatever_pin and refused_by_pin(paths[0], entry_pin(spec, ref)) is not None:  # passed over
        paths = None
    used = bundled_use(registry, ref, spec) if not paths else None
    return paths[0] if paths else used[1] if used is not None else None


def default_gone_note(registry: Registry) -> str:
    """What models rm says when it removed the default model's file: run and chat without -m download it again (or,
    for a default given as a path, find no file)."""
    default = registry.default_reference()
    then = "find no model file" if registry.reference(default).path is not None else "download it again"
    return (f"localgen: {default} is still the default model, so run and chat without -m {then} (`localgen models "
            "default REF` sets another)")


def default_missing_note(registry: Registry, parts: list[PartialDownload]) -> str | None:
    """What `models list` says where no row is the default's and no file of it is here (not even one a run passes
    over, whose row says so): the note models default gives (None for a file's path, which no pull downloads, or
    where a stopped pull kept a part of it, whose note gives the pull that resumes it)."""
    from localgen.hub_choice import quant_of

    try:
        default = registry.default_reference()
        ref = registry.reference(default)
        if ref.path is not None or default_here(registry, whatever_pin=True) is not None:
            return None
        repo, quant, filename = hub_target(ref, registry.spec_for(ref))
    except (LocalgenError, PermissionError):
        return None
    wanted = quant or (quant_of(filename) if filename else None)
    if any(p.repo.lower() == repo.lower() and wanted in (None, p.quant) for p in parts):
        return None
    return _lacking_default_warning(registry, ref, repo, quant, filename) or not_downloaded_note(default)


def _lacking_default_warning(registry: Registry, ref: ModelRef, repo: str, quant: str | None,
                             filename: str | None) -> str | None:
    """What `models list` warns of a default model, not downloaded, whose quant or file its repo lacked when localgen
    last listed it (offline a run without -m fails on it; online it asks the Hub again, as the pull hinted does), or
    None."""
    from localgen.config import settings
    from localgen.hub_lack import lacking_refusal, listed_lack
    from localgen.offline_words import pull_command

    lack = listed_lack(repo, quant, filename)
    if lack is None:
        return None
    offline = settings().offline
    again = None if offline else f"to check the repo again, run `{pull_command(ref.text)}`"
    setting = f" ([defaults] model in {registry.default_source})" if registry.default_source else ""
    refusal = lacking_refusal(ref, registry.spec_for(ref), lack, subject=f"the default model, {ref.text}{setting},",
                              then="; ".join(filter(None, (again, "`localgen models default REF` sets another"))))
    fail = "fail" if offline else "fail unless the repo has it now"
    return f"localgen: warning: {refusal.message}, so run and chat without -m {fail} (hint: {refusal.hint})"


def not_downloaded_note(default: str) -> str:
    """What models default and models list say of a default model that is not downloaded: the pull that downloads
    it, and, where the environment leaves runs free to download, that the first run or chat does otherwise."""
    from localgen.config import settings
    from localgen.offline_words import online_pull

    otherwise = "" if settings().offline_envs else ", else the first run or chat does"
    pull = online_pull(default, "downloads it now")
    return f"localgen: the default model, {default}, is not downloaded yet: {pull}{otherwise}"
