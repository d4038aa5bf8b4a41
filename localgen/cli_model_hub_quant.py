"""What `localgen models show ORG/REPO:QUANT` and `ORG/REPO/FILE.gguf` print of a Hub model not downloaded, online:
the fields a downloaded model's `models show` prints, read from the Hub's listing and the file's header, with
`downloaded: no` and the `localgen pull` that fetches it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from localgen.errors import HubError
from localgen.hub_types import HubModel
from localgen.registry import hub_target
from localgen.units import binary_size

if TYPE_CHECKING:
    from pathlib import Path

    from localgen.estimate import ModelShape
    from localgen.fit import LoadPlan
    from localgen.gguf_info import GGUFInfo
    from localgen.hub_types import HubFile
    from localgen.partial_downloads import PartialDownload
    from localgen.references import ModelRef
    from localgen.registry import ModelSpec


@dataclass(frozen=True)
class HubModelView:
    """One quant or file of a Hub repo as the Hub lists it: its files (a split model's shards), the first one's header
    with the model's shape and how a load would go here, or why the header could not be read."""

    name: str
    files: tuple[HubFile, ...]
    spec: ModelSpec | None
    header: tuple[GGUFInfo, ModelShape] | None
    plan: LoadPlan | None
    problem: str | None
    part: PartialDownload | None = None  # what a stopped (or running) pull of it kept
    typed: str | None = None  # the reference its pull names (None: name)
    refused: str | None = None  # why a pull of it is refused (a registry entry's pin the Hub's file breaks)

    @property
    def size(self) -> int:
        """The bytes of all its files."""
        return sum(f.size for f in self.files)


def hub_model_view(ref: ModelRef, spec: ModelSpec | None) -> HubModelView | HubError:
    """The quant or file ref names, as the Hub lists it now (one listing request and one header read, nothing
    downloaded); a quant or file the repo lacks, or lists empty, refused naming what it has; the Hub's error where it
    cannot be asked, for refuse_lacking to say."""
    from localgen.hub_lack import lacking_refusal
    from localgen.references import normalize_quant

    found = listed_model(ref, spec)
    if isinstance(found, tuple):
        raise lacking_refusal(ref, spec, found) from None
    if not isinstance(found, HubModel):
        return found
    filename = hub_target(ref, spec)[2]
    name = f"{found.repo}/{filename}" if filename else f"{found.repo}:{normalize_quant(found.quant or '')}"
    return model_view(found, name, spec)


def listed_model(ref: ModelRef, spec: ModelSpec | None) -> HubModel | HubError | tuple[HubError, str]:
    """The files of the quant or file ref names, as the Hub lists them now (one request); what the repo lacks of it
    (the error and what it says is lacking: a quant or file it has not, or lists empty); or the Hub's error where it
    cannot be asked."""
    from localgen import hub
    from localgen.errors import HubError
    from localgen.hub_lack import listed_empty
    from localgen.hub_types import NotInRepoError

    repo, quant, filename = hub_target(ref, spec)
    try:
        model = hub.find_model(repo, quant=quant, filename=filename)
    except NotInRepoError as exc:  # the listing just asked says what it has
        return exc, exc.message
    except HubError as exc:
        return exc
    return listed_empty(model.files, model.repo) or model


def model_view(model: HubModel, name: str, spec: ModelSpec | None, *, typed: str | None = None,
               refused: str | None = None) -> HubModelView:
    """A listed model's view named name: its first file's header read from the Hub and how a load would go here
    (typed: the reference its pull names, name where None; refused: why a pull refuses it)."""
    from localgen.errors import LocalgenError
    from localgen.fit import plan_of_shape
    from localgen.partial_downloads import part_of_files
    from localgen.quant_choice import hub_header

    default_ctx = spec.context if spec is not None else None
    part = part_of_files(model.files)
    try:
        header = hub_header(model.files, revision=model.revision)
    except LocalgenError as exc:
        return HubModelView(name, model.files, spec, None, None, problem=exc.message, part=part, typed=typed,
                            refused=refused)
    plan, problem = plan_of_shape(header[1], default_ctx=default_ctx)
    return HubModelView(name, model.files, spec, header, plan, problem, part, typed, refused)


def _downloaded(view: HubModelView) -> str:
    """The `downloaded` field: no, with the pull that fetches the model, or resumes what a stopped pull kept of it; a
    pull refused said, with what a stopped pull (or a running one) kept all the same."""
    from localgen.partial_downloads import kept_said

    if view.refused is not None:
        return f"no ({view.refused}{'; ' + kept_said(view.part) if view.part else ''})"
    if view.part is not None or view.header:
        return not_downloaded(view.typed or view.name, view.part)
    return "no"


def not_downloaded(reference: str, part: PartialDownload | None) -> str:
    """The `downloaded` field of a model that is not: no, with the pull that fetches it (reference: as it names the
    model), or what a stopped pull kept of it and the pull that resumes it, or how much a running one has so far."""
    from localgen.offline_words import online_pull
    from localgen.partial_downloads import kept_said

    if part is None:
        return f"no ({online_pull(reference, 'downloads it')})"
    if part.running:
        return f"no ({kept_said(part)})"
    return f"no ({kept_said(part)}; {online_pull(reference, 'resumes it')})"


def kept_part_of(path: Path) -> PartialDownload | None:
    """What a stopped pull kept of the model whose (first) file path is in the cache's snapshot, as localgen last
    listed its repo (None: nothing, or path is no snapshot's)."""
    from localgen.hub_settings import snapshot_entry
    from localgen.partial_downloads import listed_part

    found = snapshot_entry(path)
    return None if found is None else listed_part(found[0], None, found[1])


def missing_shards_bytes(first_shard: Path, missing: list[Path]) -> int | None:
    """The bytes of a split model's missing shards, its first shard in the cache's snapshot: as localgen last listed
    its repo (a pull lists it first), else online as the Hub lists it now; None where neither gives every size."""
    import contextlib

    from localgen import hub_cache
    from localgen.errors import LocalgenError
    from localgen.hub_listing import answers_within, fetch_listing, is_offline, one_listing_per_repo
    from localgen.hub_settings import snapshot_entry
    from localgen.quant_instead import HINT_WAIT_S

    snapshot_file = snapshot_entry(first_shard)
    if snapshot_file is None:
        return None
    repo, folder = snapshot_file[0], snapshot_file[1].rpartition("/")[0]
    names = [f"{folder}/{path.name}" if folder else path.name for path in missing]
    size = _listed_size(hub_cache.cached_listing(repo), names)
    if size is None and not is_offline():
        with one_listing_per_repo(), answers_within(HINT_WAIT_S), contextlib.suppress(LocalgenError):
            size = _listed_size(list(fetch_listing(repo).files), names)
    return size


def _listed_size(files: list[HubFile] | None, names: list[str]) -> int | None:
    """The bytes of the files names in a listing of a repo; None where it lacks one (or there is none)."""
    sizes = {f.filename: f.size for f in files or ()}
    return sum(sizes[name] for name in names) if all(name in sizes for name in names) else None


def show_hub_model(view: HubModelView, *, template: bool = False, json_output: bool) -> None:
    """Print a Hub model not downloaded as `models show` prints a downloaded one (--json: the same keys, downloaded
    false; --template: the header's chat template)."""
    from localgen import console
    from localgen.cli_model_fields import entry_fields, entry_json, load_plan_field, template_field, template_in_use
    from localgen.cli_model_hub import count_text, parameters_text, print_hub_template, print_template
    from localgen.partial_downloads import partial_json

    info, shape = view.header if view.header else (None, None)
    if template and view.spec is not None and view.spec.template is not None:  # the entry's, whatever the header
        print_template(view.name, view.spec.template)
        return
    if template:
        print_hub_template(view.name, info, view.problem)
        return
    first, count = view.files[0], len(view.files)
    license_ = (view.spec.license if view.spec else None) or (
        str(info.metadata.get("general.license", "unknown")) if info else None)
    quant = first.quant or (info.quant if info else None)
    used = template_in_use(view.spec, info.chat_template if info else None)  # None: not known where info is None
    if json_output:
        console.print_json({
            "name": view.name, "architecture": shape.architecture if shape else None,
            "parameters": (shape.parameter_count or None) if shape else None, "quant": quant,
            "context_length": info.context_length if info else None, "layers": info.block_count if info else None,
            "embedding_size": info.embedding_length if info else None,
            "chat_template": bool(used) if info or used else None, "license": license_, "size": view.size,
            "shards": count, "missing_shards": None, "sha256": first.sha256, "source": None, "verified": False,
            "path": None, "fits": (view.plan.fits_in if view.plan else "no") if info else None,
            "plan": view.plan.to_dict() if view.plan else None,
            "problem": "; ".join(filter(None, (view.refused, view.problem))) or None, "downloaded": False,
            "partial": partial_json(view.part, view.typed or view.name),
            "entry": entry_json(view.spec) if view.spec else None}, indent=2)
        return
    header: list[tuple[str, str]] = [("quant", quant or "unknown"), ("header", f"not readable: {view.problem}")]
    if info is not None and shape is not None:
        header = [("architecture", info.architecture), ("parameters", parameters_text(shape.parameter_count)),
                  ("quant", quant or "unknown"), ("context length", count_text(info.context_length)),
                  ("layers", count_text(info.block_count)), ("embedding size", count_text(info.embedding_length)),
                  ("chat template", template_field(view.spec, info.chat_template)),
                  ("license", license_ or "unknown")]
    shards = f", {count} shards" if count > 1 else ""
    plan = [] if info is None else [("load plan", load_plan_field(view.plan, view.problem))]
    console.print_fields([
        ("name", view.name), *(entry_fields(view.spec, info.context_length if info else None) if view.spec else []),
        *header,
        ("file size", f"{binary_size(view.size)} ({view.size:,} bytes{shards}) on the Hub"),
        ("sha256" if count == 1 else "sha256 (first shard)", first.sha256 or "not listed by the Hub"),
        ("read from", f"the header of {first.repo}/{first.filename} on the Hub"), *plan,
        ("downloaded", _downloaded(view))])
