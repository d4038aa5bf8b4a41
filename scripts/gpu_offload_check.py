"""GPU offload checks on the bundled SmolLM2-135M, run by scripts/gpu_check.sh with a CUDA build of llama-cpp-python.

Each check prints PASS or FAIL and the figures it measured; the exit status is 1 when any check failed. Checks:
llama.cpp lists the GPU; the automatic plan offloads every layer, and llama.cpp says it did; decode is faster on the
GPU than with --no-gpu; a low LOCALGEN_VRAM_LIMIT gives a partial offload that localgen explains, and 0 none; VRAM
that another process holds gives a partial offload too (when PyTorch is there to hold it). It also prints the
estimate against llama.cpp's own buffer sizes, and `localgen fit`, `models show` and `bench` on the GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Callable

from localgen.catalog import builtin_bundled_file
from localgen.engine import backend_devices, supports_gpu_offload
from localgen.estimate import estimate_memory, read_shape
from localgen.fit import plan_fit
from localgen.hardware import probe_hardware

PROMPT = "Count from 1 to 300, separated by commas."
OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
GPU_BUFFER = re.compile(r"CUDA\d+ (model|KV|compute) buffer size =\s*([\d.]+) MiB")
CONTEXT = re.compile(r"llama_context: n_ctx\s+=\s*(\d+)")
MIB = 2**20
failures: list[str] = []


def check(name: str, passed: bool, detail: str) -> None:
    """Print a check's result; remember a failure."""
    print(f"{'PASS' if passed else 'FAIL'}: {name}: {detail}", flush=True)
    if not passed:
        failures.append(name)


def localgen(*args: str, timeout: int = 300, **env: str) -> subprocess.CompletedProcess[str]:
    """`localgen ARGS` with llama.cpp's log on stderr."""
    return subprocess.run([sys.executable, "-m", "localgen", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "LOCALGEN_DEBUG": "1", **env}, stdin=subprocess.DEVNULL)


def run(*args: str, **env: str) -> tuple[dict, str]:
    """`localgen run --json` of PROMPT: the JSON record ({} when it failed) and stderr."""
    proc = localgen("run", PROMPT, "--json", "-n", "256", "--temperature", "0", *args, **env)
    if proc.returncode != 0:
        print(f"localgen run {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return {}, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def offloaded(stderr: str) -> tuple[int, int]:
    """(offloaded, total) layers from llama.cpp's log ((0, 0) when it does not say)."""
    match = OFFLOADED.search(stderr)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def gpu_buffers_mib(stderr: str) -> float:
    """The GPU buffers llama.cpp's log names (weights, KV cache, compute), in MiB."""
    return sum(float(size) for _, size in GPU_BUFFER.findall(stderr))


def context_made(stderr: str) -> int | None:
    """The context size llama.cpp made, from its log (None when it does not say)."""
    match = CONTEXT.search(stderr)
    return int(match[1]) if match else None


def decode_speed(record: dict) -> float:
    """Decode tok/s of a `run --json` record (0 for a failed run)."""
    return float(record.get("timings", {}).get("decode_tokens_per_s") or 0)


def show(title: str, *args: str, **env: str) -> None:
    """Print what a localgen command says (its stdout and the last of its stderr)."""
    proc = localgen(*args, **{"LOCALGEN_DEBUG": "0", **env})
    print(f"\n-- localgen {' '.join(args)} (exit {proc.returncode}){f' {title}' if title else ''}\n{proc.stdout}"
          f"{proc.stderr[-1500:] if proc.returncode else ''}", flush=True)


HOLDER = """
import sys
import torch

held = []
print(torch.cuda.mem_get_info()[0], flush=True)
for line in sys.stdin:
    more = torch.cuda.mem_get_info()[0] - int(line)
    if more > 0:
        held.append(torch.empty(more, dtype=torch.uint8, device="cuda"))
    print(torch.cuda.mem_get_info()[0], flush=True)
"""
ONE_GPU = {"CUDA_VISIBLE_DEVICES": "0"}  # the holder fills the first GPU: localgen sees that one alone


def _reply(holder: subprocess.Popen[str], timeout: float = 120) -> int | None:
    """The holder's next line, the GPU's free bytes as it sees them; None where it failed or said nothing in time."""
    assert holder.stdout is not None
    ready, _, _ = select.select([holder.stdout], [], [], timeout)
    line = holder.stdout.readline() if ready else ""
    return int(line) if line.strip().isdigit() else None


def _vram_budget() -> int | None:
    """The VRAM budget localgen plans with on the first GPU now (`fit --json`), None where fit failed."""
    proc = localgen("fit", "smollm2-135m", "--json", LOCALGEN_DEBUG="0", **ONE_GPU)
    return json.loads(proc.stdout)["hardware"]["vram_budget_bytes"] if proc.returncode == 0 else None


def with_vram_held(budget: int, then: Callable[[], None]) -> None:
    """Run then() while a PyTorch process holds the first GPU's memory but what leaves localgen a VRAM budget of
    about budget bytes (what localgen's own CUDA context and reserve take is measured first, with fit)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, **ONE_GPU})
    try:
        free, before = _reply(holder), _vram_budget()
        if free is None or before is None:
            check("partial offload where another process holds the VRAM", False,
                  f"PyTorch could not hold the GPU's memory (free: {free}, localgen's budget: {before})")
            return
        assert holder.stdin is not None
        holder.stdin.write(f"{budget + free - before}\n")  # localgen sees less free than the holder, by that much
        holder.stdin.flush()
        left, after = _reply(holder), _vram_budget()
        print(f"a PyTorch process holds the GPU's memory: {(left or 0) / MIB:,.0f} MiB left free, localgen's VRAM "
              f"budget {(after or 0) / MIB:,.0f} MiB (aimed at {budget / MIB:,.0f})")
        then()
    finally:
        holder.kill()
        holder.wait(timeout=60)


def main() -> int:
    """Run every check; 0 when all pass."""
    check("offload support", supports_gpu_offload(), "llama_supports_gpu_offload() is true")
    gpus = [d for d in backend_devices() if d.kind == "gpu"]
    check("GPU device", bool(gpus), "; ".join(f"{d.name}: {d.description}, {d.free_bytes / 2**30:.1f} of "
                                             f"{d.total_bytes / 2**30:.1f} GiB free" for d in gpus) or "none listed")
    shape = read_shape(builtin_bundled_file())
    plan = plan_fit(shape, probe_hardware())
    check("automatic plan", plan.where == "gpu", plan.describe())

    auto, log = run()
    done, total = offloaded(log)
    check("every layer offloaded", bool(total) and done == total,
          f"llama.cpp: offloaded {done}/{total} layers; decode {decode_speed(auto):.1f} tok/s")
    everything = estimate_memory(shape, n_ctx=plan.n_ctx, n_gpu_layers=-1).vram_bytes
    # run makes the context its prompt and -n need, not the plan's: the estimate is compared at that one
    measured, n_ctx = gpu_buffers_mib(log), context_made(log) or plan.n_ctx
    estimated = estimate_memory(shape, n_ctx=n_ctx, n_gpu_layers=-1).vram_bytes / MIB
    print(f"VRAM at context {n_ctx:,}: estimate {estimated:.1f} MiB, llama.cpp's GPU buffers "
          f"{measured:.1f} MiB ({(estimated - measured) / measured:+.1%})" if measured
          else "llama.cpp's log names no GPU buffer")

    gpu, _ = run("--gpu-layers", "-1")
    cpu, log = run("--no-gpu")
    check("--no-gpu keeps every layer on the CPU", offloaded(log)[0] == 0 and bool(cpu),
          f"llama.cpp: offloaded {offloaded(log)[0]} layers")
    gpu_tps, cpu_tps = decode_speed(gpu), decode_speed(cpu)
    check("decode faster on the GPU", gpu_tps > cpu_tps,
          f"GPU {gpu_tps:.1f} tok/s, CPU {cpu_tps:.1f} tok/s ({gpu_tps / max(cpu_tps, 1e-9):.1f}x); greedy text "
          f"{'the same' if gpu.get('text') == cpu.get('text') else 'different'} on both")

    limit = everything // 2
    _, log = run(LOCALGEN_VRAM_LIMIT=str(limit))
    done, total = offloaded(log)
    check("partial offload under LOCALGEN_VRAM_LIMIT", 0 < done < total and "layers fit in" in log,
          f"{limit / MIB:.0f} MiB: offloaded {done}/{total} layers; "
          f"{'localgen says why' if 'layers fit in' in log else 'localgen does not say why'}")
    _, log = run(LOCALGEN_VRAM_LIMIT="0")
    check("LOCALGEN_VRAM_LIMIT=0 keeps the model off the GPU", offloaded(log)[0] == 0,
          f"offloaded {offloaded(log)[0]} layers")

    if importlib.util.find_spec("torch") is None:
        print("SKIP: VRAM held by another process (no PyTorch here to hold it)")
    else:
        def partial_from_free_memory() -> None:
            _, log = run(**ONE_GPU)
            done, total = offloaded(log)
            check("partial offload where another process holds the VRAM", 0 < done < total,
                  f"offloaded {done}/{total} layers; {' '.join(line for line in log.splitlines() if 'fit in' in line)}")

        with_vram_held(everything // 2, partial_from_free_memory)

    show("", "fit", "smollm2-135m")
    show("", "models", "show", "smollm2-135m")
    show("", "bench", "-r", "3")
    show("(CPU)", "bench", "-r", "3", "--no-gpu")
    print(f"\n{'all GPU checks passed' if not failures else 'FAILED: ' + ', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
