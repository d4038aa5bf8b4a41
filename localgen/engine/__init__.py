"""llama.cpp engine: the only way into llama_cpp (its low-level bindings), for the rest of localgen."""

from localgen.engine.core import DRAFT_LIMIT, CachedPrefix, Engine, PrefixCache
from localgen.engine.devices import BackendDevice, backend_devices
from localgen.engine.native import FLASH_ATTN, KV_TYPES, lc, llama_cpp_version, supports_gpu_offload

__all__ = [
    "DRAFT_LIMIT", "FLASH_ATTN", "KV_TYPES", "BackendDevice", "CachedPrefix", "Engine", "PrefixCache",
    "backend_devices", "lc", "llama_cpp_version", "supports_gpu_offload",
]
