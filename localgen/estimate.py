"""The memory estimate: what a model needs in RAM and VRAM, from its GGUF header alone.

Calibrated against measured RSS by scripts/fit_measure.py.

    weights   the tensors' bytes: per repeating layer (blk.N.*) and the rest (embeddings, output head).
              llama.cpp maps the file and prefetches it. Weights it repacks for the CPU's matrix kernels (Q4_0,
              Q4_K, IQ4_NL with AVX2 on x86; more on ARM) and weights it copies to a GPU are read through the
              mapping: their file pages stay resident (RSS shows them) when they lie between weights still used
              from the mapping. Those pages are clean page cache the kernel can drop, so the plan counts every
              weight once (ram_bytes) and reports the stale pages apart (reclaimable_bytes; rss_bytes = both).
    KV cache  cells x sum over layers of kv_heads(l) x (key_length + value_length) x bytes per element
              (f16 2, q8_0 34/32, q4_0 18/32); cells = allocated_context(n_ctx): n_ctx rounded up to 256, and
              without flash attention from 1,024 up an odd multiple of 256 (one 256 more). A sliding-window layer holds
              every cell too: the engine keeps llama.cpp's default swa_full (on), so the plan counts every layer in
              full.
    compute   llama.cpp's compute buffer for one physical batch of n_ub tokens (4-byte floats):
              max(logits (n_vocab + 2 n_embd), feed-forward (3 n_ff + 2 n_embd),
                  attention without flash attention (n_ctx (n_head + masks) + 4 n_embd)) x n_ub x 4.
              A GPU allocates all of it. A CPU prefill touches only part of it (logits are computed for the
              last token only): RSS grows by max(feed-forward, attention) + one logits row + with flash
              attention the masks (n_ctx x n_ub f16 each; two for models with sliding-window layers), without
              it the f16 copy of the attention scores (n_ctx x n_ub x n_head) ggml-cpu makes for the product
              with V.
    overhead  OVERHEAD_FIXED_BYTES (threads, code pages, the mapped header) + OVERHEAD_PER_TOKEN_BYTES per
              vocabulary token + OVERHEAD_PER_MERGE_BYTES per BPE merge (llama.cpp's tokenizer tables).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgen.gguf_info import GGUFInfo

CONTEXT_PAD = 256  # llama.cpp rounds n_ctx up to a multiple of this
FLOAT_BYTES = 4
# ggml's backend scheduler's context, allocated (not touched) as llama.cpp plans the compute graph: a split for each of
# the graph's nodes (8 for each of the model's tensors, 1,024 at least), each with up to GGML_SCHED_MAX_SPLIT_INPUTS
# inputs, twice, of sizeof(struct ggml_tensor) bytes (llama_cpp's bindings do not bind ggml_tensor_overhead())
GGML_SCHED_MAX_SPLIT_INPUTS = 30
GGML_TENSOR_BYTES = 336  # sizeof(struct ggml_tensor) in this build
SCHEDULER_BYTES_PER_NODE = GGML_SCHED_MAX_SPLIT_INPUTS * 2 * GGML_TENSOR_BYTES
KV_ELEMENT_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
# Calibrated against measured RSS (scripts/fit_measure.py; numbers in the issue note).
OVERHEAD_FIXED_BYTES = 11 * 2**20
OVERHEAD_PER_TOKEN_BYTES = 160
OVERHEAD_PER_MERGE_BYTES = 140
GPU_HOST_OVERHEAD_BYTES = 256 * 2**20  # CUDA runtime's host memory when offloading (not measured here)
# Sliding-window layer patterns llama.cpp hard-codes per architecture (n: every n-th layer is full attention);
# others are read from {arch}.attention.sliding_window_pattern or counted as full attention.
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "gemma-embedding": 6, "cohere2": 4, "llama4": 4, "gpt-oss": 2,
                "exaone4": 4, "olmo2": 4}


# ============================================================================ the model's shape


@dataclass(frozen=True)
class WeightSlot:
    """Where one tensor lies in the file and what llama.cpp does with it."""

    offset: int
    nbytes: int
    layer: int  # -1: not a repeating layer
    type_name: str
    matmul: bool  # a 2-D weight multiplied by activations (the embeddings are only looked up)
    output: bool = False  # the output head


@dataclass(frozen=True)
class ModelShape:
    """What the memory estimate needs from a GGUF header."""

    architecture: str
    n_layer: int
    n_embd: int
    n_head: int
    n_vocab: int
    n_ff: int
    context_length: int
    kv_elements: tuple[int, ...]  # per layer: K + V elements per token
    swa_layers: tuple[bool, ...]
    layer_bytes: tuple[int, ...]
    other_bytes: int  # non-repeating tensors: embeddings, output norm and head
    output_bytes: int  # the output head (the embeddings when tied); duplicated on a GPU when offloaded
    parameter_count: int
    file_size: int
    tied_output: bool = False  # no output.weight: the embeddings double as the output head
    n_merges: int = 0  # BPE merges in the tokenizer
    slots: tuple[WeightSlot, ...] = ()  # the first file's tensors, in file order
    quant: str | None = None
    name: str | None = None
    longest_token: int = 0  # bytes of the vocabulary's longest token as stored (fit.fewest_tokens)

    @property
    def weights_bytes(self) -> int:
        """All tensor bytes."""
        return sum(self.layer_bytes) + self.other_bytes

    @property
    def bits_per_weight(self) -> float:
        """Average bits per parameter (16 for F16, about 4.8 for Q4_K_M)."""
        return self.weights_bytes * 8 / self.parameter_count if self.parameter_count else 0.0


def _meta_ints(info: GGUFInfo, key: str, n_layer: int) -> tuple[int, ...] | None:
    """A per-layer hyperparameter ({arch}.key), broadcast to n_layer values, or None."""
    value = info.metadata.get(f"{info.architecture}.{key}")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,) * n_layer
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        items = tuple(int(v) for v in value)
        return (items + (items[-1],) * n_layer)[:n_layer]
    return None


def _swa_layers(info: GGUFInfo, n_layer: int) -> tuple[bool, ...]:
    """Which layers use sliding-window attention (all False when the model has no window)."""
    if not info.sliding_window:
        return (False,) * n_layer
    pattern = _meta_ints(info, "attention.sliding_window_pattern", n_layer)
    raw = info.metadata.get(f"{info.architecture}.attention.sliding_window_pattern")
    if isinstance(raw, tuple) and pattern is not None:  # one flag per layer
        return tuple(bool(v) for v in pattern)
    n = pattern[0] if pattern else SWA_PATTERNS.get(info.architecture)
    if n is None:
        return (False,) * n_layer
    return tuple(n == 0 or (il % n < n - 1) for il in range(n_layer))


def _kv_elements(info: GGUFInfo, n_layer: int) -> tuple[int, ...]:
    """K + V elements per token for each layer (multi-head latent attention counted as its compressed cache)."""
    lora = _meta_ints(info, "attention.kv_lora_rank", n_layer)
    if lora is not None:
        rope = _meta_ints(info, "rope.dimension_count", n_layer) or (64,) * n_layer
        return tuple(r + d + r for r, d in zip(lora, rope, strict=True))
    heads = _meta_ints(info, "attention.head_count_kv", n_layer) or _meta_ints(info, "attention.head_count", n_layer)
    if heads is None:
        return (0,) * n_layer
    k, v = info.key_length or 0, info.value_length or 0
    return tuple(h * (k + v) for h in heads)


def _array_length(value: object) -> int:
    """The length of a metadata array (kept, or summarized as an ArraySummary), 0 for anything else."""
    length = getattr(value, "length", None)
    return int(length) if isinstance(length, int) else len(value) if isinstance(value, tuple) else 0


def _n_vocab(info: GGUFInfo) -> int:
    """The vocabulary size, from the embedding matrix or the token list."""
    for tensor in info.tensors:
        if tensor.name == "token_embd.weight" and len(tensor.shape) >= 2:
            return int(tensor.shape[1])
    return _array_length(info.metadata.get("tokenizer.ggml.tokens"))


def _n_ff(info: GGUFInfo, n_layer: int) -> int:
    """The widest feed-forward activation per token (experts used x expert width for mixtures of experts)."""
    dense = max(_meta_ints(info, "feed_forward_length", n_layer) or (0,))
    used = max(_meta_ints(info, "expert_used_count", n_layer) or (0,))
    expert = max(_meta_ints(info, "expert_feed_forward_length", n_layer) or (0,))
    return max(dense, used * expert, 4 * (info.embedding_length or 0) if not dense and not expert else 0)


def model_shape(info: GGUFInfo, *, file_size: int | None = None, shard_bytes: int = 0) -> ModelShape:
    """The estimate's view of a GGUF header; shard_bytes (a split model's other shards) fill its missing layers."""
    n_layer = max(info.block_count or 0, 0)
    layer_bytes = [0] * n_layer
    other = output = params = 0
    tied = not any(t.name == "output.weight" for t in info.tensors)
    for tensor in info.tensors:
        params += tensor.n_elements
        match = re.match(r"blk\.(\d+)\.", tensor.name)
        if match and int(match[1]) < n_layer:
            layer_bytes[int(match[1])] += tensor.nbytes
        else:
            other += tensor.nbytes
            if tensor.name == ("token_embd.weight" if tied else "output.weight"):
                output = tensor.nbytes
    missing = [i for i, b in enumerate(layer_bytes) if b == 0]
    if missing and shard_bytes > 0:
        known = sum(layer_bytes) + other
        for i in missing:
            layer_bytes[i] = shard_bytes // len(missing)
        params = int(params * (known + shard_bytes) / known) if known else params
    return ModelShape(
        architecture=info.architecture, n_layer=n_layer, n_embd=info.embedding_length or 0,
        n_head=info.head_count or 0, n_vocab=_n_vocab(info), n_ff=_n_ff(info, n_layer),
        context_length=info.context_length or 0, kv_elements=_kv_elements(info, n_layer),
        swa_layers=_swa_layers(info, n_layer), layer_bytes=tuple(layer_bytes),
        other_bytes=other, output_bytes=output, parameter_count=params,
        file_size=file_size if file_size is not None else info.file_size, tied_output=tied,
        n_merges=_array_length(info.metadata.get("tokenizer.ggml.merges")), slots=_slots(info, n_layer),
        quant=info.quant, name=info.name, longest_token=info.longest_token)


def _slots(info: GGUFInfo, n_layer: int) -> tuple[WeightSlot, ...]:
    """The tensors' places in the file, roles and types."""
    slots = []
    for t in sorted(info.tensors, key=lambda t: t.offset):
        match = re.match(r"blk\.(\d+)\.", t.name)
        layer = int(match[1]) if match and int(match[1]) < n_layer else -1
        matmul = len(t.shape) >= 2 and t.name != "token_embd.weight" and t.shape[1] % 8 == 0
        slots.append(WeightSlot(offset=t.offset, nbytes=t.nbytes, layer=layer, type_name=t.type_name, matmul=matmul,
                                output=t.name == "output.weight"))
    return tuple(slots)


def read_shape(path: Path) -> ModelShape:
    """The shape of a local GGUF (all shards of a split model counted)."""
    from localgen.gguf_reader import read_gguf

    return header_shape(read_gguf(path), path)


def header_shape(info: GGUFInfo, path: Path, *, missing_bytes: int = 0) -> ModelShape:
    """The shape of a local GGUF whose header is already read, counting the other shards of a split model: those on
    disk, and missing_bytes for those that are not (their size where it is known)."""
    if info.split_count <= 1:
        return model_shape(info)
    from localgen.gguf_split import present_shards

    others = sum(p.stat().st_size for p in present_shards(path)[0][1:]) + missing_bytes
    return model_shape(info, file_size=info.file_size + others, shard_bytes=others)


# ============================================================================ the estimate


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a model needs at one context size, KV type and GPU split; ram_bytes is what RSS grows by."""

    n_ctx: int
    kv_type: str
    n_gpu_layers: int  # llama.cpp's count: repeating layers from the last, plus 1 for the output head
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int  # llama.cpp's compute buffer as allocated (what a GPU needs)
    compute_resident_bytes: int  # the part a CPU prefill touches
    overhead_bytes: int
    ram_bytes: int
    vram_bytes: int
    reclaimable_bytes: int = 0  # file pages of repacked or offloaded weights left mapped (RSS counts them)
    mapped_bytes: int = 0  # weights used in place from the file's mapping (page cache, which counts as available)
    scheduler_bytes: int = 0  # ggml's scheduler's context: allocated, barely touched (RSS leaves it out)
    work_bytes: int = 0  # ggml-cpu's work buffer of a full batch (without flash attention the scores' f16 copy)

    @property
    def private_ram_bytes(self) -> int:
        """The RAM the system does not count as available while the model is loaded (KV cache, buffers, repacked
        weights): what freeing it gives back."""
        return self.ram_bytes - self.mapped_bytes

    @property
    def context_bytes(self) -> int:
        """What making the context and its first full batch allocate, touched or not (what a memory limit counts):
        the KV cache, the whole compute buffer, the scheduler's context and the work buffer."""
        return self.kv_bytes + self.compute_bytes + self.scheduler_bytes + self.work_bytes

    @property
    def limited_bytes(self) -> int:
        """What a memory limit counts of the private RAM: the compute buffer, scheduler and work buffer whole."""
        return self.private_ram_bytes - self.compute_resident_bytes + self.compute_bytes + self.scheduler_bytes + \
            self.work_bytes

    @property
    def rss_bytes(self) -> int:
        """What the process's RSS grows to: the need plus the stale, reclaimable file pages."""
        return self.ram_bytes + self.reclaimable_bytes

    @property
    def total_bytes(self) -> int:
        """RAM plus VRAM."""
        return self.ram_bytes + self.vram_bytes

    @property
    def buffers_bytes(self) -> int:
        """The total less the weights and the KV cache: compute buffers and overhead (and a tied output head's GPU
        copy), so that the three add up to it."""
        return self.total_bytes - self.weights_bytes - self.kv_bytes


def padded_context(n_ctx: int) -> int:
    """The context llama.cpp allocates: n_ctx rounded up to a multiple of 256."""
    return -(-n_ctx // CONTEXT_PAD) * CONTEXT_PAD


def allocated_context(n_ctx: int, *, flash_attn: bool) -> int:
    """The cells the engine asks llama.cpp for: n_ctx padded, and without flash attention from 1,024 cells up an
    odd multiple of CONTEXT_PAD.

    Without flash attention llama.cpp stores the V cache transposed, one row per dimension as long as the context;
    rows an even multiple of 512 bytes apart fall into a few of the CPU caches' sets, and decode measured 4-9%
    slower in contexts of 1,024 to 16,384 cells than in ones 256 cells larger (scripts/README.md: the V cache's rows).
    """
    cells = padded_context(n_ctx)
    if not flash_attn and cells >= 4 * CONTEXT_PAD and cells // CONTEXT_PAD % 2 == 0:
        cells += CONTEXT_PAD
    return cells


def kv_cache_bytes(shape: ModelShape, n_ctx: int, kv_type: str = "f16", *,
                   layers: Sequence[int] | None = None) -> int:
    """KV cache bytes for some layers (all by default) at a context size, sliding-window layers in full."""
    cells = padded_context(n_ctx)
    per_element = KV_ELEMENT_BYTES[kv_type]
    return int(sum(cells * shape.kv_elements[il] * per_element
                   for il in (range(shape.n_layer) if layers is None else layers)))


def compute_terms(shape: ModelShape, n_ctx: int, *, n_ubatch: int = 512,
                  flash_attn: bool = True) -> tuple[int, int, int]:
    """(logits, feed-forward, attention) peaks of llama.cpp's compute graph for one physical batch, in bytes."""
    n_ub = max(min(n_ubatch, padded_context(n_ctx)), 1)
    logits = (shape.n_vocab + 2 * shape.n_embd) * n_ub * FLOAT_BYTES
    ffn = (3 * shape.n_ff + 2 * shape.n_embd) * n_ub * FLOAT_BYTES
    masks = _mask_count(shape)
    attention = 0 if flash_attn else (padded_context(n_ctx) * (shape.n_head + masks) + 4 * shape.n_embd) * n_ub * 4
    return logits, ffn, attention


def scheduler_bytes(shape: ModelShape) -> int:
    """ggml's backend scheduler's context for the model's compute graph (SCHEDULER_BYTES_PER_NODE per node)."""
    return max(1024, 8 * len(shape.slots)) * SCHEDULER_BYTES_PER_NODE


def _mask_count(shape: ModelShape) -> int:
    """Attention masks in the graph: one, or two (full and sliding-window) for models with window layers."""
    return 2 if any(shape.swa_layers) else 1


def estimate_memory(shape: ModelShape, *, n_ctx: int, kv_type: str = "f16", n_gpu_layers: int = 0,
                    n_ubatch: int = 512, flash_attn: bool | None = None,
                    repack_types: frozenset[str] = frozenset()) -> MemoryEstimate:
    """RAM and VRAM a model needs when loaded with these settings, from its header alone (flash_attn None: as
    --flash-attn auto chooses for them)."""
    if flash_attn is None:
        from localgen.params import flash_attention_on

        flash_attn = flash_attention_on("auto", kv_type=kv_type, gpu=n_gpu_layers != 0, n_ctx=n_ctx)
    cells = allocated_context(n_ctx, flash_attn=flash_attn)
    gpu_count = shape.n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, shape.n_layer + 1)
    gpu_layers = list(range(shape.n_layer - min(gpu_count, shape.n_layer), shape.n_layer))
    cpu_layers = list(range(shape.n_layer - len(gpu_layers)))
    output_on_gpu = gpu_count > shape.n_layer
    logits, ffn, attention = compute_terms(shape, cells, n_ubatch=n_ubatch, flash_attn=flash_attn)
    compute = max(logits, ffn, attention)
    activations = max(ffn, attention)
    masks = _mask_count(shape) * cells * min(n_ubatch, cells) * 2
    # without flash attention ggml-cpu also converts the attention scores to f16 for the product with V
    conversion = cells * min(n_ubatch, cells) * shape.n_head * 2
    resident = activations + (masks if flash_attn else conversion) + shape.n_vocab * FLOAT_BYTES
    kv_gpu = kv_cache_bytes(shape, cells, kv_type, layers=gpu_layers)
    kv_cpu = kv_cache_bytes(shape, cells, kv_type, layers=cpu_layers)
    overhead = (OVERHEAD_FIXED_BYTES + OVERHEAD_PER_TOKEN_BYTES * shape.n_vocab
                + OVERHEAD_PER_MERGE_BYTES * shape.n_merges)
    weights_gpu = sum(shape.layer_bytes[i] for i in gpu_layers) + (shape.output_bytes if output_on_gpu else 0)
    # a tied output head is the embedding matrix: offloading it copies it, the CPU keeps it for the input
    weights_cpu = shape.weights_bytes - weights_gpu + (shape.output_bytes if output_on_gpu and shape.tied_output else 0)
    vram = 0
    if gpu_count > 0:
        vram = weights_gpu + kv_gpu + (compute if output_on_gpu else activations)
        overhead += GPU_HOST_OVERHEAD_BYTES
        if output_on_gpu:
            resident = 2 * shape.n_embd * n_ubatch * FLOAT_BYTES
    ram = weights_cpu + kv_cpu + resident + overhead
    offloaded = set(gpu_layers)
    stale = stale_mapped_bytes(shape, offloaded, output_on_gpu, repack_types)
    mapped = sum(s.nbytes for s in shape.slots if not _copied(s, offloaded, output_on_gpu, repack_types))
    return MemoryEstimate(n_ctx=n_ctx, kv_type=kv_type, n_gpu_layers=gpu_count, weights_bytes=shape.weights_bytes,
                          kv_bytes=kv_gpu + kv_cpu, compute_bytes=compute, compute_resident_bytes=resident,
                          overhead_bytes=overhead, ram_bytes=ram, vram_bytes=vram, reclaimable_bytes=stale,
                          mapped_bytes=mapped, scheduler_bytes=scheduler_bytes(shape),
                          work_bytes=0 if flash_attn else conversion)


def stale_mapped_bytes(shape: ModelShape, gpu_layers: set[int], output_on_gpu: bool,
                       repack_types: frozenset[str]) -> int:
    """Bytes of weights read through the mapping but used from a copy (repacked, or on a GPU) whose file pages
    stay mapped because weights used in place lie before and after them (llama.cpp unmaps only the ends)."""
    in_place = [s for s in shape.slots if not _copied(s, gpu_layers, output_on_gpu, repack_types)]
    if not in_place:
        return 0
    first, last = in_place[0].offset, in_place[-1].offset + in_place[-1].nbytes
    return sum(s.nbytes for s in shape.slots
               if _copied(s, gpu_layers, output_on_gpu, repack_types) and first <= s.offset < last)


def _copied(slot: WeightSlot, gpu_layers: set[int], output_on_gpu: bool, repack_types: frozenset[str]) -> bool:
    """Whether a weight is used from a copy (on a GPU, or repacked for this CPU) rather than in place."""
    on_gpu = slot.layer in gpu_layers or (slot.output and output_on_gpu)
    return on_gpu or (slot.matmul and slot.type_name in repack_types)
