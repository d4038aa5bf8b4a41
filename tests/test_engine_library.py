"""A llama-cpp-python whose llama.cpp library cannot load (a CUDA build without the NVIDIA driver, a library lost
from the install, the package missing): a one-line error naming the reason, with the fix, never a traceback."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localgen.engine.native import engine_library_error
from tests.conftest import run_localgen

REAL_PACKAGE = Path(str(importlib.util.find_spec("llama_cpp").origin)).parent


def _package_without_library(root: Path) -> Path:
    """A copy of llama_cpp's Python files under root, with an empty lib/ folder: the package, its library gone."""
    copy = root / "llama_cpp"
    shutil.copytree(REAL_PACKAGE, copy, ignore=shutil.ignore_patterns("lib", "__pycache__", "*.so*"))
    (copy / "lib").mkdir()
    return copy


def _library_needing(soname: str, folder: Path, into: Path) -> None:
    """Build into a shared library that needs soname, a library built beside it in folder and then removed, so
    that the dynamic loader refuses into as it would a CUDA build's library where the driver is not installed."""
    source = folder / "empty.c"
    source.write_text("int placeholder(void) { return 0; }\n")
    needed = folder / soname
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(needed), f"-Wl,-soname,{soname}", str(source)], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(into), str(source), "-Wl,--no-as-needed", str(needed)],
                   check=True)
    needed.unlink()


def _run_with(package_root: Path, *args: str) -> tuple[int, str]:
    """`localgen ARGS` importing llama_cpp from package_root: exit code and stderr."""
    result = run_localgen(*args, env={"PYTHONPATH": os.pathsep.join([str(package_root), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep)})
    return result.returncode, result.err


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a library the loader refuses")
def test_a_cuda_build_without_the_nvidia_driver_is_named_with_both_fixes(tmp_path: Path) -> None:
    package = _package_without_library(tmp_path / "site")
    _library_needing("libcuda.so.1", tmp_path, package / "lib" / "libllama.so")
    code, err = _run_with(tmp_path / "site", "run", "hi")
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("localgen: error: llama.cpp's library could not be loaded: "), err
    assert "libcuda.so.1: cannot open shared object file" in err
    assert "needs the NVIDIA driver" in err and "pip install --force-reinstall --no-cache-dir llama-cpp-python==" in err
    assert "internal error" not in err and "Traceback" not in err


def test_a_library_missing_from_the_install_says_to_reinstall(tmp_path: Path) -> None:
    _package_without_library(tmp_path / "site")
    code, err = _run_with(tmp_path / "site", "fit", "smollm2-135m")
    assert code == 1, err
    assert err.startswith("localgen: error: llama.cpp's library could not be loaded: "), err
    assert "reinstall llama-cpp-python: pip install --force-reinstall" in err
    assert "internal error" not in err and len(err.strip().splitlines()) == 1, err


def test_llama_cpp_python_missing_says_how_to_install_it() -> None:
    code = ("import sys; sys.modules['llama_cpp'] = None; sys.argv = ['localgen', 'run', 'hi']\n"
            "from localgen.launcher import main; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("localgen: error: llama-cpp-python cannot be imported: "), proc.stderr
    assert "pip install 'llama-cpp-python" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("reason", "said"), [
    ("libcudart.so.13: cannot open shared object file", "needs the CUDA runtime libraries"),
    ("libcublas.so.13: cannot open shared object file", "needs the CUDA runtime libraries"),
    ("libggml-base.so: cannot open shared object file", "reinstall llama-cpp-python"),
])
def test_each_missing_library_gets_its_own_fix(reason: str, said: str) -> None:
    error = engine_library_error(RuntimeError(f"Failed to load shared library '/x/libllama.so': {reason}"))
    assert reason in error.message and said in (error.hint or "")
