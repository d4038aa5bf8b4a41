"""llama.cpp engine: the only way into llama_cpp (its low-level bindings), for the rest of localgen."""

from localgen.engine.core import Engine
from localgen.engine.devices import BackendDevice, backend_devices
from localgen.engine.loading import bare_llama_prelude, use_cpu_extra_buffers
from localgen.engine.native import FLASH_ATTN, KV_TYPES, lc, llama_cpp_version, supports_gpu_offload
from localgen.engine.prefix import CachedPrefix, PrefixCache

__all__ = [
    "FLASH_ATTN", "KV_TYPES", "BackendDevice", "CachedPrefix", "Engine", "PrefixCache",
    "backend_devices", "bare_llama_prelude", "lc", "llama_cpp_version", "supports_gpu_offload", "use_cpu_extra_buffers",
]
