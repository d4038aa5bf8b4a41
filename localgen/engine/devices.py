"""ggml's backend devices (for localgen.hardware) and the CPU backend's extra weight buffer types.

ggml's backend device API (ggml-backend.h) has no Python binding in llama-cpp-python: bind the few calls that
localgen needs with ctypes, from the ggml library shipped in llama_cpp's lib folder.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

from localgen.engine.native import load_bindings

DEVICE_KINDS = ("cpu", "gpu", "igpu", "accel", "meta")  # enum ggml_backend_dev_type, in order
EXTRA_BUFTS_PROC = b"ggml_backend_dev_get_extra_bufts"  # the CPU backend's list of extra buffer types


@dataclass(frozen=True)
class BackendDevice:
    """One device llama.cpp can compute on: its name, kind (cpu, gpu, igpu, accel) and memory in bytes."""

    index: int
    name: str
    description: str
    kind: str
    total_bytes: int
    free_bytes: int


def _ggml_device_api() -> ctypes.CDLL | None:
    """The ggml library with the device calls' signatures declared, or None when it lacks them."""
    try:
        lib = load_bindings("_ggml").libggml
    except (ImportError, OSError, AttributeError):
        return None
    try:
        lib.ggml_backend_dev_count.restype = ctypes.c_size_t
        lib.ggml_backend_dev_count.argtypes = []
        lib.ggml_backend_dev_get.restype = ctypes.c_void_p
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
            getattr(lib, name).restype = ctypes.c_char_p
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_type.restype = ctypes.c_int
        lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_memory.restype = None
        lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.POINTER(ctypes.c_size_t)]
    except AttributeError:
        return None
    return lib


def backend_devices() -> tuple[BackendDevice, ...]:
    """Every device registered with llama.cpp's ggml backends (the CPU included), with free and total memory."""
    lib = _ggml_device_api()
    if lib is None:
        return ()
    devices = []
    for index in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(index)
        if not dev:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = int(lib.ggml_backend_dev_type(dev))
        devices.append(BackendDevice(
            index=index,
            name=(lib.ggml_backend_dev_name(dev) or b"").decode("utf-8", errors="replace"),
            description=(lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", errors="replace"),
            kind=DEVICE_KINDS[kind] if 0 <= kind < len(DEVICE_KINDS) else "unknown",
            total_bytes=int(total.value),
            free_bytes=int(free.value),
        ))
    return tuple(devices)


@lru_cache(maxsize=1)
def cpu_extra_buffer_types() -> tuple[str, ...]:
    """The names of the extra weight buffer types llama.cpp's CPU backend offers on this machine ("AMX",
    "CPU_REPACK"...): the repacked copies of weights it uses when a model's types allow."""
    lib = _ggml_device_api()
    if lib is None:
        return ()
    try:
        lib.ggml_backend_dev_by_type.restype = ctypes.c_void_p
        lib.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
        lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
        lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
        lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.ggml_backend_buft_name.restype = ctypes.c_char_p
        lib.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    except AttributeError:
        return ()
    cpu = lib.ggml_backend_dev_by_type(DEVICE_KINDS.index("cpu"))
    reg = lib.ggml_backend_dev_backend_reg(cpu) if cpu else None
    address = lib.ggml_backend_reg_get_proc_address(reg, EXTRA_BUFTS_PROC) if reg else None
    if not address:
        return ()
    extra_bufts = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(address)(cpu)
    names = []
    for index in range(64):  # a null-terminated array of a few entries
        if not extra_bufts or not extra_bufts[index]:
            break
        names.append((lib.ggml_backend_buft_name(extra_bufts[index]) or b"").decode("utf-8", errors="replace"))
    return tuple(names)
