"""Hardware facts and load planning: what this machine has, and how to load a model on it."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def physical_cores() -> int:
    """The number of physical CPU cores (not hyper-threads) this process may use."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cores: set[tuple[str, str]] = set()
    try:
        physical_id = core_id = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                physical_id = value.strip()
            elif key == "core id":
                core_id = value.strip()
                cores.add((physical_id, core_id))
    except OSError:
        pass
    return max(1, min(len(cores) or allowed, allowed))
