"""Memory fit: hardware probe, estimates against measured RSS, plans, quant choice on a loopback Hub, the CLI."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hub_server import (
    HubEnv,
    HubServer,
    child_env,
    make_gguf_bytes,
    run_cli,
)

from localgen import config, fit, hardware, hub_errors, once, quant_choice, runner, units
from localgen.conversation import Conversation
from localgen.errors import ConfigError, InsufficientMemoryError, LocalgenError, ModelLoadError
from localgen.estimate import (
    GPU_HOST_OVERHEAD_BYTES,
    ModelShape,
    allocated_context,
    estimate_memory,
    kv_cache_bytes,
    read_shape,
)
from localgen.fit import FitRequest
from localgen.gguf_reader import read_gguf
from localgen.hardware import GpuInfo, Hardware, MemoryInfo
from localgen.params import GenerationLimits, SamplingParams
from localgen.quant_choice import choose_cached, choose_download, choose_option, hub_options, remote_header
from localgen.runner import ModelOptions, load_model
from localgen.session import ChatSession
from localgen.units import binary_size, parse_size
from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen, run_localgen_process, user_registry
from tests.mount_namespace import run_mounted
from tests.script_modules import script

MIB = 2**20
GIB = 2**30
REPO = "org/fit-GGUF"
QUANTS = ("f16", "q8_0", "q5_0", "q4_0")


def machine(ram: int = 16 * GIB, *, gpus: tuple[GpuInfo, ...] = (), offload: bool = False,
            nvidia: tuple[GpuInfo, ...] = (), vram_limit: int | None = None) -> Hardware:
    """Injected hardware facts."""
    return Hardware(memory=MemoryInfo(total_bytes=ram, available_bytes=ram, source="test"), cores=2,
                    gpu_offload=offload, gpus=gpus, nvidia_gpus=nvidia, llama_version="0.3.36",
                    vram_limit_bytes=vram_limit)


@pytest.fixture(scope="module")
def bundled_shape() -> ModelShape:
    """The bundled SmolLM2-135M's shape."""
    return read_shape(bundled_model_file())


@pytest.fixture(scope="module")
def quant_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small random-weight llama in four weight types (different sizes, same shape), named like a Hub repo."""
    models = script("fit_models")
    folder = tmp_path_factory.mktemp("quants")
    files = {}
    for quant in QUANTS:
        size = models.ModelSize(arch="llama", n_vocab=1024, n_embd=512, n_layer=4, n_head=8, n_head_kv=2, n_ff=1536,
                                n_ctx=8192, weight_type=quant, name="fit-test")
        files[quant.upper()] = models.build_model(folder / f"fit-{quant.upper()}.gguf", size)
    return files


# ----------------------------------------------------------------------------- hardware probe


def test_parse_size_accepts_bytes_and_binary_and_decimal_units() -> None:
    assert parse_size("4GiB", name="X") == 4 * GIB
    assert parse_size("512MiB", name="X") == 512 * MIB
    assert parse_size("1.5g", name="X") == int(1.5 * GIB)  # a letter alone is binary
    assert parse_size("1GB", name="X") == 10**9 and parse_size("1.5 GB", name="X") == 1_500_000_000  # decimal
    assert [parse_size(f"2{unit}", name="X") for unit in ("kB", "KB", "MB", "TB", "KiB", "TiB")] == [
        2000, 2000, 2 * 10**6, 2 * 10**12, 2 * 1024, 2 * 2**40]
    assert parse_size("1000", name="X") == 1000
    with pytest.raises(ConfigError, match="not a size"):
        parse_size("lots", name="X")
    with pytest.raises(ConfigError, match="not a size"):
        parse_size("\u0663G", name="X")  # an Arabic-Indic three is not a digit here
    with pytest.raises(ConfigError, match="not a whole number of bytes"):
        parse_size("1.5", name="X")
    assert parse_size("3b", name="X") == 3 and parse_size("4Gi", name="X") == 4 * GIB  # as Kubernetes writes it
    for text in ("5i", "5ib", "5 bytes"):  # a unit letter is needed before i or ib
        with pytest.raises(ConfigError, match="not a size"):
            parse_size(text, name="X")


def test_memory_limit_env_caps_total_and_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, "300MiB")
    memory = hardware.probe_memory()
    assert memory.total_bytes == 300 * MIB and memory.available_bytes <= 300 * MIB
    assert memory.source == config.MEMORY_LIMIT_ENV
    monkeypatch.delenv(config.MEMORY_LIMIT_ENV)
    machine = hardware.probe_memory()
    assert machine.total_bytes > 300 * MIB
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, "999T")  # above the machine: a limit only lowers the figures
    assert hardware.probe_memory().total_bytes == machine.total_bytes
    assert hardware.probe_memory().source == machine.source


def test_a_limit_too_small_to_hold_a_model_is_refused_naming_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOCALGEN_MEMORY_LIMIT=1 (8 meant as 8GiB, say) is one byte: refused, not read as a machine with 0 B of RAM."""
    for value, amount in (("1", "1 byte"), ("512", "512 bytes"), ("64", "64 bytes")):
        monkeypatch.setenv(config.MEMORY_LIMIT_ENV, value)
        with pytest.raises(ConfigError, match=f"^{config.MEMORY_LIMIT_ENV}='{value}' is {amount}, too little") as info:
            hardware.probe_memory()
        assert info.value.hint == f"a plain number counts bytes: give the unit, as in {config.MEMORY_LIMIT_ENV}=8GiB"
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, "0")  # no unit would help: 0 is often meant as no limit
    with pytest.raises(ConfigError, match=f"^{config.MEMORY_LIMIT_ENV}='0' is 0 bytes, too little") as info:
        hardware.probe_memory()
    assert info.value.hint == f"unset it for no limit, or give a size, as in {config.MEMORY_LIMIT_ENV}=8GiB"
    for value, amount in (("100KiB", "100.0 KiB"), ("512KiB", "512.0 KiB"), ("0.5MiB", "512.0 KiB"), ("8b", "8 bytes")):
        monkeypatch.setenv(config.MEMORY_LIMIT_ENV, value)  # a unit was given: no word of plain numbers
        with pytest.raises(ConfigError, match=f"^{config.MEMORY_LIMIT_ENV}='{value}' is {amount}, too little") as info:
            hardware.probe_memory()
        assert info.value.hint == f"give 1 MiB or more, as in {config.MEMORY_LIMIT_ENV}=8GiB"
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, "1MiB")
    assert hardware.probe_memory().total_bytes == MIB
    assert config.size_limit("0", config.VRAM_LIMIT_ENV) == 0
    with pytest.raises(ConfigError, match=f"^{config.VRAM_LIMIT_ENV}='6' is 6 bytes"):
        config.size_limit("6", config.VRAM_LIMIT_ENV)
    result = run_localgen("fit", str(bundled_model_file()), env={config.MEMORY_LIMIT_ENV: "1"})
    assert result.returncode == 1 and result.out == ""
    assert result.err == (f"localgen: error: {config.MEMORY_LIMIT_ENV}='1' is 1 byte, too little to hold any model "
                          f"(hint: a plain number counts bytes: give the unit, as in {config.MEMORY_LIMIT_ENV}=8GiB)\n")


def test_a_vram_limit_too_small_is_hinted_that_0_keeps_models_off_the_gpu() -> None:
    """LOCALGEN_VRAM_LIMIT=100 is refused; its hint names =0 too, the way to keep models on the CPU."""
    name = config.VRAM_LIMIT_ENV
    with pytest.raises(ConfigError) as info:
        config.size_limit("512KiB", name)
    assert info.value.hint == f"give 1 MiB or more, as in {name}=8GiB, or {name}=0 to keep models off the GPU"
    result = run_localgen("fit", str(bundled_model_file()), env={name: "100"})
    assert result.returncode == 1 and result.out == ""
    assert result.err == (f"localgen: error: {name}='100' is 100 bytes, too little to hold any model (hint: a plain "
                          f"number counts bytes: give the unit, as in {name}=8GiB, or {name}=0 to keep models off the "
                          "GPU)\n")


@pytest.mark.parametrize("version", [1, 2])
def test_cgroup_limits_are_read(tmp_path: Path, version: int) -> None:
    if version == 2:
        (tmp_path / "memory.max").write_text(f"{2 * GIB}\n")
        (tmp_path / "memory.current").write_text(f"{GIB}\n")
        (tmp_path / "memory.stat").write_text(f"anon 1\ninactive_file {256 * MIB}\n")
    else:
        v1 = tmp_path / "memory"
        v1.mkdir()
        (v1 / "memory.limit_in_bytes").write_text(f"{2 * GIB}\n")
        (v1 / "memory.usage_in_bytes").write_text(f"{GIB}\n")
        (v1 / "memory.stat").write_text(f"total_inactive_file {256 * MIB}\n")
    assert hardware.cgroup_memory(tmp_path) == (2 * GIB, GIB + 256 * MIB)


def test_the_ram_available_is_the_least_any_cgroup_leaves(tmp_path: Path) -> None:
    """A group with more room (a v2 limit of 8 GiB, 7.5 used) holds a smaller one (v1: 4 GiB, 1 used) to its 0.5."""
    (tmp_path / "memory.max").write_text(f"{8 * GIB}\n")
    (tmp_path / "memory.current").write_text(f"{15 * GIB // 2}\n")
    v1 = tmp_path / "memory"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text(f"{4 * GIB}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{GIB}\n")
    assert hardware.cgroup_memory(tmp_path) == (4 * GIB, GIB // 2)


def test_fit_counts_the_ram_a_cgroup_above_leaves(tmp_path: Path) -> None:
    """A parent group near its limit (2 GiB, 1.75 GiB used by others) leaves its child (1 GiB, 256 MiB used) 256 MiB,
    where the child's own limit would leave 768 MiB."""
    hardware_json = _fit_hardware_in_cgroups(tmp_path, {
        "memory/outer/memory.limit_in_bytes": f"{2 * GIB}\n", "memory/outer/memory.usage_in_bytes": f"{7 * GIB // 4}\n",
        "memory/outer/inner/memory.limit_in_bytes": f"{GIB}\n",
        "memory/outer/inner/memory.usage_in_bytes": f"{256 * MIB}\n"})
    assert (hardware_json["ram_source"], hardware_json["ram_total_bytes"]) == ("cgroup", GIB), hardware_json
    assert hardware_json["ram_available_bytes"] == 256 * MIB


@pytest.mark.parametrize(("cpu_max", "cpus"), [("150000 100000\n", 2), ("200000 100000\n", 2),
                                               ("max 100000\n", None), ("garbage\n", None)])
def test_a_cgroup_cpu_quota_caps_the_threads(tmp_path: Path, cpu_max: str, cpus: int | None) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert hardware.cgroup_cpus(tmp_path) == cpus


@pytest.mark.parametrize(("quota", "period", "cpus"), [("100000\n", "100000\n", 1), ("150000\n", "100000\n", 2),
                                                    ("-1\n", "100000\n", None), ("garbage\n", "100000\n", None)])
def test_a_cgroup_v1_cpu_quota_caps_the_threads(tmp_path: Path, quota: str, period: str, cpus: int | None) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(quota)
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(period)
    assert hardware.cgroup_cpus(tmp_path) == cpus


def test_a_cgroup_v1_cpu_quota_is_found_where_cpu_cpuacct_is_mounted_without_a_cpu_link(tmp_path: Path) -> None:
    joint = tmp_path / "cpu,cpuacct"
    joint.mkdir()
    (joint / "cpu.cfs_quota_us").write_text("100000\n")
    (joint / "cpu.cfs_period_us").write_text("100000\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"33 31 0:30 / {tmp_path}/cpuacct rw - cgroup cgroup rw,cpuacct\n"
                         f"32 31 0:29 / {joint} rw,relatime shared:1 - cgroup cgroup rw,cpu,cpuacct\n")
    assert hardware.cgroup_cpus(tmp_path, mountinfo) == 1
    assert hardware.cgroup_cpus(tmp_path, tmp_path / "none") is None, "a v1 cpu controller is looked for in cpu"


def _fit_hardware_in_cgroups(tmp_path: Path, files: dict[str, str], mounts: str = "") -> dict[str, object]:
    """fit --json's hardware where /sys/fs/cgroup holds only files (their paths in it, their text) and this process
    is in group /outer/inner of each controller (v1's memory and cpu, and v2's); mounts: the lines of mountinfo it
    sees in place of its own, where given."""
    tree = tmp_path / "cgroup"
    tree.mkdir()
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    groups = tmp_path / "groups"
    groups.write_text("4:memory:/outer/inner\n1:cpu,cpuacct:/outer/inner\n0::/outer/inner\n")
    setup = f"mount --bind {tree} /sys/fs/cgroup && mount --bind {groups} /proc/$$/cgroup"  # $$: the localgen to be
    if mounts:
        (tmp_path / "mountinfo").write_text(mounts)
        setup += f" && mount --bind {tmp_path / 'mountinfo'} /proc/$$/mountinfo"
    result = run_mounted(setup, ["fit", str(bundled_model_file()), "--json"],
                         {"LOCALGEN_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)})
    assert result.stdout, result.stderr
    return json.loads(result.stdout)["hardware"]


def test_fit_counts_the_cores_a_cgroup_v1_quota_up_the_hierarchy_allows(tmp_path: Path) -> None:
    if hardware.physical_cores() < 2:
        pytest.skip("one core: a one-CPU quota changes nothing here")
    quota = {"cpu/outer/inner/cpu.cfs_quota_us": "-1\n", "cpu/outer/inner/cpu.cfs_period_us": "100000\n",
             "cpu/outer/cpu.cfs_quota_us": "100000\n", "cpu/outer/cpu.cfs_period_us": "100000\n"}  # docker --cpus 1
    assert _fit_hardware_in_cgroups(tmp_path, quota)["cores"] == 1


def test_fit_counts_the_cores_a_cgroup_v1_quota_allows_where_cpu_cpuacct_has_no_cpu_link(tmp_path: Path) -> None:
    if hardware.physical_cores() < 2:
        pytest.skip("one core: a one-CPU quota changes nothing here")
    quota = {"cpu,cpuacct/outer/cpu.cfs_quota_us": "100000\n", "cpu,cpuacct/outer/cpu.cfs_period_us": "100000\n"}
    mounts = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    assert _fit_hardware_in_cgroups(tmp_path, quota, mounts)["cores"] == 1


def test_unlimited_cgroup_is_no_limit(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text("max\n")
    assert hardware.cgroup_memory(tmp_path) is None


def test_nvidia_smi_output_is_parsed() -> None:
    gpus = hardware.parse_nvidia_smi("NVIDIA H200, 143771, 140000\nNVIDIA GeForce RTX 4090, 24564, 2000\n")
    assert [g.name for g in gpus] == ["NVIDIA H200", "NVIDIA GeForce RTX 4090"]
    assert gpus[1].total_bytes == 24564 * MIB and gpus[1].free_bytes == 2000 * MIB


def test_backend_devices_come_from_ggml() -> None:
    from localgen.engine import backend_devices

    devices = backend_devices()
    assert any(d.kind == "cpu" and d.total_bytes > 0 for d in devices)
    hw = hardware.probe_hardware()
    assert hw.memory.total_bytes > 0 and hw.cores >= 1
    assert hw.gpu_offload or not hw.can_offload


def test_cpu_only_build_with_nvidia_gpu_warns_once_with_the_reinstall_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(once, "_SAID", set())
    h200 = GpuInfo(name="NVIDIA H200", total_bytes=140 * GIB, free_bytes=139 * GIB, source="nvidia-smi")
    cpu_only = machine(nvidia=(h200,))
    message = hardware.cpu_only_warning_once(cpu_only)
    assert message is not None and "NVIDIA H200" in message
    assert ('CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall --no-cache-dir llama-cpp-python==0.3.36'
            in message)
    assert hardware.cpu_only_warning_once(cpu_only) is None
    assert hardware.cpu_only_warning(machine()) is None  # no NVIDIA GPU
    assert hardware.cpu_only_warning(machine(offload=True, gpus=(h200,), nvidia=(h200,))) is None  # a CUDA build


# ----------------------------------------------------------------------------- estimates


@pytest.mark.parametrize(("n_ctx", "kv_type", "mib"), [(2048, "f16", 45.0), (8192, "f16", 180.0),
                                                       (8192, "q8_0", 95.625), (8192, "q4_0", 50.625)])
def test_kv_cache_matches_llama_cpp(bundled_shape: ModelShape, n_ctx: int, kv_type: str, mib: float) -> None:
    assert kv_cache_bytes(bundled_shape, n_ctx, kv_type) == pytest.approx(mib * MIB)  # llama.cpp's log


@pytest.mark.parametrize(("n_ctx", "flash_attn", "cells"), [
    (100, False, 256), (768, False, 768), (1000, False, 1280), (8192, False, 8448), (8448, False, 8448),
    (8192, True, 8192), (1000, True, 1024)])
def test_without_flash_attention_a_context_from_1024_cells_is_an_odd_multiple_of_256(
        n_ctx: int, flash_attn: bool, cells: int) -> None:
    assert allocated_context(n_ctx, flash_attn=flash_attn) == cells


def test_the_estimate_counts_the_cells_allocated(bundled_shape: ModelShape) -> None:
    without = estimate_memory(bundled_shape, n_ctx=8192, flash_attn=False)
    assert without.kv_bytes == kv_cache_bytes(bundled_shape, 8448) and without.n_ctx == 8192
    assert estimate_memory(bundled_shape, n_ctx=8192, flash_attn=True).kv_bytes == kv_cache_bytes(bundled_shape, 8192)


def test_sliding_window_layers_are_counted_in_full_as_llama_cpp_s_default_keeps_them(bundled_shape: ModelShape) -> None:
    """The engine loads with llama.cpp's default context parameters, whose swa_full keeps every cell of a
    sliding-window layer: the estimate counts them as it counts the others."""
    import llama_cpp

    assert llama_cpp.llama_context_default_params().swa_full, "a window's cells alone: the estimate must say so"
    shape = replace(bundled_shape, swa_layers=tuple(i % 2 == 0 for i in range(30)))
    assert kv_cache_bytes(shape, 8192) == kv_cache_bytes(bundled_shape, 8192)


def test_weights_split_into_layers_and_the_rest(bundled_shape: ModelShape) -> None:
    info = read_gguf(bundled_model_file())
    assert bundled_shape.weights_bytes == sum(t.nbytes for t in info.tensors)
    assert len(bundled_shape.layer_bytes) == bundled_shape.n_layer == 30
    assert bundled_shape.tied_output and bundled_shape.output_bytes > 0
    assert 4 < bundled_shape.bits_per_weight < 6


def test_estimate_is_close_to_measured_rss_of_the_bundled_model(bundled_shape: ModelShape) -> None:
    """Load at ctx 2048 and prefill 256 tokens in a fresh process; compare RSS growth with the estimate (the
    full-context measurements are in scripts/fit_measure.py and the issue note)."""
    script = REPO_ROOT / "scripts" / "fit_measure.py"
    # flash attention on: without it, the scores' buffers of a 256-token prefill touch a fraction of the full
    # context's that the estimate counts
    proc = subprocess.run([sys.executable, str(script), "child", str(bundled_model_file()), "2048", "f16", "on",
                           "256"], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    measured = record["after"]["VmHWM"] - record["base"]["VmRSS"]
    estimate = estimate_memory(bundled_shape, n_ctx=2048, flash_attn=True,
                               repack_types=hardware.repacked_weight_types())
    assert estimate.kv_bytes == pytest.approx(record["buffers"]["kv"])
    assert abs(estimate.rss_bytes - measured) / measured < 0.25, (estimate, measured)


def test_repacked_weights_are_counted_once_and_their_stale_pages_apart(quant_files: dict[str, Path]) -> None:
    shape = read_shape(quant_files["Q4_0"])
    plain = estimate_memory(shape, n_ctx=2048)
    repacked = estimate_memory(shape, n_ctx=2048, repack_types=frozenset({"Q4_0"}))
    assert plain.reclaimable_bytes == 0 and repacked.ram_bytes == plain.ram_bytes
    # token_embd first and output_norm last stay mapped: the layers' matrices between them leave stale pages;
    # output.weight, after the last weight used in place, is unmapped
    layer_matrices = sum(s.nbytes for s in shape.slots if s.layer >= 0 and s.matmul)
    assert repacked.reclaimable_bytes == layer_matrices
    assert repacked.rss_bytes == repacked.ram_bytes + layer_matrices


def test_weights_used_in_place_from_the_mapping_are_not_private_ram(quant_files: dict[str, Path]) -> None:
    shape = read_shape(quant_files["Q4_0"])
    plain = estimate_memory(shape, n_ctx=2048)
    assert plain.mapped_bytes == shape.weights_bytes
    assert plain.private_ram_bytes == plain.ram_bytes - shape.weights_bytes > 0
    repacked = estimate_memory(shape, n_ctx=2048, repack_types=frozenset({"Q4_0"}))
    copies = sum(s.nbytes for s in shape.slots if s.matmul and s.type_name == "Q4_0")
    assert repacked.mapped_bytes == shape.weights_bytes - copies > 0, "a repacked copy is private memory"
    assert repacked.private_ram_bytes == plain.private_ram_bytes + copies


def test_gpu_estimate_moves_layers_kv_and_compute_to_vram(bundled_shape: ModelShape) -> None:
    cpu = estimate_memory(bundled_shape, n_ctx=4096)
    half = estimate_memory(bundled_shape, n_ctx=4096, n_gpu_layers=15)
    full = estimate_memory(bundled_shape, n_ctx=4096, n_gpu_layers=-1)
    assert cpu.vram_bytes == 0 and 0 < half.vram_bytes < full.vram_bytes
    assert full.n_gpu_layers == 31
    assert full.vram_bytes >= full.kv_bytes + sum(bundled_shape.layer_bytes) + full.compute_bytes
    assert full.ram_bytes - GPU_HOST_OVERHEAD_BYTES < cpu.ram_bytes


# ----------------------------------------------------------------------------- plans


def test_a_replan_after_a_failed_gpu_load_keeps_the_batch_and_attention_settings(bundled_shape: ModelShape) -> None:
    gpu = GpuInfo(name="GPU", total_bytes=8 * GIB, free_bytes=8 * GIB)
    request = FitRequest(gpu_layers=-1, n_ubatch=128, flash_attn="off", ctx_size=4096)
    plan = fit.plan_fit(bundled_shape, machine(gpus=(gpu,), offload=True), request)
    replanned = fit.replan_gpu_layers(plan, bundled_shape, 15, "retried with 15")
    assert replanned.estimate == estimate_memory(bundled_shape, n_ctx=4096, n_gpu_layers=15, n_ubatch=128,
                                                 flash_attn=False, repack_types=plan.repack_types)
    assert replanned.estimate != estimate_memory(bundled_shape, n_ctx=4096, n_gpu_layers=15,
                                                 repack_types=plan.repack_types), "the defaults differ"
    on_the_cpu = fit.replan_gpu_layers(plan, bundled_shape, 0, "retried with 0", flash_attn=False)
    assert on_the_cpu.flash_attn is False, "auto's choice for the retried context, which the loader makes too"
    assert on_the_cpu.estimate == estimate_memory(bundled_shape, n_ctx=4096, n_gpu_layers=0, n_ubatch=128,
                                                  flash_attn=False, repack_types=plan.repack_types)


def test_plan_uses_the_default_context_when_it_fits(bundled_shape: ModelShape) -> None:
    plan = fit.plan_fit(bundled_shape, machine())
    assert (plan.n_ctx, plan.n_gpu_layers, plan.kv_type, plan.where) == (8192, 0, "f16", "cpu")
    assert plan.reasons == ()
    assert fit.plan_fit(bundled_shape, machine(), FitRequest(default_ctx=4096)).n_ctx == 4096


def test_plan_lowers_the_context_to_fit_and_says_so(bundled_shape: ModelShape) -> None:
    full = estimate_memory(bundled_shape, n_ctx=8192, flash_attn=False).ram_bytes  # auto, on the CPU
    small = estimate_memory(bundled_shape, n_ctx=2048, flash_attn=False).ram_bytes
    hw = machine(int((full + small) / 2 / hardware.RAM_USABLE_FRACTION))
    plan = fit.plan_fit(bundled_shape, hw)
    assert plan.flash_attn is False, "auto on the CPU with an f16 KV cache"
    assert 2048 <= plan.n_ctx < 8192 and plan.n_ctx % 256 == 0
    assert plan.estimate.ram_bytes <= hw.ram_budget_bytes
    assert estimate_memory(bundled_shape, n_ctx=plan.n_ctx + 256, flash_attn=False).ram_bytes > hw.ram_budget_bytes
    assert "context lowered from 8,192" in plan.reasons[0]


def test_plan_aims_for_the_prompt_estimate_and_refuses_only_below_its_floor(bundled_shape: ModelShape) -> None:
    assert fit.plan_fit(bundled_shape, machine(), FitRequest(default_ctx=2048, min_ctx=5000)).n_ctx == 5120
    hw = machine(int(estimate_memory(bundled_shape, n_ctx=4096).ram_bytes / hardware.RAM_USABLE_FRACTION))
    plan = fit.plan_fit(bundled_shape, hw, FitRequest(min_ctx=5000, floor_bytes=3099 * bundled_shape.longest_token))
    # 4,096 tokens get 4,352 cells without flash attention (allocated_context): 4,352 tokens take no more
    assert 3100 <= plan.n_ctx <= 4352 and "context lowered" in plan.reasons[0], "the generous estimate is a target"
    with pytest.raises(InsufficientMemoryError, match="at a context of 5,000 tokens") as caught:
        fit.plan_fit(bundled_shape, hw, FitRequest(min_ctx=6000, floor_bytes=4999 * bundled_shape.longest_token))
    assert "--ctx-size" not in (caught.value.hint or ""), "no smaller context can hold the prompt"


def test_a_model_that_cannot_fit_is_refused_with_need_available_and_options(bundled_shape: ModelShape) -> None:
    with pytest.raises(InsufficientMemoryError) as caught:
        fit.plan_fit(bundled_shape, machine(100 * MIB), label="smollm2-135m")
    error = caught.value
    assert error.message.startswith("smollm2-135m needs about")
    assert "at a context of 2,048 tokens" in error.message and "90.0 MiB of usable RAM" in error.message
    parts = re.search(r"\(weights ([\d.]+) MiB, KV cache ([\d.]+) MiB, buffers ([\d.]+) MiB\)", error.message)
    assert parts is not None, error.message  # named the weights and KV cache alone, which fall short of the need
    needed = float(re.search(r"needs about ([\d.]+) MiB", error.message)[1])
    assert abs(sum(float(part) for part in parts.groups()) - needed) <= 0.15, error.message
    assert "a quant with fewer bits per weight than Q4_1" in (error.hint or "")
    assert "--ctx-size" not in (error.hint or "") and "--kv-type" not in (error.hint or ""), \
        "the weights alone exceed the budget: a smaller KV cache cannot help"
    between = (estimate_memory(bundled_shape, n_ctx=1024).ram_bytes
               + estimate_memory(bundled_shape, n_ctx=2048).ram_bytes) / 2
    with pytest.raises(InsufficientMemoryError) as caught:
        fit.plan_fit(bundled_shape, machine(int(between / hardware.RAM_USABLE_FRACTION)))
    offered = int(re.search(r"--ctx-size (\d+), the most that fits", caught.value.hint or "")[1])
    assert 1024 <= offered < 2048 and "--kv-type q8_0" in (caught.value.hint or "")
    budget = int(between / hardware.RAM_USABLE_FRACTION) * hardware.RAM_USABLE_FRACTION
    assert estimate_memory(bundled_shape, n_ctx=offered).ram_bytes <= budget, "the context it offers fits"
    assert fit.plan_fit(bundled_shape, machine(int(between / hardware.RAM_USABLE_FRACTION)),
                        FitRequest(ctx_size=offered)).n_ctx == offered


def test_the_refusal_names_the_memory_limit_only_where_it_set_the_ram_figure(bundled_shape: ModelShape) -> None:
    """LOCALGEN_MEMORY_LIMIT only lowers the RAM figure: the hint names it where it did, not as a way to more."""
    small = machine(100 * MIB)
    for source, named in (("system", False), ("cgroup", False), (config.MEMORY_LIMIT_ENV, True)):
        hw = replace(small, memory=replace(small.memory, source=source))
        with pytest.raises(InsufficientMemoryError) as caught:
            fit.plan_fit(bundled_shape, hw)
        assert (config.MEMORY_LIMIT_ENV in (caught.value.hint or "")) is named, caught.value.hint
    assert (caught.value.hint or "").endswith(f", or raise or unset {config.MEMORY_LIMIT_ENV}, which sets the RAM "
                                              "figure")


def test_an_explicit_context_is_kept_or_refused(bundled_shape: ModelShape) -> None:
    assert fit.plan_fit(bundled_shape, machine(), FitRequest(ctx_size=1000)).n_ctx == 1000
    fits_2048 = estimate_memory(bundled_shape, n_ctx=2048).ram_bytes
    with pytest.raises(InsufficientMemoryError, match="at a context of 8,192 tokens"):
        fit.plan_fit(bundled_shape, machine(int(fits_2048 / hardware.RAM_USABLE_FRACTION)), FitRequest(ctx_size=8192))


def test_the_vram_reserve_is_5_percent_within_256_mib_and_1_gib() -> None:
    assert hardware.vram_reserve_bytes(8 * GIB) == int(8 * GIB * 0.05)
    assert hardware.vram_reserve_bytes(2 * GIB) == 256 * 2**20
    assert hardware.vram_reserve_bytes(141 * GIB) == GIB, "not 7 GiB of an H200 left unused"
    h200 = machine(offload=True, gpus=(GpuInfo(name="H200", total_bytes=141 * GIB, free_bytes=141 * GIB),))
    assert h200.vram_budget_bytes == 140 * GIB


def test_gpu_layers_all_some_or_none(bundled_shape: ModelShape) -> None:
    def gpu(free: int) -> GpuInfo:
        return GpuInfo(name="Test GPU", total_bytes=8 * GIB, free_bytes=free)

    reserve = hardware.vram_reserve_bytes(8 * GIB)
    everything = estimate_memory(bundled_shape, n_ctx=8192, n_gpu_layers=-1).vram_bytes
    all_plan = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(8 * GIB),)))
    assert all_plan.where == "gpu" and all_plan.n_gpu_layers == 31 and all_plan.n_ctx == 8192
    some = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(reserve + everything // 2),)))
    assert some.where == "split" and 0 < some.n_gpu_layers < 30
    assert all_plan.placement == "all 30 layers on the GPU"
    assert some.placement == f"{some.n_gpu_layers}/30 layers on the GPU"
    assert some.estimate.vram_bytes <= some.vram_budget_bytes
    assert "layers fit in" in " ".join(some.reasons)
    none = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(reserve + MIB),)))
    assert none.n_gpu_layers == 0 and none.placement == "CPU only"
    all_but_output = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(8 * GIB),)), FitRequest(gpu_layers=30))
    assert all_but_output.placement == "all 30 layers on the GPU but the output layer", "not 30/30"
    limited = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(8 * GIB),), vram_limit=everything // 2))
    assert limited.where == "split"
    assert fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(8 * GIB),)), FitRequest(no_gpu=True)).where \
        == "cpu"
    assert fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu(MIB),)), FitRequest(gpu_layers=-1)) \
        .n_gpu_layers == 31
    assert fit.plan_fit(bundled_shape, machine(), FitRequest(gpu_layers=10)).n_gpu_layers == 0  # CPU-only build


def test_failed_gpu_load_is_retried_with_fewer_layers(bundled_shape: ModelShape) -> None:
    from localgen.params import LoadOptions
    from localgen.runner import open_engine

    tried: list[int] = []

    def factory(path: Path, options: LoadOptions, shape: ModelShape) -> object:
        tried.append(options.n_gpu_layers)
        if options.n_gpu_layers > 10:
            raise ModelLoadError("could not load")
        return "engine"

    hw = machine(offload=True, gpus=(GpuInfo(name="GPU", total_bytes=8 * GIB, free_bytes=8 * GIB),))
    plan = fit.plan_fit(bundled_shape, hw)
    notes: list[str] = []
    options = LoadOptions(n_ctx=plan.n_ctx, n_threads=2, n_threads_batch=2, n_gpu_layers=plan.n_gpu_layers)
    engine, final = open_engine(Path("m.gguf"), options, plan, bundled_shape, notes.append, factory=factory)  # type: ignore[arg-type]
    assert engine == "engine" and tried == [31, 15, 7]
    assert final.n_gpu_layers == 7 and final.estimate.n_gpu_layers == 7
    assert notes == ["llama.cpp could not load 31 GPU layers; retried with 15",
                     "llama.cpp could not load 15 GPU layers; retried with 7"]
    with pytest.raises(ModelLoadError):
        open_engine(Path("m.gguf"), replace(options, n_gpu_layers=0), plan, bundled_shape, notes.append,
                    factory=lambda *_: (_ for _ in ()).throw(ModelLoadError("no")))
    tried.clear()
    with pytest.raises(ModelLoadError, match="could not load") as asked:  # --gpu-layers 31: no silent change
        open_engine(Path("m.gguf"), options, plan, bundled_shape, notes.append, retry=False, factory=factory)
    assert tried == [31] and "fewer --gpu-layers than 31" in (asked.value.hint or "")


@pytest.mark.parametrize(("message", "hint"), [
    ("could not create a context of 131072 tokens for m.gguf",
     "try a smaller --ctx-size, or --kv-type q8_0 with --flash-attn on"),
    ("llama.cpp could not load m.gguf", "the file may be damaged or of an architecture this build does not know; "
     "run with LOCALGEN_DEBUG=1 for llama.cpp's log"),
], ids=["context", "weights"])
def test_given_gpu_layers_keep_the_failures_own_hint(bundled_shape: ModelShape, message: str, hint: str) -> None:
    from localgen.params import LoadOptions
    from localgen.runner import open_engine

    def factory(path: Path, options: LoadOptions, shape: ModelShape) -> object:
        raise ModelLoadError(message, hint=hint)

    plan = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(GpuInfo(name="GPU", total_bytes=8 * GIB,
                                                                           free_bytes=8 * GIB),)))
    options = LoadOptions(n_ctx=plan.n_ctx, n_threads=2, n_threads_batch=2, n_gpu_layers=20)
    with pytest.raises(ModelLoadError) as asked:  # --gpu-layers 20
        open_engine(Path("m.gguf"), options, plan, bundled_shape, lambda _: None, retry=False, factory=factory)
    assert asked.value.message == message
    assert asked.value.hint == f"{hint}; or try fewer --gpu-layers than 20, or leave it out to let localgen choose"
    assert "\n" not in asked.value.hint


def test_given_gpu_layers_keep_the_failures_kind_and_fields(bundled_shape: ModelShape) -> None:
    """A load that fails with the --gpu-layers asked for keeps its error's kind and fields (a lack of memory's sizes
    and context), the hint of fewer layers added, where it became a bare ModelLoadError of its message and hint."""
    from localgen.params import LoadOptions
    from localgen.runner import open_engine

    def factory(path: Path, options: LoadOptions, shape: ModelShape) -> object:
        raise InsufficientMemoryError("m.gguf needs about 9 GiB at 4,096 ctx", "try a smaller --ctx-size",
                                      needed_bytes=9 * GIB, usable_bytes=4 * GIB, n_ctx=4096, short="needs 9 GiB")

    plan = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(GpuInfo(name="GPU", total_bytes=8 * GIB,
                                                                           free_bytes=8 * GIB),)))
    options = LoadOptions(n_ctx=plan.n_ctx, n_threads=2, n_threads_batch=2, n_gpu_layers=20)
    with pytest.raises(ModelLoadError) as asked:  # --gpu-layers 20
        open_engine(Path("m.gguf"), options, plan, bundled_shape, lambda _: None, retry=False, factory=factory)
    error = asked.value
    assert isinstance(error, InsufficientMemoryError), type(error)
    assert (error.message, error.needed_bytes, error.usable_bytes, error.n_ctx, error.short, error.exit_code) == (
        "m.gguf needs about 9 GiB at 4,096 ctx", 9 * GIB, 4 * GIB, 4096, "needs 9 GiB", ModelLoadError.exit_code)
    assert error.hint == ("try a smaller --ctx-size; or try fewer --gpu-layers than 20, or leave it out to let "
                          "localgen choose")


# ----------------------------------------------------------------------------- quants on the loopback Hub


def _serve(hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    """Serve the four variants (and a README) as one repo."""
    files: dict[str, bytes | Path] = {p.name: p for p in quant_files.values()}
    files["README.md"] = b"# fit\n"
    hubenv.server.add_repo(REPO, files)


def _too_small_for(quant_files: dict[str, Path], quant: str) -> int:
    """A RAM size in which quant does not fit even at the smallest automatic context."""
    need = estimate_memory(read_shape(quant_files[quant]), n_ctx=fit.MIN_AUTO_CONTEXT).ram_bytes
    return int(need * 0.95 / hardware.RAM_USABLE_FRACTION)


def _limit_between(quant_files: dict[str, Path], low: str, high: str, n_ctx: int = 8192) -> int:
    """A RAM size that fits quant `low` at n_ctx (by default its full context) but not `high`."""
    need = {q: estimate_memory(read_shape(quant_files[q]), n_ctx=n_ctx).ram_bytes for q in (low, high)}
    return int((need[low] + need[high]) / 2 / hardware.RAM_USABLE_FRACTION)


def test_the_best_quant_that_fits_is_chosen_from_range_read_headers(hubenv: HubEnv,
                                                                    quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    options = hub_options(REPO, machine(), FitRequest())
    assert [o.label for o in options] == ["Q4_0", "Q5_0", "Q8_0", "F16"]  # smallest first
    assert all(o.plan is not None for o in options)
    assert options[choose_option(options, FitRequest()) or 0].label == "Q8_0"  # F16 is above the ceiling
    tight = machine(_limit_between(quant_files, "Q5_0", "Q8_0"))
    tight_options = hub_options(REPO, tight, FitRequest(ctx_size=8192))
    assert tight_options[choose_option(tight_options, FitRequest(ctx_size=8192)) or 0].label == "Q5_0"
    reads = [r for r in hubenv.server.answered() if "/resolve/" in r.path]
    assert reads and all(r.method == "GET" and r.range == f"bytes=0-{quant_choice.HEADER_READ_BYTES - 1}"
                         and r.status == 206 for r in reads)
    for path in quant_files.values():  # read once: the second choice takes the header kept from the first
        count = sum(1 for r in reads if r.path.endswith(path.name))
        assert count == 1 and hubenv.server.bytes_sent[(REPO, path.name)] <= quant_choice.HEADER_READ_BYTES
    assert hubenv.blobs(REPO) == []  # nothing downloaded


def test_a_repo_typed_in_another_case_reads_headers_as_its_downloaded_copy_is_spelled(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    """The Hub ignores a repo id's case and the cache keeps the first spelling: fit ORG/REPO in another case lists and
    reads the headers under that spelling, as a download would, not under the one typed."""
    from localgen import hub

    _serve(hubenv, quant_files)
    hub.download_model(REPO, quant="Q4_0", filename=None, quiet=True)
    hubenv.server.requests.clear()
    options = hub_options(REPO.upper(), machine(), FitRequest())
    assert [o.label for o in options] == ["Q4_0", "Q5_0", "Q8_0", "F16"] and all(o.plan for o in options)
    ref, _ = choose_download(REPO.swapcase(), hw=machine(), request=FitRequest())
    assert ref == f"{REPO}:Q8_0", "named as the cache spells it"
    paths = [r.path for r in hubenv.server.answered()]
    assert paths and all(p.startswith((f"/api/models/{REPO}", f"/{REPO}/resolve/")) for p in paths), paths


def test_a_repo_whose_only_model_lacks_shards_on_the_hub_says_so(hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    hubenv.server.add_repo("org/half-GGUF", {"half-Q8_0-00001-of-00002.gguf": quant_files["Q8_0"]})
    with pytest.raises(LocalgenError, match=r"incomplete on the Hub \(missing shards 2 of 2\)"):
        hub_options("org/half-GGUF", machine(), FitRequest())  # not an empty table


def test_a_saved_listing_with_no_usable_model_does_not_stop_the_next_pull(hubenv: HubEnv,
                                                                         quant_files: dict[str, Path]) -> None:
    half = {"half-Q8_0-00001-of-00002.gguf": quant_files["Q8_0"]}
    hubenv.server.add_repo("org/half-GGUF", half)
    env = child_env(hubenv.server, hubenv.tmp_path)

    def localgen(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return run_cli({**env, **extra}, *args)

    refused = localgen("pull", "org/half-GGUF:Q8_0")  # the listing is saved, then the model refused
    assert refused.returncode == 1 and "incomplete on the Hub (missing shards 2 of 2)" in refused.stderr
    hubenv.server.add_repo("org/half-GGUF", {**half, "half-Q4_0.gguf": quant_files["Q4_0"]})  # mended on the Hub
    mended = localgen("pull", "org/half-GGUF")
    assert mended.returncode == 0 and mended.stdout.strip().endswith("half-Q4_0.gguf"), mended.stderr
    offline = localgen("pull", "ORG/HALF-gguf", LOCALGEN_OFFLINE="1")  # the cached one, in any case, offline too
    assert offline.returncode == 0 and offline.stdout == mended.stdout, offline.stderr


def test_a_header_longer_than_the_first_read_is_read_again_larger(hubenv: HubEnv, quant_files: dict[str, Path],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(hubenv, quant_files)
    monkeypatch.setattr(quant_choice, "HEADER_READ_BYTES", 1024)
    info = remote_header(REPO, "fit-Q8_0.gguf", quant_files["Q8_0"].stat().st_size)
    assert info.block_count == 4 and info.architecture == "llama"
    reads = sorted((r.range for r in hubenv.server.answered() if r.range), key=lambda r: int(r.rpartition("-")[2]))
    assert reads[:2] == ["bytes=0-1023", "bytes=0-4095"], "logged as each ends: the first may end after the second"


def test_choose_download_picks_or_refuses_before_downloading(hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    tight = machine(_limit_between(quant_files, "Q4_0", "Q5_0"))
    reference, notes = choose_download(REPO, hw=tight, request=FitRequest())
    assert reference == f"{REPO}:Q4_0" and "chose" in notes[0]
    with pytest.raises(InsufficientMemoryError, match=f"no quant of {REPO} fits") as smallest:
        choose_download(REPO, hw=machine(20 * MIB), request=FitRequest())
    assert "a smaller model" in (smallest.value.hint or "") and "quant" not in (smallest.value.hint or "")
    hubenv.server.add_repo("org/plain-GGUF", {"model.gguf": quant_files["Q4_0"]})  # no quant in its name
    with pytest.raises(InsufficientMemoryError, match=r"even the smallest, org/plain-GGUF/model\.gguf, needs"):
        choose_download("org/plain-GGUF", hw=machine(20 * MIB), request=FitRequest())
    with pytest.raises(InsufficientMemoryError, match="needs about"):
        choose_download(f"{REPO}:F16", hw=machine(_too_small_for(quant_files, "F16")), request=FitRequest())
    short = machine(_limit_between(quant_files, "Q4_0", "Q4_0", n_ctx=4096))  # Q4_0 fits at 4,096, not 8,192
    asked_for = r"smallest, \S+:Q4_0, needs about [\d.]+ MiB of RAM at a context of 8,192 tokens"
    with pytest.raises(InsufficientMemoryError, match=asked_for) as asked:  # not at the 2,048 it fits at
        choose_download(REPO, hw=short, request=FitRequest(ctx_size=8192))
    most = re.search(r"--ctx-size (\d+), the most that fits", asked.value.hint or "")
    assert most and fit.MIN_AUTO_CONTEXT < int(most[1]) < 8192, asked.value.hint
    assert hubenv.blobs(REPO) == []


def test_choose_download_lets_a_quant_that_fits_only_at_a_smaller_context_through_only_for_a_download(
        hubenv: HubEnv, quant_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(hubenv, quant_files)
    shape = read_shape(quant_files["Q8_0"])
    need = {n: estimate_memory(shape, n_ctx=n).ram_bytes for n in (1024, fit.MIN_AUTO_CONTEXT)}
    between = machine(int(sum(need.values()) / 2 / hardware.RAM_USABLE_FRACTION))
    monkeypatch.setattr(hub_errors, "_running_command", "pull")  # what the CLI records has no say in the library
    with pytest.raises(InsufficientMemoryError) as refused:
        choose_download(f"{REPO}:Q8_0", hw=between, request=FitRequest())  # to run it: refused at 2,048 tokens
    assert "a smaller context (--ctx-size " in (refused.value.hint or ""), refused.value.hint
    reference, notes = choose_download(f"{REPO}:Q8_0", hw=between, request=FitRequest(), download_only=True)
    assert reference == f"{REPO}:Q8_0" and len(notes) == 1, notes
    assert re.fullmatch(re.escape(f"{REPO}:Q8_0") + r" fits here only at a context of [\d,]+ tokens or less \(it needs "
                        r"[\d.]+ MiB at 2,048\): run it with --ctx-size \d+", notes[0]), notes
    assert hubenv.blobs(REPO) == []


def test_counts_in_choices_and_reasons_agree_with_their_nouns(hubenv: HubEnv, quant_files: dict[str, Path],
                                                             bundled_shape: ModelShape) -> None:
    _serve(hubenv, quant_files)
    hubenv.server.add_repo("org/one-GGUF", {"one-Q4_0.gguf": quant_files["Q4_0"]})
    assert "the best that fits of 4 quants:" in choose_download(REPO, hw=machine(), request=FitRequest())[1][0]
    only = choose_download("org/one-GGUF", hw=machine(), request=FitRequest())[1][0]
    assert "the only quant, and it fits:" in only and "1 quants" not in only
    one_layer = estimate_memory(bundled_shape, n_ctx=8192, n_gpu_layers=1).vram_bytes
    reserve = hardware.vram_reserve_bytes(8 * GIB)
    gpu = GpuInfo(name="Test GPU", total_bytes=8 * GIB, free_bytes=reserve + one_layer)
    plan = fit.plan_fit(bundled_shape, machine(offload=True, gpus=(gpu,)))
    assert plan.n_gpu_layers == 1 and "1 of 30 layers fits in" in plan.reasons[0]
    assert units.counted(1, "layer") == "1 layer" and units.counted(1024, "layer") == "1,024 layers"


def test_a_model_switch_counts_the_loaded_models_memory_as_free_when_choosing_a_quant(
        hubenv: HubEnv, quant_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(hubenv, quant_files)
    options = ModelOptions(model=str(bundled_model_file()), ctx_size=1024, threads=2)
    chat = ChatSession(load_model(options), options, Conversation.new(system=None, model=options.model),
                       SamplingParams(temperature=0.0), GenerationLimits(max_tokens=2), autosave=False)
    try:
        assert chat.loaded.plan is not None
        held = chat.loaded.plan.estimate.private_ram_bytes  # its mapped weights count as available already
        roomy = _limit_between(quant_files, "Q5_0", "Q8_0", n_ctx=1024)
        while_loaded = Hardware(memory=MemoryInfo(total_bytes=roomy, available_bytes=max(roomy - held, 0),
                                                        source="test"),
                                cores=2, gpu_offload=False)
        probes = iter([while_loaded, machine(roomy)])  # before and after the old model is freed
        monkeypatch.setattr(runner, "probe_hardware", lambda: next(probes))
        chat.switch_model(REPO)
        assert chat.loaded.resolved.path.name == "fit-Q5_0.gguf"  # not refused, nor a smaller quant
    finally:
        chat.loaded.close()


def test_after_freeing_adds_memory_back_up_to_the_totals() -> None:
    gpus = (GpuInfo(name="a", total_bytes=10 * GIB, free_bytes=9 * GIB), GpuInfo(name="b", total_bytes=8 * GIB,
                                                                                   free_bytes=2 * GIB))
    hw = replace(machine(4 * GIB, gpus=gpus, offload=True), memory=MemoryInfo(4 * GIB, 1 * GIB))
    freed = hw.after_freeing(5 * GIB, 4 * GIB)
    assert freed.memory.available_bytes == 4 * GIB  # capped at the total
    assert [g.free_bytes for g in freed.gpus] == [10 * GIB, 5 * GIB]  # each GPU up to its total, in order
    assert hw.after_freeing(0, 0) == hw


# ----------------------------------------------------------------------------- the CLI


def test_pull_without_a_quant_downloads_the_one_run_would_choose(hubenv: HubEnv,
                                                                 quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    env = {**child_env(hubenv.server, hubenv.tmp_path),
           config.MEMORY_LIMIT_ENV: str(_limit_between(quant_files, "Q4_0", "Q5_0"))}

    def pull(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(env, "pull", *args)

    first = pull(REPO)
    assert first.returncode == 0, first.stderr
    assert f"chose {REPO}:Q4_0" in first.stderr and first.stdout.strip().endswith("fit-Q4_0.gguf")
    assert first.stderr.index("chose") < first.stderr.index("downloaded"), "the choice is said before the download"
    for quant, path in quant_files.items():  # only the chosen quant's body was sent; the others gave headers
        sent = hubenv.server.bytes_sent.get((REPO, path.name), 0)
        assert sent >= path.stat().st_size if quant == "Q4_0" else sent <= 2 * quant_choice.HEADER_READ_BYTES
    hubenv.server.requests.clear()
    again = pull(REPO)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert hubenv.server.count("GET", "/resolve/") == 0  # the cached copy that fits, no new download


def test_run_under_a_memory_limit_lowers_the_context_or_refuses() -> None:
    shape = read_shape(bundled_model_file())
    between = (estimate_memory(shape, n_ctx=8192).ram_bytes + estimate_memory(shape, n_ctx=2048).ram_bytes) / 2
    limit = str(int(between / hardware.RAM_USABLE_FRACTION))
    ok = run_localgen("run", "Say hi.", "-n", "3", "--temperature", "0", env={config.MEMORY_LIMIT_ENV: limit})
    assert ok.returncode == 0, ok.err
    assert "context lowered from 8,192" in ok.err and ok.out.strip()
    refused = run_localgen("run", "Say hi.", "-n", "3", env={config.MEMORY_LIMIT_ENV: "100MiB"})
    assert refused.returncode == 1 and refused.out == ""
    assert "needs about" in refused.err and "usable RAM" in refused.err
    assert "fewer bits per weight than Q4_1" in refused.err


def test_a_prompt_that_fits_is_not_refused_for_its_generous_estimate(tmp_path: Path) -> None:
    """The planner aims for bytes / 3 tokens per prompt, but only refuses below what the prompt could need."""
    doc = tmp_path / "records.txt"
    doc.write_text("Ruled page\n" + ("-" * 790 + "\n") * 10)  # many bytes, few tokens (about 150)
    assert fit.prompt_context(doc.stat().st_size + 2, 3) > 2304  # the most the budget below holds
    shape = read_shape(bundled_model_file())
    between = (estimate_memory(shape, n_ctx=2304).ram_bytes + estimate_memory(shape, n_ctx=2560).ram_bytes) / 2
    env = {config.MEMORY_LIMIT_ENV: str(int(between / hardware.RAM_USABLE_FRACTION))}
    result = run_localgen("run", "-f", str(doc), "hi", "-n", "3", "--temperature", "0", "--json", env=env)
    assert result.returncode == 0, result.err
    assert json.loads(result.out)["usage"]["prompt_tokens"] < 2304


def test_a_prompt_of_digits_gets_a_context_that_holds_its_tokens_where_the_model_and_memory_can(home: Path) -> None:
    """A token a digit outgrows the guess of 3 bytes a token: once the model counts them, a context that holds them
    is loaded (said), where the model was trained for it and memory allows; else the prompt is refused as before."""
    user_registry(home, "[models.smollm2-135m]\ncontext = 2048\n")
    numbers = home / "numbers.txt"
    numbers.write_text("".join(f"{n * 7919 % 10000:04}\n" for n in range(1500)))  # about 7,400 tokens
    asked = ("run", "-f", str(numbers), "Add them up.", "-n", "4", "--print-prompt", "--json")
    held = run_localgen(*asked)
    assert held.returncode == 0, held.err
    tokens = json.loads(held.out)["prompt_tokens"]
    wider = re.fullmatch(r"localgen: the input takes [\d,]+ tokens, .* loading the model again with a context of "
                         r"([\d,]+)\n", held.err)
    assert wider is not None and 7000 < tokens < int(wider[1].replace(",", "")) <= 8192, held.err
    shape = read_shape(bundled_model_file())
    between = (estimate_memory(shape, n_ctx=2560).ram_bytes + estimate_memory(shape, n_ctx=4096).ram_bytes) / 2
    short = run_localgen(*asked, env={config.MEMORY_LIMIT_ENV: str(int(between / hardware.RAM_USABLE_FRACTION))})
    assert short.returncode == 1 and "again" not in short.err, short.err
    assert f"the prompt is {tokens:,} tokens with -f {numbers} and the prompt, but the context holds 2,560" in short.err
    numbers.write_text("".join(f"{n * 7919 % 10000:04}\n" for n in range(1800)))  # past the model's 8,192
    beyond = run_localgen(*asked)
    assert beyond.returncode == 1 and "again" not in beyond.err, beyond.err
    assert re.search(r"the prompt is too long for the model's maximum of 8,192 tokens: it takes [\d,]+ tokens with "
                     r"-f .* \(hint: shorten the input, or split it and ask about each part\)", beyond.err), beyond.err


def test_a_prompt_no_context_of_the_model_holds_is_not_counted_whole(bundled_model: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed conversation of 40 MB (8,000 exchanges) took 28 s to reach the prompt, 26 of them counting its
    tokens only to find that no context of the model (8,192) holds them."""
    from localgen.prompt_room import wider_options

    options = ModelOptions(model=str(bundled_model), threads=1)
    loaded = load_model(options)
    try:
        counted: list[str] = []
        tokenize = loaded.engine.tokenize
        monkeypatch.setattr(loaded.engine, "tokenize", lambda text, **kw: counted.append(text) or tokenize(text, **kw))
        assert wider_options(loaded, options, ["whales " * 300_000], None) is None
        assert counted == [], "2.1 MB takes more than 8,192 tokens by its size alone"
        digits = [" ".join("1234567890") * 4] * 2000  # 76 tokens each, 152 KB: not ruled out by its size
        assert wider_options(loaded, options, digits, None) is None
        assert 100 < len(counted) < 120, "counting stops past 8,192 tokens"
    finally:
        loaded.close()


def localgen_main(*args: str) -> int:
    """Run the CLI in this process; its exit code."""
    from localgen.cli import main

    with pytest.raises(SystemExit) as exited:
        main(list(args))
    return int(exited.value.code or 0)


def test_fit_s_row_adds_up_to_its_total(capsys: pytest.CaptureFixture[str]) -> None:
    """fit showed TOTAL 546.7 MiB beside WEIGHTS 92.1 MiB and KV 185.6 MiB: the compute buffers and overhead, the
    other 269 MiB, had no column. BUFFERS (buffers_bytes in --json) shows them, and the three add up to the total."""
    assert localgen_main("fit", str(bundled_model_file()), "--json") == 0
    (option,) = json.loads(capsys.readouterr().out)["options"]
    parts = option["weights_bytes"] + option["kv_bytes"] + option["buffers_bytes"]
    assert parts == option["total_bytes"] and option["buffers_bytes"] > 100 * MIB, option
    assert localgen_main("fit", str(bundled_model_file())) == 0
    header, row = (line.split("\t") for line in capsys.readouterr().out.splitlines())
    cells = dict(zip(header, row, strict=True))
    weights, kv, buffers, total = (float(cells[name].removesuffix(" MiB")) for name in
                                   ("WEIGHTS", "KV", "BUFFERS", "TOTAL"))
    assert abs(weights + kv + buffers - total) <= 0.15, cells
    assert cells["PLAN"].startswith("context 8,192,"), "the plan names the context the sizes are for"


def test_fit_command_for_a_local_file(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert localgen_main("fit", str(bundled_model_file()), "--ctx", "4096", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    (option,) = report["options"]
    assert option["chosen"] and option["fits"] == "RAM" and option["plan"]["ctx_size"] == 4096
    assert option["kv_bytes"] == 90 * MIB * 4352 / 4096 and report["chosen"] == "Q4_1"  # cells allocated
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, "100MiB")
    assert localgen_main("fit", str(bundled_model_file())) == 0
    captured = capsys.readouterr()
    header, row = captured.out.splitlines()
    assert header.split("\t") == ["QUANT", "FILE", "WEIGHTS", "KV", "BUFFERS", "TOTAL", "FITS", "PLAN"]
    assert row.split("\t")[0] == "Q4_1" and row.split("\t")[6] == "no", "a pipe gets the bare quant"
    assert re.search(r"needs 2\d\d\.\d MiB RAM at 2,048 ctx$", row)  # the scores without flash attention
    assert "100.0 MiB available (LOCALGEN_MEMORY_LIMIT)" in captured.err
    assert "would use" not in captured.err, "nothing fits: no row is marked, and no legend"
    monkeypatch.delenv(config.MEMORY_LIMIT_ENV)
    assert localgen_main("fit", str(bundled_model_file()), "--ctx", "4096") == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[1].startswith("Q4_1\t"), "no marker glued to the quant on a pipe"
    assert "localgen: Q4_1 is the quant localgen would use here" in captured.err
    assert localgen_main("fit", "--offline") == 0
    assert capsys.readouterr().err.startswith("smollm2-135m: RAM "), "the default model is named"
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, "100MiB")
    assert localgen_main("fit", str(bundled_model_file()), "--gpu-layers", "5") == 0  # a CPU-only build
    assert "cannot offload to a GPU: --gpu-layers ignored" in capsys.readouterr().err


def test_fit_shows_kv_and_total_at_the_context_its_plan_uses() -> None:
    """Where the plan lowers the context, the KV and TOTAL cells are that context's, so FITS never contradicts
    TOTAL; a row that does not fit shows the figures at the context its refusal names."""
    model = str(bundled_model_file())
    shape = read_shape(bundled_model_file())
    between = (estimate_memory(shape, n_ctx=8192).ram_bytes + estimate_memory(shape, n_ctx=2048).ram_bytes) / 2
    env = {config.MEMORY_LIMIT_ENV: str(int(between / hardware.RAM_USABLE_FRACTION))}
    table = run_localgen("fit", model, env=env)
    assert table.returncode == 0, table.err
    usable = re.search(r"RAM (\d+\.\d \w+) usable", table.err)
    assert usable is not None, table.err
    _, _, _, kv, _, total, fits, plan = table.out.splitlines()[1].split("\t")
    n_ctx = re.match(r"context ([\d,]+),", plan)
    assert n_ctx is not None and n_ctx[1] != "8,192", plan
    assert parse_size(total, name="TOTAL") <= parse_size(usable[1], name="usable")
    report = json.loads(run_localgen("fit", model, "--json", env=env).out)
    (option,) = report["options"]
    assert fits == "RAM" and int(n_ctx[1].replace(",", "")) == option["plan"]["ctx_size"], plan
    assert kv == binary_size(option["plan"]["kv_bytes"]), (kv, plan)
    assert option["ctx_size"] == option["plan"]["ctx_size"] < 8192
    assert option["kv_bytes"] == option["plan"]["kv_bytes"] and option["ram_bytes"] == option["plan"]["ram_bytes"]
    assert option["total_bytes"] <= option["plan"]["ram_budget_bytes"]
    refused = run_localgen("fit", model, "--json", env={config.MEMORY_LIMIT_ENV: "100MiB"})
    (option,) = json.loads(refused.out)["options"]
    assert option["problem"].endswith(f"at {option['ctx_size']:,} ctx") and f"{option['ctx_size']:,}" == "2,048"
    assert option["problem"].startswith(f"needs {binary_size(option['ram_bytes'])} RAM")


def test_a_run_of_a_repo_reads_each_downloaded_quant_s_header_once(quant_files: dict[str, Path], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import file_versions, gguf_reader, hub_cache
    from localgen.hub_types import HubFile

    monkeypatch.setattr(file_versions, "SETTLED_S", 0)  # the files copied just now are kept at once
    copies = {quant: tmp_path / path.name for quant, path in quant_files.items()}
    for quant, copy in copies.items():
        copy.write_bytes(quant_files[quant].read_bytes())
    listing = [HubFile(repo=REPO, filename=copy.name, size=copy.stat().st_size, sha256=None, quant=quant,
                       shard_index=None, shard_count=None) for quant, copy in copies.items()]
    monkeypatch.setattr(hub_cache, "cached_listing", lambda repo: listing)
    monkeypatch.setattr(hub_cache, "cached_model", lambda repo, *, quant, filename: [copies[quant]])
    hw = machine(int(_limit_between(quant_files, "Q4_0", "Q5_0")))
    reads: list[Path] = []

    def counted_read(path: Path) -> object:
        reads.append(path)
        return read_gguf(path)

    monkeypatch.setattr(gguf_reader, "read_gguf", counted_read)
    chosen = [choose_cached(REPO, hw=hw, request=FitRequest()) for _ in range(2)]  # a run's preflight, then its resolve
    assert chosen == [f"{REPO}:Q4_0"] * 2
    assert sorted(reads) == sorted(copies.values())
    copies["Q8_0"].write_bytes(copies["Q8_0"].read_bytes() + b"\0")  # a file changed on disk is read again
    choose_cached(REPO, hw=hw, request=FitRequest())
    assert reads[len(copies):] == [copies["Q8_0"]]


def test_fit_and_run_against_the_hub(hubenv: HubEnv, quant_files: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(hubenv, quant_files)
    env = child_env(hubenv.server, hubenv.tmp_path)
    assert localgen_main("fit", REPO, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert [o["label"] for o in report["options"]] == ["Q4_0", "Q5_0", "Q8_0", "F16"]
    assert report["chosen"] == "Q8_0" and [o["chosen"] for o in report["options"]] == [False, False, True, False]
    assert hubenv.blobs(REPO) == []
    limit = str(_limit_between(quant_files, "Q4_0", "Q5_0"))
    run = run_localgen_process([sys.executable, "-m", "localgen", "run", "-m", REPO, "hi", "-n", "2"],
                               env={**env, config.MEMORY_LIMIT_ENV: limit}, capture_output=True, text=True, timeout=120,
                               cwd=REPO_ROOT, stdin=subprocess.DEVNULL, check=False)
    assert run.returncode == 0, run.stderr
    assert f"chose {REPO}:Q4_0" in run.stderr and run.stderr.index("chose") < run.stderr.index("downloaded")
    assert hubenv.server.bytes_sent[(REPO, "fit-Q4_0.gguf")] >= quant_files["Q4_0"].stat().st_size
    assert hubenv.server.bytes_sent[(REPO, "fit-F16.gguf")] <= 2 * quant_choice.HEADER_READ_BYTES  # fit, then run
    hubenv.server.requests.clear()
    assert choose_cached(REPO, hw=machine(int(limit)), request=FitRequest()) == f"{REPO}:Q4_0"
    assert hubenv.server.requests == []  # the downloaded quant is found again without the network
    monkeypatch.setenv(config.MEMORY_LIMIT_ENV, str(_too_small_for(quant_files, "F16")))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert localgen_main("run", "-m", f"{REPO}:F16", "hi") == 1
    assert "needs about" in capsys.readouterr().err
    assert not any("fit-F16" in p.name for p in hubenv.snapshot_files(REPO))


def _refusal(err: str) -> tuple[str, str]:
    """The message and hint of the error line a refused command printed."""
    match = re.search(r"localgen: error: (.*) \(hint: (.*)\)$", err.strip().splitlines()[-1])
    assert match is not None, err
    return match[1], match[2]


def test_fit_marks_no_quant_that_run_would_refuse_and_says_what_would_help(hubenv: HubEnv,
                                                                           quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    tiny = {config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "Q4_0"))}
    for reference in (f"{REPO}:Q8_0", REPO):  # named as a registry entry's default quant would be, and without
        run = run_localgen("run", "-m", reference, "hi", "-n", "1", env=tiny)
        assert run.returncode == 1, run.err
        message, hint = _refusal(run.err)
        hint = re.sub(r"; \S+ fits with --ctx-size \d+ or less$", "", hint)  # the one that fits: fit's table says it
        table = run_localgen("fit", reference, env=tiny)
        assert table.returncode == 0, table.err
        assert "would use" not in table.err, "no quant is marked as chosen"
        assert f"{message}; {hint}" in table.err, "fit says what run says, and what would help"
        assert "nothing fits here" in table.err or "no quant of" in table.err
        report = json.loads(run_localgen("fit", reference, "--json", env=tiny).out)
        assert report["chosen"] is None and not any(o["chosen"] for o in report["options"])
        assert any(message in note for note in report["notes"])
    at_4096 = estimate_memory(read_shape(quant_files["Q4_0"]), n_ctx=4096).ram_bytes / hardware.RAM_USABLE_FRACTION
    asked = run_localgen("fit", f"{REPO}:Q4_0", "--ctx", "8192", env={config.MEMORY_LIMIT_ENV: str(int(at_4096))})
    assert "nothing fits here" in asked.err and "--kv-type q8_0" in asked.err
    offered = int(re.search(r"--ctx-size (\d+), the most that fits", asked.err)[1])
    assert 3840 <= offered <= 4096, "the largest context that fits, a multiple of 256"
    roomy = {config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "F16"))}
    table = run_localgen("fit", f"{REPO}:F16", env=roomy)  # other quants fit; the one named does not
    rows = {row.split("\t")[0]: row.split("\t")[6] for row in table.out.splitlines()[1:]}
    assert rows["F16"] == "no" and rows["Q4_0"] == "RAM" and "would use" not in table.err
    assert f"{REPO}:F16 needs about" in table.err and "nothing fits here" not in table.err
    assert "fewer bits per weight than F16" in table.err
    assert hubenv.blobs(REPO) == []


def test_fit_of_a_model_not_downloaded_names_the_hub_problem_not_the_missing_copy() -> None:
    result = run_localgen("fit", "qwen2.5-1.5b", env={"HF_ENDPOINT": "http://127.0.0.1:9"})  # nothing listens
    assert result.returncode == 1, result.err
    assert "cannot reach the Hugging Face Hub (http://127.0.0.1:9)" in result.err.splitlines()[-1]
    assert "is not downloaded" not in result.err.splitlines()[-1]


def test_a_repo_of_projectors_only_is_refused_by_fit_and_pull_alike(hubenv: HubEnv,
                                                                   quant_files: dict[str, Path]) -> None:
    hubenv.server.add_repo("org/Proj-GGUF", {"mmproj-model-f16.gguf": quant_files["F16"]})
    message = ("localgen: error: org/Proj-GGUF holds no language model, only projector or imatrix files "
               "(mmproj-model-f16.gguf) (hint: these go with a model in another repository: pass that one)")
    for command in ("fit", "pull"):
        result = run_localgen(command, "org/Proj-GGUF", env=hubenv.env)
        assert result.returncode == 1 and result.out == "", result.err
        assert result.err.splitlines() == [message], result.err
    assert hubenv.server.count("GET", "resolve") == 0  # nothing downloaded


@pytest.mark.parametrize(("line", "refusal"), [
    ('sha256 = "' + "ab" * 32 + '"', "does not match the sha256 of [models.pinned] in "),
    ("size = 5", "does not match the size of [models.pinned] in ")])
def test_fit_marks_no_file_that_its_entry_pins_otherwise_as_run_refuses_it(hubenv: HubEnv, quant_files: dict[str, Path],
                                                                           line: str, refusal: str) -> None:
    _serve(hubenv, quant_files)
    registry = hubenv.localgen_home / "config" / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text(f'[models.pinned]\nrepo = "{REPO}"\nquant = "Q5_0"\n{line}\n')
    run = run_localgen("run", "-m", "pinned", "hi", "-n", "1", env=hubenv.env)
    assert run.returncode == 1 and refusal in run.err, run.err
    table = run_localgen("fit", "pinned", env=hubenv.env)
    assert table.returncode == 0, table.err
    rows = {row.split("\t")[0]: row.split("\t")[6:] for row in table.out.splitlines()[1:]}
    assert rows["Q8_0"][0] == "RAM" and rows["Q5_0"][0] == "no", rows
    assert re.fullmatch(r"not the file \[models\.pinned\] pins \(sizes at context [\d,]+\)", rows["Q5_0"][1]), rows
    assert "would use" not in table.err and f"{refusal}{registry}" in table.err
    report = json.loads(run_localgen("fit", "pinned", "--json", env=hubenv.env).out)
    assert report["chosen"] is None and any(refusal in note for note in report["notes"])
    assert json.loads(run_localgen("fit", "pinned:Q8_0", "--json", env=hubenv.env).out)["chosen"] == "Q8_0"
    assert hubenv.blobs(REPO) == []


def test_the_hint_names_only_smaller_quants_the_repo_has(hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    tiny = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "Q4_0"))}
    for quant, smaller in (("Q8_0", "a quant with fewer bits per weight than Q8_0 (Q5_0 or Q4_0)"),
                           ("Q4_0", "a smaller model")):
        run = run_localgen("run", "-m", f"{REPO}:{quant}", "hi", "-n", "1", env=tiny)
        assert run.returncode == 1, run.err
        assert _refusal(run.err)[1].startswith(f"try {smaller}, or "), run.err
        table = run_localgen("fit", f"{REPO}:{quant}", env=tiny)
        assert f"; try {smaller}, or " in table.err, table.err
    assert "fewer bits per weight than Q4_0" not in table.err
    assert hubenv.server.count("GET", "/api/models/") == 4, "run lists the repo once, as fit does"


def test_a_downloaded_quant_that_does_not_fit_names_the_smaller_quants_of_its_repo(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    assert run_localgen("pull", f"{REPO}:Q8_0", env=hubenv.env).returncode == 0
    hubenv.server.requests.clear()
    tiny = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "Q4_0"))}
    smaller = "try a quant with fewer bits per weight than Q8_0 (Q5_0 or Q4_0), or "
    for offline in (("--offline",), ()):  # the repo as localgen last listed it: no request (online, one follows to
        run = run_localgen("run", *offline, "-m", f"{REPO}:Q8_0", "hi", "-n", "1", env=tiny)  # name the one that fits)
        assert run.returncode == 1 and _refusal(run.err)[1].startswith(smaller), run.err
        assert hubenv.server.requests == [] if offline else hubenv.server.count("GET", "/api/models/") == 1
        hubenv.server.requests.clear()
    table = run_localgen("fit", "--offline", f"{REPO}:Q8_0", env=tiny)
    assert table.returncode == 0 and f"; {smaller}" in table.err, table.err
    assert hubenv.server.requests == []


def test_fit_offline_of_a_repo_shows_each_downloaded_quant_and_marks_the_one_run_uses(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    for quant in ("Q8_0", "F16"):
        assert run_localgen("pull", f"{REPO}:{quant}", env=hubenv.env).returncode == 0
    hubenv.server.requests.clear()
    table = run_localgen("fit", "--offline", REPO, env=hubenv.env)
    assert table.returncode == 0, table.err
    assert [row.split("\t")[0] for row in table.out.splitlines()[1:]] == ["Q8_0", "F16"], table.out
    assert "localgen: Q8_0 is the quant localgen would use here" in table.err
    report = json.loads(run_localgen("fit", "--offline", REPO, "--json", env=hubenv.env).out)
    assert [o["label"] for o in report["options"]] == ["Q8_0", "F16"] and report["chosen"] == "Q8_0"
    named = run_localgen("fit", "--offline", f"{REPO}:F16", env=hubenv.env)
    assert [row.split("\t")[0] for row in named.out.splitlines()[1:]] == ["F16"], "a quant named: that one alone"
    f16 = next(p for p in hubenv.snapshot_files(REPO) if p.name.endswith("F16.gguf")).resolve()
    before = f16.stat()
    with f16.open("r+b") as damaged:  # another quant's header, damaged unseen: the one a run uses keeps its row
        damaged.write(b"NOPE")
    os.utime(f16, ns=(before.st_atime_ns, before.st_mtime_ns))
    table = run_localgen("fit", "--offline", REPO, env=hubenv.env)
    assert table.returncode == 0 and [row.split("\t")[0] for row in table.out.splitlines()[1:]] == ["Q8_0"], table.err
    assert hubenv.server.requests == []


def _run_file(env: dict[str, str], *args: str) -> str:
    """The file name of the model a run of the repo named without a quant answered with."""
    run = run_localgen("run", *args, "-m", REPO, "hi", "-n", "1", "--json", env=env)
    assert run.returncode == 0, run.err
    return Path(json.loads(run.out)["model_path"]).name


def _fit_chosen(env: dict[str, str], *args: str) -> str:
    """The quant fit marks for the repo named without a quant, and its notes."""
    table = run_localgen("fit", *args, REPO, "--json", env=env)
    assert table.returncode == 0, table.err
    report = json.loads(table.out)
    return f"{report['chosen']} {' '.join(report['notes'])}"


def test_run_of_a_repo_uses_the_best_downloaded_quant_that_fits_as_fit_marks_it(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    assert run_localgen("pull", f"{REPO}:Q4_0", env=hubenv.env).returncode == 0  # the repo's default quant
    better = f"{REPO}:Q8_0 fits better here (`localgen pull {REPO}:Q8_0` for runs to use it)"
    assert _fit_chosen(hubenv.env) == f"Q4_0 a run uses the downloaded Q4_0; {better}"
    assert _run_file(hubenv.env) == "fit-Q4_0.gguf"
    assert run_localgen("pull", f"{REPO}:Q8_0", env=hubenv.env).returncode == 0  # the best that fits, pulled too
    for offline in ((), ("--offline",)):
        assert _fit_chosen(hubenv.env, *offline) == "Q8_0 "
        assert _run_file(hubenv.env, *offline) == "fit-Q8_0.gguf", "not the default quant, as fit marks"
    tight = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_limit_between(quant_files, "Q4_0", "Q5_0"))}
    for offline in ((), ("--offline",)):  # Q8_0 fits only at a smaller context: the full one first
        assert _fit_chosen(tight, *offline) == "Q4_0 "
        assert _run_file(tight, *offline) == "fit-Q4_0.gguf"


def test_a_run_of_a_repo_whose_downloaded_quant_does_not_fit_downloads_nothing_and_pull_downloads_the_one_that_fits(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    """The repo's default quant (by name) is downloaded and does not fit (usable RAM is what is free now, so a busy
    machine may do this to a model that ran an hour ago): a run of ORG/REPO downloads nothing in its place, where it
    downloaded the other quant unasked (GiBs, from a script too); it is refused naming the quant that fits, read from
    the Hub's headers (offline, or the Hub unreachable, the smaller quants only), and `pull ORG/REPO` downloads it."""
    repo = "org/named-GGUF"  # its default quant (by name) is the larger file
    files: dict[str, bytes | Path] = {"m-Q4_K_M.gguf": quant_files["Q8_0"], "m-Q3_K_M.gguf": quant_files["Q4_0"]}
    hubenv.server.add_repo(repo, files)
    assert run_localgen("pull", f"{repo}:Q4_K_M", env=hubenv.env).returncode == 0
    tight = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "Q8_0"))}
    smaller = "try a quant with fewer bits per weight than Q8_0 (Q3_K_M)"
    for args, env in ((("--offline",), tight), ((), {**tight, "HF_ENDPOINT": "http://127.0.0.1:9"})):
        run = run_localgen("run", *args, "-m", repo, "hi", "-n", "1", env=env)
        assert run.returncode == 1 and smaller in run.err and "fits here" not in run.err, run.err
    run = run_localgen("run", "-m", repo, "hi", "-n", "1", env=tight)
    assert run.returncode == 1 and smaller in run.err and run.err.endswith(f"; {repo}:Q3_K_M fits here)\n"), run.err
    assert len(run.err.strip().splitlines()) == 1, run.err
    assert len(hubenv.blobs(repo)) == 1 and hubenv.server.count("GET", "m-Q3_K_M.gguf") == sum(
        1 for r in hubenv.server.requests if r.range and r.path.endswith("m-Q3_K_M.gguf")), "its header read only"
    report = json.loads(run_localgen("fit", repo, "--json", env=tight).out)
    assert report["chosen"] is None, "run is refused: no quant is marked"
    assert (f"a run takes the downloaded Q4_K_M, which does not fit here; {repo}:Q3_K_M fits (`localgen pull "
            f"{repo}:Q3_K_M` for runs to use it)") in report["notes"], report
    pulled = run_localgen("pull", repo, env=tight)
    assert pulled.returncode == 0 and pulled.out.strip().endswith("m-Q3_K_M.gguf"), pulled.err
    assert pulled.err.startswith(f"localgen: the downloaded {repo}:Q4_K_M does not fit here; chose {repo}:Q3_K_M "
                                 "(7.1 MiB), the best that fits of 2 quants: context "), pulled.err
    assert pulled.err.index("chose") < pulled.err.index("downloading"), "the choice is said before the download"
    hubenv.server.requests.clear()
    offline = run_localgen("run", "--offline", "-m", repo, "hi", "-n", "1", "--json", env=tight)
    assert Path(json.loads(offline.out)["model_path"]).name == "m-Q3_K_M.gguf", "the downloaded one that fits"
    again = run_localgen("run", "-m", repo, "hi", "-n", "1", env=tight)
    assert again.returncode == 0 and "chose" not in again.err and hubenv.server.requests == [], again.err


def test_pull_downloads_a_named_quant_that_fits_only_at_a_smaller_context_and_says_which(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    shape = read_shape(quant_files["Q8_0"])
    need = {n: estimate_memory(shape, n_ctx=n).ram_bytes for n in (1024, fit.MIN_AUTO_CONTEXT)}
    between = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(int(sum(need.values()) / 2 / hardware.RAM_USABLE_FRACTION))}
    run = run_localgen("run", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", env=between)
    assert run.returncode == 1 and "or a smaller context (--ctx-size " in run.err, "a run at 2,048 tokens: refused"
    assert hubenv.blobs(REPO) == []
    pulled = run_localgen("pull", f"{REPO}:Q8_0", env=between)  # a pull only downloads: --ctx-size is run's
    assert pulled.returncode == 0 and pulled.out.strip().endswith("fit-Q8_0.gguf"), pulled.err
    most = re.search(r"fits here only at a context of ([\d,]+) tokens or less \(it needs [\d.]+ MiB at 2,048\): run "
                     r"it with --ctx-size (\d+)\n", pulled.err)
    assert most is not None and int(most[2]) == int(most[1].replace(",", "")) >= 1024, pulled.err
    ran = run_localgen("run", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", "--ctx-size", most[2], env=between)
    assert ran.returncode == 0, ran.err


def test_pull_downloads_a_named_quant_that_fits_at_no_context_warning_that_runs_refuse_it_and_naming_one_that_fits(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    """The quant named is the user's choice (ollama pull downloads it too): downloaded, with one warning line that
    says a run will refuse it here, what it needs and what there is, and the quant of its repo that fits."""
    _serve(hubenv, quant_files)
    f16_least = estimate_memory(read_shape(quant_files["F16"]), n_ctx=256).ram_bytes
    tiny = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(int(f16_least * 0.9 / hardware.RAM_USABLE_FRACTION))}
    run = run_localgen("run", "-m", f"{REPO}:F16", "hi", "-n", "1", env=tiny)
    assert run.returncode == 1 and "needs about" in run.err and hubenv.blobs(REPO) == [], "a run: refused, no download"
    none = run_localgen("pull", REPO, env={**tiny, config.MEMORY_LIMIT_ENV: "20MiB"})  # no quant named: none fits
    assert none.returncode == 1 and f"no quant of {REPO} fits" in none.err and hubenv.blobs(REPO) == [], none.err
    smallest = run_localgen("pull", f"{REPO}:Q4_0", env={**tiny, config.MEMORY_LIMIT_ENV: "20MiB"})
    assert smallest.returncode == 0 and "a run will refuse org/fit-GGUF:Q4_0 here" in smallest.err and \
        smallest.err.splitlines()[0].endswith("; org/fit-GGUF has no smaller quant"), smallest.err
    pulled = run_localgen("pull", f"{REPO}:F16", env=tiny)
    assert pulled.returncode == 0 and pulled.out.strip().endswith("fit-F16.gguf"), pulled.err
    warning = re.search(r"^localgen: warning: a run will refuse org/fit-GGUF:F16 here: it needs about ([\d.]+) MiB of "
                        r"RAM even at a context of 256 tokens, but this machine has [\d.]+ MiB of usable RAM \("
                        r"LOCALGEN_MEMORY_LIMIT: [\d.]+ MiB available\); org/fit-GGUF:(Q\w+) fits with --ctx-size "
                        r"(\d+) or less \(`localgen pull org/fit-GGUF:\2`\)\n", pulled.err, re.M)
    assert warning is not None and pulled.err.index("warning") < pulled.err.index("downloading"), pulled.err
    assert warning[1] == binary_size(f16_least).removesuffix(" MiB")
    again = run_localgen("run", "-m", f"{REPO}:F16", "hi", "-n", "1", "--offline", env=tiny)
    assert again.returncode == 1 and "try a quant with fewer bits per weight than F16 (Q8_0, Q5_0 or Q4_0)" in \
        again.err, again.err
    assert run_localgen("pull", f"{REPO}:{warning[2]}", env=tiny).returncode == 0
    ran = run_localgen("run", "-m", f"{REPO}:{warning[2]}", "hi", "-n", "1", "--ctx-size", warning[3], env=tiny)
    assert ran.returncode == 0, ran.err


def test_a_run_refusing_a_named_quant_names_the_quant_of_its_repo_that_fits_where_the_hub_can_say(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    """The hint named the repo's smaller quants (the last one listed) without a word of which fits; online it now ends
    with the one that fits, from their headers on the Hub, before a download and for a downloaded quant alike."""
    _serve(hubenv, quant_files)
    tight = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "Q8_0"))}
    fitting = re.compile(r"; org/fit-GGUF:(Q5_0|Q4_0) fits here\)$")
    before = run_localgen("run", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", env=tight)
    named = fitting.search(before.err.strip())
    assert before.returncode == 1 and named is not None and hubenv.blobs(REPO) == [], before.err
    assert run_localgen("pull", f"{REPO}:Q8_0", env=hubenv.env).returncode == 0
    downloaded = run_localgen("run", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", env=tight)
    assert downloaded.returncode == 1 and downloaded.err.strip().endswith(named[0]), downloaded.err
    hubenv.server.requests.clear()
    offline = run_localgen("run", "--offline", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", env=tight)
    assert offline.returncode == 1 and "fits here" not in offline.err and hubenv.server.requests == [], offline.err
    ran = run_localgen("run", "-m", f"{REPO}:{named[1]}", "hi", "-n", "1", env=tight)
    assert ran.returncode == 0, ran.err


def test_a_run_refusing_a_quant_reads_the_headers_of_the_smaller_quants_only_down_to_the_one_that_fits(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    """F16 refused where Q8_0 fits at the context asked: the hint names Q8_0 from its header alone, where the refusal
    read every smaller quant's header (a few MiB each, 4 MiB to 20 for a real model's, of a repo of twenty quants)
    before saying the same; where none fits, each is read to name the one that fits at a smaller context."""
    _serve(hubenv, quant_files)
    tight = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_limit_between(quant_files, "Q8_0", "F16", 2048))}
    run = run_localgen("run", "-m", f"{REPO}:F16", "--ctx-size", "2048", "hi", "-n", "1", env=tight)
    assert run.returncode == 1 and run.err.strip().endswith(f"; {REPO}:Q8_0 fits here)"), run.err
    read = {name: sum(1 for r in hubenv.server.requests if r.range and r.path.endswith(name))
            for name in ("fit-F16.gguf", "fit-Q8_0.gguf", "fit-Q5_0.gguf", "fit-Q4_0.gguf")}
    assert read == {"fit-F16.gguf": 1, "fit-Q8_0.gguf": 1, "fit-Q5_0.gguf": 0, "fit-Q4_0.gguf": 0}, read
    hubenv.server.requests.clear()
    tiny = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(_too_small_for(quant_files, "Q4_0"))}
    run = run_localgen("run", "-m", f"{REPO}:F16", "hi", "-n", "1", env=tiny)
    assert run.returncode == 1 and re.search(r"; org/fit-GGUF:Q4_0 fits with --ctx-size \d+ or less\)$",
                                             run.err.strip()), run.err
    assert all(any(r.range and r.path.endswith(f"fit-{q}.gguf") for r in hubenv.server.requests)
               for q in ("Q5_0", "Q4_0")), "each read (Q8_0's header kept from the run before)"


def test_pull_of_a_repo_none_of_whose_quants_fits_at_the_default_context_takes_the_smallest(
        hubenv: HubEnv, quant_files: dict[str, Path]) -> None:
    _serve(hubenv, quant_files)
    shape = read_shape(quant_files["Q4_0"])
    need = {n: estimate_memory(shape, n_ctx=n).ram_bytes for n in (1024, fit.MIN_AUTO_CONTEXT)}
    between = {**hubenv.env, config.MEMORY_LIMIT_ENV: str(int(sum(need.values()) / 2 / hardware.RAM_USABLE_FRACTION))}
    pulled = run_localgen("pull", REPO, env=between)
    assert pulled.returncode == 0 and pulled.out.strip().endswith("fit-Q4_0.gguf"), pulled.err
    assert re.search(r"chose the smallest quant, as none fits at the context a run takes by default: org/fit-GGUF:"
                     r"Q4_0 fits here only at a context of [\d,]+ tokens or less \(it needs [\d.]+ MiB at 2,048\): "
                     r"run it with --ctx-size \d+\n", pulled.err), pulled.err
    run = run_localgen("run", "-m", REPO, "hi", env=between)
    assert run.returncode == 1 and "try a smaller model, or a smaller context" in run.err, run.err


def test_fit_offline_of_a_damaged_download_names_the_pull_that_mends_it(hub: tuple[HubServer, dict[str, str]]) -> None:
    """fit offline of a download damaged since its pull said to leave offline mode and `run the command again to check
    it against the Hub`, where fit online reads the Hub's header and leaves the copy damaged: it names the pull, as a
    run does."""
    repo = "acme/Tiny-GGUF"
    server, env = hub
    server.add_repo(repo, {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", f"{repo}:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    Path(pulled.stdout.strip()).resolve().write_bytes(b"GGUF" + bytes(8))
    offline = {**env, "LOCALGEN_OFFLINE": "1"}
    fitted = run_cli(offline, "fit", f"{repo}:Q8_0")
    assert fitted.returncode == 1, fitted.stderr
    assert fitted.stderr.endswith(f"unset it, then run `localgen pull {repo}:Q8_0` to check it against the Hub)\n")
    ran = run_cli(offline, "run", "-m", f"{repo}:Q8_0", "hi")
    assert ran.stderr.split("(hint: ")[1] == fitted.stderr.split("(hint: ")[1], ran.stderr
    assert run_cli(env, "fit", f"{repo}:Q8_0").returncode == 0
    assert run_cli(offline, "fit", f"{repo}:Q8_0").returncode == 1, "fit online left the copy damaged"
    assert run_cli(env, "pull", f"{repo}:Q8_0").returncode == 0
    assert run_cli(offline, "fit", f"{repo}:Q8_0").returncode == 0, "the pull the hint names mends it"
