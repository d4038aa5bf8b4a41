"""The limits on this process's memory that make an allocation fail (`ulimit -d`, `ulimit -v`), and what they leave."""

from __future__ import annotations

import resource
from pathlib import Path

from localgen.units import binary_size

# `ulimit -v`, and `ulimit -d`, which Linux holds private writable mappings to (llama.cpp's buffers among them)
MEMORY_LIMITS = {resource.RLIMIT_DATA: "ulimit -d", resource.RLIMIT_AS: "ulimit -v"}


def data_limit() -> int | None:
    """`ulimit -d` in bytes; None where there is none."""
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def data_in_use() -> int:
    """The bytes `ulimit -d` counts as mapped by this process (Linux's VmData); OSError or ValueError where /proc does
    not tell."""
    status = Path("/proc/self/status").read_text()
    fields = next((line.split() for line in status.splitlines() if line.startswith("VmData:")), None)
    if fields is None or len(fields) < 2:
        raise ValueError("no VmData in /proc/self/status")
    return int(fields[1]) * 1024


def memory_limit_words() -> str | None:
    """The memory limits set on this process, as a hint names them (`ulimit -d` of 254.0 MiB); None where none is."""
    words = [f"`{name}` of {binary_size(limit)}" for which, name in MEMORY_LIMITS.items()
             if (limit := resource.getrlimit(which)[0]) != resource.RLIM_INFINITY]
    return " and ".join(words) or None


def out_of_memory_hint() -> str:
    """What to do where an allocation failed: raise the limit set on this process, or ask for less memory."""
    limits = memory_limit_words()
    if limits:
        return f"{limits} holds this process: raise it, or try a smaller --ctx-size or model"
    return "free some memory, or try a smaller --ctx-size or model"
