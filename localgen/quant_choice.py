"""Choosing among a repo's quants, before anything is downloaded: each file's estimate and plan from its header.

Headers are read with HTTP range requests (hub_range.read_header_bytes). When a repo is named without a quant
(choose_option): among the quants that fit, the full context first, then everything on the GPU, then the most bits
per weight up to Q8_0's (F16/BF16/F32 only when no quantized file fits). `localgen fit`'s report of the options is
quant_report.py's; `localgen models show`'s plan, fit.plan_of_shape's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import GGUFError, InsufficientMemoryError, LocalgenError, is_files_own_refusal
from localgen.estimate import MemoryEstimate, ModelShape, header_shape, model_shape, read_shape
from localgen.file_versions import ReadOnce
from localgen.fit import (
    FitRequest,
    LoadPlan,
    estimate_at,
    fitting_context,
    insufficient_memory,
    least_context,
    plan_fit,
    target_context,
)
from localgen.hardware import Hardware, probe_hardware
from localgen.hub_choice import EMPTY_ON_THE_HUB, choose_model, is_auxiliary, only_auxiliary
from localgen.hub_header_blame import empty_on_the_hub
from localgen.model_target import Target, model_target
from localgen.units import binary_size, counted

if TYPE_CHECKING:
    from localgen.gguf_info import GGUFInfo
    from localgen.hub_types import HubFile
    from localgen.resolve import ResolvedModel

HEADER_READ_BYTES = 4 * 2**20  # first range read of a Hub file's header; grown x4 up to HEADER_READ_MAX_BYTES
HEADER_READ_MAX_BYTES = 256 * 2**20
# Most quantized first: auto choice of a quant never takes more bits per weight than Q8_0 unless nothing else
# fits the bill (unquantized weights decode slowly for little gain).
MAX_AUTO_BITS_PER_WEIGHT = 8.6
SLOW_HEADERS_S = 2.0  # header reads that take this long, more to come, are said to be under way

log = logging.getLogger("localgen.models")


@dataclass(frozen=True)
class FitOption:
    """One candidate model file (a quant of a Hub repo, or a local file) with its estimate and plan."""

    label: str  # the quant tag, or the file name when it has none
    quant: str | None
    filenames: tuple[str, ...]
    file_size: int
    shape: ModelShape | None = None
    estimate: MemoryEstimate | None = None  # the plan's, or at the context its problem names when it does not fit
    plan: LoadPlan | None = None  # None: does not fit (problem says why)
    problem: str | None = None
    path: Path | None = None  # the local file, when there is one
    refused: GGUFError | None = None  # its header (or empty file) on the Hub, which a download would be refused for

    @property
    def fits_in(self) -> str:
        """VRAM, VRAM+RAM, RAM, or no."""
        return self.plan.fits_in if self.plan is not None else "no"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        e = self.estimate
        return {"label": self.label, "quant": self.quant, "files": list(self.filenames), "size": self.file_size,
                "ctx_size": e.n_ctx if e else None,
                "weights_bytes": e.weights_bytes if e else None, "kv_bytes": e.kv_bytes if e else None,
                "buffers_bytes": e.buffers_bytes if e else None,
                "total_bytes": e.total_bytes if e else None, "ram_bytes": e.ram_bytes if e else None,
                "vram_bytes": e.vram_bytes if e else None,
                "bits_per_weight": round(self.shape.bits_per_weight, 2) if self.shape else None,
                "fits": self.fits_in, "plan": self.plan.to_dict() if self.plan else None, "problem": self.problem,
                "path": str(self.path) if self.path else None}


def evaluate(label: str, quant: str | None, filenames: tuple[str, ...], file_size: int, shape: ModelShape,
             hw: Hardware, request: FitRequest, path: Path | None = None) -> FitOption:
    """A candidate's plan and its estimate, or why it cannot fit and the estimate at the context that says so."""
    option = FitOption(label=label, quant=quant, filenames=filenames, file_size=file_size, shape=shape, path=path)
    try:
        plan = plan_fit(shape, hw, request, label=label)
    except InsufficientMemoryError as exc:
        return replace(option, estimate=estimate_at(shape, hw, exc.n_ctx, request)[0], problem=exc.short)
    return replace(option, estimate=plan.estimate, plan=plan)


def choose_option(options: Sequence[FitOption], request: FitRequest) -> int | None:
    """The index of the best option that fits: full context first, then all on the GPU, then the most bits per
    weight up to Q8_0's (unquantized weights only when nothing quantized fits); None when none fits."""

    def rank(option: FitOption) -> tuple[bool, bool, bool, float]:
        plan, shape = option.plan, option.shape
        assert plan is not None and shape is not None
        bits = shape.bits_per_weight
        quantized = bits <= MAX_AUTO_BITS_PER_WEIGHT
        full_context = plan.n_ctx >= target_context(shape, request)
        return full_context, plan.where == "gpu", quantized, bits if quantized else -bits

    fitting = [i for i, o in enumerate(options) if o.plan is not None and o.shape is not None]
    return max(fitting, key=lambda i: rank(options[i])) if fitting else None


def remote_header(repo: str, filename: str, size: int, *, revision: str | None = None,
                  sha256: str | None = None) -> GGUFInfo:
    """A Hub file's GGUF header from HTTP range reads of its first few MB (more only when the header is longer), or
    as kept from an earlier read of the file with that sha256 (kept where the Hub named the bytes read by it), as is
    the refusal of a header the Hub sent twice the same."""
    from localgen import gguf_cache, hub_range
    from localgen.gguf_cursor import GGUFTruncatedError
    from localgen.gguf_reader import read_gguf_bytes
    from localgen.hub_header_blame import kept_refusal, read_again, sent_short

    if size == 0:  # nothing to read (the Hub refuses a range of no bytes), and no model
        raise empty_on_the_hub(repo, filename)
    kept = gguf_cache.kept_hub_header(sha256, filename) if sha256 else None
    if kept is not None:
        return kept
    if sha256 and (refusal := kept_refusal(repo, filename, sha256)) is not None:
        raise refusal
    n = min(HEADER_READ_BYTES, size)
    while True:
        read = hub_range.read_header_bytes(repo, filename, n, revision=revision)
        try:
            info = read_gguf_bytes(read.data, filename, file_size=size)
        except GGUFError as exc:
            if len(read.data) < n:  # the Hub sent less than asked of a file it lists as longer: whatever the bytes
                raise sent_short(repo, filename, len(read.data), n, size) from None
            if isinstance(exc, GGUFTruncatedError) and n < min(size, HEADER_READ_MAX_BYTES):
                n = min(n * 4, size, HEADER_READ_MAX_BYTES)  # the header goes on past the bytes read
                continue
            read, info = read_again(exc, repo, filename, read.data, size=size, revision=revision, sha256=sha256)
        if sha256 and read.sha256 == sha256:  # not a file the Hub changed since its listing
            gguf_cache.keep_hub_header(sha256, info)
        return info


def hub_header(files: Sequence[HubFile], *, revision: str | None = None) -> tuple[GGUFInfo, ModelShape]:
    """The first file's header of a Hub model (one file, or the shards of a split model) and the model's shape from it
    (fit's and models show's read), under the repo's spelling in the listing (the cache's, where a copy is
    downloaded), not the one typed."""
    first = files[0]
    info = remote_header(first.repo, first.filename, first.size, revision=revision, sha256=first.sha256)
    others = sum(f.size for f in files[1:])
    return info, model_shape(info, file_size=first.size + others, shard_bytes=others)


def quant_groups(files: Sequence[HubFile], repo: str, *, explain: bool = False) -> list[tuple[HubFile, ...]]:
    """One file group per quant tag, plus each untagged model file (projectors and imatrix files left out); with
    explain, when none is usable (a split model with shards missing on the Hub, say), the last one's reason is
    raised rather than an empty list returned."""
    groups: dict[str, tuple[HubFile, ...]] = {}
    models = [f for f in files if not is_auxiliary(f)]
    if explain and files and not models:
        raise only_auxiliary(repo, files)
    refused: LocalgenError | None = None
    choices = [{"quant": quant, "filename": None} for quant in sorted({f.quant for f in models if f.quant})]
    choices += [{"quant": None, "filename": f.filename} for f in models if not f.quant and f.shard_index in (None, 1)]
    for choice in choices:
        try:
            group = choose_model(list(files), repo=repo, **choice)
        except LocalgenError as exc:
            refused = exc
            continue
        groups[group[0].filename] = group
    if explain and not groups and refused is not None:
        raise refused
    return sorted(groups.values(), key=lambda g: sum(f.size for f in g))


def hub_options(repo: str, hw: Hardware, request: FitRequest, *, files: Sequence[HubFile] | None = None,
                note: Callable[[str], None] | None = None) -> list[FitOption]:
    """Every model file of a Hub repo with its estimate and plan, from header range reads (nothing downloaded); note,
    when given, hears once that the reads are under way where they take SLOW_HEADERS_S and more are to come."""
    from localgen import hub

    listing = list(files) if files is not None else hub.list_gguf_files(repo)
    options: list[FitOption] = []
    groups, started = quant_groups(listing, repo, explain=True), time.monotonic()
    for group in groups:
        spent = time.monotonic() - started
        if note is not None and options and spent >= SLOW_HEADERS_S:
            note(f"reading the headers of {counted(len(groups), 'quant')} of {repo} on the Hub to choose the one "
                 f"that fits: {len(options)} read in {spent:.0f} s")
            note = None
        first = group[0]
        label = first.quant or first.filename
        names, size = tuple(f.filename for f in group), sum(f.size for f in group)
        if first.size == 0:
            options.append(FitOption(label=label, quant=first.quant, filenames=names, file_size=size,
                                     problem=EMPTY_ON_THE_HUB, refused=empty_on_the_hub(repo, first.filename)))
            continue
        try:
            shape = hub_header(group)[1]
        except LocalgenError as exc:
            options.append(FitOption(label=label, quant=first.quant, filenames=names, file_size=size,
                                     problem=f"header not readable: {exc.message}",
                                     refused=exc if isinstance(exc, GGUFError) else None))
            continue
        options.append(evaluate(label, first.quant, names, size, shape, hw, request))
    return options


def local_option(path: Path, hw: Hardware, request: FitRequest, *, label: str | None = None) -> FitOption:
    """A local GGUF file as a candidate; a split model's shards, where all are here, are checked as a run checks them
    (a later shard that is no GGUF, or of another model, is refused with its error)."""
    from localgen.gguf_split import present_shards, validate_split

    shape = read_shape(path)
    label = label or shape.quant or path.name
    present, missing = present_shards(path)
    if missing:
        return FitOption(label=label, quant=shape.quant, filenames=(path.name,), file_size=shape.file_size,
                         problem=f"{counted(len(missing), 'shard')} of {len(present) + len(missing)} missing "
                                 f"({missing[0].name} first)")
    if len(present) > 1:
        validate_split(path)
    return evaluate(label, shape.quant, (path.name,), shape.file_size, shape, hw, request, path=path)


def smaller_quants(sizes: Sequence[tuple[str, int]], size: int) -> tuple[str, ...]:
    """The quants (labels) of a repo whose files are smaller than size, the nearest first."""
    return tuple(label for label, other in sorted(sizes, key=lambda pair: -pair[1]) if other < size)


def _sizes(groups: Sequence[tuple[HubFile, ...]]) -> list[tuple[str, int]]:
    """Each file group's label (its quant, or its file name when it has none) and the size of all its files."""
    return [(g[0].quant or g[0].filename, sum(f.size for f in g)) for g in groups]


def listed_smaller_quants(resolved: ResolvedModel) -> tuple[str, ...] | None:
    """The quants of a downloaded model's repo with smaller files than its own, nearest first, as localgen last
    listed the repo (no network); None when that is not known (a file of one's own, a repo never listed)."""
    from localgen import hub_cache

    repo = resolved.spec.repo if resolved.spec is not None else resolved.ref.repo
    listing = hub_cache.cached_listing(repo) if repo is not None else None
    if not listing:
        return None
    groups = quant_groups(listing, repo)
    own = next((g for g in groups if Path(g[0].filename).name == resolved.path.name), None)
    if own is None:
        return None
    return smaller_quants(_sizes(groups), sum(f.size for f in own))


def smallest_option(options: Sequence[FitOption]) -> FitOption | None:
    """The option that needs the least RAM, among those whose header could be read."""
    readable = [o for o in options if o.estimate is not None and o.shape is not None]
    return min(readable, key=lambda o: o.estimate.ram_bytes if o.estimate else 0) if readable else None


def option_reference(repo: str, option: FitOption) -> str:
    """The reference that names a repo's option: ORG/REPO:QUANT, or ORG/REPO/FILE when it has no quant tag."""
    return f"{repo}:{option.quant}" if option.quant else f"{repo}/{option.filenames[0]}"


def choose_download(reference: str | None, *, hw: Hardware, request: FitRequest, download_only: bool = False,
                    note: Callable[[str], None] | None = None) -> tuple[str | None, tuple[str, ...]]:
    """Before a download: check the named model fits (or pick the best quant that fits) from Hub headers.

    Returns the reference to download and notes for the user; raises InsufficientMemoryError when nothing fits.
    download_only (`pull`): a model that fits only at a smaller context than a run takes by default is let through,
    with a note naming the context to run it at, as nothing is loaded now. note hears of header reads that take a
    while (hub_options).
    """
    from localgen.hub_errors import blamed_on_entry
    from localgen.hub_listing import one_listing_per_repo

    target = model_target(reference)
    if target.repo is None:
        return reference, ()
    with blamed_on_entry(target.spec, target.ref), one_listing_per_repo():
        return _choose_download(reference, target, hw=hw, request=replace(request, default_ctx=target.default_ctx),
                                download_only=download_only, note=note)


def _choose_download(reference: str | None, target: Target, *, hw: Hardware, request: FitRequest,
                     download_only: bool, note: Callable[[str], None] | None) -> tuple[str | None, tuple[str, ...]]:
    """choose_download of a parsed reference to a Hub repo."""
    from localgen import hub

    assert target.repo is not None
    if target.quant or target.filename:
        model = hub.find_model(target.repo, quant=target.quant, filename=target.filename)
        try:
            shape = hub_header(model.files, revision=model.revision)[1]
        except GGUFError:
            raise  # a header this file cannot be loaded with: the download would be refused after the fact
        except LocalgenError as exc:  # no header to judge by: the load after the download will tell
            return reference, (f"could not read {model.label}'s header from the Hub: {exc.message}; downloading it "
                               "without checking it fits here",)
        groups = quant_groups(hub.list_gguf_files(target.repo), target.repo)  # the listing find_model fetched
        try:
            plan_fit(shape, hw, request, label=model.label, smaller_quants=smaller_quants(_sizes(groups), model.size))
        except InsufficientMemoryError as exc:
            from localgen.quant_instead import naming_the_fitting_quant, will_not_run_warning

            if not download_only:  # a run: refused, naming the quant that fits
                raise naming_the_fitting_quant(exc, reference, model.size, hw, request) from None
            if fitting_context(shape, hw, request, exc.n_ctx) is None:  # a pull: chosen all the same
                return reference, (will_not_run_warning(target, model.label, shape, model.size, hw, request, groups),)
            return reference, (pulled_at_a_smaller_context(exc, shape, hw, request, model.label, download_only),)
        return reference, ()
    files = hub.list_gguf_files(target.repo)
    options = hub_options(target.repo, hw, request, files=files, note=note)
    repo = next((f.repo for f in files), target.repo)  # as the Hub (or cache) spells it
    index = choose_option(options, request)
    if index is None:
        smallest = smallest_option(options)
        if smallest is None:  # no header read: a quant whose header is refused is not downloaded
            from localgen.quant_unreadable import choice_without_headers

            return choice_without_headers(reference, repo, options, files)
        assert smallest.shape is not None  # smallest_option takes only options whose header was read
        ref = option_reference(repo, smallest)
        note = pulled_at_a_smaller_context(too_big_repo(repo, smallest, hw, request), smallest.shape, hw,
                                            request, ref, download_only)
        return ref, (f"chose the smallest quant, as none fits at the context a run takes by default: {note}",)
    chosen = options[index]
    assert chosen.plan is not None
    ref = option_reference(repo, chosen)
    count = len(options)
    which = "the only quant, and it fits" if count == 1 else f"the best that fits of {counted(count, 'quant')}"
    note = f"chose {ref} ({binary_size(chosen.file_size)}), {which}: {chosen.plan.describe()}"
    return ref, (note,)


def pulled_at_a_smaller_context(refusal: InsufficientMemoryError, shape: ModelShape, hw: Hardware,
                                 request: FitRequest, label: str, download_only: bool) -> str:
    """A download only (`pull`) of a quant that fits only at a smaller context than a run takes by default: the note
    that says which to run it at (a run would be refused). A download to run, or no context that fits, re-raises the
    refusal."""
    most = fitting_context(shape, hw, request, refusal.n_ctx) if download_only else None
    if most is None:
        raise refusal
    return (f"{label} fits here only at a context of {most:,} tokens or less (it needs "
            f"{binary_size(refusal.needed_bytes)} at {refusal.n_ctx:,}): run it with --ctx-size {most}")


def resolve_downloaded(reference: str | None, *, offline: bool | None = None, hw: Hardware | None = None,
                       request: FitRequest | None = None) -> ResolvedModel:
    """A reference resolved with no download and no network: for a repo named without a quant, the best downloaded
    quant that fits (the one `fit` marks), else its own file if that is here (ModelNotFoundError when there is none);
    its errors and warnings worded for offline mode where it is on, or where offline is True (no download follows)."""
    from localgen.resolve import resolve_model

    cached = choose_cached(reference, hw=hw, request=request or FitRequest())
    return resolve_model(cached or reference, offline=offline, pull=False)


def choose_cached(reference: str | None, *, hw: Hardware | None, request: FitRequest) -> str | None:
    """For a repo named without a quant: the best already downloaded quant that fits, ranked as a download is chosen,
    as ORG/REPO:QUANT (no network); None when there is none, or when the reference names a quant, a file or a path."""
    target = model_target(reference)
    if target.repo is None or target.quant or target.filename:
        return None
    request = replace(request, default_ctx=target.default_ctx)
    options = cached_options(target.repo, hw or probe_hardware(), request)
    index = choose_option(options, request)
    if index is None:
        return None
    return option_reference(target.repo, options[index])


def cached_options(repo: str, hw: Hardware, request: FitRequest) -> list[FitOption]:
    """Every downloaded quant of a repo (verified, as localgen last listed the repo) with its estimate and plan, from
    the local files' headers (no network); one whose header cannot be read is left out (a run names it when asked
    for it)."""
    from localgen import hub_cache

    options = []
    for group in quant_groups(hub_cache.cached_listing(repo) or [], repo):
        first = group[0]
        paths = hub_cache.cached_model(repo, quant=first.quant, filename=None if first.quant else first.filename)
        if not paths:
            continue
        try:
            shape = header_shape(read_local_header(paths[0]), paths[0])
        except LocalgenError as exc:
            log.debug("leaving out %s: %s", paths[0], exc.message)
            continue
        options.append(evaluate(first.quant or first.filename, first.quant, tuple(f.filename for f in group),
                                shape.file_size, shape, hw, request, path=paths[0]))
    return options


_HEADERS: ReadOnce[GGUFInfo] = ReadOnce(is_files_own_refusal)  # a run chooses a quant twice; models list lists often


def read_local_header(path: Path) -> GGUFInfo:
    """A local file's validated header, or the error refusing it, read once a process while the file stays the same
    version."""
    from localgen.gguf_reader import read_gguf

    return _HEADERS.read(path, lambda: read_gguf(path))


def too_big_repo(repo: str, smallest: FitOption, hw: Hardware, request: FitRequest) -> InsufficientMemoryError:
    """The error when not even a repo's smallest quant fits."""
    assert smallest.shape is not None
    n_ctx = least_context(target_context(smallest.shape, request), request, smallest.shape)  # where plan_fit refused it
    est = estimate_at(smallest.shape, hw, n_ctx, request)[0]
    named = option_reference(repo, smallest)  # ORG/REPO/FILE where the file has no quant in its name
    return insufficient_memory(smallest.shape, hw, est, request, n_ctx,
                               subject=f"no quant of {repo} fits: even the smallest, {named},", smallest_quant=True)

