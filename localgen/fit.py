"""The load plan: GPU layers, context and KV type chosen so a model fits this machine, or a clear refusal.

plan_fit, from the model's shape (estimate.py) and the machine (hardware.py):
    GPU layers: all if they fit in the VRAM budget (free VRAM less hardware.vram_reserve_bytes), else the most that
    fit, else 0. Context: the model's training context capped by the registry's context and DEFAULT_CONTEXT_CAP
    (config; raised to what the prompt needs), then lowered in steps of 256 to what fits in RAM_USABLE_FRACTION of
    available RAM, never below MIN_AUTO_CONTEXT or the fewest tokens the prompt could take (prompt_floor). KV type:
    f16 unless asked. --gpu-layers, --no-gpu, --ctx-size and --kv-type override the choices; a model that does not
    fit raises InsufficientMemoryError before any download or load.
Choosing among a repo's quants is quant_choice.py's; `localgen fit`'s report of them, quant_report.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from localgen.config import DEFAULT_CONTEXT_CAP, MEMORY_LIMIT_ENV
from localgen.errors import (
    ContextOverflowError,
    ContextSizeError,
    InsufficientMemoryError,
    UsageError,
    beyond_the_model,
)
from localgen.estimate import CONTEXT_PAD, MemoryEstimate, ModelShape, estimate_memory, padded_context
from localgen.params import check_context_size, check_gpu_layers, check_kv_type, flash_attention_on
from localgen.units import alternatives, binary_size, counted

if TYPE_CHECKING:
    from localgen.hardware import Hardware

MIN_AUTO_CONTEXT = 2048  # the planner never shrinks the context below this on its own
UNKNOWN_LONGEST_TOKEN = 1024  # bytes a token may hold where the vocabulary was not read (fewest_tokens)
BYTES_PER_TOKEN_GUESS = 3  # prose takes fewer tokens, numbers more (many tokenizers spend a token on each digit)
ANSWER_ROOM = 512  # the tokens a context keeps for an answer when -n does not say
TEMPLATE_ROOM = 64  # the tokens a chat template adds around counted texts (role markers, its own system prompt)


@dataclass(frozen=True)
class LoadPlan:
    """How to load a model here: GPU layers, context and KV type, the estimate for them, and why."""

    n_ctx: int
    n_gpu_layers: int  # 0 = CPU only; n_layers + 1 = every layer and the output head
    n_layers: int  # the model's repeating layers
    kv_type: str
    estimate: MemoryEstimate
    ram_budget_bytes: int
    vram_budget_bytes: int
    reasons: tuple[str, ...] = ()
    repack_types: frozenset[str] = frozenset()
    n_ubatch: int = 512  # the physical batch and attention kind the estimate assumed
    flash_attn: bool = True

    @property
    def where(self) -> str:
        """'gpu' (everything offloaded), 'split' (some layers) or 'cpu'."""
        if self.n_gpu_layers > self.n_layers:
            return "gpu"
        return "split" if self.n_gpu_layers > 0 else "cpu"

    @property
    def fits_in(self) -> str:
        """Where the model fits, for tables: VRAM, VRAM+RAM or RAM."""
        return {"gpu": "VRAM", "split": "VRAM+RAM", "cpu": "RAM"}[self.where]

    @property
    def placement(self) -> str:
        """Where the layers go: 'all 30 layers on the GPU', '13/30 layers on the GPU' or 'CPU only' (llama.cpp counts
        the output layer as one more: 30 of 31 leaves it on the CPU)."""
        if self.where == "split" and self.n_gpu_layers >= self.n_layers:  # all but the output layer
            return f"all {counted(self.n_layers, 'layer')} on the GPU but the output layer"
        return {"gpu": f"all {counted(self.n_layers, 'layer')} on the GPU",
                "split": f"{self.n_gpu_layers}/{counted(self.n_layers, 'layer')} on the GPU",
                "cpu": "CPU only"}[self.where]

    def describe(self) -> str:
        """One line: 'context 8,192, KV f16, 13/30 layers on the GPU'."""
        return f"context {self.n_ctx:,}, KV {self.kv_type}, {self.placement}"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description, each setting named as the option that sets it (--ctx-size, --gpu-layers)."""
        e = self.estimate
        return {"ctx_size": self.n_ctx, "gpu_layers": self.n_gpu_layers, "layers": self.n_layers,
                "kv_type": self.kv_type, "where": self.where, "ram_bytes": e.ram_bytes, "vram_bytes": e.vram_bytes,
                "weights_bytes": e.weights_bytes, "kv_bytes": e.kv_bytes, "compute_bytes": e.compute_bytes,
                "reclaimable_bytes": e.reclaimable_bytes, "ram_budget_bytes": self.ram_budget_bytes,
                "vram_budget_bytes": self.vram_budget_bytes,
                "reasons": list(self.reasons)}


@dataclass(frozen=True)
class FitRequest:
    """What the user asked for (None = choose for me) and what the prompt needs."""

    ctx_size: int | None = None
    gpu_layers: int | None = None  # -1 = all
    no_gpu: bool = False
    kv_type: str = "f16"
    flash_attn: str = "auto"  # --flash-attn: on, off, or auto (flash_attention_on decides at each context)
    n_ubatch: int = 512
    min_ctx: int = 0  # a generous context for the prompt and its answer (0 = unknown): the planner aims for it
    floor_bytes: int = 0  # UTF-8 bytes of the prompt's texts: the context they need at least (floor_ctx) is
    # refused below, not lowered
    floor_texts: str = ""  # those texts, named after the tokens they take where they are refused (with -f FILE)
    default_ctx: int | None = None  # the registry's context for the model

    def floor_ctx(self, shape: ModelShape) -> int:
        """The least context the prompt could need in this model: prompt_floor of its bytes."""
        return prompt_floor(self.floor_bytes, shape.longest_token)

    def __post_init__(self) -> None:
        """Check what was asked, with the same rules as LoadOptions."""
        check_kv_type(self.kv_type)
        if self.ctx_size is not None:
            check_context_size(self.ctx_size)
        if self.gpu_layers is not None:
            check_gpu_layers(self.gpu_layers)
        if self.no_gpu and self.gpu_layers:
            raise UsageError(f"--no-gpu and --gpu-layers {self.gpu_layers} contradict each other",
                             hint="give one of them")


def text_bytes(*texts: str | None) -> int:
    """The UTF-8 bytes of the texts a prompt is made of (None counts nothing)."""
    return sum(len(text.encode()) for text in texts if text)


def prompt_context(prompt_bytes: int, answer_tokens: int | None = None) -> int:
    """A generous context for a prompt of this many UTF-8 bytes (about 3 bytes a token: a guess, which text of
    digits outgrows, prompt_room.py then counts) plus the answer."""
    if prompt_bytes <= 0:
        return 0
    return guessed_tokens(prompt_bytes) + (answer_tokens or ANSWER_ROOM)


def guessed_tokens(prompt_bytes: int) -> int:
    """The tokens a prompt of this many UTF-8 bytes is guessed to take, before a tokenizer counts them."""
    return prompt_bytes // BYTES_PER_TOKEN_GUESS


def counted_context(prompt_tokens: int, answer_tokens: int | None = None) -> int:
    """The context for a prompt whose texts the model's tokenizer counted: room for them, the chat template's own
    tokens and the answer."""
    return prompt_tokens + TEMPLATE_ROOM + (answer_tokens or ANSWER_ROOM)


def fewest_tokens(prompt_bytes: int, longest_token: int) -> int:
    """The fewest tokens a text of this many UTF-8 bytes can take however it tokenizes, no token holding more bytes
    than the vocabulary's longest as stored (longest_token; UNKNOWN_LONGEST_TOKEN where 0): a text that cannot fit
    even so is refused by its size, before a tokenizer spends seconds on it."""
    return prompt_bytes // _most_bytes(longest_token)


def _most_bytes(longest_token: int) -> int:
    """The most bytes of text one token can stand for: a vocabulary's token stores each byte it stands for in one
    byte or more (a byte-level BPE's space as two bytes, Ġ; SentencePiece's as three, ▁; a byte token as <0x0A>)."""
    return longest_token if longest_token > 0 else UNKNOWN_LONGEST_TOKEN


def prompt_floor(prompt_bytes: int, longest_token: int) -> int:
    """The fewest tokens a prompt of this many UTF-8 bytes can take (fewest_tokens), plus an answer."""
    return fewest_tokens(prompt_bytes, longest_token) + 1 if prompt_bytes > 0 else 0


def refused_bytes(n_ctx: int, longest_token: int) -> int:
    """UTF-8 bytes of prompt text that take more tokens than a context of n_ctx holds, however they tokenize
    (fewest_tokens past n_ctx): a read may stop there, the text refused."""
    return (n_ctx + 1) * _most_bytes(longest_token)


def prompt_limit(shape: ModelShape, request: FitRequest) -> int:
    """The context a prompt's floor is checked against (target_context): the one asked for, else the model's own."""
    return request.ctx_size if request.ctx_size is not None else shape.context_length or DEFAULT_CONTEXT_CAP


def target_context(shape: ModelShape, request: FitRequest) -> int:
    """The context to aim for: asked (within what the model was trained for), else the trained context capped by
    the registry and the default cap."""
    trained = shape.context_length or DEFAULT_CONTEXT_CAP
    if request.ctx_size is not None:
        if shape.context_length and request.ctx_size > shape.context_length:
            raise ContextSizeError(request.ctx_size, shape.context_length)
        floor, limit = request.floor_ctx(shape), prompt_limit(shape, request)
        _check_prompt_can_fit(floor, limit, request.floor_texts, asked=True, most=shape.context_length)
        return request.ctx_size
    _check_prompt_can_fit(request.floor_ctx(shape), prompt_limit(shape, request), request.floor_texts, asked=False)
    target = default_context(shape.context_length, request.default_ctx)
    if request.min_ctx > target:
        target = min(padded_context(request.min_ctx), trained)
    return target


def default_context(trained: int | None, registry: int | None) -> int:
    """The context a prompt that needs no more gets: the model's trained one, capped by the registry's context for
    it and DEFAULT_CONTEXT_CAP."""
    return min(c for c in (trained, registry, DEFAULT_CONTEXT_CAP) if c)


def least_context(target: int, request: FitRequest, shape: ModelShape) -> int:
    """The smallest context a plan aiming at target settles for: the one asked for, else MIN_AUTO_CONTEXT or the
    fewest tokens the prompt could take."""
    return target if request.ctx_size is not None else min(target, max(MIN_AUTO_CONTEXT, request.floor_ctx(shape)))


def _check_prompt_can_fit(floor_ctx: int, n_ctx: int, texts: str, *, asked: bool, most: int | None = None) -> None:
    """Refuse, before any download or tokenization, a prompt that cannot fit however it tokenizes (texts: what it
    holds, named after its tokens where given; most: the model's own maximum, when a larger --ctx-size could help)."""
    if floor_ctx > n_ctx:
        if not asked or (most and floor_ctx > most):  # no context this model takes holds it
            raise beyond_the_model(floor_ctx - 1, most if asked and most else n_ctx, texts, at_least=True)
        larger = f"a larger --ctx-size (this model takes up to {most}), or " if most else ""
        raise ContextOverflowError(f"the prompt is too long for --ctx-size {n_ctx}: it takes at least "
                                   f"{floor_ctx - 1:,} tokens" + (f" {texts}" if texts else ""),
                                   hint=f"try {larger}shortening the input, or split it and ask about each part")


def _max_gpu_layers(shape: ModelShape, hw: Hardware, n_ctx: int, request: FitRequest) -> int:
    """The most layers (output head counted as one) whose VRAM need fits the budget."""
    def fits(count: int) -> bool:
        est = estimate_memory(shape, n_ctx=n_ctx, kv_type=request.kv_type, n_gpu_layers=count,
                              n_ubatch=request.n_ubatch, flash_attn=_flash(request, n_ctx, count))
        return est.vram_bytes <= hw.vram_budget_bytes

    low, high = 0, shape.n_layer + 1  # VRAM need grows with the count: bisect for the largest that fits
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _layers_for(shape: ModelShape, hw: Hardware, n_ctx: int, request: FitRequest) -> int:
    """GPU layers at a context: the user's number, none, or the most that fit."""
    if request.no_gpu or not hw.can_offload:
        return 0
    if request.gpu_layers is not None:
        return shape.n_layer + 1 if request.gpu_layers < 0 else min(request.gpu_layers, shape.n_layer + 1)
    return _max_gpu_layers(shape, hw, n_ctx, request)


def _flash(request: FitRequest, n_ctx: int, gpu_layers: int) -> bool:
    """Whether the context the request makes at n_ctx, with gpu_layers offloaded, runs flash attention."""
    return flash_attention_on(request.flash_attn, kv_type=request.kv_type, gpu=gpu_layers != 0, n_ctx=n_ctx)


def estimate_at(shape: ModelShape, hw: Hardware, n_ctx: int, request: FitRequest) -> tuple[MemoryEstimate, bool]:
    """The estimate at a context with the GPU layers chosen for it, and whether its RAM part fits."""
    layers = _layers_for(shape, hw, n_ctx, request)
    est = estimate_memory(shape, n_ctx=n_ctx, kv_type=request.kv_type, n_gpu_layers=layers,
                          n_ubatch=request.n_ubatch, flash_attn=_flash(request, n_ctx, layers),
                          repack_types=hw.cpu_repack_types)
    return est, est.ram_bytes <= hw.ram_budget_bytes


def plan_fit(shape: ModelShape, hw: Hardware, request: FitRequest | None = None, *,
             label: str | None = None, smaller_quants: Sequence[str] | None = None) -> LoadPlan:
    """The load plan for a model on this hardware, or InsufficientMemoryError (naming it label) when it cannot fit;
    smaller_quants: the repo's quants with smaller files, nearest first, for the hint (None: the repo is not known)."""
    request = request or FitRequest()
    target = target_context(shape, request)
    floor = least_context(target, request, shape)
    est, fits = estimate_at(shape, hw, target, request)
    reasons: list[str] = []
    if not fits:
        low_est, low_fits = estimate_at(shape, hw, floor, request)
        if not low_fits:
            raise insufficient_memory(shape, hw, low_est, request, floor, subject=label, smaller_quants=smaller_quants)
        best = _largest_context(shape, hw, request, floor, target)
        est = estimate_at(shape, hw, best, request)[0]
        reasons.append(f"context lowered from {target:,} to {best:,} tokens to fit "
                       f"{binary_size(hw.ram_budget_bytes)} of usable RAM")
        target = best
    if hw.can_offload and not request.no_gpu and request.gpu_layers is None and est.n_gpu_layers <= shape.n_layer:
        on_gpu = min(est.n_gpu_layers, shape.n_layer)
        reasons.append(f"{on_gpu} of {counted(shape.n_layer, 'layer')} {'fits' if on_gpu == 1 else 'fit'} in "
                       f"{binary_size(hw.vram_budget_bytes)} of free VRAM")
    reasons.extend(ignored_requests(request, hw))
    return LoadPlan(n_ctx=target, n_gpu_layers=est.n_gpu_layers, n_layers=shape.n_layer, kv_type=request.kv_type,
                    estimate=est, ram_budget_bytes=hw.ram_budget_bytes, vram_budget_bytes=hw.vram_budget_bytes,
                    reasons=tuple(reasons), repack_types=hw.cpu_repack_types, n_ubatch=request.n_ubatch,
                    flash_attn=_flash(request, target, est.n_gpu_layers))


def ignored_requests(request: FitRequest, hw: Hardware) -> list[str]:
    """What the user asked for that this machine cannot do (GPU layers on a CPU-only build)."""
    if request.gpu_layers and not request.no_gpu and not hw.gpu_offload:
        return ["this llama.cpp build cannot offload to a GPU: --gpu-layers ignored"]
    return []


def _largest_context(shape: ModelShape, hw: Hardware, request: FitRequest, floor: int, target: int) -> int:
    """The largest multiple of 256 between floor (which fits) and target (which does not) that fits."""
    low, high = floor // CONTEXT_PAD, target // CONTEXT_PAD
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_at(shape, hw, middle * CONTEXT_PAD, request)[1]:
            low = middle
        else:
            high = middle - 1
    return max(low * CONTEXT_PAD, floor)


def fitting_context(shape: ModelShape, hw: Hardware, request: FitRequest, below: int) -> int | None:
    """The largest context under `below` (a multiple of 256, holding at least the prompt) that fits, if any."""
    least = padded_context(max(request.floor_ctx(shape), 1))
    if least >= below or not estimate_at(shape, hw, least, request)[1]:
        return None
    return _largest_context(shape, hw, request, least, padded_context(below) - CONTEXT_PAD)


def _fits_with_q8_0(shape: ModelShape, hw: Hardware, request: FitRequest, n_ctx: int, gpu_layers: int) -> bool:
    """Whether a q8_0 KV cache would fit where the f16 one does not (with the flash attention it needs, the
    attention scores take less memory too)."""
    est = estimate_memory(shape, n_ctx=n_ctx, kv_type="q8_0", n_gpu_layers=gpu_layers, n_ubatch=request.n_ubatch)
    return est.ram_bytes <= hw.ram_budget_bytes


def insufficient_memory(shape: ModelShape, hw: Hardware, est: MemoryEstimate, request: FitRequest, n_ctx: int,
                        subject: str | None = None, *, smallest_quant: bool = False,
                        smaller_quants: Sequence[str] | None = None) -> InsufficientMemoryError:
    """The error for a model that does not fit even at the smallest context the planner would choose.

    smallest_quant: it is already the smallest quant there is, so the hint offers a smaller model instead.
    smaller_quants: the quants of its repo with smaller files, nearest first (None: not known), named in the hint.
    """
    name = subject or shape.name or "the model"
    where = (f"{binary_size(hw.ram_budget_bytes)} of usable RAM ({hw.memory.source}: "
             f"{binary_size(hw.memory.available_bytes)} available)")
    if hw.can_offload and est.vram_bytes:
        where += f" and {binary_size(hw.vram_budget_bytes)} of free VRAM"
    options = [_fewer_bits(shape, () if smallest_quant else smaller_quants)]
    kv_could_help = est.ram_bytes - est.kv_bytes < hw.ram_budget_bytes  # not when the rest alone is too big
    smaller = fitting_context(shape, hw, request, n_ctx)  # the KV cache and the attention scores shrink with it
    if smaller is not None:
        options.append(f"a smaller context (--ctx-size {smaller}, the most that fits)")
    if request.kv_type == "f16" and request.flash_attn != "off" and (kv_could_help or _fits_with_q8_0(
            shape, hw, request, n_ctx, est.n_gpu_layers)):
        options.append("--kv-type q8_0 (halves the KV cache)")
    return InsufficientMemoryError(
        f"{name} needs about {binary_size(est.ram_bytes)} of RAM at a context of {n_ctx:,} tokens "
        f"(weights {binary_size(est.weights_bytes)}, KV cache {binary_size(est.kv_bytes)}, buffers "
        f"{binary_size(est.buffers_bytes)}), "
        f"but this machine has {where}",
        hint="try " + ", or ".join(options) + (f", or raise or unset {MEMORY_LIMIT_ENV}, which sets the RAM figure"
                                               if hw.memory.source == MEMORY_LIMIT_ENV else ""),
        needed_bytes=est.ram_bytes, usable_bytes=hw.ram_budget_bytes, n_ctx=n_ctx,
        short=f"needs {binary_size(est.ram_bytes)} RAM at {n_ctx:,} ctx")


def _fewer_bits(shape: ModelShape, smaller_quants: Sequence[str] | None) -> str:
    """The hint's first option: a smaller quant, named when the repo's quants are known, else a smaller model when it
    has none."""
    this_quant = shape.quant or f"these {shape.bits_per_weight:.1f}"
    if smaller_quants is None:
        return f"a quant with fewer bits per weight than {this_quant}"
    if not smaller_quants:
        return "a smaller model"
    names = list(smaller_quants[:3])
    return f"a quant with fewer bits per weight than {this_quant} ({alternatives(names)})"


def fewer_gpu_layers(n_gpu_layers: int, n_layers: int) -> int:
    """The next, smaller GPU layer count to try after a failed load: half as many, then none."""
    current = n_layers + 1 if n_gpu_layers < 0 else n_gpu_layers
    return current // 2 if current > 1 else 0


def replan_gpu_layers(plan: LoadPlan, shape: ModelShape, n_gpu_layers: int, reason: str, *,
                      flash_attn: bool | None = None) -> LoadPlan:
    """The same plan with another GPU layer count (after llama.cpp refused the first); flash_attn: whether the
    retried context runs flash attention (None: as the plan's)."""
    flash = plan.flash_attn if flash_attn is None else flash_attn
    est = estimate_memory(shape, n_ctx=plan.n_ctx, kv_type=plan.kv_type, n_gpu_layers=n_gpu_layers,
                          n_ubatch=plan.n_ubatch, flash_attn=flash, repack_types=plan.repack_types)
    return replace(plan, n_gpu_layers=est.n_gpu_layers, estimate=est, reasons=(*plan.reasons, reason),
                   flash_attn=flash)


def plan_of_shape(shape: ModelShape, *, default_ctx: int | None = None) -> tuple[LoadPlan | None, str | None]:
    """How a load of a model of this shape with no options given would go here: its plan, or None and why it does
    not fit (a local file's, or a Hub file's from its header before it is downloaded)."""
    from localgen.hardware import probe_hardware

    try:
        return plan_fit(shape, probe_hardware(), FitRequest(default_ctx=default_ctx)), None
    except InsufficientMemoryError as exc:
        return None, exc.short
