"""A llama-cpp-python whose llama.cpp library cannot load (a CUDA build without the NVIDIA driver, a library lost
from the install, the package missing): a one-line error naming the reason, with the fix, never a traceback."""

from __future__ import annotations

import ctypes
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


def _driver_installed() -> bool:
    """Whether the NVIDIA driver's libcuda.so.1 loads here (then no library can be refused for lack of it)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a library the loader refuses")
@pytest.mark.skipif(_driver_installed(), reason="the NVIDIA driver is installed here: libcuda.so.1 is found")
def test_a_cuda_build_without_the_nvidia_driver_is_named_with_both_fixes(tmp_path: Path) -> None:
    package = _package_without_library(tmp_path / "site")
    _library_needing("libcuda.so.1", tmp_path, package / "lib" / "libllama.so")
    code, err = _run_with(tmp_path / "site", "run", "hi")
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("localgen: error: llama.cpp's library could not be loaded: "), err
    assert "libcuda.so.1: cannot open shared object file" in err
    assert 'needs the NVIDIA driver (libcuda.so.1), missing here or too old for it: install the driver, or the CPU ' \
           'build: ' \
           'CMAKE_ARGS="-DGGML_CUDA=off" pip install --force-reinstall --no-cache-dir llama-cpp-python==' in err
    assert "internal error" not in err and "Traceback" not in err


def test_a_library_missing_from_the_install_says_to_reinstall(tmp_path: Path) -> None:
    _package_without_library(tmp_path / "site")
    code, err = _run_with(tmp_path / "site", "fit", "smollm2-135m")
    assert code == 1, err
    assert err.startswith("localgen: error: llama.cpp's library could not be loaded: "), err
    assert "reinstall llama-cpp-python: pip install --force-reinstall" in err
    assert "internal error" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a library")
def test_a_library_of_another_build_that_lacks_a_function_says_to_reinstall(tmp_path: Path) -> None:
    """A libllama.so the loader takes, without the functions llama-cpp-python binds (another version's, or a
    LLAMA_CPP_LIB_PATH naming another build): ctypes raises AttributeError, said as the loader's refusals are."""
    package = _package_without_library(tmp_path / "site")
    source = tmp_path / "empty.c"
    source.write_text("int placeholder(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(package / "lib" / "libllama.so"), str(source)], check=True)
    code, err = _run_with(tmp_path / "site", "run", "hi")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "libllama.so: undefined symbol: " in err and "reinstall llama-cpp-python: pip install" in err, err
    elsewhere = run_localgen("run", "hi", env={"LLAMA_CPP_LIB_PATH": str(tmp_path / "nowhere")})
    assert elsewhere.returncode == 1 and f"LLAMA_CPP_LIB_PATH={tmp_path / 'nowhere'} tells llama-cpp-python where " \
        "its libraries are: unset it" in elsewhere.err, elsewhere.err


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
    # a CUDA build linked without the driver's library (the linker dropped a stub): the driver's API is missing
    ("/x/libggml-cuda.so.0: undefined symbol: cuMemCreate", "needs the NVIDIA driver (libcuda.so.1)"),
])
def test_each_missing_library_gets_its_own_fix(reason: str, said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    error = engine_library_error(RuntimeError(f"Failed to load shared library '/x/libllama.so': {reason}"))
    assert reason in error.message and said in (error.hint or "")


def test_a_module_llama_cpp_python_needs_is_named_not_the_package() -> None:
    """pip would answer 'already satisfied' to installing the package that is there: the missing module is named."""
    error = engine_library_error(ModuleNotFoundError("No module named 'typing_extensions'", name="typing_extensions"))
    assert error.hint is not None and error.hint.startswith("install typing_extensions, or llama-cpp-python again: ")
    missing = engine_library_error(ModuleNotFoundError("No module named 'llama_cpp'", name="llama_cpp"))
    assert missing.hint is not None and "pip install 'llama-cpp-python" in missing.hint


def test_a_ctrl_c_wrapped_in_a_runtime_error_is_not_taken_for_a_broken_install() -> None:
    from localgen.engine.native import _not_loadable

    assert not _not_loadable(RuntimeError("error calling __set_name__"))
    assert not _not_loadable(AttributeError("'NoneType' object has no attribute 'x'"))
    assert _not_loadable(RuntimeError("Failed to load shared library '/x/libllama.so': libggml.so: cannot open"))
