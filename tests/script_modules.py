"""The scripts in scripts/ loaded as modules, for tests that call their functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _scripts_on_path() -> None:
    """scripts/ on sys.path, where the scripts import their own modules from."""
    if str(SCRIPTS) not in sys.path:
        sys.path.append(str(SCRIPTS))


def bench_module(name: str) -> ModuleType:
    """A module of scripts/bench/ (bench.NAME), imported as bench_features.py imports it."""
    _scripts_on_path()
    return importlib.import_module(f"bench.{name}")


def script(name: str) -> ModuleType:
    """A script from scripts/ as a module (the folder on sys.path, for the scripts it imports)."""
    _scripts_on_path()
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
