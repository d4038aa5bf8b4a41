"""The test modules' bytecode as pytest rewrote their asserts: kept between runs, and made once a run, not a worker."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Keep the test modules' bytecode, as pytest rewrote their asserts, whatever PYTHONDONTWRITEBYTECODE says; a
    pytest-xdist worker first rewrites its share of the modules that have none yet.

    pytest rewrites a test module's asserts as it imports it, and keeps the result only where bytecode may be
    written: where PYTHONDONTWRITEBYTECODE is set (as on CI), every worker of every run rewrote and compiled each
    test module again (10 s CPU a worker, of the 14.5 s its collection took; 4 s with them kept). On a fresh
    checkout (as on CI) none is kept yet, and the workers, collecting the same modules in the same order, each
    rewrote them all at once: 10 s CPU a worker. Each rewrites a share first, then finds the others' kept.
    """
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        config = session.config
        worker = getattr(config, "workerinput", None)  # what pytest-xdist gives its workers (not their environment)
        if worker is not None and config.getoption("assertmode") == "rewrite":
            rewrite_share(config, collected_modules(config), int(worker["workerid"][2:]), int(worker["workercount"]))
        yield
    finally:
        sys.dont_write_bytecode = saved


def collected_modules(config: pytest.Config) -> list[Path]:
    """The test modules the run's arguments (or testpaths) name, in order: files named, and those in folders."""
    modules: list[Path] = []
    for arg in config.args:
        path = config.invocation_params.dir / arg.split("::")[0]
        if path.is_dir():
            modules += modules_under(config, path)
        elif path.is_file() and is_test_module(config, path):
            modules.append(path)
    return list(dict.fromkeys(modules))


def modules_under(config: pytest.Config, folder: Path) -> Iterator[Path]:
    """The test modules pytest collects under a folder, in its order: none it ignores (norecursedirs...)."""
    try:  # the folder's conftests, as pytest loads them before collecting it: their collect_ignore
        config.pluginmanager._loadconftestmodules(folder, config.getoption("importmode"), rootpath=config.rootpath,
                                                  consider_namespace_packages=config.getini(
                                                      "consider_namespace_packages"))
    except Exception:  # one that fails to import: collecting the folder reports it, and none under it is rewritten
        return
    for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
        path = Path(entry.path)
        if config.hook.pytest_ignore_collect(collection_path=path, config=config):
            continue
        if entry.is_dir():
            yield from modules_under(config, path)
        elif entry.is_file() and is_test_module(config, path):
            yield path


def is_test_module(config: pytest.Config, path: Path) -> bool:
    """Whether the file is a Python module whose name python_files matches."""
    return path.suffix == ".py" and any(fnmatch.fnmatch(path.name, glob) for glob in config.getini("python_files"))


def rewrite_share(config: pytest.Config, modules: list[Path], worker: int, workers: int) -> None:
    """Rewrite and keep, as pytest's import would, every workers-th module from the worker-th that has none kept,
    until one cannot be kept."""
    try:
        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _write_pyc, get_cache_dir
        from _pytest.assertion.rewrite import assertstate_key as state_key
    except ImportError:  # another pytest's insides: each worker rewrites them all as it imports them
        return
    for module in modules[worker::workers]:
        pyc = get_cache_dir(module) / (module.name[:-3] + PYC_TAIL)
        if _read_pyc(module, pyc) is not None:
            continue
        try:
            pyc.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return
        rewritten = quietly_rewritten(config, module)
        if rewritten is not None and not _write_pyc(config.stash[state_key], rewritten[1], rewritten[0], pyc):
            return  # an unwritable cache: the others would be rewritten for nothing


def quietly_rewritten(config: pytest.Config, module: Path) -> tuple[bytes, types.CodeType] | None:
    """The module's source hash and rewritten code, or None where rewriting it warns or fails (its import says so)."""
    from _pytest.assertion.rewrite import _rewrite_test

    # under -W error a warning raised here, as any exception, ended the whole run: the module's import rewrites it
    # again, and reports it as pytest does
    with warnings.catch_warnings(record=True) as warned, contextlib.suppress(Exception):
        warnings.simplefilter("always")
        rewritten = _rewrite_test(module, config)
        return None if warned else rewritten
    return None
