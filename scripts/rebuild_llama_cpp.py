"""Rebuild the installed llama-cpp-python from source with the AMX tile-configuration fix (README: Intel AMX).

Built by GCC 12, llama.cpp's AMX kernels crash, and localgen leaves AMX off. This reinstalls the same version
of llama-cpp-python, compiled with scripts/amx_tile_config_fix.h forced into every source file, then says whether
localgen's probe now finds AMX working. It takes as long as the first install (minutes on two cores).

Usage: python scripts/rebuild_llama_cpp.py [--dry-run]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIX_HEADER = Path(__file__).resolve().parent / "amx_tile_config_fix.h"
PACKAGE = "llama-cpp-python"
VERDICT = ("from localgen.engine import use_cpu_extra_buffers\n"
           "print('AMX buffers: used' if use_cpu_extra_buffers() else 'AMX buffers: not used')")


def tile_fix_cmake_args(header: Path) -> list[str]:
    """CMake arguments that force the fix header into every C and C++ file of llama.cpp's build (no spaces in
    header's path: CMAKE_ARGS is split on them)."""
    return [f"-DCMAKE_C_FLAGS=-include{header}", f"-DCMAKE_CXX_FLAGS=-include{header}"]


def pip_command(version: str) -> list[str]:
    """pip reinstalling this version of llama-cpp-python from source, neither from nor into its wheel cache."""
    return [sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-cache-dir",
            "--no-binary", PACKAGE, f"{PACKAGE}=={version}"]


def main() -> None:
    """Rebuild, or with --dry-run say what would be run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the command and its CMAKE_ARGS, run nothing")
    args = parser.parse_args()
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"rebuild_llama_cpp: {PACKAGE} is not installed; install localgen first (README: Quick start)")
    with tempfile.TemporaryDirectory(prefix="localgen-amx-") as folder:
        header = Path(folder) / FIX_HEADER.name
        shutil.copyfile(FIX_HEADER, header)
        cmake_args = " ".join(filter(None, [os.environ.get("CMAKE_ARGS", "").strip(), *tile_fix_cmake_args(header)]))
        command = pip_command(version)
        print(f"CMAKE_ARGS={shlex.quote(cmake_args)} {shlex.join(command)}", flush=True)
        if args.dry_run:
            return
        subprocess.run(command, env={**os.environ, "CMAKE_ARGS": cmake_args}, check=True)
    subprocess.run([sys.executable, "-c", VERDICT], check=True)  # a new process: the new library, probed anew


if __name__ == "__main__":
    main()
