"""Hardware facts and load planning: what this machine has, what a model needs, and how to load it so it fits.

Hardware probe
    RAM from /proc/meminfo, capped by the cgroup (v2 memory.max, v1 memory.limit_in_bytes) and by
    LOCALGEN_MEMORY_LIMIT (bytes or a size such as 4GiB, to simulate a smaller machine). GPUs from llama.cpp's
    ggml backend devices (engine.backend_devices), else from `nvidia-smi`; LOCALGEN_VRAM_LIMIT caps the VRAM
    budget the same way.

Estimate, from the GGUF header alone (estimate_memory; calibrated by scripts/fit_measure.py)
    weights   the tensors' bytes: per repeating layer (blk.N.*) and the rest (embeddings, output head).
              llama.cpp maps the file and prefetches it. Weights it repacks for the CPU's matrix kernels (Q4_0,
              Q4_K, IQ4_NL with AVX2 on x86; more on ARM) and weights it copies to a GPU are read through the
              mapping: their file pages stay resident (RSS shows them) when they lie between weights still used
              from the mapping. Those pages are clean page cache the kernel can drop, so the plan counts every
              weight once (ram_bytes) and reports the stale pages apart (reclaimable_bytes; rss_bytes = both).
    KV cache  cells x sum over layers of kv_heads(l) x (key_length + value_length) x bytes per element
              (f16 2, q8_0 34/32, q4_0 18/32); cells = n_ctx rounded up to 256. A sliding-window layer holds
              min(cells, window + n_ubatch) cells, but only when llama.cpp's swa_full is off (the engine keeps
              llama.cpp's default, on, so the plan counts every layer in full).
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

Plan (plan_fit)
    GPU layers: all if they fit in the VRAM budget (free VRAM less VRAM_RESERVE_FRACTION of the total and at
    least VRAM_RESERVE_MIN_BYTES), else the most that fit, else 0. Context: the model's training context capped
    by the registry's context and DEFAULT_CONTEXT_CAP (config; raised to what the prompt needs), then lowered in
    steps of 256 to what fits in RAM_USABLE_FRACTION of available RAM, never below MIN_AUTO_CONTEXT or what the
    prompt needs. KV type: f16 unless asked. --gpu-layers, --no-gpu, --ctx-size and --kv-type override the
    choices; a model that does not fit raises InsufficientMemoryError before any download or load.
    Quant (choose_option), when a repo is named without one: among the quants that fit, the full context first,
    then everything on the GPU, then the most bits per weight up to Q8_0's (F16/BF16/F32 only when no quantized
    file fits), judged from each file's header, read with HTTP range requests before anything is downloaded.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.config import DEFAULT_CONTEXT_CAP
from localgen.errors import ConfigError, GGUFError, LocalgenError, ModelLoadError, UsageError

if TYPE_CHECKING:
    from localgen.gguf_file import GGUFInfo
    from localgen.hub import HubFile

MEMORY_LIMIT_ENV = "LOCALGEN_MEMORY_LIMIT"
VRAM_LIMIT_ENV = "LOCALGEN_VRAM_LIMIT"
CONTEXT_PAD = 256  # llama.cpp rounds n_ctx up to a multiple of this
MIN_AUTO_CONTEXT = 2048  # the planner never shrinks the context below this on its own
FLOAT_BYTES = 4
KV_ELEMENT_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
# Calibrated against measured RSS (scripts/fit_measure.py; numbers in the issue note).
OVERHEAD_FIXED_BYTES = 11 * 2**20
OVERHEAD_PER_TOKEN_BYTES = 160
OVERHEAD_PER_MERGE_BYTES = 140
GPU_HOST_OVERHEAD_BYTES = 256 * 2**20  # CUDA runtime's host memory when offloading (not measured here)
RAM_USABLE_FRACTION = 0.9
VRAM_RESERVE_FRACTION = 0.05
VRAM_RESERVE_MIN_BYTES = 256 * 2**20
HEADER_READ_BYTES = 4 * 2**20  # first range read of a Hub file's header; grown x4 up to HEADER_READ_MAX_BYTES
HEADER_READ_MAX_BYTES = 256 * 2**20
# Most quantized first: auto choice of a quant never takes more bits per weight than Q8_0 unless nothing else
# fits the bill (unquantized weights decode slowly for little gain).
MAX_AUTO_BITS_PER_WEIGHT = 8.6
# Weight types ggml-cpu repacks into interleaved copies (ggml_repack_get_optimal_repack_type, 0.3.36).
REPACK_TYPES_X86_AVX2 = frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"})
REPACK_TYPES_X86_AVX512 = frozenset({"Q2_K"})
REPACK_TYPES_ARM_DOTPROD = frozenset({"Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "Q8_0", "MXFP4"})
# Sliding-window layer patterns llama.cpp hard-codes per architecture (n: every n-th layer is full attention);
# others are read from {arch}.attention.sliding_window_pattern or counted as full attention.
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "gemma-embedding": 6, "cohere2": 4, "llama4": 4, "gpt-oss": 2,
                "exaone4": 4, "olmo2": 4}
REINSTALL_COMMAND = 'CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall --no-cache-dir llama-cpp-python=={}'
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_UNLIMITED = 1 << 60


class InsufficientMemoryError(ModelLoadError):
    """A model that cannot fit in this machine's memory (said before downloading or loading it)."""

    def __init__(self, message: str, hint: str | None = None, *, needed_bytes: int = 0, usable_bytes: int = 0,
                 n_ctx: int = 0) -> None:
        super().__init__(message, hint)
        self.needed_bytes = needed_bytes
        self.usable_bytes = usable_bytes
        self.n_ctx = n_ctx

    @property
    def short(self) -> str:
        """A table cell: 'needs 1.2 GiB RAM at 2,048 ctx'."""
        return f"needs {_size(self.needed_bytes)} RAM at {self.n_ctx:,} ctx"


# ============================================================================ hardware probe


@lru_cache(maxsize=1)
def physical_cores() -> int:
    """The number of physical CPU cores (not hyper-threads) this process may use."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cores: set[tuple[str, str]] = set()
    try:
        physical_id = core_id = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                physical_id = value.strip()
            elif key == "core id":
                core_id = value.strip()
                cores.add((physical_id, core_id))
    except OSError:
        pass
    return max(1, min(len(cores) or allowed, allowed))


@dataclass(frozen=True)
class MemoryInfo:
    """RAM this process may use: total and available bytes, and what limited them."""

    total_bytes: int
    available_bytes: int
    source: str = "system"  # "system", "cgroup" or MEMORY_LIMIT_ENV


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: name, total and free memory, and where the facts came from ("llama.cpp" or "nvidia-smi")."""

    name: str
    total_bytes: int
    free_bytes: int
    source: str = "llama.cpp"
    description: str = ""


@dataclass(frozen=True)
class Hardware:
    """What this machine offers a model: RAM, cores, and the GPUs this llama.cpp build can offload to."""

    memory: MemoryInfo
    cores: int
    gpu_offload: bool  # llama_supports_gpu_offload(): the build has a GPU backend
    gpus: tuple[GpuInfo, ...] = ()  # devices llama.cpp can offload to
    nvidia_gpus: tuple[GpuInfo, ...] = ()  # what nvidia-smi sees, whatever the build
    llama_version: str = ""
    vram_limit_bytes: int | None = None
    cpu_repack_types: frozenset[str] = frozenset()  # weight types ggml-cpu repacks on this CPU

    @property
    def can_offload(self) -> bool:
        """True when layers can go to a GPU."""
        return self.gpu_offload and bool(self.gpus)

    @property
    def vram_budget_bytes(self) -> int:
        """Free VRAM usable for a model: each GPU's free memory less a reserve, capped by LOCALGEN_VRAM_LIMIT."""
        if not self.can_offload:
            return 0
        budget = sum(max(g.free_bytes - max(int(g.total_bytes * VRAM_RESERVE_FRACTION), VRAM_RESERVE_MIN_BYTES), 0)
                     for g in self.gpus)
        return budget if self.vram_limit_bytes is None else min(budget, self.vram_limit_bytes)

    @property
    def ram_budget_bytes(self) -> int:
        """RAM usable for a model: a fraction of what is available."""
        return int(self.memory.available_bytes * RAM_USABLE_FRACTION)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        return {"ram_total": self.memory.total_bytes, "ram_available": self.memory.available_bytes,
                "ram_source": self.memory.source, "ram_budget": self.ram_budget_bytes, "cores": self.cores,
                "gpu_offload": self.gpu_offload, "vram_budget": self.vram_budget_bytes,
                "gpus": [{"name": g.name, "total": g.total_bytes, "free": g.free_bytes, "source": g.source}
                         for g in self.gpus],
                "nvidia_gpus": [g.name for g in self.nvidia_gpus], "llama_cpp_python": self.llama_version,
                "cpu_repack_types": sorted(self.cpu_repack_types)}


def parse_size(text: str, *, name: str) -> int:
    """Bytes from '4GiB', '512MiB', '4G', '1.5g' or a plain byte count (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ConfigError(f"{name}={text!r} is not a size", hint="use bytes or a size such as 4GiB or 512MiB")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def _env_size(name: str) -> int | None:
    """A size from the environment, or None when unset."""
    value = os.environ.get(name, "").strip()
    return parse_size(value, name=name) if value else None


def _meminfo() -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo (0, 0 when unreadable)."""
    values: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable", "MemFree", "Cached"):
                values[key] = int(rest.split()[0]) * 1024
    total = values.get("MemTotal", 0)
    return total, values.get("MemAvailable", values.get("MemFree", 0) + values.get("Cached", 0)) or total


def _read_int(path: Path) -> int | None:
    """An integer from a one-line file ('max' and unreadable files give None)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat_value(path: Path, key: str) -> int:
    """One counter from a cgroup memory.stat file (0 when absent)."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _cgroup_dirs(root: Path, controller: str | None) -> list[Path]:
    """This process's cgroup folder and its parents under root (the root itself last)."""
    relative = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3 and ((controller is None and parts[0] == "0")
                                    or (controller is not None and controller in parts[1].split(","))):
                relative = parts[2].strip("/")
    folders = []
    path = root / relative if relative else root
    while True:
        if path.is_dir():
            folders.append(path)
        if path == root or root not in path.parents:
            break
        path = path.parent
    return folders or [root]


def cgroup_memory(root: Path = Path("/sys/fs/cgroup")) -> tuple[int, int] | None:
    """(limit, available) bytes of this process's cgroup (v2, else v1), or None when unlimited."""
    best: tuple[int, int] | None = None
    candidates = [(d / "memory.max", d / "memory.current", d / "memory.stat", "inactive_file")
                  for d in _cgroup_dirs(root, None)]
    v1 = root / "memory"
    if v1.is_dir():
        candidates += [(d / "memory.limit_in_bytes", d / "memory.usage_in_bytes", d / "memory.stat",
                        "total_inactive_file") for d in _cgroup_dirs(v1, "memory")]
    for limit_file, usage_file, stat_file, inactive_key in candidates:
        limit = _read_int(limit_file)
        if limit is None or limit >= _UNLIMITED:
            continue
        usage = _read_int(usage_file) or 0
        available = max(limit - usage + _stat_value(stat_file, inactive_key), 0)
        if best is None or limit < best[0]:
            best = (limit, min(available, limit))
    return best


def probe_memory() -> MemoryInfo:
    """Total and available RAM, honouring cgroup limits and LOCALGEN_MEMORY_LIMIT."""
    total, available = _meminfo()
    source = "system"
    cgroup = cgroup_memory()
    if cgroup is not None and cgroup[0] < total:
        total, available, source = cgroup[0], min(available, cgroup[1]), "cgroup"
    limit = _env_size(MEMORY_LIMIT_ENV)
    if limit is not None:
        total, available, source = limit, min(available, limit), MEMORY_LIMIT_ENV
    return MemoryInfo(total_bytes=total, available_bytes=available, source=source)


@lru_cache(maxsize=1)
def nvidia_smi_gpus() -> tuple[GpuInfo, ...]:
    """GPUs reported by `nvidia-smi` (none when it is missing or fails)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total,memory.free", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return parse_nvidia_smi(out)


def parse_nvidia_smi(text: str) -> tuple[GpuInfo, ...]:
    """GPUs from `nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv,noheader,nounits` (MiB)."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.rsplit(",", 2)]
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            gpus.append(GpuInfo(name=parts[0], total_bytes=int(parts[1]) * 2**20, free_bytes=int(parts[2]) * 2**20,
                                source="nvidia-smi"))
    return tuple(gpus)


def _llama_gpus() -> tuple[GpuInfo, ...]:
    """The GPU-like devices llama.cpp registered (CPU and meta devices left out)."""
    from localgen.engine import backend_devices

    return tuple(GpuInfo(name=d.name, total_bytes=d.total_bytes, free_bytes=d.free_bytes, description=d.description)
                 for d in backend_devices() if d.kind in ("gpu", "igpu", "accel"))


@lru_cache(maxsize=1)
def cpu_repack_types() -> frozenset[str]:
    """The weight types llama.cpp's CPU backend repacks on this CPU (from /proc/cpuinfo's feature flags)."""
    flags: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                flags.update(value.split())
    types: set[str] = set()
    if "avx2" in flags:
        types |= REPACK_TYPES_X86_AVX2
    if "avx512f" in flags:
        types |= REPACK_TYPES_X86_AVX512
    if "asimddp" in flags or "i8mm" in flags:
        types |= REPACK_TYPES_ARM_DOTPROD
    return frozenset(types)


def probe_hardware() -> Hardware:
    """This machine now: RAM (limits honoured), cores, GPU offload support and GPU memory."""
    from localgen.engine import llama_cpp_version, supports_gpu_offload

    offload = supports_gpu_offload()
    gpus = _llama_gpus() if offload else ()
    nvidia = nvidia_smi_gpus() if not offload or not gpus else ()
    if offload and not gpus:
        gpus = nvidia
    return Hardware(memory=probe_memory(), cores=physical_cores(), gpu_offload=offload, gpus=gpus,
                    nvidia_gpus=nvidia, llama_version=llama_cpp_version(), vram_limit_bytes=_env_size(VRAM_LIMIT_ENV),
                    cpu_repack_types=cpu_repack_types())


def cpu_only_warning(hw: Hardware) -> str | None:
    """The warning for a CPU-only llama.cpp build on a machine with an NVIDIA GPU (None otherwise)."""
    if hw.gpu_offload or not hw.nvidia_gpus:
        return None
    names = ", ".join(sorted({g.name for g in hw.nvidia_gpus}))
    return (f"this llama-cpp-python build is CPU-only but an NVIDIA GPU is present ({names}); for GPU offload "
            f"reinstall it with CUDA: {REINSTALL_COMMAND.format(hw.llama_version or '0.3.36')}")


_warned: set[str] = set()


def cpu_only_warning_once(hw: Hardware) -> str | None:
    """cpu_only_warning the first time it applies in this process, then None."""
    message = cpu_only_warning(hw)
    if message is None or message in _warned:
        return None
    _warned.add(message)
    return message


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
    sliding_window: int | None
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
        swa_layers=_swa_layers(info, n_layer), sliding_window=info.sliding_window, layer_bytes=tuple(layer_bytes),
        other_bytes=other, output_bytes=output, parameter_count=params,
        file_size=file_size if file_size is not None else info.file_size, tied_output=tied,
        n_merges=_array_length(info.metadata.get("tokenizer.ggml.merges")), slots=_slots(info, n_layer),
        quant=info.quant, name=info.name)


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
    from localgen.gguf_file import read_gguf

    return header_shape(read_gguf(path), path)


def header_shape(info: GGUFInfo, path: Path) -> ModelShape:
    """The shape of a local GGUF whose header is already read, counting the other shards of a split model."""
    if info.split_count <= 1:
        return model_shape(info)
    from localgen.gguf_file import split_shard_paths

    others = sum(p.stat().st_size for p in split_shard_paths(path)[1:] if p.exists())
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

    @property
    def rss_bytes(self) -> int:
        """What the process's RSS grows to: the need plus the stale, reclaimable file pages."""
        return self.ram_bytes + self.reclaimable_bytes

    @property
    def total_bytes(self) -> int:
        """RAM plus VRAM."""
        return self.ram_bytes + self.vram_bytes

    @property
    def kv_bytes_per_token(self) -> float:
        """KV cache bytes per context token."""
        return self.kv_bytes / self.n_ctx if self.n_ctx else 0.0


def padded_context(n_ctx: int) -> int:
    """The context llama.cpp allocates: n_ctx rounded up to a multiple of 256."""
    return -(-n_ctx // CONTEXT_PAD) * CONTEXT_PAD


def kv_cache_bytes(shape: ModelShape, n_ctx: int, kv_type: str = "f16", *, layers: Sequence[int] | None = None,
                   n_ubatch: int = 512, swa_full: bool = True) -> int:
    """KV cache bytes for some layers (all by default) at a context size."""
    cells = padded_context(n_ctx)
    per_element = KV_ELEMENT_BYTES[kv_type]
    total = 0.0
    for il in range(shape.n_layer) if layers is None else layers:
        layer_cells = cells
        if shape.swa_layers[il] and not swa_full and shape.sliding_window:
            layer_cells = min(cells, padded_context(shape.sliding_window + n_ubatch))
        total += layer_cells * shape.kv_elements[il] * per_element
    return int(total)


def compute_terms(shape: ModelShape, n_ctx: int, *, n_ubatch: int = 512,
                  flash_attn: bool = True) -> tuple[int, int, int]:
    """(logits, feed-forward, attention) peaks of llama.cpp's compute graph for one physical batch, in bytes."""
    n_ub = max(min(n_ubatch, padded_context(n_ctx)), 1)
    logits = (shape.n_vocab + 2 * shape.n_embd) * n_ub * FLOAT_BYTES
    ffn = (3 * shape.n_ff + 2 * shape.n_embd) * n_ub * FLOAT_BYTES
    masks = _mask_count(shape)
    attention = 0 if flash_attn else (padded_context(n_ctx) * (shape.n_head + masks) + 4 * shape.n_embd) * n_ub * 4
    return logits, ffn, attention


def _mask_count(shape: ModelShape) -> int:
    """Attention masks in the graph: one, or two (full and sliding-window) for models with window layers."""
    return 2 if any(shape.swa_layers) else 1


def estimate_memory(shape: ModelShape, *, n_ctx: int, kv_type: str = "f16", n_gpu_layers: int = 0,
                    n_ubatch: int = 512, flash_attn: bool = True, swa_full: bool = True,
                    repack_types: frozenset[str] = frozenset()) -> MemoryEstimate:
    """RAM and VRAM a model needs when loaded with these settings, from its header alone."""
    gpu_count = shape.n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, shape.n_layer + 1)
    gpu_layers = list(range(shape.n_layer - min(gpu_count, shape.n_layer), shape.n_layer))
    cpu_layers = list(range(shape.n_layer - len(gpu_layers)))
    output_on_gpu = gpu_count > shape.n_layer
    logits, ffn, attention = compute_terms(shape, n_ctx, n_ubatch=n_ubatch, flash_attn=flash_attn)
    compute = max(logits, ffn, attention)
    activations = max(ffn, attention)
    masks = _mask_count(shape) * padded_context(n_ctx) * min(n_ubatch, padded_context(n_ctx)) * 2
    # without flash attention ggml-cpu also converts the attention scores to f16 for the product with V
    conversion = padded_context(n_ctx) * min(n_ubatch, padded_context(n_ctx)) * shape.n_head * 2
    resident = activations + (masks if flash_attn else conversion) + shape.n_vocab * FLOAT_BYTES
    kv_gpu = kv_cache_bytes(shape, n_ctx, kv_type, layers=gpu_layers, n_ubatch=n_ubatch, swa_full=swa_full)
    kv_cpu = kv_cache_bytes(shape, n_ctx, kv_type, layers=cpu_layers, n_ubatch=n_ubatch, swa_full=swa_full)
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
    stale = stale_mapped_bytes(shape, set(gpu_layers), output_on_gpu, repack_types)
    return MemoryEstimate(n_ctx=n_ctx, kv_type=kv_type, n_gpu_layers=gpu_count, weights_bytes=shape.weights_bytes,
                          kv_bytes=kv_gpu + kv_cpu, compute_bytes=compute, compute_resident_bytes=resident,
                          overhead_bytes=overhead, ram_bytes=ram, vram_bytes=vram, reclaimable_bytes=stale)


def stale_mapped_bytes(shape: ModelShape, gpu_layers: set[int], output_on_gpu: bool,
                       repack_types: frozenset[str]) -> int:
    """Bytes of weights read through the mapping but used from a copy (repacked, or on a GPU) whose file pages
    stay mapped because weights used in place lie before and after them (llama.cpp unmaps only the ends)."""
    def copied(slot: WeightSlot) -> bool:
        on_gpu = slot.layer in gpu_layers or (slot.output and output_on_gpu)
        return on_gpu or (slot.matmul and slot.type_name in repack_types)

    in_place = [s for s in shape.slots if not copied(s)]
    if not in_place:
        return 0
    first, last = in_place[0].offset, in_place[-1].offset + in_place[-1].nbytes
    return sum(s.nbytes for s in shape.slots if copied(s) and first <= s.offset < last)


# ============================================================================ the plan


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

    def describe(self) -> str:
        """One line: 'context 8,192, KV f16, 13/31 layers on the GPU'."""
        layers = {"gpu": f"all {self.n_layers} layers on the GPU",
                  "split": f"{min(self.n_gpu_layers, self.n_layers)}/{self.n_layers} layers on the GPU",
                  "cpu": "CPU only"}[self.where]
        return f"context {self.n_ctx:,}, KV {self.kv_type}, {layers}"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        e = self.estimate
        return {"n_ctx": self.n_ctx, "n_gpu_layers": self.n_gpu_layers, "n_layers": self.n_layers,
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
    flash_attn: bool = True
    n_ubatch: int = 512
    min_ctx: int = 0  # the context the prompt needs (0 = unknown)
    default_ctx: int | None = None  # the registry's context for the model

    def __post_init__(self) -> None:
        if self.kv_type not in KV_ELEMENT_BYTES:
            raise UsageError(f"unknown KV cache type '{self.kv_type}'",
                             hint=f"use one of {', '.join(KV_ELEMENT_BYTES)}")
        if self.ctx_size is not None and self.ctx_size < 16:
            raise UsageError(f"context size {self.ctx_size} is out of range",
                             hint="use --ctx-size of at least 16 tokens, e.g. 4096")


def prompt_context(prompt_bytes: int, answer_tokens: int | None = None) -> int:
    """A generous context for a prompt of this many UTF-8 bytes (about 3 bytes a token) plus the answer."""
    if prompt_bytes <= 0:
        return 0
    return prompt_bytes // 3 + (answer_tokens or 512)


def target_context(shape: ModelShape, request: FitRequest) -> int:
    """The context to aim for: asked, else the trained context capped by the registry and the default cap."""
    trained = shape.context_length or DEFAULT_CONTEXT_CAP
    if request.ctx_size is not None:
        return request.ctx_size
    target = min(c for c in (trained, request.default_ctx, DEFAULT_CONTEXT_CAP) if c)
    if request.min_ctx > target:
        target = min(padded_context(request.min_ctx), trained)
    return target


def _max_gpu_layers(shape: ModelShape, hw: Hardware, n_ctx: int, request: FitRequest) -> int:
    """The most layers (output head counted as one) whose VRAM need fits the budget."""
    def fits(count: int) -> bool:
        est = estimate_memory(shape, n_ctx=n_ctx, kv_type=request.kv_type, n_gpu_layers=count,
                              n_ubatch=request.n_ubatch, flash_attn=request.flash_attn)
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


def _try(shape: ModelShape, hw: Hardware, n_ctx: int, request: FitRequest) -> tuple[MemoryEstimate, bool]:
    """The estimate at a context with the GPU layers chosen for it, and whether its RAM part fits."""
    layers = _layers_for(shape, hw, n_ctx, request)
    est = estimate_memory(shape, n_ctx=n_ctx, kv_type=request.kv_type, n_gpu_layers=layers,
                          n_ubatch=request.n_ubatch, flash_attn=request.flash_attn, repack_types=hw.cpu_repack_types)
    return est, est.ram_bytes <= hw.ram_budget_bytes


def plan_fit(shape: ModelShape, hw: Hardware, request: FitRequest | None = None, *,
             label: str | None = None) -> LoadPlan:
    """The load plan for a model on this hardware, or InsufficientMemoryError (naming it label) when it cannot fit."""
    request = request or FitRequest()
    target = target_context(shape, request)
    floor = target if request.ctx_size is not None else min(target, max(MIN_AUTO_CONTEXT, request.min_ctx))
    est, fits = _try(shape, hw, target, request)
    reasons: list[str] = []
    if not fits:
        low_est, low_fits = _try(shape, hw, floor, request)
        if not low_fits:
            raise _too_big(shape, hw, low_est, request, floor, subject=label)
        best = _largest_context(shape, hw, request, floor, target)
        est = _try(shape, hw, best, request)[0]
        reasons.append(f"context lowered from {target:,} to {best:,} tokens to fit "
                       f"{_size(hw.ram_budget_bytes)} of usable RAM")
        target = best
    if hw.can_offload and not request.no_gpu and request.gpu_layers is None and est.n_gpu_layers <= shape.n_layer:
        reasons.append(f"{min(est.n_gpu_layers, shape.n_layer)} of {shape.n_layer} layers fit in "
                       f"{_size(hw.vram_budget_bytes)} of free VRAM")
    if request.gpu_layers and not request.no_gpu and not hw.gpu_offload:
        reasons.append("this llama.cpp build cannot offload to a GPU: --gpu-layers ignored")
    return LoadPlan(n_ctx=target, n_gpu_layers=est.n_gpu_layers, n_layers=shape.n_layer, kv_type=request.kv_type,
                    estimate=est, ram_budget_bytes=hw.ram_budget_bytes, vram_budget_bytes=hw.vram_budget_bytes,
                    reasons=tuple(reasons), repack_types=hw.cpu_repack_types)


def _largest_context(shape: ModelShape, hw: Hardware, request: FitRequest, floor: int, target: int) -> int:
    """The largest multiple of 256 between floor (which fits) and target (which does not) that fits."""
    low, high = floor // CONTEXT_PAD, target // CONTEXT_PAD
    while low < high:
        middle = (low + high + 1) // 2
        if _try(shape, hw, middle * CONTEXT_PAD, request)[1]:
            low = middle
        else:
            high = middle - 1
    return max(low * CONTEXT_PAD, floor)


def _size(n: int) -> str:
    """Bytes for people, binary units: 1.5 GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _too_big(shape: ModelShape, hw: Hardware, est: MemoryEstimate, request: FitRequest, n_ctx: int,
             subject: str | None = None) -> InsufficientMemoryError:
    """The error for a model that does not fit even at the smallest context the planner would choose."""
    name = subject or shape.name or "the model"
    where = f"{_size(hw.ram_budget_bytes)} of usable RAM ({hw.memory.source}: {_size(hw.memory.available_bytes)} " \
            "available)"
    if hw.can_offload and est.vram_bytes:
        where += f" and {_size(hw.vram_budget_bytes)} of free VRAM"
    options = ["a smaller quant (e.g. ORG/REPO:Q4_K_M or :Q3_K_M)"]
    if n_ctx > 512:
        options.append(f"a smaller context (--ctx-size {max(512, n_ctx // 2)})")
    if request.kv_type == "f16":
        options.append("--kv-type q8_0 (halves the KV cache)")
    return InsufficientMemoryError(
        f"{name} needs about {_size(est.ram_bytes)} of RAM at a {n_ctx:,}-token context "
        f"(weights {_size(est.weights_bytes)}, KV cache {_size(est.kv_bytes)}), but this machine has {where}",
        hint="try " + ", or ".join(options) + f" ({MEMORY_LIMIT_ENV} overrides the RAM figure)",
        needed_bytes=est.ram_bytes, usable_bytes=hw.ram_budget_bytes, n_ctx=n_ctx)


def fewer_gpu_layers(n_gpu_layers: int, n_layers: int) -> int:
    """The next, smaller GPU layer count to try after a failed load: half as many, then none."""
    current = n_layers + 1 if n_gpu_layers < 0 else n_gpu_layers
    return current // 2 if current > 1 else 0


def replan_gpu_layers(plan: LoadPlan, shape: ModelShape, n_gpu_layers: int, reason: str) -> LoadPlan:
    """The same plan with another GPU layer count (after llama.cpp refused the first)."""
    est = estimate_memory(shape, n_ctx=plan.n_ctx, kv_type=plan.kv_type, n_gpu_layers=n_gpu_layers,
                          repack_types=plan.repack_types)
    return replace(plan, n_gpu_layers=est.n_gpu_layers, estimate=est, reasons=(*plan.reasons, reason))


# ============================================================================ choosing among a repo's quants


@dataclass(frozen=True)
class FitOption:
    """One candidate model file (a quant of a Hub repo, or a local file) with its estimate and plan."""

    label: str  # the quant tag, or the file name when it has none
    quant: str | None
    filenames: tuple[str, ...]
    file_size: int
    shape: ModelShape | None = None
    estimate: MemoryEstimate | None = None  # at the target context (even when it does not fit)
    plan: LoadPlan | None = None  # None: does not fit (problem says why)
    problem: str | None = None
    path: Path | None = None  # the local file, when there is one

    @property
    def fits_in(self) -> str:
        """VRAM, VRAM+RAM, RAM, or no."""
        return self.plan.fits_in if self.plan is not None else "no"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        e = self.estimate
        return {"label": self.label, "quant": self.quant, "files": list(self.filenames), "file_size": self.file_size,
                "weights_bytes": e.weights_bytes if e else None, "kv_bytes": e.kv_bytes if e else None,
                "total_bytes": e.total_bytes if e else None, "ram_bytes": e.ram_bytes if e else None,
                "vram_bytes": e.vram_bytes if e else None,
                "bits_per_weight": round(self.shape.bits_per_weight, 2) if self.shape else None,
                "fits": self.fits_in, "plan": self.plan.to_dict() if self.plan else None, "problem": self.problem,
                "path": str(self.path) if self.path else None}


def evaluate(label: str, quant: str | None, filenames: tuple[str, ...], file_size: int, shape: ModelShape,
             hw: Hardware, request: FitRequest, path: Path | None = None) -> FitOption:
    """A candidate's estimate at the target context and its plan (or why it cannot fit)."""
    target = target_context(shape, request)
    est = _try(shape, hw, target, request)[0]
    try:
        plan, problem = plan_fit(shape, hw, request, label=label), None
    except InsufficientMemoryError as exc:
        plan, problem = None, exc.short
    return FitOption(label=label, quant=quant, filenames=filenames, file_size=file_size, shape=shape, estimate=est,
                     plan=plan, problem=problem, path=path)


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


def parse_header_bytes(data: bytes, name: str) -> GGUFInfo:
    """Parse a GGUF header from the first bytes of a file (tensor data need not be there)."""
    from localgen.gguf_file import read_gguf

    with tempfile.TemporaryDirectory(prefix="localgen-header-") as folder:
        path = Path(folder) / (Path(name).name or "header.gguf")
        path.write_bytes(data)
        return read_gguf(path, check_tensors=False)


def remote_header(repo: str, filename: str, size: int, *, revision: str | None = None) -> GGUFInfo:
    """A Hub file's GGUF header from HTTP range reads of its first few MB (more only when the header is longer)."""
    from localgen import hub

    n = min(HEADER_READ_BYTES, size) if size > 0 else HEADER_READ_BYTES
    while True:
        data = hub.read_header_bytes(repo, filename, n, revision=revision)
        try:
            return parse_header_bytes(data, filename)
        except GGUFError:
            if len(data) < n or n >= min(size or HEADER_READ_MAX_BYTES, HEADER_READ_MAX_BYTES):
                raise
            n = min(n * 4, size or HEADER_READ_MAX_BYTES, HEADER_READ_MAX_BYTES)


def hub_shape(repo: str, files: Sequence[HubFile], *, revision: str | None = None) -> ModelShape:
    """The shape of a Hub model (one file, or the shards of a split model) from its first file's header."""
    first = files[0]
    info = remote_header(repo, first.filename, first.size, revision=revision)
    others = sum(f.size for f in files[1:])
    return model_shape(info, file_size=first.size + others, shard_bytes=others)


def _groups(files: Sequence[HubFile], repo: str) -> list[tuple[HubFile, ...]]:
    """One file group per quant tag, plus each untagged model file (projectors and imatrix files left out)."""
    from localgen import hub

    groups: dict[str, tuple[HubFile, ...]] = {}
    models = [f for f in files if not f.name.lower().startswith(hub.AUXILIARY_PREFIXES)]
    for quant in sorted({f.quant for f in models if f.quant}):
        with contextlib.suppress(LocalgenError):
            group = hub.choose_model(list(files), quant=quant, filename=None, repo=repo)
            groups[group[0].filename] = group
    for f in models:
        if not f.quant and f.shard_index in (None, 1):
            with contextlib.suppress(LocalgenError):
                group = hub.choose_model(list(files), quant=None, filename=f.filename, repo=repo)
                groups[group[0].filename] = group
    return sorted(groups.values(), key=lambda g: sum(f.size for f in g))


def hub_options(repo: str, hw: Hardware, request: FitRequest, *,
                files: Sequence[HubFile] | None = None) -> list[FitOption]:
    """Every model file of a Hub repo with its estimate and plan, from header range reads (nothing downloaded)."""
    from localgen import hub

    listing = list(files) if files is not None else hub.list_gguf_files(repo)
    options = []
    for group in _groups(listing, repo):
        first = group[0]
        label = first.quant or first.filename
        names, size = tuple(f.filename for f in group), sum(f.size for f in group)
        try:
            shape = hub_shape(repo, group)
        except LocalgenError as exc:
            options.append(FitOption(label=label, quant=first.quant, filenames=names, file_size=size,
                                     problem=f"header not readable: {exc.message}"))
            continue
        options.append(evaluate(label, first.quant, names, size, shape, hw, request))
    return options


def local_option(path: Path, hw: Hardware, request: FitRequest, *, label: str | None = None) -> FitOption:
    """A local GGUF file as a candidate."""
    shape = read_shape(path)
    return evaluate(label or shape.quant or path.name, shape.quant, (path.name,), shape.file_size, shape, hw, request,
                    path=path)


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
        return {"reference": self.reference, "repo": self.repo, "hardware": self.hardware.to_dict(),
                "ctx_size": self.request.ctx_size, "kv_type": self.request.kv_type,
                "options": [o.to_dict() | {"chosen": i == self.chosen} for i, o in enumerate(self.options)],
                "chosen": self.options[self.chosen].label if self.chosen is not None else None,
                "notes": list(self.notes)}


@dataclass(frozen=True)
class _Target:
    """Where a reference points: a local path, or a Hub repo with the quant or file named (if any)."""

    path: Path | None
    repo: str | None
    quant: str | None
    filename: str | None
    default_ctx: int | None


def _target(reference: str | None) -> _Target:
    """Parse a reference the way resolve_model does."""
    from localgen.config import settings
    from localgen.registry import load_registry, parse_reference
    from localgen.resolve import _hub_target

    registry = load_registry(settings().user_registry)
    ref = parse_reference(reference if reference is not None else registry.default_model)
    if ref.path is not None:
        return _Target(path=ref.path, repo=None, quant=None, filename=None, default_ctx=None)
    spec = registry.get(ref.name) if ref.name is not None else None
    repo, quant, filename = _hub_target(ref, spec)
    return _Target(path=None, repo=repo, quant=quant, filename=filename,
                   default_ctx=spec.context if spec is not None else None)


def _named_index(options: Sequence[FitOption], files: Sequence[HubFile], target: _Target) -> int | None:
    """The option a named quant or file points at."""
    from localgen import hub

    assert target.repo is not None
    group = hub.choose_model(list(files), quant=target.quant, filename=target.filename, repo=target.repo)
    return next((i for i, o in enumerate(options) if o.filenames[0] == group[0].filename), None)


def fit_report(reference: str | None, *, request: FitRequest, hw: Hardware | None = None,
               offline: bool | None = None) -> FitReport:
    """Estimate and plan every quant of a reference's repo (or its one local file) and mark the one to use."""
    from localgen import hub
    from localgen.resolve import resolve_model

    hw = hw or probe_hardware()
    target = _target(reference)
    request = replace(request, default_ctx=target.default_ctx)
    text = reference or ""
    notes: list[str] = []
    if target.path is None and target.repo is not None and not (offline or hub.is_offline()):
        try:
            files = hub.list_gguf_files(target.repo)
            options = hub_options(target.repo, hw, request, files=files)
            named = target.quant or target.filename
            chosen = _named_index(options, files, target) if named else choose_option(options, request)
            return FitReport(text, target.repo, hw, request, tuple(options), chosen, tuple(notes))
        except LocalgenError as exc:
            notes.append(f"could not survey {target.repo} on the Hub ({exc.message}); showing the local copy")
    resolved = resolve_model(reference, offline=offline, pull=False)
    option = local_option(resolved.path, hw, request, label=target.quant or None)
    return FitReport(text, target.repo, hw, request, (option,), 0 if option.plan else None, tuple(notes))


def choose_download(reference: str | None, *, hw: Hardware, request: FitRequest) -> tuple[str | None, tuple[str, ...]]:
    """Before a download: check the named model fits (or pick the best quant that fits) from Hub headers.

    Returns the reference to download and notes for the user; raises InsufficientMemoryError when nothing fits.
    """
    from localgen import hub

    target = _target(reference)
    if target.repo is None:
        return reference, ()
    request = replace(request, default_ctx=target.default_ctx)
    if target.quant or target.filename:
        model = hub.find_model(target.repo, quant=target.quant, filename=target.filename)
        try:
            shape = hub_shape(target.repo, model.files, revision=model.revision)
        except LocalgenError:
            return reference, ()  # no header to judge by: the load after the download will tell
        plan_fit(shape, hw, request, label=model.label)
        return reference, ()
    options = hub_options(target.repo, hw, request)
    index = choose_option(options, request)
    if index is None:
        readable = [o for o in options if o.estimate is not None]
        if not readable:
            return reference, ()
        smallest = min(readable, key=lambda o: o.estimate.ram_bytes if o.estimate else 0)
        assert smallest.shape is not None
        raise _too_big_repo(target.repo, smallest, hw, request)
    chosen = options[index]
    assert chosen.plan is not None
    ref = f"{target.repo}:{chosen.quant}" if chosen.quant else f"{target.repo}/{chosen.filenames[0]}"
    note = (f"chose {ref} ({_size(chosen.file_size)}), the best of {len(options)} quants that fits: "
            f"{chosen.plan.describe()}")
    return ref, (note,)


def choose_cached(reference: str | None, *, hw: Hardware, request: FitRequest) -> str | None:
    """For a repo named without a quant: the best already downloaded quant that fits, as ORG/REPO:QUANT (no
    network); None when there is none."""
    from localgen import hub

    target = _target(reference)
    if target.repo is None or target.quant or target.filename:
        return None
    request = replace(request, default_ctx=target.default_ctx)
    options = []
    for group in _groups(hub.cached_listing(target.repo) or [], target.repo):
        first = group[0]
        paths = hub.cached_model(target.repo, quant=first.quant, filename=None if first.quant else first.filename)
        if paths:
            shape = header_shape(_read_local(paths[0]), paths[0])
            options.append(evaluate(first.quant or first.filename, first.quant, tuple(f.filename for f in group),
                                    shape.file_size, shape, hw, request, path=paths[0]))
    index = choose_option(options, request)
    if index is None:
        return None
    chosen = options[index]
    return f"{target.repo}:{chosen.quant}" if chosen.quant else f"{target.repo}/{chosen.filenames[0]}"


def _read_local(path: Path) -> GGUFInfo:
    """A local file's validated header."""
    from localgen.gguf_file import read_gguf

    return read_gguf(path)


def _too_big_repo(repo: str, smallest: FitOption, hw: Hardware, request: FitRequest) -> InsufficientMemoryError:
    """The error when not even a repo's smallest quant fits."""
    assert smallest.shape is not None
    n_ctx = min(target_context(smallest.shape, request), MIN_AUTO_CONTEXT)
    est = _try(smallest.shape, hw, n_ctx, request)[0]
    return _too_big(smallest.shape, hw, est, request, n_ctx,
                    subject=f"no quant of {repo} fits: even the smallest, {repo}:{smallest.label},")


def report_table(report: FitReport) -> tuple[str, list[str], list[list[str]]]:
    """A title line, headers and rows for `localgen fit` (the chosen row's label starts with '*')."""
    hw = report.hardware
    gpus = ", ".join(f"{g.name} ({_size(g.free_bytes)} free)" for g in hw.gpus) or (
        "none usable (CPU-only llama.cpp build)" if hw.nvidia_gpus else "none")
    title = (f"{report.reference or 'default model'}: RAM {_size(hw.ram_budget_bytes)} usable of "
             f"{_size(hw.memory.available_bytes)} available ({hw.memory.source}); GPU: {gpus}")
    headers = ["QUANT", "FILE", "WEIGHTS", "KV", "TOTAL", "FITS", "PLAN"]
    rows = []
    for index, option in enumerate(report.options):
        e = option.estimate
        mark = "*" if index == report.chosen else " "
        kv = f"{_size(e.kv_bytes)} @ {e.n_ctx:,}" if e else "-"
        plan = option.plan.describe() if option.plan else (option.problem or "-")
        rows.append([mark + option.label, _size(option.file_size), _size(e.weights_bytes) if e else "-", kv,
                     _size(e.total_bytes) if e else "-", option.fits_in, plan])
    return title, headers, rows


def plan_summary(path: Path, *, default_ctx: int | None = None, hw: Hardware | None = None) -> str:
    """One line on how a load of this local file would go here (for `localgen models show`)."""
    shape = read_shape(path)
    try:
        plan = plan_fit(shape, hw or probe_hardware(), FitRequest(default_ctx=default_ctx))
    except InsufficientMemoryError as exc:
        return f"does not fit: {exc.short}"
    return f"{plan.describe()} (about {_size(plan.estimate.total_bytes)})"
