"""A quant of a Hub repo that fits here, in place of one that does not: what `pull` of a named quant that no run can
load here warns of (the download goes ahead: the user chose it), what a run's refusal of a quant names, and the quant
a pull of ORG/REPO downloads where the downloaded one a run would take does not fit."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import HubError, InsufficientMemoryError, LocalgenError
from localgen.estimate import ModelShape, padded_context
from localgen.fit import FitRequest, LoadPlan, estimate_at, fitting_context, plan_fit
from localgen.offline_words import online_pull
from localgen.units import binary_size

HINT_WAIT_S = 3.0  # the most a run's refusal waits for each answer of the Hub naming the quant that fits: a hint only
OFFLINE = "localgen is offline"  # why the Hub was not asked which quant fits instead
HUB_FAILED = "asking it failed"  # ... or why it did not tell (the line of the Hub check after it says how)
NONE_FITS = "the Hub has no quant of {repo} that fits here either"  # ... or what it told: none fits in its place

if TYPE_CHECKING:
    from localgen.hardware import Hardware
    from localgen.hub_types import HubFile
    from localgen.model_target import Target
    from localgen.quant_choice import FitOption
    from localgen.resolve import ResolvedModel


def will_not_run_warning(target: Target, label: str, shape: ModelShape, size: int, hw: Hardware,
                         request: FitRequest, groups: Sequence[tuple[HubFile, ...]]) -> str:
    """The warning for a named quant (label, size: of all its files) that fits this machine at no context: what it
    needs at the least context, what there is, and which quant of its repo (groups: its quants) fits instead."""
    return misfit_warning(label, shape, hw, request, fitting_instead(target, groups, size, hw, request))


def misfit_warning(label: str, shape: ModelShape, hw: Hardware, request: FitRequest, instead: str) -> str:
    """The warning that a run will refuse a quant (label) that fits this machine at no context: what it needs at the
    least context and what there is, ending with instead (which quant fits in its place, or why that is not told)."""
    least = padded_context(max(request.floor_ctx(shape), 1))
    est = estimate_at(shape, hw, least, request)[0]
    return (f"warning: a run will refuse {label} here: it needs about {binary_size(est.ram_bytes)} of RAM even at a "
            f"context of {least:,} tokens, but this machine has {binary_size(hw.ram_budget_bytes)} of usable RAM "
            f"({hw.memory.source}: {binary_size(hw.memory.available_bytes)} available); {instead}")


def untold(target: Target, unlisted: str) -> str:
    """The clause that ends a warning where the Hub was not asked which quant fits instead (unlisted: why)."""
    return f"which smaller quant of {target.repo} fits here takes the Hub to tell, and {unlisted}"


def fitting_instead(target: Target, groups: Sequence[tuple[HubFile, ...]], size: int, hw: Hardware,
                    request: FitRequest, *, pull: bool = True) -> str:
    """Which quant of the repo, smaller than size, fits here (the best, as `pull ORG/REPO` chooses it, from their
    headers on the Hub), with the pull that downloads it (pull); or that none does."""
    from localgen.quant_choice import choose_option, smallest_option, too_big_repo

    assert target.repo is not None
    smaller = [group for group in groups if sum(f.size for f in group) < size]
    if not smaller:
        return f"{target.repo} has no smaller quant"
    options = _read_down_to_the_best(target.repo, smaller, hw, request)
    index = choose_option(options, request)
    if index is not None:
        named = _named(target, options[index])
        return f"{named} fits" + (f" ({online_pull(named)})" if pull else " here")
    smallest = smallest_option(options)
    if smallest is not None and smallest.shape is not None:
        refusal = too_big_repo(target.repo, smallest, hw, request)
        most = fitting_context(smallest.shape, hw, request, refusal.n_ctx)
        if most is not None:
            named = _named(target, smallest)
            return f"{named} fits with --ctx-size {most} or less" + (f" ({online_pull(named)})" if pull else "")
    return f"no smaller quant of {target.repo} fits here either"


def _read_down_to_the_best(repo: str, groups: Sequence[tuple[HubFile, ...]], hw: Hardware,
                           request: FitRequest) -> list[FitOption]:
    """The options of these quants of a repo, their headers (a few MiB each) read from the largest down, stopping at
    one no smaller quant can beat as choose_option ranks them: it fits at the full context, quantized, wholly on the
    GPU or where none can take layers; every one read where none does."""
    from localgen.fit import target_context
    from localgen.quant_choice import MAX_AUTO_BITS_PER_WEIGHT, choose_option, hub_options

    options: list[FitOption] = []
    for group in sorted(groups, key=lambda g: sum(f.size for f in g), reverse=True):
        options += hub_options(repo, hw, request, files=list(group))
        index = choose_option(options, request)
        best = options[index] if index is not None else None
        if best is not None and best.plan is not None and best.shape is not None and (
                best.plan.n_ctx >= target_context(best.shape, request)
                and best.shape.bits_per_weight <= MAX_AUTO_BITS_PER_WEIGHT
                and (best.plan.where == "gpu" or not hw.can_offload)):
            break
    return options


def _named(target: Target, option: FitOption) -> str:
    """The reference to an option as the user named its repo: NAME:QUANT after a registry name, else ORG/REPO:QUANT
    (ORG/REPO/FILE for a file with no quant tag)."""
    from localgen.quant_choice import option_reference

    if target.ref.kind == "name" and option.quant:
        return f"{target.text.partition(':')[0]}:{option.quant}"
    return option_reference(target.repo or "", option)


def fitting_download(found: ResolvedModel, reference: str | None, *, hw: Hardware, request: FitRequest,
                     note: Callable[[str], None]) -> ResolvedModel | None:
    """For `pull ORG/REPO` (no quant named), online, whose downloaded quant a run takes does not fit here (none of its
    downloaded quants does): the quant of the repo that fits, chosen on the Hub as where none is downloaded, said and
    downloaded. None where the downloaded one fits, none on the Hub fits better, or the Hub cannot be asked: the
    downloaded one is brought up to date as before (a run refuses it, naming the quant that fits). A named quant
    downloaded that a run will refuse is warned of, offline too, as is the downloaded quant of ORG/REPO offline,
    where the Hub failed to choose, or where it has none that fits."""
    from localgen.estimate import header_shape
    from localgen.hub_listing import is_offline, one_listing_per_repo
    from localgen.quant_choice import choose_download, model_target, read_local_header
    from localgen.references import quant_of_filename
    from localgen.resolve import resolve_model

    if found.source != "cache":
        return None  # bundled, or one's own: not the Hub's
    target = model_target(reference)
    if target.repo is None:
        return None
    request = replace(request, default_ctx=target.default_ctx)
    offline = is_offline()
    own_quant = quant_of_filename(found.path.name)
    own = f"{target.repo}:{own_quant}" if own_quant else f"{target.repo}/{found.path.name}"
    if target.quant or target.filename:  # the quant or file named is the one pulled: the warning its first pull gave
        label = f"{target.repo}:{target.quant}" if target.quant else f"{target.repo}/{target.filename}"
        instead = untold(target, OFFLINE) if offline else None  # None: the Hub is asked which quant fits instead
        _warn_of_a_misfit(found, target, label, hw, request, note, instead=instead)
        return None
    if offline:  # no Hub to choose the quant that fits on: what a run will make of the downloaded one
        _warn_of_a_misfit(found, target, own, hw, request, note, instead=untold(target, OFFLINE))
        return None
    try:
        plan_fit(header_shape(read_local_header(found.path), found.path), hw, request)
        return None
    except InsufficientMemoryError:
        pass
    except LocalgenError:
        return None  # a header the load will name
    try:
        with one_listing_per_repo():
            chosen, notes = choose_download(reference, hw=hw, request=request, download_only=True, note=note)
    except HubError:  # no answer: what a run will make of the downloaded one, as offline (the Hub check says why)
        _warn_of_a_misfit(found, target, own, hw, request, note, instead=untold(target, HUB_FAILED))
        return None
    except InsufficientMemoryError:  # nothing fits: what a run will make of the downloaded one, and the Hub's answer
        _warn_of_a_misfit(found, target, own, hw, request, note, instead=NONE_FITS.format(repo=target.repo))
        return None
    chosen_target = model_target(chosen)
    if (own_quant is not None and chosen_target.quant == own_quant) or (
            chosen_target.filename is not None and Path(chosen_target.filename).name == found.path.name):
        return None
    first, *rest = notes or ("",)
    note(f"the downloaded {own} does not fit here" + (f"; {first}" if first else ""))
    for text in rest:
        note(text)
    return resolve_model(chosen, offline=False)


def _warn_of_a_misfit(found: ResolvedModel, target: Target, label: str, hw: Hardware, request: FitRequest,
                      note: Callable[[str], None], *, instead: str | None) -> None:
    """For `pull` of a quant already downloaded (label: as its reference names it) that a run will refuse here, or
    load only at a smaller context: note what the first pull of it named noted (the quant that fits instead, or the
    --ctx-size to run it with), from its header here; instead: the clause that ends the warning where the Hub was not
    asked, failed or has answered already (None: ask it which quant fits instead)."""
    from localgen.estimate import header_shape
    from localgen.hub import list_gguf_files
    from localgen.quant_choice import pulled_at_a_smaller_context, quant_groups, read_local_header

    try:
        shape = header_shape(read_local_header(found.path), found.path)
        plan_fit(shape, hw, request)
        return
    except InsufficientMemoryError as exc:
        refusal = exc
    except LocalgenError:
        return  # a header the load will name
    assert target.repo is not None
    if fitting_context(shape, hw, request, refusal.n_ctx) is not None:
        note(pulled_at_a_smaller_context(refusal, shape, hw, request, label, True))
        return
    if instead is None:
        try:
            groups = quant_groups(list_gguf_files(target.repo), target.repo)
        except LocalgenError:
            instead = untold(target, HUB_FAILED)
        else:
            instead = fitting_instead(target, groups, shape.file_size, hw, request)
    note(misfit_warning(label, shape, hw, request, instead))


def naming_the_fitting_quant(refusal: InsufficientMemoryError, reference: str | None, size: int, hw: Hardware,
                             request: FitRequest) -> InsufficientMemoryError:
    """A run's refusal of a quant (ORG/REPO:QUANT, a registry name's, or the downloaded one ORG/REPO takes), its hint
    ending with the quant of its repo that fits here, from the Hub's headers of the smaller ones (size: the refused
    quant's files'); the refusal as it was where the Hub is offline or cannot be asked."""
    from localgen.hub import list_gguf_files
    from localgen.hub_listing import answers_within, is_offline, one_listing_per_repo, stall
    from localgen.hub_settings import hub_endpoint
    from localgen.quant_choice import model_target, quant_groups

    target = model_target(reference)
    if target.repo is None or is_offline():
        return refusal
    instead: str | None = None
    with one_listing_per_repo(), answers_within(HINT_WAIT_S):
        with contextlib.suppress(LocalgenError):  # the Hub's error: the refusal goes as it was
            instead = fitting_instead(target, quant_groups(list_gguf_files(target.repo), target.repo), size, hw,
                                      request, pull=False)
        stalled = stall()
        if stalled is not None:  # a listing or a header read not answered: what was read is not the whole story
            waited = HINT_WAIT_S if stalled.waited is None else stalled.waited  # a shorter timeout's own
            instead = (f"the Hub ({hub_endpoint()}) did not answer within {waited:g} s to say which smaller "
                       "quant fits here")
    if instead is None:
        return refusal
    return refusal.with_hint(f"{refusal.hint}; {instead}" if refusal.hint else instead)


def plan_resolved(resolved: ResolvedModel, shape: ModelShape, hw: Hardware, request: FitRequest) -> LoadPlan:
    """plan_fit for a model about to load; when it does not fit, the hint names the smaller quants of its repo as
    localgen last listed it, and, online, the one that fits; warns of a models.toml entry's context beyond the
    model's maximum, where it is used."""
    from localgen.quant_choice import listed_smaller_quants
    from localgen.registry_entries import warn_context_beyond

    if request.ctx_size is None:
        warn_context_beyond(resolved.spec, shape.context_length)
    try:
        return plan_fit(shape, hw, request, label=resolved.display_name)
    except InsufficientMemoryError as exc:
        refusal, smaller = exc, listed_smaller_quants(resolved)
    if smaller is not None:
        try:
            plan_fit(shape, hw, request, label=resolved.display_name, smaller_quants=smaller)  # refused, naming them
        except InsufficientMemoryError as exc:
            refusal = exc
    if resolved.source != "cache":  # bundled or one's own: no repo to look in
        raise refusal
    raise naming_the_fitting_quant(refusal, resolved.ref.text, shape.file_size, hw, request)
