"""What `localgen bench` says of other processes keeping the CPUs busy: before its tests, where they already do, and
after, of the tests whose threads lost CPU time to them (their figures are then below the machine's when idle)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from localgen.hardware import allowed_cpus

if TYPE_CHECKING:
    from localgen.bench import BenchResult

BUSY_NOTE_CPUS = 0.25  # CPUs' worth of a test's threads' time other processes may take before its figures are low


class BusyWarnings:
    """bench's warnings that other processes keep the CPUs busy: as it begins, and after, of its tests (where both
    name the same thread counts that may measure more, the second refers to the first's)."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._warn = warn
        self._said: list[str] = []

    def before(self, note: str) -> None:
        """Warn as the benchmark begins (busy_before_note's note)."""
        self._said.append(note)
        self._warn(note)

    def after(self, result: BenchResult) -> None:
        """Warn, once the tests are over, where other processes took CPU time that their threads needed."""
        note = contention_note(result, said=self._said)
        if note is not None:
            self._warn(note)


def contention_note(result: BenchResult, n_cpus: int | None = None, said: Iterable[str] = ()) -> str | None:
    """A warning where other processes took CPU time that a test's threads needed: its figures are below what the
    machine does idle (n_cpus: the CPUs this process may use, by default); the thread counts that may measure more
    are referred to, not named again, where a warning said (busy_before_note's, as the benchmark began) named them."""
    n_cpus = allowed_cpus() if n_cpus is None else n_cpus
    threads = {"prefill": result.threads_batch, "decode": result.threads}
    busy = [(test, cpus) for test, cpus in result.busy_elsewhere.items() if _slows(cpus, threads[test], n_cpus)]
    if not busy:
        return None
    used = "CPUs busy (" + " and ".join(f"{cpus:.2f} during the {test} test" for test, cpus in busy) + ")"
    return _busy_note(used, "these figures are", threads, busy, n_cpus, said)


def busy_before_note(cpus: float, threads: dict[str, int], tests: Iterable[str],
                     n_cpus: int | None = None) -> str | None:
    """The same warning, at the start, where other processes kept cpus CPUs' worth busy before the tests to run
    (threads: the threads of the prefill and decode tests): the figures to come will be below the machine's idle
    ones."""
    n_cpus = allowed_cpus() if n_cpus is None else n_cpus
    busy = [(test, cpus) for test in tests if _slows(cpus, threads[test], n_cpus)]
    return None if not busy else _busy_note(f"{cpus:.2f} CPUs busy before the tests", "the figures will be", threads,
                                            busy, n_cpus)


def _slows(cpus: float, threads: int, n_cpus: int) -> bool:
    """Whether other processes taking cpus CPUs' worth of time leave a test's threads less than they need."""
    return cpus >= max(0, n_cpus - threads) + BUSY_NOTE_CPUS


def _busy_note(used: str, figures: str, threads: dict[str, int], busy: list[tuple[str, float]], n_cpus: int,
               said: Iterable[str] = ()) -> str:
    """The warning's one line: what other processes used, that the figures are below the machine's idle ones, and
    the thread counts that may measure more (referred to where a warning said names them already)."""
    hint = _fewer_threads_hint(threads, busy, n_cpus)
    if hint and any(hint in note for note in said):
        hint = "; beside them, the thread counts named above may measure more"
    return f"other processes kept {used}: {figures} below this machine's when it is idle{hint}"


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
