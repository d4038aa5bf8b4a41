"""`localgen fit`'s report: every quant of a reference's repo (or its one local file) with its estimate and plan,
the one a run would use marked, and why a run would refuse the one named; and the report as a table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import InsufficientMemoryError, LocalgenError, ModelNotFoundError
from localgen.fit import FitRequest, ignored_requests, plan_fit
from localgen.hardware import Hardware, probe_hardware
from localgen.hub_choice import choose_model, no_gguf_files
from localgen.model_target import Target, model_target
from localgen.offline_words import online_pull
from localgen.quant_choice import (
    FitOption,
    cached_options,
    choose_option,
    hub_options,
    listed_smaller_quants,
    local_option,
    option_reference,
    resolve_downloaded,
    smaller_quants,
    smallest_option,
    too_big_repo,
)
from localgen.units import binary_size

if TYPE_CHECKING:
    from localgen.hub_types import HubFile


@dataclass(frozen=True)
class FitReport:
    """`localgen fit`: the candidates for a reference on this hardware, and the one a run would use."""

    reference: str
    repo: str | None
    hardware: Hardware
    request: FitRequest
    options: tuple[FitOption, ...]
    chosen: int | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        return {"model": self.reference, "repo": self.repo, "hardware": self.hardware.to_dict(),
                "ctx_size": self.request.ctx_size, "kv_type": self.request.kv_type,
                "options": [o.to_dict() | {"chosen": i == self.chosen} for i, o in enumerate(self.options)],
                "chosen": self.options[self.chosen].label if self.chosen is not None else None,
                "notes": list(self.notes)}


def _named_index(options: Sequence[FitOption], files: Sequence[HubFile], target: Target) -> int | None:
    """The option a named quant or file points at."""
    assert target.repo is not None
    group = choose_model(list(files), quant=target.quant, filename=target.filename, repo=target.repo)
    return next((i for i, o in enumerate(options) if o.filenames[0] == group[0].filename), None)


def fit_report(reference: str | None, *, request: FitRequest, hw: Hardware | None = None) -> FitReport:
    """Estimate and plan every quant of a reference's repo (or its one local file) and mark the one to use."""
    from localgen.hub_errors import blamed_on_entry

    target = model_target(reference)
    with blamed_on_entry(target.spec, target.ref):
        return _fit_report(reference, target, request=request, hw=hw or probe_hardware())


def _fit_report(reference: str | None, target: Target, *, request: FitRequest, hw: Hardware) -> FitReport:
    """fit_report of a parsed reference."""
    from localgen import hub

    request = replace(request, default_ctx=target.default_ctx)
    text = target.text
    notes = ignored_requests(request, hw)
    survey_error: LocalgenError | None = None
    if target.path is None and target.repo is not None and not hub.is_offline():
        try:
            files = hub.list_gguf_files(target.repo)
            if not files:
                raise no_gguf_files(target.repo)
            options = hub_options(target.repo, hw, request, files=files)
            if target.quant or target.filename:
                index = _named_index(options, files, target)
                options, refused = _pin_refusal(options, index, files, target)
                smaller = smaller_quants([(o.label, o.file_size) for o in options],
                                          options[index].file_size) if index is not None else None
                notes.extend([refused] if refused else _named_refusal(options, index, text, hw, request,
                                                                      smaller=smaller))
            else:
                index, better = _run_choice(options, reference, target, hw, request)
                notes.extend(_repo_refusal(options, target.repo, hw, request) + better)
            notes.extend(_entry_context_notes(target, options, request))
            return FitReport(text, target.repo, hw, request, tuple(options), _marked(options, index), tuple(notes))
        except LocalgenError as exc:
            survey_error = exc
            notes.append(f"showing the local copy only: {exc.message} (--offline skips asking the Hub)")
    try:
        resolved = resolve_downloaded(reference, hw=hw, request=request)
    except ModelNotFoundError:
        if survey_error is not None:
            raise survey_error from None  # not downloaded either: the Hub's error is the one to fix
        raise
    option = local_option(resolved.path, hw, request, label=target.quant or resolved.ref.quant)
    notes.extend(_named_refusal([option], 0, text, hw, request, smaller=listed_smaller_quants(resolved)))
    options = _with_other_downloads(option, target, hw, request)
    index = next(i for i, o in enumerate(options) if o.path == option.path)
    notes.extend(_entry_context_notes(target, options, request))
    named = resolved.cache_file_name or text  # a download given by its path: as models list names it
    return FitReport(named, target.repo, hw, request, tuple(options), _marked(options, index), tuple(notes))


def _entry_context_notes(target: Target, options: Sequence[FitOption], request: FitRequest) -> list[str]:
    """The note a run's warning would give where the models.toml entry's context is beyond the model's maximum
    (read from the first header at hand), and no --ctx asked for another."""
    from localgen.registry_entries import context_beyond_note

    maximum = next((o.shape.context_length for o in options if o.shape is not None), None)
    note = None if request.ctx_size is not None else context_beyond_note(target.spec, maximum)
    return [note] if note else []


def _run_choice(options: Sequence[FitOption], reference: str | None, target: Target, hw: Hardware,
                request: FitRequest) -> tuple[int | None, list[str]]:
    """For a repo named without a quant: the option a run uses (the downloaded quant it resolves to, else the best
    that fits on the Hub, which it would download), and a note when a better fit is on the Hub but not downloaded."""
    best = choose_option(options, request)
    try:
        used = resolve_downloaded(reference, hw=hw, request=request).path.name
    except ModelNotFoundError:
        return best, []
    index = next((i for i, o in enumerate(options) if Path(o.filenames[0]).name == used), None)
    if index is None or best is None or best == index:
        return best if index is None else index, []
    assert target.repo is not None
    better = option_reference(target.repo, options[best])
    if options[index].plan is None:  # a run refuses it, never downloading another quant in its place
        said = f"a run takes the downloaded {options[index].label}, which does not fit here; {better} fits"
    else:
        said = f"a run uses the downloaded {options[index].label}; {better} fits better here"
    return index, [f"{said} ({online_pull(better)} for runs to use it)"]


def _with_other_downloads(option: FitOption, target: Target, hw: Hardware, request: FitRequest) -> list[FitOption]:
    """For a repo named without a quant: the downloaded quant a run would use, and the repo's other downloaded quants
    beside it, smallest first (the one option alone otherwise)."""
    if target.repo is None or target.quant or target.filename or option.path is None:
        return [option]
    others = [o for o in cached_options(target.repo, hw, request) if o.path != option.path]
    return sorted([option, *others], key=lambda o: o.file_size)


def _pin_refusal(options: list[FitOption], index: int | None, files: Sequence[HubFile],
                 target: Target) -> tuple[list[FitOption], str | None]:
    """The options, the named one marked as refused when the Hub's file is not the one its registry entry pins (its
    sha256 or size, as a run refuses it before downloading), and that refusal as a note (None when none)."""
    from localgen.hub_verify import check_pin
    from localgen.resolve import entry_pin

    pin = entry_pin(target.spec, target.ref)
    if pin is None or index is None:
        return options, None
    option = options[index]
    first = next(f for f in files if f.filename == option.filenames[0])
    try:
        check_pin(f"{first.repo}/{first.filename}", first.sha256, first.size, pin)
    except LocalgenError as exc:
        name = target.spec.name if target.spec is not None else target.text
        sizes = f" (sizes at context {option.estimate.n_ctx:,})" if option.estimate else ""  # no PLAN names it
        refused = replace(option, plan=None, problem=f"not the file [models.{name}] pins{sizes}")
        return [*options[:index], refused, *options[index + 1:]], _refusal_note(exc)
    return options, None


def _marked(options: Sequence[FitOption], index: int | None) -> int | None:
    """The option to mark as the one a run would use: only one that fits (a run refuses the others)."""
    return index if index is not None and options[index].plan is not None else None


def _named_refusal(options: Sequence[FitOption], index: int | None, subject: str, hw: Hardware,
                   request: FitRequest, *, smaller: Sequence[str] | None = None) -> list[str]:
    """Run's refusal of the named quant or file (subject: the reference) as a note, when it does not fit; smaller:
    the repo's quants with smaller files, nearest first, for its hint (None: not known)."""
    option = options[index] if index is not None else None
    if option is None or option.plan is not None or option.shape is None:
        return []
    try:
        plan_fit(option.shape, hw, request, label=subject, smaller_quants=smaller)
    except InsufficientMemoryError as exc:
        return [_refusal_note(exc, lead="" if any(o.plan for o in options) else "nothing fits here: ")]
    return []


def _repo_refusal(options: Sequence[FitOption], repo: str, hw: Hardware, request: FitRequest) -> list[str]:
    """Run's refusal of a repo named without a quant ('no quant of ORG/REPO fits') as a note, when none fits."""
    smallest = smallest_option(options)
    if smallest is None or any(o.plan for o in options):
        return []
    return [_refusal_note(too_big_repo(repo, smallest, hw, request))]


def _refusal_note(refusal: LocalgenError, *, lead: str = "") -> str:
    """A refusal, its hint (what would help) included, as one note line."""
    return f"{lead}{refusal.message}" + (f"; {refusal.hint}" if refusal.hint else "")


def report_table(report: FitReport) -> tuple[str, list[str], list[list[str]]]:
    """A title line, headers and rows for `localgen fit` (report.chosen is the index of the chosen row)."""
    hw = report.hardware
    gpus = ", ".join(f"{g.name} ({binary_size(g.free_bytes)} free)" for g in hw.gpus) or (
        "none usable (CPU-only llama.cpp build)" if hw.nvidia_gpus else "none")
    title = (f"{report.reference}: RAM {binary_size(hw.ram_budget_bytes)} usable of "
             f"{binary_size(hw.memory.available_bytes)} available ({hw.memory.source}); GPU: {gpus}")
    headers = ["QUANT", "FILE", "WEIGHTS", "KV", "BUFFERS", "TOTAL", "FITS", "PLAN"]
    rows = []
    for option in report.options:
        e = option.estimate
        # the sizes add up to the total; the plan names their context (a refusal the one it needs)
        sizes = [binary_size(size) for size in (e.weights_bytes, e.kv_bytes, e.buffers_bytes, e.total_bytes)] if e \
            else ["-"] * 4
        plan = option.plan.describe() if option.plan else (option.problem or "-")
        rows.append([option.label, binary_size(option.file_size), *sizes, option.fits_in, plan])
    return title, headers, rows
