"""Whether llama.cpp's Intel AMX kernels work with this build of its CPU library, tried once in a child process.

Built by GCC 12, llama.cpp's AMX matrix kernels load a tile configuration of stale stack bytes (the compiler's
`_tile_loadconfig` declares an 8-byte operand, so the stores that fill the rest of the 64-byte configuration are
dropped) and the first batch of two tokens or more dies of a general protection fault. Other builds work, and
there AMX prefills about 3 and decodes about 2 times as fast (README: Intel AMX). A child process that loads the
bundled model into AMX buffers and decodes a batch tells the two apart; its verdict is kept, keyed by the CPU
library file, the kernel and the CPU.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

log = logging.getLogger("localgen.engine")

AMX_BUFFER_TYPE = "AMX"  # ggml-cpu's buffer type for Intel AMX's repacked weights
AMX_WEIGHT_TYPES = frozenset({"Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"})  # ggml's AMX kernels' types
PROBE_FILE = "amx-probe.json"  # the kept verdict, in localgen's cache folder
PROBE_TIMEOUT_S = 120.0
PROBE_BATCH = 8  # tokens decoded at once: AMX's tile kernels take every batch of two or more
PROBE_OK, PROBE_NO_AMX_BUFFER = 0, 3  # the child's exit codes besides a crash
CRASHED = "the child died of signal"  # how a crash's verdict begins
NO_VERDICT = "could not run"  # a probe stopped from outside or not started: not kept
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT})
CRASH_NOTE = ("localgen: llama.cpp's AMX kernels crash with this build of llama-cpp-python, so AMX stays off; "
              "python scripts/rebuild_llama_cpp.py rebuilds it with the fix (README: Intel AMX)")

PROBE_SCRIPT = f"""
import ctypes, resource, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is the answer, not a core file
import llama_cpp.llama_cpp as lc
lines = []
@lc.llama_log_callback
def keep(level, text, data):
    lines.append(text.decode("utf-8", "replace"))
lc.llama_log_set(keep, ctypes.c_void_p(0))
lc.llama_backend_init()
params = lc.llama_model_default_params()
params.n_gpu_layers = 0
params.use_extra_bufts = True
model = lc.llama_model_load_from_file(sys.argv[1].encode(), params)
if not model or not any("AMX" in line and "buffer size" in line for line in lines):
    sys.exit({PROBE_NO_AMX_BUFFER})
cparams = lc.llama_context_default_params()
cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = 64, {PROBE_BATCH}, {PROBE_BATCH}
cparams.n_threads = cparams.n_threads_batch = 1
ctx = lc.llama_init_from_model(model, cparams)
tokens = (lc.llama_token * {PROBE_BATCH})(*range(1, {PROBE_BATCH + 1}))
first = lc.llama_decode(ctx, lc.llama_batch_get_one(tokens, {PROBE_BATCH}))
second = lc.llama_decode(ctx, lc.llama_batch_get_one(tokens, 1))
sys.exit({PROBE_OK} if (first, second) == (0, 0) else 4)
"""


@dataclass(frozen=True)
class Verdict:
    """What the probe found for one build of the CPU library on one machine."""

    key: str  # the library file, its size and time, the kernel release and the CPU model
    works: bool
    detail: str  # how the child ended, in words


def cpu_library() -> Path | None:
    """The ggml CPU backend library that llama-cpp-python loads, where it is a file of its own."""
    from localgen.engine.native import lc  # not the llama_cpp package, whose import puts a printing logger in place

    folder = Path(lc.__file__).parent / "lib"
    found = sorted(folder.glob("libggml-cpu.*")) if folder.is_dir() else []
    return found[0].resolve() if found else None


def verdict_key(library: Path) -> str:
    """What the verdict depends on: the library build, the kernel that grants AMX state, and the CPU."""
    from localgen.hardware import cpu_model_name

    info = library.stat()
    return "|".join((str(library), str(info.st_size), str(info.st_mtime_ns), os.uname().release, cpu_model_name()))


@lru_cache(maxsize=1)
def amx_works() -> bool:
    """Whether llama.cpp's AMX buffers may be used here: the kept verdict for this library, or a new probe with the
    bundled model; False when neither can be had (AMX stays off, as is safe)."""
    from localgen.config import settings

    library = cpu_library()
    if library is None:
        log.debug("AMX stays off: llama-cpp-python's CPU library was not found to probe")
        return False
    key = verdict_key(library)
    kept_file = settings().cache_dir / PROBE_FILE
    kept = read_verdict(kept_file)
    if kept is not None and kept.key == key:
        log.debug("AMX probe, kept in %s: %s", kept_file, kept.detail)
        return kept.works
    model = _probe_model()
    if model is None:
        log.debug("AMX stays off: the bundled model, which the probe loads, is not installed")
        return False
    verdict = probe(model, key)
    log.debug("AMX probe: %s", verdict.detail)
    not_kept = write_verdict(kept_file, verdict) if verdict.detail != NO_VERDICT else None
    if verdict.detail.startswith(CRASHED):
        from localgen.console import say

        say(CRASH_NOTE)  # once, where the verdict is kept
        if not_kept is not None:
            say(f"localgen: the probe's verdict could not be kept ({not_kept}), so it runs again next time")
    return verdict.works


def _probe_model() -> Path | None:
    """The bundled model's file, small enough to load in a moment, or None."""
    from localgen.catalog import builtin_bundled_file
    from localgen.errors import LocalgenError

    try:
        return builtin_bundled_file()
    except (LocalgenError, OSError):
        return None


def probe(model: Path, key: str) -> Verdict:
    """Load model into AMX buffers and decode a batch in a child process; the verdict from how it ended.

    The child has a session of its own, so a Ctrl-C at the terminal stops only localgen (and with it the probe,
    whose verdict is then not kept); a child killed by another signal than a crash's gives no verdict either.
    """
    try:
        child = subprocess.run([sys.executable, "-c", PROBE_SCRIPT, os.fsdecode(model)], start_new_session=True,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        log.debug("AMX probe could not run: %s", error)
        return Verdict(key, False, NO_VERDICT)
    code = child.returncode
    if code == PROBE_OK:
        return Verdict(key, True, "a batch decoded in AMX buffers")
    if code == PROBE_NO_AMX_BUFFER:
        return Verdict(key, False, "the model loaded without AMX buffers")
    if code < 0 and -code in CRASH_SIGNALS:
        return Verdict(key, False, f"{CRASHED} {-code} in a batch decoded in AMX buffers")
    if code < 0:
        log.debug("AMX probe was stopped by signal %d", -code)
        return Verdict(key, False, NO_VERDICT)
    return Verdict(key, False, f"the child exited with {code}")


def read_verdict(path: Path) -> Verdict | None:
    """The verdict kept at path, or None when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Verdict(key=str(data["key"]), works=data["works"] is True, detail=str(data["detail"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_verdict(path: Path, verdict: Verdict) -> str | None:
    """Keep a verdict for later processes; return why it could not be written (a full disk, a file in the cache
    folder's place), which only costs the next process a probe, or None."""
    from localgen.errors import LocalgenError, os_reason
    from localgen.storage import atomic_write_text

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(asdict(verdict)) + "\n", mode=0o644, own_record=True)
    except (OSError, LocalgenError) as error:
        log.debug("the AMX probe's verdict was not kept: %s", error)
        return error.message if isinstance(error, LocalgenError) else f"{path}: {os_reason(error)}"
    return None
