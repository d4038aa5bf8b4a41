"""`localgen models`: list, inspect and remove downloaded models; show or set the default."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from localgen.cli_examples import alone_lists
from localgen.cli_options import JsonOpt, ListingJsonOpt, OfflineOpt, PlainUsage, confirmed, list_by_default
from localgen.config import offline_given, settings
from localgen.errors import LocalgenError, ModelNotFoundError, UsageError
from localgen.units import alternatives, binary_size, counted, iso_time, local_minute

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from localgen.catalog import CachedModel, ListedModel
    from localgen.default_model import DefaultRow
    from localgen.model_removal import RemovedModel
    from localgen.partial_downloads import PartialDownload
    from localgen.registry import Registry

models_app = typer.Typer(rich_markup_mode=None, help="List, inspect and remove models; show or set the default.",
                         no_args_is_help=False, epilog=alone_lists("models", "--all"))
AllOpt = Annotated[bool, typer.Option("--all", help="Also list the registry's models that are not downloaded.")]
ListingAllOpt = Annotated[bool, typer.Option("--all", hidden=True)]  # the group's: list's, shown there


@models_app.callback(invoke_without_command=True)
def _models_default(ctx: typer.Context, json_output: ListingJsonOpt = False, all_models: ListingAllOpt = False) -> None:
    """List models on this machine (`localgen models` = `localgen models list`)."""
    from localgen.hub_errors import set_running_command

    if ctx.invoked_subcommand:  # models rm: its hints name what it does (ORG/REPO alone picks no quant to remove)
        set_running_command(f"models {ctx.invoked_subcommand}")
    list_by_default(ctx, models_list, json_output=json_output, all_models=all_models)


@models_app.command("list", short_help="List the bundled, your own and downloaded models.")
def models_list(json_output: JsonOpt = False, all_models: AllOpt = False) -> None:
    """List models on this machine: bundled, your own (models.toml's path =) and downloaded, the default starred, and
    those a stopped pull kept a part of; --all adds the rest. On a pipe, tab-separated: a backslash, tab,
    newline or carriage return in a field is written \\\\, \\t, \\n, \\r, another control character \\xHH, and
    a last DEFAULT column says yes on the default's row."""
    from localgen import console
    from localgen.catalog import SOURCE_HUB, list_models
    from localgen.default_model import default_in_listing, default_missing_note, default_refusal
    from localgen.hub_cache import repo_folders
    from localgen.hub_errors import unread_cache_warnings
    from localgen.partial_downloads import kept_of_size, partial_downloads
    from localgen.registry import load_registry

    registry = load_registry(settings().user_registry)
    refused: list[PermissionError] = []  # the cache's places not to be read: warned of, the rest listed
    default, parts = default_in_listing(registry, refused), partial_downloads(registry)
    refusal = default_refusal(registry) if default == (None, None) else None
    if refusal is not None:  # no row to star: said
        console.warn(refusal)
    if all_models:
        _list_all(registry, default, parts, refused, json_output=json_output)
        return
    models = list_models(registry, folders=repo_folders(refused=refused), refused=refused)
    console.warn_each(unread_cache_warnings(refused))
    marked = _default_index(models, default)
    hub_names = {m.name for m in models if m.source == SOURCE_HUB}
    part_of = {p.name: p for p in parts}
    alone = [p for p in parts if p.name not in hub_names]  # one with shards here is listed already
    if json_output:
        console.print_json([
            *(_model_json(m, default=index == marked, part=part_of.get(m.name) if m.source == SOURCE_HUB else None)
              for index, m in enumerate(models)),
            *(_part_json(p) for p in alone)], indent=2)
        return
    rows = [_model_row(m, part_of.get(m.name) if m.source == SOURCE_HUB else None) for m in models]
    rows += [[p.name, p.quant or "-", kept_of_size(p), "-", _part_source(p), str(p.parts[0])] for p in alone]
    _print_listing(["NAME", "QUANT", "SIZE", "LAST USED", "SOURCE", "PATH"], rows, squeeze=(), marked=marked)
    for part in parts:
        console.say(_part_note(part))
    if marked is None and refusal is None and not refused and (note := default_missing_note(registry, parts)):
        console.say(note)


def _print_listing(headers: list[str], rows: list[list[str]], *, squeeze: tuple[str, ...], marked: int | None) -> None:
    """A models listing, the default's row (marked) starred on a terminal; a pipe, which gets no star, has a last
    DEFAULT column instead, yes on that row and no on the others."""
    from localgen import console

    if not sys.stdout.isatty():
        headers, rows = [*headers, "DEFAULT"], [[*row, "yes" if index == marked else "no"] for index, row in
                                                enumerate(rows)]
    console.print_table(headers, rows, squeeze=squeeze, marked=marked)


def _model_row(model: CachedModel, part: PartialDownload | None) -> list[str]:
    """A model's `models list` row; one lacking shards that a pull kept a part of shows as the partial rows do, with
    what is kept of the whole (a whole copy beside the part of a newer one is listed as the copy it is)."""
    from localgen.partial_downloads import kept_of_size

    if part is not None and model.missing_shards:
        return [model.name, model.quant or "-", kept_of_size(part), _when(model.last_used), _part_source(part),
                str(model.path)]
    return [model.name, model.quant or "-", binary_size(model.size) if model.size is not None else "-",
            _when(model.last_used), _source(model), str(model.path)]


def _default_index(models: Sequence[CachedModel | None], default: DefaultRow) -> int | None:
    """Where the file run and chat load without -m is among models (None: a row of none): the row of its file, or,
    where the default is an entry's name, of those named so a verified download its entry's pin takes first, then the
    bundled copy or the entry's own file, as they take it; else the row of the default's own file (an entry's, or a
    path's) or download that a run refuses (missing, unreadable, not the pinned file), which it fails on."""
    from localgen.catalog import SOURCE_HUB, SOURCE_LOCAL

    name, file = default
    usable = {index: model.source != SOURCE_HUB for index, model in enumerate(models)
              if model is not None and (model.name == name or (file is not None and model.path == file))
              and model.size is not None and not model.missing_shards and not model.problem
              and (model.verified or model.source != SOURCE_HUB)}
    if usable:
        return min(usable, key=lambda index: (usable[index], index))
    return next((index for index, model in enumerate(models) if model is not None and model.name == name
                 and (model.source == SOURCE_LOCAL or model.problem)), None)


def _part_source(part: PartialDownload) -> str:
    """The SOURCE cell of a model downloaded in part."""
    from localgen.partial_downloads import PARTLY_DOWNLOADED

    return "hub (downloading)" if part.running else f"hub ({PARTLY_DOWNLOADED})"


def _part_note(part: PartialDownload) -> str:
    """What `models list` says of a model downloaded in part: how much is kept, and the pull that resumes it."""
    from localgen.offline_words import online_command
    from localgen.partial_downloads import part_said, pull_command

    said = f"localgen: {part_said(part.name, part)}"
    return said if part.running else f"{said}; {online_command(pull_command(part.name), 'resumes it')}"


def _source(model: CachedModel) -> str:
    """The SOURCE cell: where the file came from, marked when a split model lacks shards (a download stopped part
    way), a Hub file is not verified yet, or a models.toml entry's own file cannot be used (own_files says why)."""
    from localgen.catalog import SOURCE_HUB

    if model.size is None or model.problem:
        return f"{model.source} ({model.problem or 'missing'})"
    if model.missing_shards:
        return f"{model.source} (incomplete: {counted(model.missing_shards, 'shard')} missing)"
    return f"{model.source} (unverified)" if model.source == SOURCE_HUB and not model.verified else model.source


def _list_all(registry: Registry, default: DefaultRow, parts: list[PartialDownload], refused: list[PermissionError],
              *, json_output: bool) -> None:
    """Print every downloaded model and every registry entry, each marked downloaded or not (the default starred),
    and the models a stopped pull kept a part of (refused: the cache's places found not to be read so far, warned of
    with the others)."""
    from localgen import console
    from localgen.catalog import ListedModel, list_all_models
    from localgen.hub_errors import unread_cache_warnings

    rows = list_all_models(registry, refused=refused)
    console.warn_each(unread_cache_warnings(refused))
    listed = {r.name for r in rows if r.model is None or r.model.source == "hub"}
    rows += [ListedModel(name=p.name, repo=p.repo, quant=p.quant, context=None, description="", downloaded=False)
             for p in parts if p.name not in listed]
    part_of = {p.name: p for p in parts}
    kept = [part_of.get(r.name) if not r.downloaded and (r.model is None or r.model.source == "hub") else None
            for r in rows]
    marked = _default_index([r.model for r in rows], default)
    if marked is None:  # not here (or its own file missing, its shards incomplete): its registry row, or its file's
        marked = next((index for index, r in enumerate(rows) if not r.downloaded and (
            r.name == default[0] or (r.model is not None and r.model.path == default[1]))), None)
    if json_output:
        console.print_json([_listed_json(r, default=index == marked, part=part)
                            for index, (r, part) in enumerate(zip(rows, kept, strict=True))], indent=2)
        return
    _print_listing(["NAME", "REPO", "QUANT", "CONTEXT", "DOWNLOADED", "DESCRIPTION"], [
        [r.name, r.repo or "-", r.quant or "-", f"{r.context:,}" if r.context else "-", _downloaded_cell(r, part),
         r.description] for r, part in zip(rows, kept, strict=True)], squeeze=("REPO", "DESCRIPTION"), marked=marked)


def _downloaded_cell(row: ListedModel, part: PartialDownload | None) -> str:
    """yes, yes (bundled), yes (local) for an entry's own file, no, no (missing) for one that is not there (or
    no (not a file), no (unreadable)), no (partly downloaded: ...) for one a pull kept a part of, no (incomplete:
    ...) for a split model with shards missing, or no (does not match the pinned sha256) for a download its entry's
    pin refuses."""
    source = row.model.source if row.model is not None else None
    if part is not None:
        from localgen.partial_downloads import kept_said

        return f"no ({kept_said(part)})"
    if row.model is not None and row.model.missing_shards:
        return f"no (incomplete: {counted(row.model.missing_shards, 'shard')} missing)"
    if not row.downloaded:
        problem = row.model.problem if row.model is not None else None
        return f"no ({problem or 'missing'})" if source == "local" or problem else "no"
    return f"yes ({source})" if source in ("bundled", "local") else "yes"


def _model_json(model: CachedModel, *, default: bool = False, part: PartialDownload | None = None) -> dict[str, object]:
    """A downloaded model as `models list --json` prints it (part: what a stopped pull kept of it besides)."""
    from localgen.partial_downloads import partial_json

    return {"name": model.name, "repo": model.repo, "quant": model.quant, "size": model.size,
            "last_used": iso_time(model.last_used), "path": str(model.path), "source": model.source,
            "verified": model.verified, "missing_shards": model.missing_shards, "problem": model.problem,
            "problem_detail": model.problem_detail, "default": default, "partial": partial_json(part)}


def _part_json(part: PartialDownload) -> dict[str, object]:
    """A model downloaded in part as `models list --json` prints it: size is what is on disk of it."""
    from localgen.partial_downloads import partial_json

    return {"name": part.name, "repo": part.repo, "quant": part.quant, "size": part.kept, "last_used": None,
            "path": str(part.parts[0]), "source": "hub", "verified": False, "missing_shards": part.missing_shards,
            "problem": None, "problem_detail": None, "default": False, "partial": partial_json(part)}


def _listed_json(row: ListedModel, *, default: bool = False, part: PartialDownload | None = None) -> dict[str, object]:
    """A `models list --all --json` entry: the `models list --json` keys (a part's as `models list --json` gives them,
    null when nothing is downloaded) and more."""
    from localgen.partial_downloads import partial_json

    files = _model_json(row.model) if row.model is not None else _part_json(part) if part is not None else \
        {"verified": False, "missing_shards": 0}
    return {"name": row.name, "repo": row.repo, "quant": row.quant,
            **{key: files.get(key) for key in ("size", "last_used", "path", "source", "verified", "missing_shards",
                                            "problem", "problem_detail")},
            "default": default, "partial": partial_json(part),
            "context": row.context, "description": row.description, "downloaded": row.downloaded}


def _when(epoch: float | None) -> str:
    """A last-use time as the table shows it."""
    return local_minute(epoch) if epoch else "never"


@models_app.command("show", short_help="Describe a model from its GGUF header.")
def models_show(
    reference: Annotated[str | None, typer.Argument(
        metavar="[REF]", help="NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf, a Hub address or a .gguf path; "
                              "without one, the default model.")] = None,
    template: Annotated[bool, typer.Option("--template", help="Print the chat template.")] = False,
    json_output: JsonOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Describe a model from its GGUF header (no weights are loaded; one not downloaded, online, as the Hub lists it and
    its header); without REF, the default model."""
    if template and json_output:
        raise UsageError("--template and --json contradict each other",
                         hint="--template prints the chat template as it is; --json's record says whether there is one")
    with offline_given(offline):
        _show_model(reference, template=template, json_output=json_output)


def _show_model(reference: str | None, *, template: bool, json_output: bool) -> None:
    """What `models show` prints of the model reference names (None: the default model)."""
    from localgen import console
    from localgen.cli_model_entry import show_entry
    from localgen.cli_model_fields import entry_fields, entry_json, load_plan_field, template_field, template_in_use
    from localgen.cli_model_hub import HubView, count_text, hub_view, parameters_text, print_template, show_hub_view
    from localgen.cli_model_hub_quant import HubModelView, kept_part_of, missing_shards_bytes, not_downloaded
    from localgen.estimate import header_shape
    from localgen.fit import plan_of_shape
    from localgen.gguf_reader import read_gguf
    from localgen.gguf_split import missing_shards_text, parameter_count, present_shards, validate_split
    from localgen.hub_lack import refuse_lacking
    from localgen.model_file_errors import named_as_typed
    from localgen.partial_downloads import partial_json
    from localgen.pull_checks import checked_by_pull
    from localgen.quant_choice import resolve_downloaded
    from localgen.registry import load_registry
    from localgen.resolve import undownloaded_entry, unverified_copy
    from localgen.shards_missing import is_own_split
    from localgen.verify import recorded_sha256

    text = reference if reference is not None else load_registry(settings().user_registry).default_reference()
    try:
        resolved = resolve_downloaded(reference)
    except ModelNotFoundError as not_here:
        unverified = unverified_copy(text)  # another tool's download: its header can be read all the same
        entry = None if unverified is not None else undownloaded_entry(text)
        if unverified is None and entry is None:
            if not isinstance(view := hub_view(text), (HubView, HubModelView)):  # online: as the Hub lists it
                refuse_lacking(text, failed=view)  # before the error's `localgen pull`: the quant or file must be there
                raise
            _say_default(reference, text)
            show_hub_view(view, template=template, json_output=json_output)
            return
        if unverified is None:
            _say_default(reference, text)
            show_entry(text, entry, not_here, template=template, json_output=json_output)
            return
        if unverified.path.stat().st_size == 0:
            refuse_lacking(text)  # the Hub's file is empty too (no model): no use downloading it again
        resolved = unverified
    _say_default(reference, text)
    shards, missing = present_shards(resolved.path)
    with named_as_typed(reference), checked_by_pull(resolved, text):  # every shard checked, as a run checks them
        info = read_gguf(resolved.path) if missing else validate_split(resolved.path)[0]
    spec = resolved.spec
    if template:
        print_template(resolved.display_name, template_in_use(spec, info.chat_template))
        return
    license_ = (spec.license if spec else None) or str(info.metadata.get("general.license", "unknown"))
    sha = recorded_sha256(resolved.path)
    expected = len(shards) + len(missing)
    size = sum(path.stat().st_size for path in shards) if expected > 1 else info.file_size
    count = f"{len(shards)} shards" if not missing else f"{len(shards)} of {expected} shards"
    parameters = parameter_count(info, resolved.path)
    missing_bytes = missing_shards_bytes(resolved.path, missing) if missing else 0  # None: their sizes not known
    shape = header_shape(info, resolved.path, missing_bytes=missing_bytes or 0)
    plan, problem = plan_of_shape(shape, default_ctx=resolved.context)
    part = kept_part_of(resolved.path) if missing else None  # shards a stopped pull kept a part of
    lacking = missing_shards_text(missing) if missing and is_own_split(resolved.path) else None  # no pull
    problem = "; ".join(filter(None, (lacking, problem))) or None
    if json_output:
        source = resolved.shown_source.partition(" (")[0]  # "hub", as models list --json: verified says the rest
        console.print_json({
            "name": resolved.display_name, "architecture": info.architecture, "parameters": parameters or None,
            "quant": info.quant, "context_length": info.context_length, "layers": info.block_count,
            "embedding_size": info.embedding_length, "chat_template": bool(template_in_use(spec, info.chat_template)),
            "license": license_, "size": size, "shards": expected,
            "missing_shards": len(missing), "sha256": sha, "source": source,
            "verified": sha is not None and source == resolved.shown_source,  # no "hub (unverified)" copy
            "path": str(resolved.path), "fits": plan.fits_in if plan else "no",  # as fit --json's options say it
            "plan": plan.to_dict() if plan else None, "problem": problem, "downloaded": not missing,
            "partial": partial_json(part, text),
            "entry": entry_json(spec) if spec else None}, indent=2)
        return
    console.print_fields([
        ("name", resolved.display_name), *(entry_fields(spec, info.context_length) if spec else []),
        ("architecture", info.architecture),
        ("parameters", parameters_text(parameters) + (f" (in {count})" if missing else "")),
        ("quant", info.quant or "unknown"),
        ("context length", count_text(info.context_length)), ("layers", count_text(info.block_count)),
        ("embedding size", count_text(info.embedding_length)),
        ("chat template", template_field(spec, info.chat_template)),
        ("license", license_), ("file size", f"{binary_size(size)} ({size:,} bytes"
                                              + (f", {count})" if expected > 1 else ")")),
        ("sha256" if expected == 1 else "sha256 (first shard)", sha or "not verified yet"),
        ("source", resolved.shown_source), ("path", str(resolved.path)),
        ("load plan", load_plan_field(plan, problem, counts_only=count if missing_bytes is None else None)),
        *([("problem", f"{lacking} (a run refuses the model)")] if lacking else
          [("downloaded", not_downloaded(text, part))] if missing else []),
    ])


def _say_default(reference: str | None, text: str) -> None:
    """Where no REF was given, say which model is the default one shown."""
    from localgen import console

    if reference is None:
        console.say(f"localgen: showing the default model, {text} (`localgen models default REF` sets another)")


@models_app.command("default", short_help="Print the model used without -m, or set it.")
def models_default(
    name: Annotated[str | None, typer.Argument(metavar="[REF]", help="The model to make the default, as -m takes it: "
                                               "NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf, a Hub address or "
                                               "a .gguf path.")]
    = None,
) -> None:
    """Print the model run and chat use without -m; with REF, make that model it ([defaults] model in your
    models.toml)."""
    import shlex

    from localgen import console
    from localgen.default_model import entries_naming, not_downloaded_note, set_default_model
    from localgen.registry import load_registry

    user_file = settings().user_registry
    if name is None:
        print(load_registry(user_file).default_reference())
        return
    chosen, here = set_default_model(name, user_file)
    console.say(f"localgen: the default model is now {chosen} ([defaults] model in {user_file})")
    if named := entries_naming(chosen, load_registry(user_file)):
        whose = f"{named[0]}'s" if len(named) == 1 else "their"
        console.say(f"localgen: {alternatives(named, 'and')} {'names' if len(named) == 1 else 'name'} this file too; "
                    f"run and chat without -m take it without {whose} settings (`localgen models default "
                    f"{shlex.quote(named[0])}` makes {named[0]} the default, with them)")
    if not here:
        console.say(not_downloaded_note(chosen))


@models_app.command("rm", short_help="Remove downloaded models.", cls=PlainUsage)
def models_rm(
    references: Annotated[list[str], typer.Argument(
        metavar="REF...", help="NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf or a Hub address of a downloaded "
                               "model; several are all checked before any is removed.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove downloaded models' files (never files another cached model still uses)."""
    from localgen import console
    from localgen.cli_model_rm import asked_of, removals_around, removed_line
    from localgen.default_model import default_gone_note, default_here
    from localgen.model_removal import remove_model
    from localgen.partial_downloads import parts_left_note
    from localgen.registry import load_registry

    registry = load_registry(settings().user_registry)
    default_before = default_here(registry, whatever_pin=True)  # a copy a run refuses is the default's to remove
    # by its files: a model named twice, or by two of its names, is removed once; each is checked before any removal
    plans: dict[tuple[Path, ...], tuple[str, RemovedModel]] = {}
    for reference in references:
        try:
            plan = remove_model(registry, reference, dry_run=True)  # a malformed one's hint: no ORG/REPO alone
        except LocalgenError as exc:
            if len(references) > 1:  # the others are there: say that they are kept too
                exc.message = f"{exc.message}; nothing removed"
            raise
        plans.setdefault(plan.entries or plan.paths, (reference, plan))
    ordered = [(reference, removals_around(list(plans.values()), index)) for index, (reference, _) in
               enumerate(plans.values())]
    shares = [remove_model(registry, reference, dry_run=True, others=others) for reference, others in ordered]
    listed = ", ".join(map(asked_of, shares))
    if not confirmed("remove", listed, yes=yes, declined="nothing removed"):
        return
    for reference, others in ordered:
        console.say(removed_line(removed := remove_model(registry, reference, others=others)))
        typed = registry.reference(reference)  # ORG/REPO alone: what is left of the repo's other quants is said
        if typed.kind == "repo" and typed.quant is None and (note := parts_left_note(registry, removed.repo)):
            console.say(note)
    if default_before is not None and default_here(registry, whatever_pin=True) is None:  # the default was removed
        console.say(default_gone_note(registry))
