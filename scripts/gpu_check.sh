#!/usr/bin/env bash
# GPU offload check for localgen on a machine with an NVIDIA GPU (it cannot run without one).
#
#   scripts/gpu_check.sh [VENV_DIR]
#
# 1. With the installed (usually CPU-only) llama-cpp-python: localgen must warn that the build is CPU-only
#    and print the reinstall command (skipped when the installed build already offloads).
# 2. Builds llama-cpp-python with CUDA (CMAKE_ARGS=-DGGML_CUDA=on) into a virtual environment that sees the
#    system's other packages, from a local sdist when there is one (LLAMA_CPP_SDIST, or
#    .bench/sdist/llama_cpp_python-VERSION.tar.gz), else from PyPI.
# 3. Checks, with the bundled SmolLM2-135M:
#    - the automatic plan offloads every layer (llama.cpp's log says "offloaded 31/31 layers to GPU");
#    - decode is faster on the GPU than with --no-gpu;
#    - an artificially low VRAM budget (LOCALGEN_VRAM_LIMIT) gives a partial offload, and localgen says so.
#
# Needs: nvidia-smi, the CUDA toolkit (nvcc), cmake >= 3.24, a C++ compiler. The build takes several minutes
# (one GPU architecture: CUDA_ARCH, default "native"). Exit status 0 when every check passes.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-gpu}
PYTHON=${PYTHON:-python3}

say() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this check needs an NVIDIA GPU"
say "GPU"
nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version --format=csv,noheader

VERSION=$("$PYTHON" -c "import importlib.metadata as m; print(m.version('llama-cpp-python'))" 2>/dev/null || echo 0.3.36)

say "1. the installed llama-cpp-python $VERSION"
"$PYTHON" - <<'EOF'
from localgen.hardware import cpu_only_warning, probe_hardware

hw = probe_hardware()
print(f"gpu_offload={hw.gpu_offload} gpus={[g.name for g in hw.gpus]} nvidia-smi={[g.name for g in hw.nvidia_gpus]}")
warning = cpu_only_warning(hw)
if hw.gpu_offload:
    print("the installed build already offloads: no CPU-only warning expected")
    assert warning is None, warning
else:
    assert hw.nvidia_gpus, "nvidia-smi lists no GPU"
    assert warning and 'CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall' in warning, warning
    print("warning:", warning)
EOF

say "2. build llama-cpp-python $VERSION with CUDA into $VENV"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null || fail "nvcc not found: install the CUDA toolkit"
SDIST=${LLAMA_CPP_SDIST:-}
if [ -z "$SDIST" ] && [ -f ".bench/sdist/llama_cpp_python-$VERSION.tar.gz" ]; then
    SDIST=".bench/sdist/llama_cpp_python-$VERSION.tar.gz"
fi
"$PYTHON" -m venv --system-site-packages "$VENV"
if ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)" \
        2>/dev/null || [ "${REBUILD:-0}" = 1 ]; then
    export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-native}"
    export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
    started=$(date +%s)
    "$VENV/bin/pip" install --force-reinstall --no-deps --no-cache-dir "${SDIST:-llama-cpp-python==$VERSION}"
    echo "built in $(( $(date +%s) - started )) s"
fi
"$VENV/bin/pip" install --no-deps -q -e .

say "3. offload checks"
"$VENV/bin/python" - <<'EOF'
import json
import os
import re
import subprocess
import sys

from localgen.catalog import builtin_bundled_file
from localgen.engine import backend_devices, supports_gpu_offload
from localgen.estimate import estimate_memory, read_shape
from localgen.fit import plan_fit
from localgen.hardware import probe_hardware

PROMPT = "Count from 1 to 300, separated by commas."
OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def run(*args: str, **env: str) -> tuple[dict, str]:
    """`localgen run --json` with llama.cpp's log on stderr; the JSON record and the stderr text."""
    proc = subprocess.run([sys.executable, "-m", "localgen", "run", PROMPT, "--json", "-n", "256",
                           "--temperature", "0", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LOCALGEN_DEBUG": "1", **env}, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        sys.exit(f"FAIL: localgen run {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def offloaded(stderr: str) -> tuple[int, int]:
    """(offloaded, total) layers from llama.cpp's log ((0, 0) when it does not say)."""
    match = OFFLOADED.search(stderr)
    return (int(match[1]), int(match[2])) if match else (0, 0)


assert supports_gpu_offload(), "the CUDA build cannot offload"
gpus = [d for d in backend_devices() if d.kind == "gpu"]
assert gpus, f"llama.cpp lists no GPU device: {backend_devices()}"
for d in gpus:
    print(f"device {d.name}: {d.description}, {d.free_bytes / 2**30:.1f} of {d.total_bytes / 2**30:.1f} GiB free")

shape = read_shape(builtin_bundled_file())
plan = plan_fit(shape, probe_hardware())
print("plan:", plan.describe())
assert plan.where == "gpu", f"the plan does not offload everything: {plan.describe()} {plan.reasons}"

auto, log = run()
done, total = offloaded(log)
print(f"automatic plan: offloaded {done}/{total} layers, decode {auto['timings']['decode_tokens_per_s']:.1f} tok/s")
assert total and done == total, f"expected every layer offloaded, llama.cpp says {done}/{total}"

gpu, _ = run("--gpu-layers", "-1")
cpu, log = run("--no-gpu")
assert offloaded(log)[0] == 0, "--no-gpu still offloaded layers"
gpu_tps, cpu_tps = gpu["timings"]["decode_tokens_per_s"], cpu["timings"]["decode_tokens_per_s"]
print(f"decode: GPU {gpu_tps:.1f} tok/s, CPU {cpu_tps:.1f} tok/s ({gpu_tps / max(cpu_tps, 1e-9):.1f}x)")
assert gpu_tps > cpu_tps, "decode is not faster on the GPU"

everything = estimate_memory(shape, n_ctx=plan.n_ctx, n_gpu_layers=-1).vram_bytes
limit = everything // 2
partial, log = run(LOCALGEN_VRAM_LIMIT=str(limit))
done, total = offloaded(log)
print(f"LOCALGEN_VRAM_LIMIT={limit / 2**20:.0f}MiB: offloaded {done}/{total} layers")
assert 0 < done < total, f"expected a partial offload under a {limit / 2**20:.0f} MiB budget, got {done}/{total}"
assert "layers fit in" in log, "localgen did not say why it offloaded only some layers"
print("\nall GPU checks passed")
EOF
