"""The hardware probe: the RAM, cores and GPUs this process may give a model.

RAM from /proc/meminfo, capped by the cgroup (v2 memory.max, v1 memory.limit_in_bytes) and by LOCALGEN_MEMORY_LIMIT
(bytes or a size such as 4GiB, to simulate a smaller machine). Cores from /proc/cpuinfo, capped by the CPU affinity
and the cgroup quota (v2 cpu.max, v1 cpu.cfs_quota_us where /proc/self/mountinfo says the cpu controller is). GPUs
from llama.cpp's ggml backend devices (engine.backend_devices), else from `nvidia-smi`; LOCALGEN_VRAM_LIMIT caps the
VRAM budget the same way. The two limits are read by config.load_settings() and parsed by config.size_limit.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path

from localgen.config import MEMORY_LIMIT_ENV, VRAM_LIMIT_ENV, load_settings, size_limit
from localgen.llama_install import installed_version, reinstall_command

RAM_USABLE_FRACTION = 0.9
VRAM_RESERVE_FRACTION = 0.05
VRAM_RESERVE_MIN_BYTES = 256 * 2**20
VRAM_RESERVE_MAX_BYTES = 2**30  # llama.cpp's own fit margin (llama_params_fit): 5% of an H200 would be 7 GiB
# Weight types ggml-cpu repacks into interleaved copies (ggml_repack_get_optimal_repack_type, 0.3.36).
REPACK_TYPES_X86_AVX2 = frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"})
REPACK_TYPES_X86_AVX512 = frozenset({"Q2_K"})
REPACK_TYPES_ARM_DOTPROD = frozenset({"Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "Q8_0", "MXFP4"})
_UNLIMITED = 1 << 60
CGROUP_ROOT = Path("/sys/fs/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")  # where cgroup v1 mounts each controller (cpu,cpuacct for cpu)


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[tuple[str, str], ...]:
    """/proc/cpuinfo's (key, value) lines, stripped, read once (none where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ()
    return tuple((key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in text.splitlines()))


def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where there is none)."""
    return next((value for key, value in _cpuinfo() if key == "model name"), "")


def allowed_cpus() -> int:
    """The number of CPUs (hyper-threads included) this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def usable_cpus() -> int:
    """The CPUs this process may keep busy: those it may run on, fewer where a cgroup quota allows fewer."""
    allowed = allowed_cpus()
    return max(1, min(allowed, cgroup_cpus() or allowed))


@lru_cache(maxsize=1)
def physical_cores() -> int:
    """The number of physical CPU cores (not hyper-threads) this process may use."""
    allowed = usable_cpus()
    cores: set[tuple[str, str]] = set()
    physical_id = ""
    for key, value in _cpuinfo():
        if key == "physical id":
            physical_id = value
        elif key == "core id":
            cores.add((physical_id, value))
    return max(1, min(len(cores) or allowed, allowed))


def cgroup_cpus(root: Path = CGROUP_ROOT, mountinfo: Path = MOUNTINFO) -> int | None:
    """The CPUs a cgroup quota allows this process (docker --cpus=2): the least over its groups of v2's cpu.max and
    v1's cpu.cfs_quota_us over cpu.cfs_period_us, rounded up; None: no quota."""
    quotas = [_cpu_quota(d / "cpu.max") for d in _cgroup_dirs(root, None)]
    for v1 in _v1_mounts(root, "cpu", mountinfo):
        quotas += [_cpu_quota(d / "cpu.cfs_quota_us", d / "cpu.cfs_period_us") for d in _cgroup_dirs(v1, "cpu")]
    return min((cpus for cpus in quotas if cpus is not None), default=None)


def _v1_mounts(root: Path, controller: str, mountinfo: Path) -> list[Path]:
    """The folders under root where cgroup v1 mounts controller: those mountinfo names (cpu,cpuacct for cpu, whether
    cpu links to it or not), else root/controller."""
    mounts = [place for place, controllers in _cgroup_v1_mounts(mountinfo)
              if controller in controllers and (place == root or root in place.parents)]
    return [mount for mount in mounts or [root / controller] if mount.is_dir()]


def _cgroup_v1_mounts(mountinfo: Path) -> list[tuple[Path, list[str]]]:
    """The cgroup v1 mounts mountinfo lists: each one's mount point and its super options (the controllers it holds);
    none where it cannot be read."""
    mounts = []
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text().splitlines():
            fields, _, rest = line.partition(" - ")  # then the file system's type, its source and its super options
            place, kind = fields.split()[4:5], rest.split()
            if place and len(kind) >= 3 and kind[0] == "cgroup":
                mounts.append((Path(_unescaped(place[0])), kind[2].split(",")))
    return mounts


def _unescaped(field: str) -> str:
    """A mountinfo path with its octal escapes (\\040 for a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda escape: chr(int(escape.group(1), 8)), field)


def _cpu_quota(quota_file: Path, period_file: Path | None = None) -> int | None:
    """The CPUs one group's quota allows, rounded up: v2's "QUOTA PERIOD" in quota_file, or v1's quota and period in
    two files; None where the group has none ("max", -1) or it cannot be read."""
    try:
        fields = quota_file.read_text().split()
        if period_file is not None:
            fields = fields[:1] + period_file.read_text().split()[:1]
        quota, period = (int(field) for field in fields[:2])
    except (OSError, ValueError):  # "max": no quota at this level
        return None
    return -(-quota // period) if quota > 0 and period > 0 else None


def vram_reserve_bytes(total_bytes: int) -> int:
    """The free VRAM a plan leaves on a GPU for the CUDA context and what else may start: VRAM_RESERVE_FRACTION of
    its memory, within VRAM_RESERVE_MIN_BYTES and VRAM_RESERVE_MAX_BYTES."""
    return min(max(int(total_bytes * VRAM_RESERVE_FRACTION), VRAM_RESERVE_MIN_BYTES), VRAM_RESERVE_MAX_BYTES)


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

    @cached_property
    def cpu_repack_types(self) -> frozenset[str]:
        """The weight types llama.cpp repacks here (repacked_weight_types), asked when a plan first needs them: the
        AMX probe this may run comes after a command's cheaper checks of its model file."""
        return repacked_weight_types()

    @property
    def can_offload(self) -> bool:
        """True when layers can go to a GPU."""
        return self.gpu_offload and bool(self.gpus)

    @property
    def vram_budget_bytes(self) -> int:
        """Free VRAM usable for a model: each GPU's free memory less a reserve, capped by LOCALGEN_VRAM_LIMIT."""
        if not self.can_offload:
            return 0
        budget = sum(max(g.free_bytes - vram_reserve_bytes(g.total_bytes), 0) for g in self.gpus)
        return budget if self.vram_limit_bytes is None else min(budget, self.vram_limit_bytes)

    def after_freeing(self, ram_bytes: int, vram_bytes: int) -> Hardware:
        """These facts as they will be once a loaded model holding ram_bytes of RAM and vram_bytes of VRAM is freed."""
        memory = replace(self.memory, available_bytes=min(self.memory.available_bytes + ram_bytes,
                                                          self.memory.total_bytes))
        gpus, left = [], vram_bytes
        for gpu in self.gpus:
            gained = min(left, gpu.total_bytes - gpu.free_bytes)
            gpus.append(replace(gpu, free_bytes=gpu.free_bytes + gained))
            left -= gained
        return replace(self, memory=memory, gpus=tuple(gpus))

    @property
    def ram_budget_bytes(self) -> int:
        """RAM usable for a model: a fraction of what is available."""
        return int(self.memory.available_bytes * RAM_USABLE_FRACTION)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        return {"ram_total_bytes": self.memory.total_bytes, "ram_available_bytes": self.memory.available_bytes,
                "ram_source": self.memory.source, "ram_budget_bytes": self.ram_budget_bytes, "cores": self.cores,
                "gpu_offload": self.gpu_offload, "vram_budget_bytes": self.vram_budget_bytes,
                "gpus": [{"name": g.name, "total_bytes": g.total_bytes, "free_bytes": g.free_bytes, "source": g.source}
                         for g in self.gpus],
                "nvidia_gpus": [g.name for g in self.nvidia_gpus], "llama_cpp_python": self.llama_version,
                "cpu_repack_types": sorted(self.cpu_repack_types)}


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


def cgroup_memory(root: Path = CGROUP_ROOT, mountinfo: Path = MOUNTINFO) -> tuple[int, int] | None:
    """(limit, available) bytes of this process's cgroups (v2 and v1), or None when unlimited: the least limit over
    the group and those above it, and apart from it the least each leaves (limit - usage + inactive file pages), as a
    parent near its limit holds a child to what is left of it."""
    limits: list[int] = []
    availables: list[int] = []
    candidates = [(d / "memory.max", d / "memory.current", d / "memory.stat", "inactive_file")
                  for d in _cgroup_dirs(root, None)]
    for v1 in _v1_mounts(root, "memory", mountinfo):
        candidates += [(d / "memory.limit_in_bytes", d / "memory.usage_in_bytes", d / "memory.stat",
                        "total_inactive_file") for d in _cgroup_dirs(v1, "memory")]
    for limit_file, usage_file, stat_file, inactive_key in candidates:
        limit = _read_int(limit_file)
        if limit is None or limit >= _UNLIMITED:
            continue
        usage = _read_int(usage_file) or 0
        limits.append(limit)
        availables.append(max(limit - usage + _stat_value(stat_file, inactive_key), 0))
    return (min(limits), min(*availables, *limits)) if limits else None


def probe_memory() -> MemoryInfo:
    """Total and available RAM, honouring cgroup limits and LOCALGEN_MEMORY_LIMIT."""
    total, available = _meminfo()
    source = "system"
    cgroup = cgroup_memory()
    if cgroup is not None and cgroup[0] < total:
        total, available, source = cgroup[0], min(available, cgroup[1]), "cgroup"
    # load_settings(), not the cached settings(): a probe reports the limit as it is set now
    limit = size_limit(load_settings().memory_limit, MEMORY_LIMIT_ENV)
    if limit is not None and limit < total:  # a limit only lowers the figures
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
    flags = {flag for key, value in _cpuinfo() if key in ("flags", "Features") for flag in value.split()}
    types: set[str] = set()
    if "avx2" in flags:
        types |= REPACK_TYPES_X86_AVX2
    if "avx512f" in flags:
        types |= REPACK_TYPES_X86_AVX512
    if "asimddp" in flags or "i8mm" in flags:
        types |= REPACK_TYPES_ARM_DOTPROD
    return frozenset(types)


def repacked_weight_types() -> frozenset[str]:
    """The weight types llama.cpp repacks here as localgen loads models: its AMX kernels' too where it uses AMX
    buffers, none where it declines the CPU backend's extra buffer types (engine.use_cpu_extra_buffers)."""
    from localgen.engine import use_cpu_extra_buffers
    from localgen.engine.amx import AMX_BUFFER_TYPE, AMX_WEIGHT_TYPES
    from localgen.engine.devices import cpu_extra_buffer_types

    if not use_cpu_extra_buffers():
        return frozenset()
    amx = AMX_WEIGHT_TYPES if AMX_BUFFER_TYPE in cpu_extra_buffer_types() else frozenset()
    return cpu_repack_types() | amx


def probe_hardware() -> Hardware:
    """This machine now: RAM (limits honoured), cores, GPU offload support and GPU memory."""
    from localgen.engine import llama_cpp_version, supports_gpu_offload

    offload = supports_gpu_offload()
    gpus = _llama_gpus() if offload else ()
    nvidia = nvidia_smi_gpus() if not offload or not gpus else ()
    if offload and not gpus:
        gpus = nvidia
    vram_limit = size_limit(load_settings().vram_limit, VRAM_LIMIT_ENV)
    return Hardware(memory=probe_memory(), cores=physical_cores(), gpu_offload=offload, gpus=gpus,
                    nvidia_gpus=nvidia, llama_version=llama_cpp_version(), vram_limit_bytes=vram_limit)


def cpu_only_warning(hw: Hardware) -> str | None:
    """The warning for a CPU-only llama.cpp build on a machine with an NVIDIA GPU (None otherwise)."""
    if hw.gpu_offload or not hw.nvidia_gpus:
        return None
    names = ", ".join(sorted({g.name for g in hw.nvidia_gpus}))
    return (f"this llama-cpp-python build is CPU-only but an NVIDIA GPU is present ({names}); for GPU offload "
            f"reinstall it with CUDA: {reinstall_command(hw.llama_version or installed_version(), cuda=True)}")


def cpu_only_warning_once(hw: Hardware) -> str | None:
    """cpu_only_warning the first time it applies in this process, then None."""
    from localgen.once import first_time

    return first_time(cpu_only_warning(hw))
