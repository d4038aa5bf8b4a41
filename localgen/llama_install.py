"""The llama-cpp-python installed here, read without importing it (its library may not load), and the pip command
that builds it again: with CUDA, for the CPU only, or as it was built."""

from __future__ import annotations

import contextlib
import importlib.util
import re
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def installed_version() -> str:
    """The installed llama-cpp-python's version: its package's __version__ line, read rather than imported, and
    before a metadata scan, which costs tens of milliseconds a run; '' where it is not installed."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        spec = importlib.util.find_spec("llama_cpp")
        if spec is not None and spec.origin:
            init = Path(spec.origin).read_text(encoding="utf-8")
            found = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", init, re.MULTILINE)
            if found:
                return found.group(1)
    from importlib import metadata

    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return ""


def reinstall_command(version: str, *, cuda: bool | None) -> str:
    """pip's command that builds llama-cpp-python (version, where known) again: with CUDA (cuda True), for the CPU
    only (False), or with whatever CMAKE_ARGS the shell has (None)."""
    cmake = "" if cuda is None else f'CMAKE_ARGS="-DGGML_CUDA={"on" if cuda else "off"}" '
    return f"{cmake}pip install --force-reinstall --no-cache-dir llama-cpp-python{f'=={version}' if version else ''}"
