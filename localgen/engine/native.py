"""The llama.cpp bindings, loaded once without llama_cpp's high-level API, and the settings they name."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib
import importlib.util
import logging
import os
import re
import sys
import types
from collections.abc import Iterator

from localgen.errors import EXIT_RUNTIME, EngineLibraryError
from localgen.llama_install import installed_version, reinstall_command
from localgen.signals import called_from_c


def load_bindings(submodule: str) -> types.ModuleType:
    """Import llama_cpp.<submodule> without running llama_cpp/__init__.py.

    The package's __init__ also imports the high-level API (numpy, jinja2, diskcache...): about 0.2 s of CPU
    and 20 MiB that the low-level bindings never use. A later `import llama_cpp` still gets the full package.
    """
    name = f"llama_cpp.{submodule}"
    spec = importlib.util.find_spec("llama_cpp") if "llama_cpp" not in sys.modules else None
    if spec is None or not spec.submodule_search_locations:
        return importlib.import_module(name)
    stub = types.ModuleType("llama_cpp")
    stub.__path__ = list(spec.submodule_search_locations)
    sys.modules["llama_cpp"] = stub
    try:
        return importlib.import_module(name)
    finally:
        if sys.modules.get("llama_cpp") is stub:
            del sys.modules["llama_cpp"]


def engine_library_error(exc: BaseException) -> EngineLibraryError:
    """What to say where llama-cpp-python or its llama.cpp library would not load: the loader's reason, and a fix."""
    version = installed_version()
    if isinstance(exc, ImportError):
        if exc.name in ("llama_cpp", "llama_cpp.llama_cpp"):
            hint = f"install it (a C/C++ compiler and CMake build it): pip install '{_required_llama_cpp()}'"
        else:  # installed, but a module it needs is not
            hint = f"install {exc.name or 'what it needs'}, or llama-cpp-python again: " + reinstall_command(
                version, cuda=None)
        return EngineLibraryError(f"llama-cpp-python cannot be imported: {exc}", hint=hint)
    reason = str(exc)
    folder = os.environ.get("LLAMA_CPP_LIB_PATH")
    if folder:
        hint = (f"LLAMA_CPP_LIB_PATH={folder} tells llama-cpp-python where its libraries are: unset it, or point it "
                f"at a build of llama-cpp-python {version or 'as installed'}'s own")
    elif "libcuda.so" in reason or re.search(r"undefined symbol: cu[A-Z]", reason):  # the driver's API
        hint = ("this llama-cpp-python is a CUDA build, which needs the NVIDIA driver (libcuda.so.1), missing here "
                f"or too old for it: install the driver, or the CPU build: {reinstall_command(version, cuda=False)}")
    elif any(name in reason for name in ("libcudart", "libcublas")):
        hint = ("this llama-cpp-python is a CUDA build, which needs the CUDA runtime libraries, not found here: "
                f"install the CUDA toolkit's runtime, or the CPU build: {reinstall_command(version, cuda=False)}")
    else:
        hint = f"reinstall llama-cpp-python: {reinstall_command(version, cuda=None)}"
    return EngineLibraryError(f"llama.cpp's library could not be loaded: {reason}", hint=hint)


def _required_llama_cpp() -> str:
    """The llama-cpp-python requirement localgen was installed with (its metadata), or the bare name."""
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        for requirement in metadata.requires("localgen") or ():
            if requirement.startswith("llama-cpp-python"):
                return requirement.split(";")[0].replace(" ", "")
    return "llama-cpp-python"


def _not_loadable(exc: BaseException) -> bool:
    """Whether an exception from importing the bindings says the package or its library cannot load (a missing
    package or module, a library missing or one it needs, a library of another version that lacks a function),
    not a Ctrl-C that Python 3.11 wraps in a RuntimeError or another failure."""
    if isinstance(exc, (ImportError, OSError)):
        return True
    if isinstance(exc, AttributeError):  # ctypes binding a function the library does not have
        return "undefined symbol" in str(exc)
    return isinstance(exc, RuntimeError) and str(exc).startswith("Failed to load shared library")


try:
    lc = load_bindings("llama_cpp")
except Exception as exc:
    if not _not_loadable(exc):
        raise
    raise engine_library_error(exc) from exc

native_log = logging.getLogger("localgen.llama")
LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")  # llama.cpp's libraries, ggml's backends among them

KV_TYPES = {"f16": lc.GGML_TYPE_F16, "q8_0": lc.GGML_TYPE_Q8_0, "q4_0": lc.GGML_TYPE_Q4_0}
FLASH_ATTN = {
    "auto": lc.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": lc.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": lc.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


GGML_LOG_LEVEL_ERROR = 4  # ggml.h's enum ggml_log_level: none, debug, info, warn, error, cont
_error_collectors: list[list[str]] = []


@lc.llama_log_callback
@called_from_c
def _route_native_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    """Send llama.cpp's log lines to localgen's debug log instead of the terminal (errors also to a collector)."""
    if level == GGML_LOG_LEVEL_ERROR and _error_collectors:
        _error_collectors[-1].append(text.decode("utf-8", errors="replace").strip())
    if native_log.isEnabledFor(logging.DEBUG):
        native_log.debug(text.decode("utf-8", errors="replace").rstrip())


@contextlib.contextmanager
def native_errors() -> Iterator[list[str]]:
    """The error lines llama.cpp logs meanwhile (to say why a call failed); they still reach the debug log."""
    lines: list[str] = []
    _error_collectors.append(lines)
    try:
        yield lines
    finally:
        _error_collectors.remove(lines)


def route_native_log() -> None:
    """Send llama.cpp's log to _route_native_log (done on import; again after llama_cpp's own package, imported
    by a bare llama-cpp-python script, has put its printing logger in place)."""
    lc.llama_log_set(_route_native_log, ctypes.c_void_p(0))


route_native_log()


_ABORT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
OUT_OF_MEMORY_ABORT = "ctx->mem_buffer != NULL"  # ggml_init's GGML_ASSERT where the malloc of a context failed
_out_of_memory_errors: list[tuple[str, str]] = []


@contextlib.contextmanager
def out_of_memory_said_as(message: str, hint: str) -> Iterator[None]:
    """Where llama.cpp aborts meanwhile for want of memory, the error said (made beforehand: little may be left)."""
    _out_of_memory_errors.append((message, hint))
    try:
        yield
    finally:
        _out_of_memory_errors.pop()


def _say_out_of_memory() -> None:
    """Say llama.cpp ran out of memory as a localgen error (what it was doing where known, the limit in the hint)."""
    message, hint = _out_of_memory_errors[-1] if _out_of_memory_errors else ("llama.cpp ran out of memory", "")
    try:
        from localgen.console import error
        from localgen.memory_limits import out_of_memory_hint

        error(message, hint or out_of_memory_hint())
    except BaseException:  # nothing left to format it with: the words as they are
        os.write(2, f"localgen: error: {message}\n".encode())


@_ABORT_CALLBACK
def _say_native_abort(message: bytes) -> None:
    """What llama.cpp says as it aborts the process, as one line of localgen's (in place of its debugger's backtrace,
    which it printed on stdout among the answer); an allocation that failed (a `ulimit -d` met) is said as out of
    memory and ends the process with status 1, as localgen's other errors do."""
    where = message.decode("utf-8", errors="replace").strip()
    if OUT_OF_MEMORY_ABORT in where:
        _say_out_of_memory()
        os._exit(EXIT_RUNTIME)
    os.write(2, f"localgen: internal error: llama.cpp stopped the process ({where}) (hint: run again with "
                f"LOCALGEN_DEBUG=1 for llama.cpp's log, and report it)\n".encode())


def quiet_native_aborts() -> None:
    """Where llama.cpp aborts the process (a bug it cannot recover from), say so in one line on stderr: no debugger
    attached to print a backtrace (GGML_NO_BACKTRACE, set unless the user set it), nothing written to stdout."""
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")
    with contextlib.suppress(AttributeError):  # a build without ggml's abort callback keeps its own message
        lc._lib.ggml_set_abort_callback.restype = ctypes.c_void_p
        lc._lib.ggml_set_abort_callback.argtypes = [_ABORT_CALLBACK]
        lc._lib.ggml_set_abort_callback(_say_native_abort)


quiet_native_aborts()


def supports_gpu_offload() -> bool:
    """True when this llama.cpp build can offload layers to a GPU."""
    return bool(lc.llama_supports_gpu_offload())


@functools.lru_cache(maxsize=1)
def library_build() -> str:
    """The llama.cpp build loaded, as a short key: each library file in its folder by name, size, time and inode. The
    version names no build: llama.cpp built again with other flags or kernels (scripts/rebuild_llama_cpp.py) keeps
    it, and computes other sums."""
    folder = os.path.dirname(lc._lib._name)
    files = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(LIBRARY_SUFFIXES) or ".so." in entry.name:
                with contextlib.suppress(OSError):
                    status = entry.stat()
                    files.append(f"{entry.name} {status.st_size} {status.st_mtime_ns} {status.st_ino}")
    return hashlib.sha256("\n".join([folder, *sorted(files)]).encode()).hexdigest()[:16]


def llama_cpp_version() -> str:
    """The installed llama-cpp-python version (for reinstall hints and --stats), 'unknown' where it cannot be read."""
    return installed_version() or "unknown"
