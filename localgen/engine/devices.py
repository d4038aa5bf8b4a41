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


_VOID_P, _SIZE_P = ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)
_SIGNATURES: dict[str, tuple[type | None, list[type]]] = {  # name: (restype, argtypes), from ggml-backend.h
    "ggml_backend_dev_count": (ctypes.c_size_t, []),
    "ggml_backend_dev_get": (_VOID_P, [ctypes.c_size_t]),
    "ggml_backend_dev_name": (ctypes.c_char_p, [_VOID_P]),
    "ggml_backend_dev_description": (ctypes.c_char_p, [_VOID_P]),
    "ggml_backend_dev_type": (ctypes.c_int, [_VOID_P]),
    "ggml_backend_dev_memory": (None, [_VOID_P, _SIZE_P, _SIZE_P]),
    "ggml_backend_dev_by_type": (_VOID_P, [ctypes.c_int]),
    "ggml_backend_dev_backend_reg": (_VOID_P, [_VOID_P]),
    "ggml_backend_reg_get_proc_address": (_VOID_P, [_VOID_P, ctypes.c_char_p]),
    "ggml_backend_buft_name": (ctypes.c_char_p, [_VOID_P]),
}
MAX_EXTRA_BUFTS = 64  # more than ggml-cpu has (AMX, CPU_REPACK, KleidiAI...): a bound on a null-terminated list


@lru_cache(maxsize=1)
def _ggml_device_api() -> ctypes.CDLL | None:
    """The ggml library with the calls localgen makes declared, or None when it lacks them."""
    try:
        lib = load_bindings("_ggml").libggml
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
    except (ImportError, OSError, AttributeError):
        return None
    return lib


def _text(value: bytes | None) -> str:
    """A C string from ggml as text."""
    return (value or b"").decode("utf-8", errors="replace")


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
            name=_text(lib.ggml_backend_dev_name(dev)),
            description=_text(lib.ggml_backend_dev_description(dev)),
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
    cpu = lib.ggml_backend_dev_by_type(DEVICE_KINDS.index("cpu"))
    reg = lib.ggml_backend_dev_backend_reg(cpu) if cpu else None
    address = lib.ggml_backend_reg_get_proc_address(reg, EXTRA_BUFTS_PROC) if reg else None
    if not address:
        return ()
    extra_bufts = ctypes.CFUNCTYPE(ctypes.POINTER(_VOID_P), _VOID_P)(address)(cpu)
    names = []
    for index in range(MAX_EXTRA_BUFTS):
        if not extra_bufts or not extra_bufts[index]:
            break
        names.append(_text(lib.ggml_backend_buft_name(extra_bufts[index])))
    return tuple(names)
