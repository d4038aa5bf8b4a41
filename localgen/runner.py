"""The generation service: load a model for a reference and stream answers to messages."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from localgen import lock_activity
from localgen.chat import Message, PromptFormat
from localgen.config import DEFAULT_BATCH_SIZE, DEFAULT_UBATCH_SIZE
from localgen.engine import Engine
from localgen.errors import HubError, LocalgenError, ModelLoadError, ModelNotFoundError
from localgen.estimate import MemoryEstimate, ModelShape, header_shape
from localgen.events import Event
from localgen.fit import (
    FitRequest,
    LoadPlan,
    fewer_gpu_layers,
    prompt_limit,
    refused_bytes,
    replan_gpu_layers,
    target_context,
)
from localgen.hardware import Hardware, cpu_only_warning_once, physical_cores, probe_hardware, usable_cpus
from localgen.hub_refresh import refreshed
from localgen.input_text import TextBound
from localgen.model_file_errors import named_as_typed
from localgen.once import first_time
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.quant_choice import choose_download, resolve_downloaded
from localgen.quant_instead import fitting_download, plan_resolved
from localgen.resolve import ResolvedModel, holds_hub_copy, resolve_model, with_unverified_copy
from localgen.template_sandbox import TEMPLATE_HINT, check_template
from localgen.units import counted

RESOLVE_TRIES = 3  # a model a models rm removes each time the run finds it is given up after this many lookups

if TYPE_CHECKING:
    from localgen.gguf_info import GGUFInfo
    from localgen.promptcache import PromptCache


@dataclass(frozen=True)
class ModelOptions:
    """What the user asked for about the model and how to load it (None = choose for me)."""

    model: str | None = None
    ctx_size: int | None = None
    threads: int | None = None
    threads_batch: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    ubatch_size: int = DEFAULT_UBATCH_SIZE
    gpu_layers: int | None = None  # None: as many as fit; -1: all
    flash_attn: str = "auto"
    kv_type: str = "f16"
    raw: bool = False
    no_gpu: bool = False
    min_ctx: int = 0  # a generous context for the prompt (fit.prompt_context), 0 when unknown
    floor_bytes: int = 0  # UTF-8 bytes of the prompt's texts, which need a context of fit.prompt_floor at least
    floor_texts: str = ""  # those texts, named after the tokens they take where they are refused (with -f FILE)
    chat_template: str | None = None  # a Jinja chat template that replaces the model's and the registry's
    chat_template_file: str | None = None  # the file it came from, for errors
    think: str | None = None  # --think, /think: the chat template's thinking switch (None: as the template has it)
    adapt_threads: bool = True  # without --threads, fewer while other processes keep the CPUs busy (not in bench)
    keys_for_drafts: bool = False  # --draft lookup without --kv-type: LoadOptions.key_type

    def __post_init__(self) -> None:
        """Check every loading option now, before anything is resolved or downloaded (same rules as at load)."""
        fit_request(self)
        LoadOptions(n_ctx=16,  # the context is checked against the model itself (fit.target_context)
                    n_threads=self.threads if self.threads is not None else 1,
                    n_threads_batch=self.threads_batch if self.threads_batch is not None else 1,
                    n_batch=self.batch_size, n_ubatch=self.ubatch_size,
                    n_gpu_layers=self.gpu_layers if self.gpu_layers is not None else 0,
                    flash_attn=self.flash_attn, kv_type=self.kv_type)


@dataclass
class LoadedModel:
    """A resolved model with its engine and prompt format."""

    resolved: ResolvedModel
    engine: Engine
    prompt_format: PromptFormat
    plan: LoadPlan | None = None  # the memory plan used: plan.describe(), plan.n_gpu_layers, plan.n_ctx, ...
    longest_token: int = 0  # bytes of its vocabulary's longest token as stored (fit.fewest_tokens)

    def close(self) -> None:
        """Free the engine."""
        self.engine.close()


def plan_load(options: ModelOptions, resolved: ResolvedModel, header: GGUFInfo,
              hw: Hardware | None = None) -> tuple[LoadOptions, LoadPlan, ModelShape]:
    """Choose context, GPU layers, KV type and threads for a model on this machine (fit.plan_fit)."""
    shape = header_shape(header, resolved.path)
    plan = plan_resolved(resolved, shape, hw or probe_hardware(), fit_request(options, default_ctx=resolved.context))
    threads = options.threads if options.threads is not None else physical_cores()
    load_options = LoadOptions(
        n_ctx=plan.n_ctx,
        n_threads=threads,
        n_threads_batch=options.threads_batch if options.threads_batch is not None else threads,
        n_batch=options.batch_size,
        n_ubatch=options.ubatch_size,
        n_gpu_layers=plan.n_gpu_layers,
        flash_attn=options.flash_attn,
        kv_type=options.kv_type,
        adapt_threads=options.threads is None and options.adapt_threads,
        expected_tokens=options.min_ctx,
        keys_for_drafts=options.keys_for_drafts,
    )
    return load_options, plan, shape


def fit_request(options: ModelOptions, *, default_ctx: int | None = None) -> FitRequest:
    """The planner's view of the user's options."""
    return FitRequest(ctx_size=options.ctx_size, gpu_layers=options.gpu_layers, no_gpu=options.no_gpu,
                      kv_type=options.kv_type, flash_attn=options.flash_attn,
                      n_ubatch=min(options.ubatch_size, options.batch_size), min_ctx=options.min_ctx,
                      floor_bytes=options.floor_bytes, floor_texts=options.floor_texts,
                      default_ctx=default_ctx)


def threads_warning_once(options: ModelOptions) -> str | None:
    """The first time in this process that --threads or --threads-batch asks for more threads than the CPUs this
    process may use, a warning that says so (llama.cpp's threads then wait for one another); else None."""
    cpus = usable_cpus()
    asked = (("--threads", options.threads), ("--threads-batch", options.threads_batch))
    over = [(flag, value) for flag, value in asked if value is not None and value > cpus]
    if not over:
        return None
    given = " and ".join(f"{flag} {value}" for flag, value in over)
    flags = " and ".join(flag for flag, _ in over)
    return first_time(f"{given} {'is' if len(over) == 1 else 'are'} more than the {counted(cpus, 'CPU')} this "
                      f"process may use; llama.cpp's threads wait for one another, so this is much slower (leave "
                      f"{flags} out to let localgen choose)")


def ignore_note(_: str) -> None:
    """A note nobody reads."""


def resolve_fitting(options: ModelOptions, hw: Hardware, note: Callable[[str], None] = ignore_note, *,
                    force: bool = False, download_only: bool = False, pulled: Collection[Path] = ()) -> ResolvedModel:
    """Resolve a reference; before any download, check it fits (or choose the best quant that does, and note it).

    force downloads again even when a copy is cached (for `pull --force`); download_only (for `pull`) lets through a
    model that fits only at a smaller context than a run takes by default, noting which; pulled: files the same pull
    has just fetched, returned as they are where the reference comes to one of them (neither checked nor downloaded
    again).
    """
    from localgen.hub_listing import is_offline, one_listing_per_repo

    if force:
        kept = _kept_from_force(options)
        if kept is not None:
            return kept
    else:
        try:
            found = resolve_downloaded(options.model, hw=hw, request=fit_request(options))
        except ModelNotFoundError:
            if is_offline():
                raise
        else:  # a run uses a downloaded model as it is, never downloading another quant in its place (its refusal
            if not download_only or found.path.absolute() in pulled:  # names the one that fits); pull brings it up
                return found  # to date, or pulls the one that fits
            with one_listing_per_repo():  # a repo asked for a quant that fits is not listed again to refresh it
                instead = fitting_download(found, options.model, hw=hw, request=fit_request(options), note=note)
                return instead if instead is not None else refreshed(found)
    try:
        with one_listing_per_repo():
            reference, chosen = choose_download(options.model, hw=hw, request=fit_request(options),
                                                download_only=download_only, note=note)
            fetched = pulled_before(reference, pulled)
            if fetched is not None:
                return fetched
            for text in chosen:  # said now, before the download starts
                note(text)
            return resolve_model(reference, force=force)
    except HubError as exc:  # the Hub cannot be asked: a copy another tool downloaded can still be used as it is
        raise with_unverified_copy(exc, options.model) from exc


def pulled_before(reference: str | None, pulled: Collection[Path]) -> ResolvedModel | None:
    """The downloaded copy of the model a chosen reference names where it is one of the files just pulled, else None."""
    if not pulled:
        return None
    try:
        found = resolve_downloaded(reference)
    except LocalgenError:
        return None
    return found if found.path.absolute() in pulled else None


def _kept_from_force(options: ModelOptions) -> ResolvedModel | None:
    """For `pull --force`: the file where there is no copy in the Hugging Face cache to download again (a file of
    one's own, or the bundled file where the cache holds none of it: its Python package's reinstall replaces it), else
    None; offline, a cached copy is refused, as downloading it again needs the network."""
    from localgen.hub import is_offline
    from localgen.offline_words import leave_offline

    offline = is_offline()
    try:
        found = resolve_model(options.model, pull=False)
    except LocalgenError:
        if offline:
            raise  # unknown or missing: as without --force
        return None  # no copy here: the download says what it finds
    if found.source == "local" or (found.source == "bundled" and not holds_hub_copy(found)):
        return found
    if not offline:
        return None
    raise LocalgenError("--force downloads the model again, which needs the network, and localgen is offline",
                        hint=f"{leave_offline()} to download it again, or drop --force to use the "
                             f"{'bundled' if found.source == 'bundled' else 'cached'} copy")


def open_engine(path: Path, load_options: LoadOptions, plan: LoadPlan, shape: ModelShape,
                note: Callable[[str], None], *, retry: bool = True,
                factory: Callable[[Path, LoadOptions, ModelShape], Engine] = Engine) -> tuple[Engine, LoadPlan]:
    """Load the engine; when llama.cpp fails with GPU layers the planner chose (retry: out of VRAM), retry with
    fewer and say so. Layers the user asked for with --gpu-layers are not changed behind their back."""
    while True:
        try:
            return factory(path, load_options, shape), plan  # the shape read: the engine reads no header again
        except ModelLoadError as exc:
            if load_options.n_gpu_layers == 0:
                raise
            if not retry:  # the cause may be the layers asked for (VRAM), or not: keep what the error said
                fewer_hint = (f"try fewer --gpu-layers than {load_options.n_gpu_layers}, "
                              "or leave it out to let localgen choose")
                raise exc.with_hint(f"{exc.hint}; or {fewer_hint}" if exc.hint else fewer_hint) from exc
            before = load_options.n_gpu_layers
            fewer = fewer_gpu_layers(before, shape.n_layer)
            reason = f"llama.cpp could not load {before} GPU layers; retried with {fewer}"
            note(reason)
            load_options = replace(load_options, n_gpu_layers=fewer)
            plan = replan_gpu_layers(plan, shape, fewer, reason, flash_attn=load_options.flash_attention)


def _resolved_held(options: ModelOptions, freed: Hardware, note: Callable[[str], None],
                   loading: contextlib.ExitStack) -> ResolvedModel:
    """The model resolved, its loading locks held in loading (load_locks.py) with each of its files still there: one a
    models rm removed as it was resolved is resolved again (downloaded, where the Hub is reached), up to
    RESOLVE_TRIES times."""
    from localgen import console
    from localgen.gguf_split import split_shard_paths
    from localgen.load_locks import REMOVAL_WAIT_S, held_for_loading, removal_holder
    from localgen.shards_missing import refuse_missing_shards

    def waiting(lock: Path) -> None:
        """Say once that the run waits on the process holding this loading lock."""
        console.say(f"localgen: waiting for {removal_holder(lock)} to end (at most {REMOVAL_WAIT_S:g} s)")

    for _ in range(RESOLVE_TRIES):
        resolved = resolve_fitting(options, freed, note)
        refuse_missing_shards(resolved)  # a path: none to resolve again
        if loading.enter_context(held_for_loading(split_shard_paths(resolved.path), waiting=waiting)):
            return resolved
        loading.close()  # removed as it was resolved: resolved again
    raise ModelNotFoundError(f"{resolved.display_name} was removed from the cache each time this run found it",
                             hint="another command removes it: run this command again once it has ended")


def load_model(options: ModelOptions, *, release: Callable[[], None] | None = None,
               held: MemoryEstimate | None = None, note: Callable[[str], None] = ignore_note,
               opening: Callable[[ResolvedModel], None] | None = None,
               found: Callable[[ResolvedModel], None] | None = None) -> LoadedModel:
    """Resolve, check, plan and load a model; the one way every command gets an engine.

    note gets what the planner chose or changed, and warnings (a CPU-only build on a machine with an NVIDIA GPU),
    as they happen. opening, when given, hears of the model once every check has passed, just before llama.cpp loads
    it. release, when given, frees a model already loaded once the new one is found and checked, so that the memory
    plan sees the RAM and VRAM that model held; held is what it holds, counted as free when a quant is chosen before
    that. found, when given, hears of the model as soon as it is resolved, before anything is freed, and may raise
    to load nothing.
    """
    from localgen.catalog import touch_last_used
    from localgen.gguf_split import validate_split
    from localgen.hub import locks_held_through

    hw = probe_hardware()
    for warning in (cpu_only_warning_once(hw), threads_warning_once(options)):
        if warning:
            note(f"warning: {warning}")
    freed = hw if held is None else hw.after_freeing(held.private_ram_bytes, held.vram_bytes)
    with locks_held_through(), contextlib.ExitStack() as loading:  # a models rm removes the model once llama.cpp
        with named_as_typed(options.model):  # has it open: waiting on a download's locks, refused by a load's
            resolved = _resolved_held(options, freed, note, loading)
            if found is not None:
                found(resolved)
            # every shard is checked in Python before llama.cpp opens it
            header, _ = validate_split(resolved.path)
        if release is not None:
            release()
            hw = probe_hardware()
        load_options, plan, shape = plan_load(options, resolved, header, hw)
        for reason in plan.reasons:
            note(reason)
        if opening is not None:
            opening(resolved)
        lock_activity.now_doing("loading")  # the locks of a model downloaded now, held until llama.cpp has it open
        engine, plan = open_engine(resolved.path, load_options, plan, shape, note, retry=options.gpu_layers is None)
    try:
        control_tokens = header.control_tokens | engine.control_among(header.user_defined_tokens)
        prompt_format = _prompt_format(engine, options, resolved, control_tokens)
    except BaseException:  # a template error or a signal: the weights just loaded must not stay behind
        engine.close()
        raise
    touch_last_used(resolved.path)
    return LoadedModel(resolved=resolved, engine=engine, prompt_format=prompt_format, plan=plan,
                       longest_token=shape.longest_token)


def _prompt_format(engine: Engine, options: ModelOptions, resolved: ResolvedModel,
                   control_tokens: frozenset[str]) -> PromptFormat:
    """How messages become the prompt: a --chat-template file, else a models.toml entry's template (each named in
    its errors), else the model's own."""
    override, name, hint = _template_naming(options, resolved)
    return PromptFormat.for_engine(engine, override=override, raw=options.raw, model_name=name, template_hint=hint,
                                   control_tokens=control_tokens, think=options.think)


def _template_naming(options: ModelOptions, resolved: ResolvedModel) -> tuple[str | None, str, str]:
    """The template that stands in for the model's own (a --chat-template file's, else a models.toml entry's; None:
    the model's own), how errors name it and what they advise."""
    spec = resolved.spec
    if options.chat_template is not None:
        return options.chat_template, *_given_template_naming(options)
    if spec is not None and spec.template is not None:
        return (spec.template, f"{resolved.display_name} ({spec.origin})",
                "fix that entry's template, or remove it to use the model's own, or use --raw")
    return None, resolved.display_name, TEMPLATE_HINT


def _given_template_naming(options: ModelOptions) -> tuple[str, str]:
    """How errors name a --chat-template template, and what they advise."""
    name = options.chat_template_file or "--chat-template"
    return name, f"fix {name}, or leave out --chat-template to use the model's own template, or use --raw"


def check_given_template(options: ModelOptions) -> None:
    """Refuse now a --chat-template that loading would refuse (too long, not valid Jinja, no switch for --think)."""
    from localgen.think_switch import refuse_think

    if options.chat_template is not None:
        name, hint = _given_template_naming(options)
        check_template(options.chat_template, model_name=name, hint=hint)
        refuse_think(options.chat_template, options.think, model_name=name)


def preflight_checks_think(options: ModelOptions) -> bool:
    """Whether preflight can refuse options.think: it is given, and no --chat-template file is still to be read
    (its template is checked once it is)."""
    return options.think is not None and (options.chat_template is not None or options.chat_template_file is None)


def preflight(options: ModelOptions) -> TextBound | None:
    """Refuse now what loading would refuse without a download or the input: a model file that is not there, a
    model that is neither here nor to be had offline, a file that is no GGUF (or a broken split), a --ctx-size
    beyond the model's maximum, a --think its chat template has no switch for. A run or a chat calls it before it
    waits for a pipe to end. Returns the bound on the prompt's text that loading would refuse (by its size:
    fit.refused_bytes), where the model is here."""
    from localgen.gguf_split import validate_split
    from localgen.hub import is_offline
    from localgen.resolve import check_reference
    from localgen.shards_missing import refuse_missing_shards
    from localgen.think_switch import refuse_think

    if options.model is not None:
        check_reference(options.model)  # a local file or a models.toml name, whether or not the Hub can be asked
    try:
        with named_as_typed(options.model):
            resolved = resolve_downloaded(options.model, request=fit_request(options))
    except ModelNotFoundError:
        if is_offline():
            raise
        return None  # checked once it is downloaded, after the input is read
    with named_as_typed(options.model):
        refuse_missing_shards(resolved)
        header, _ = validate_split(resolved.path)
    if preflight_checks_think(options):  # the template loading would take: --chat-template's, models.toml's, its own
        override, name, hint = _template_naming(options, resolved)  # named as loading names it
        template = override or header.chat_template
        if template is not None:  # refused for its syntax first, as loading refuses it
            check_template(template, model_name=name, hint=hint)
        refuse_think(template, options.think, model_name=name)
    shape, request = header_shape(header, resolved.path), fit_request(options, default_ctx=resolved.context)
    target_context(shape, request)
    return TextBound(refused_bytes(prompt_limit(shape, request), shape.longest_token),
                     lambda size: target_context(shape, replace(request, floor_bytes=size)))


def checked_prompt(loaded: LoadedModel, messages: Sequence[Message], made_of: str = "",
                   prompt: tuple[str, list[int]] | None = None) -> tuple[str, list[int]]:
    """Render and tokenize messages for the loaded model (or take prompt, their text and tokens rendered already),
    refusing prompts that cannot fit (naming what they hold: made_of, as attached.prompt_parts says it), and warning
    (once) where the chat template left the message out."""
    text, tokens = prompt or loaded.prompt_format.prompt(loaded.engine, messages)
    loaded.engine.check_fits(len(tokens), made_of)
    warn_if_left_out(loaded, text, messages)
    return text, tokens


def warn_if_left_out(loaded: LoadedModel, text: str, messages: Sequence[Message]) -> None:
    """Warn, the first time in this process, where the chat template left the last user message out of text, the
    prompt it rendered from messages."""
    warning = first_time(loaded.prompt_format.left_out_warning(text, messages))
    if warning is not None:
        from localgen import console

        console.warn(warning)


def stream_answer(loaded: LoadedModel, messages: Sequence[Message], sampling: SamplingParams,
                  limits: GenerationLimits, *, draft: str = "none", prompt_cache: bool = False,
                  made_of: str = "", prompt: tuple[str, list[int]] | None = None) -> Iterator[Event]:
    """Stream the model's answer to a conversation (optionally drafting by prompt lookup, using the prompt cache;
    a prompt too long is refused naming made_of, what it holds; prompt: the messages' text and tokens, where they
    were rendered already)."""
    cache = disk_prompt_cache(loaded) if prompt_cache else None
    tokens = checked_prompt(loaded, messages, made_of, prompt)[1]
    return loaded.engine.generate(tokens, sampling, limits, draft=draft, prefix_cache=cache)


def disk_prompt_cache(loaded: LoadedModel) -> PromptCache | None:
    """The on-disk prompt cache for this model (None when its size bound is 0, or its file is gone), whose entries are
    kept for the context a run gets by default: the model's, or the smaller one loaded (--ctx-size, or memory allowing
    no more)."""
    from localgen.fit import default_context
    from localgen.promptcache import prompt_cache_for

    usual = min(default_context(loaded.engine.n_ctx_train, loaded.resolved.context), loaded.engine.n_ctx)
    try:
        cache = prompt_cache_for(loaded.resolved.path, loaded.engine.state_signature, default_context=usual)
    except OSError:  # its file removed (a models rm) since llama.cpp loaded it: the answer goes on, keeping no state
        return None
    return cache if cache.max_bytes > 0 else None
