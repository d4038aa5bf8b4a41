"""Under pytest-xdist: how many workers, which tests share one, and the serial tests run alone, last."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`'s workers: one per CPU this process may use, and two more, for the time the workers wait on
    terminals, children and sockets (the CPUs were 75-83% busy with one a CPU; on 2 CPUs, 4 workers ran 143 chat,
    pipe and Ctrl-C tests in 191-205 s where 3 took 196-212 s); serial tests still run alone."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus + 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the tests that share a module-scoped fixture run on one worker, and the serial tests
    come last, in their order, so the workers meet them together.

    Spread over the workers, a module's fixture was made again on each of them (test_promptcache's took 30-55 s
    on each); as one group (`--dist loadgroup`, which hands out the biggest groups first and the other tests one
    at a time) it is made once a run. Spread among the others, each serial test waited for the test the other
    worker had under way, and that worker then waited for it: both CPUs stood half idle at every one. Last, they
    run one after another while the other workers are done. A serial test is in no group: a group runs early.
    """
    if getattr(config.option, "loadgroup", False):
        for item in items:
            if item.get_closest_marker("serial") is None and _uses_a_module_fixture(item):
                _name_group(item, item.nodeid.split("::")[0])
    if "PYTEST_XDIST_WORKER" in os.environ:
        items.sort(key=lambda item: item.get_closest_marker("serial") is not None)


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """True when a test uses a module-scoped fixture (made again wherever the module's tests run apart)."""
    fixtures = getattr(item, "_fixtureinfo", None)
    return fixtures is not None and any(
        definitions[-1].scope == "module" for definitions in fixtures.name2fixturedefs.values() if definitions)


def _name_group(item: pytest.Item, group: str) -> None:
    """End a test's id with @GROUP, which `--dist loadgroup` groups by, as pytest-xdist does for an xdist_group
    mark: it sets the id pytest read before 9.2 (`_nodeid`), and pytest 9.2 reads a structured one (`_id`), so
    its marks group nothing there (pytest-xdist issue 1386)."""
    nodeid = f"{item.nodeid}@{group}"
    if hasattr(item, "_id"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(nodeid)
    else:
        item._nodeid = nodeid  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under pytest-xdist, a test marked serial runs alone (its set-up and tear-down too), the others side by side.

    Every test holds a lock file shared by the workers, a serial one exclusively: a test that times keys against an
    answer or a signal against a prompt, or one that keeps the CPUs busy with llama.cpp's threads (which spin while
    they wait for each other, so a busy CPU stalls them all), gets the machine to itself. A gate taken first, and
    held by a serial test until it has the lock, keeps new tests from starting meanwhile (Linux grants a shared lock
    while an exclusive one waits, so with many workers a serial test could wait until nearly the end).
    """
    folder = _workers_folder(item.config)
    if folder is None:
        yield
        return
    with (folder / "gate.lock").open("a") as gate, (folder / "one-at-a-time.lock").open("a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if item.get_closest_marker("serial") else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _workers_folder(config: pytest.Config) -> Path | None:
    """The folder the workers of this pytest-xdist run share (the run's temporary folder); None without xdist."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    return config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
