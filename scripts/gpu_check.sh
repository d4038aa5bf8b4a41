#!/usr/bin/env bash
# GPU offload check for localgen on a machine with an NVIDIA GPU (it cannot run without one).
#
#   scripts/gpu_check.sh [--build-only] [VENV_DIR]
#
# 1. With the llama-cpp-python that PYTHON has (usually CPU-only): localgen must warn that the build is CPU-only
#    and print the reinstall command (skipped when that build already offloads, or PYTHON has none).
# 2. Builds llama-cpp-python with CUDA (CMAKE_ARGS=-DGGML_CUDA=on) into a virtual environment that sees PYTHON's
#    packages (those of the environment PYTHON runs in too, where that is itself a virtual environment), from a
#    local sdist when there is one (LLAMA_CPP_SDIST, or .bench/sdist/llama_cpp_python-VERSION.tar.gz), else from
#    PyPI. Skipped when VENV_DIR already holds a build that offloads (REBUILD=1 builds again). --build-only stops here.
# 3. scripts/gpu_offload_check.py, with the bundled SmolLM2-135M: every layer offloaded by the automatic plan,
#    decode faster on the GPU than with --no-gpu, a partial offload under a low LOCALGEN_VRAM_LIMIT and where
#    another process holds the VRAM, and the estimate against llama.cpp's own buffer sizes.
#
# Needs: nvidia-smi, the CUDA toolkit (nvcc), cmake >= 3.24, a C++ compiler. The build takes several minutes
# (one GPU architecture: CUDA_ARCH, default "native"). Offline, set PIP_NO_INDEX=1 and PIP_NO_BUILD_ISOLATION=0
# (pip reads a "no-" option's variable the other way round: 0 turns build isolation off; scikit-build-core, CMake
# and ninja must then be installed). Exit status 0 when every check passes.
set -euo pipefail
BUILD_ONLY=0
VENV=.venv-gpu
for arg in "$@"; do
    case "$arg" in
        --build-only) BUILD_ONLY=1 ;;
        -*) printf 'usage: %s [--build-only] [VENV_DIR]\n' "$0" >&2; exit 2 ;;
        *) VENV=$(realpath -m "$arg") ;;  # from where the script was started, before the cd below
    esac
done
if [ -n "${LLAMA_CPP_SDIST:-}" ]; then
    LLAMA_CPP_SDIST=$(realpath -m "$LLAMA_CPP_SDIST")
fi
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
FAILED=0

say() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this check needs an NVIDIA GPU"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
fi
say "GPU"
nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version --format=csv,noheader
echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 2 | head -n 1 || echo none); $(cmake --version | head -n 1);" \
     "$("$PYTHON" --version); $(nproc) CPUs"

VERSION=$("$PYTHON" -c "import importlib.metadata as m; print(m.version('llama-cpp-python'))" 2>/dev/null || echo 0.3.36)

say "1. the CPU-only warning, with PYTHON's llama-cpp-python"
if ! "$PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llama_cpp') is None)"; then
    echo "SKIP: $PYTHON has no llama-cpp-python"
elif ! loaded=$("$PYTHON" -c "import llama_cpp" 2>&1); then
    echo "SKIP: $PYTHON's llama-cpp-python does not load: $(printf '%s' "$loaded" | tail -n 1)"
else
    "$PYTHON" - <<'EOF' || FAILED=1
from localgen.hardware import cpu_only_warning, probe_hardware

hw = probe_hardware()
print(f"gpu_offload={hw.gpu_offload} gpus={[g.name for g in hw.gpus]} nvidia-smi={[g.name for g in hw.nvidia_gpus]}")
warning = cpu_only_warning(hw)
if hw.gpu_offload:
    print("SKIP: this build already offloads: no CPU-only warning expected")
    assert warning is None, warning
else:
    assert hw.nvidia_gpus, "nvidia-smi lists no GPU"
    assert warning and 'CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall' in warning, warning
    print("PASS: CPU-only warning:", warning)
EOF
fi

say "2. llama-cpp-python $VERSION with CUDA in $VENV"
command -v nvcc >/dev/null || fail "nvcc not found: install the CUDA toolkit"
SDIST=${LLAMA_CPP_SDIST:-}
if [ -z "$SDIST" ] && [ -f ".bench/sdist/llama_cpp_python-$VERSION.tar.gz" ]; then
    SDIST=".bench/sdist/llama_cpp_python-$VERSION.tar.gz"
fi
if [ ! -x "$VENV/bin/python" ]; then
    # without ensurepip (some Pythons lack it), a venv without pip, which PYTHON's pip installs into (--python)
    "$PYTHON" -m venv --system-site-packages "$VENV" 2>/dev/null ||
        "$PYTHON" -m venv --system-site-packages --without-pip --clear "$VENV"
    # a virtual environment's --system-site-packages are its base Python's: add PYTHON's own, and their .pth files
    "$PYTHON" -c "import site, sysconfig; print(f'import site; site.addsitedir({sysconfig.get_paths()[\"purelib\"]!r})')" \
        > "$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_localgen_parent.pth"
fi
if "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    PIP=("$VENV/bin/python" -m pip)
else
    PIP=("$PYTHON" -m pip --python "$VENV/bin/python")  # pip 22.3 or later
fi
if ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)" \
        2>/dev/null || [ "${REBUILD:-0}" = 1 ]; then
    # LLAVA_BUILD=OFF: localgen does not use llama-cpp-python's multimodal library, and the build is shorter
    export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-native} -DLLAVA_BUILD=OFF"
    export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
    started=$(date +%s)
    "${PIP[@]}" install --force-reinstall --no-deps --no-cache-dir "${SDIST:-llama-cpp-python==$VERSION}"
    echo "built in $(( $(date +%s) - started )) s"
else
    echo "already built: $("$VENV/bin/python" -c "import llama_cpp; print(llama_cpp.__file__)")"
fi
"${PIP[@]}" install --no-deps -q -e .
if [ "$BUILD_ONLY" = 1 ]; then
    exit "$FAILED"
fi

say "3. offload checks"
"$VENV/bin/python" scripts/gpu_offload_check.py || FAILED=1
exit "$FAILED"
