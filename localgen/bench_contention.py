"""What `localgen bench` says of other processes keeping the CPUs busy: before its tests, where they already do, and
after, of the tests whose threads lost CPU time to them (their figures are then below the machine's when idle)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from localgen.hardware import allowed_cpus

if TYPE_CHECKING:
    from localgen.bench import BenchResult

BUSY_NOTE_CPUS = 0.25  # CPUs' worth of a test's threads' time other processes may take before its figures are low
BUSY_BEFORE_S = 0.3  # the least time over which the CPUs are watched before the tests, to tell how busy they are


def contention_note(result: BenchResult, n_cpus: int | None = None) -> str | None:
    """A warning where other processes took CPU time that a test's threads needed: its figures are below what the
    machine does idle (n_cpus: the CPUs this process may use, by default)."""
    n_cpus = allowed_cpus() if n_cpus is None else n_cpus
    threads = {"prefill": result.threads_batch, "decode": result.threads}
    busy = [(test, cpus) for test, cpus in result.busy_elsewhere.items() if _slows(cpus, threads[test], n_cpus)]
    if not busy:
        return None
    used = " and ".join(f"{cpus:.2f} during the {test} test" for test, cpus in busy)
    return _busy_note(used, "these figures are", threads, busy, n_cpus)


def busy_before_note(cpus: float, threads: dict[str, int], tests: Iterable[str],
                     n_cpus: int | None = None) -> str | None:
    """The same warning, at the start, where other processes kept cpus CPUs' worth busy before the tests to run
    (threads: the threads of the prefill and decode tests): the figures to come will be below the machine's idle
    ones."""
    n_cpus = allowed_cpus() if n_cpus is None else n_cpus
    busy = [(test, cpus) for test in tests if _slows(cpus, threads[test], n_cpus)]
    return None if not busy else _busy_note(f"{cpus:.2f} before the tests", "the figures will be", threads, busy,
                                            n_cpus)


def _slows(cpus: float, threads: int, n_cpus: int) -> bool:
    """Whether other processes taking cpus CPUs' worth of time leave a test's threads less than they need."""
    return cpus >= max(0, n_cpus - threads) + BUSY_NOTE_CPUS


def _busy_note(used: str, figures: str, threads: dict[str, int], busy: list[tuple[str, float]], n_cpus: int) -> str:
    """The warning's one line: what other processes used, that the figures are below the machine's idle ones, and
    the thread counts that may measure more."""
    return (f"other processes kept CPUs busy ({used}): {figures} below this machine's when it is idle"
            + _fewer_threads_hint(threads, busy, n_cpus))


def _fewer_threads_hint(threads: dict[str, int], busy: list[tuple[str, float]], n_cpus: int) -> str:
    """'; beside them, -t 1 --threads-batch 2 may measure more (...)' where a test ran more threads than the CPUs
    others left it: its threads waited on each other while one was preempted, as `localgen run` avoids by decoding
    with fewer. -t alone would set the prefill's threads too, so the prefill's are named with it."""
    fewer = {test: left for test, cpus in busy if (left := max(1, int(n_cpus - cpus + 0.5))) < threads[test]}
    if not fewer:
        return ""
    suggested = {**threads, **fewer}
    options = f"-t {suggested['decode']} --threads-batch {suggested['prefill']}" if "decode" in fewer else \
        f"--threads-batch {suggested['prefill']}"
    return (f"; beside them, {options} may measure more (localgen run decodes with fewer threads on its own while "
            "the CPUs are busy)")
