"""The native allocations behind an Engine: the weights, the context and the draft batch."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from localgen.engine.amx import AMX_BUFFER_TYPE, amx_works
from localgen.engine.devices import cpu_extra_buffer_types
from localgen.engine.growth import context_beyond_memory_limit, smaller_context_hint
from localgen.engine.native import FLASH_ATTN, KV_TYPES, lc, native_errors, out_of_memory_said_as
from localgen.errors import ModelLoadError
from localgen.estimate import ModelShape
from localgen.memory_limits import out_of_memory_hint
from localgen.params import LoadOptions
from localgen.speculative import DRAFT_MAX

log = logging.getLogger("localgen.engine")
OUT_OF_MEMORY = "bad_alloc"  # what llama.cpp logs where a C++ allocation of a model's load failed (std::bad_alloc)


def use_cpu_extra_buffers() -> bool:
    """Whether llama.cpp may repack weights into the CPU backend's extra buffer types: where AMX is among them, only
    when its kernels work with this build (engine.amx), or as LOCALGEN_AMX says."""
    from localgen.config import settings

    forced = settings().amx
    if AMX_BUFFER_TYPE not in cpu_extra_buffer_types():
        return True
    return amx_works() if forced is None else forced


def extra_buffers_declined() -> str:
    """Why the CPU backend's extra buffer types are declined, in a few words ("" where they are used)."""
    from localgen.config import settings

    if use_cpu_extra_buffers():
        return ""
    return "LOCALGEN_AMX=0" if settings().amx is False else "AMX fails with this build"


UNPACKED_LLAMA_PRELUDE = """
import llama_cpp as _package
_defaults = _package.llama_cpp.llama_model_default_params
def _unpacked():
    params = _defaults()
    params.use_extra_bufts = False
    return params
_package.llama_model_default_params = _package.llama_cpp.llama_model_default_params = _unpacked
"""


def bare_llama_prelude() -> str:
    """Python source for the start of a bare llama-cpp-python script or process (the benchmarks' and tests'), so
    that its Llama and llama_model_default_params load weights as localgen does; empty where they load alike."""
    return "" if use_cpu_extra_buffers() else UNPACKED_LLAMA_PRELUDE


def load_weights(path: Path, options: LoadOptions, stop: Callable[[], bool], *,
                 repack: bool | None = None) -> lc.llama_model_p:
    """The model's weights, loaded by llama.cpp, or ModelLoadError; the load gives up early once stop() is true.
    repack: whether llama.cpp may repack them into the CPU backend's extra buffers (None: use_cpu_extra_buffers())."""
    params = lc.llama_model_default_params()
    params.n_gpu_layers = options.n_gpu_layers
    params.use_extra_bufts = use_cpu_extra_buffers() if repack is None else repack
    if not params.use_extra_bufts:
        log.debug("weights stay unpacked: AMX buffers are off (LOCALGEN_AMX=0, or the probe found them failing)")
    params.progress_callback = progress = lc.llama_progress_callback(lambda _done, _data: not stop())
    out_of_memory = (f"llama.cpp ran out of memory loading {path}", out_of_memory_hint())
    with native_errors() as errors, out_of_memory_said_as(*out_of_memory):  # where ggml_init's malloc fails: abort
        model = lc.llama_model_load_from_file(os.fsencode(path), params) or None
    del progress  # kept alive until here: llama.cpp calls it during the load
    if model is None and any(OUT_OF_MEMORY in line for line in errors):  # a limit (`ulimit -d`) met, no damage
        raise ModelLoadError(*out_of_memory)
    if model is None:
        raise ModelLoadError(
            f"llama.cpp could not load {path}",
            hint="the file may be damaged or of an architecture this build does not know; "
            "run with LOCALGEN_DEBUG=1 for llama.cpp's log",
        )
    return model


def new_context(model: lc.llama_model_p, options: LoadOptions, path: Path, cells: int,
                shape: ModelShape | None) -> lc.llama_context_p:
    """The inference context (a KV cache of this many cells, and compute buffers) of a loaded model, of this shape
    (shape_for_limits), or ModelLoadError."""
    params = lc.llama_context_default_params()
    params.n_ctx = cells  # the engine keeps n_ctx
    params.n_batch = options.n_batch
    params.n_ubatch = min(options.n_ubatch, options.n_batch)
    params.n_seq_max = 1
    params.n_threads = options.n_threads
    params.n_threads_batch = options.n_threads_batch
    # where auto wants it, llama.cpp's own auto still leaves it off on a GPU backend without the kernel
    wanted = "auto" if options.flash_attn == "auto" else "on"
    params.flash_attn_type = FLASH_ATTN[wanted if options.flash_attention else "off"]
    params.type_k = KV_TYPES[options.key_type]
    params.type_v = KV_TYPES[options.kv_type]
    params.no_perf = True
    refusal = context_beyond_memory_limit(options, path, cells, shape)  # llama.cpp would abort the process, not fail
    if refusal is not None:
        raise refusal
    ctx = lc.llama_init_from_model(model, params) or None
    if ctx is None:
        raise ModelLoadError(
            f"could not create a context of {options.n_ctx} tokens for {path.name}",
            hint=smaller_context_hint(options),
        )
    log.debug("context: %d tokens (%d cells), batch %d, ubatch %d, threads %d, threads for batches %d, "
              "flash attention %s, KV type %s", options.n_ctx, lc.llama_n_ctx(ctx), lc.llama_n_batch(ctx),
              lc.llama_n_ubatch(ctx), lc.llama_n_threads(ctx), lc.llama_n_threads_batch(ctx), options.attention_mode,
              options.kv_layout)
    return ctx


def new_draft_batch() -> lc.llama_batch:
    """A batch for verifying drafts: one sequence, logits at every position."""
    batch = lc.llama_batch_init(DRAFT_MAX + 1, 0, 1)
    for i in range(DRAFT_MAX + 1):
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1
    return batch
