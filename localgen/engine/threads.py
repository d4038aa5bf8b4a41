"""Fewer decode threads while other processes keep the CPUs busy, chosen by measuring both counts.

llama.cpp's CPU threads wait for one another, spinning, after every graph node: one thread that the scheduler
preempts for another process stalls them all. On a 2-core machine beside one busy process, 2 threads decoded
at 19-20 tok/s and 1 thread at 42-44 tok/s. The governor watches other processes' CPU use (/proc/stat less this
process's own time) and the decode steps' times; when either says the CPUs are contended it decodes a few
steps with fewer threads and keeps whichever count was faster, and it tries more again once CPUs are free. A
prompt's prefill starts with the count that the CPU time left free since the last sample allows. Waiting threads
that sleep instead (OpenMP's OMP_WAIT_POLICY=passive, read once as llama.cpp's library loads) would spare a busy
CPU too, but an idle one then decodes at a third of the speed (27.6 against 91-97 tok/s, 2 threads), so the wait
stays a spin and the count is what changes.

A count changes no output where each value is summed by one thread, whatever the count: matrix products, a
prompt's attention, attention without flash attention, and flash attention over quantized keys. llama.cpp's
CPU flash attention over an f16 KV cache splits the cached keys of a one-token batch among the threads once it
reads 512 of them (the tokens held, rounded up to 256), and adds the parts up in an order the count sets: there
the governor holds a count until the answer ends, so that the answer is the one `--threads` with that count
gives: the one the CPU time other processes left free since the last window (or the prefill's start, or the last
answer's end) allows, by the rule a prefill's count follows. A load that starts or ends after that is not
followed. Jumping to every thread there instead stalled a busy machine: 0.5-0.9 tok/s against 14-19 with the one
thread held (2 cores, one busy loop beside).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from localgen.hardware import allowed_cpus

log = logging.getLogger("localgen.engine")

WINDOW_S = 0.2  # a measurement window: at least this long...
WINDOW_MIN_STEPS = 4  # ...and this many decode steps, or...
WINDOW_MAX_STEPS = 32  # ...this many steps, whichever comes first
BUSY_MARGIN = 0.5  # contended: fewer than (threads - this) CPUs' worth of time left free by other processes
SLOWER = 1.5  # contended too: steps this much slower than the best window of this generation at this count
FASTER = 0.9  # a tried count is kept when its steps take at most this fraction of the current count's
FIRST_BACKOFF = 4  # windows to wait after a try that was not faster, doubled after each such try...
MOST_BACKOFF = 64  # ...up to this many
PROC_STAT = Path("/proc/stat")  # Linux's per-CPU time counters
SPLIT_ATTENTION_FROM = 256  # a one-token batch at this position or later reads 512 keys: see the module's docstring


def median_of(values: list[float]) -> float:
    """statistics.median's value, without its import (fractions and decimal with it: 3 ms of every start)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True)
class CpuSample:
    """CPU time spent on the CPUs this process may use, by every process (None: not known) and by this one."""

    wall_s: float
    all_busy_s: float | None
    own_s: float


def cpu_sample() -> CpuSample:
    """A CPU time sample now (Linux's per-CPU counters; elsewhere only this process's own time). Own time counts
    the child processes waited for (the AMX probe's) as this process's."""
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return CpuSample(wall_s=time.monotonic(), all_busy_s=_busy_seconds(PROC_STAT), own_s=own)


def _busy_seconds(stat: Path) -> float | None:
    """Busy time (steal included: a hypervisor's other guests contend too) of the CPUs in this process's affinity
    mask since boot, from /proc/stat; None where it cannot be read."""
    try:
        lines = stat.read_text(encoding="ascii").splitlines()
        allowed = os.sched_getaffinity(0)
        ticks = 0
        for line in lines:
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in allowed:
                user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
                ticks += user + nice + system + irq + softirq + steal
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None


_at_import: list[CpuSample] = [cpu_sample()]  # the engine's import, early in a command: the first load's window


def load_started() -> CpuSample:
    """The sample a new Engine's first prefill measures from: the engine's import for the process's first Engine
    (the command's model resolution and checks count as well as the load), a sample now for later ones."""
    return _at_import.pop() if _at_import else cpu_sample()


def count_matters_from(flash_attention: bool, key_type: str) -> int | None:
    """The position from which a one-token batch's output depends on the thread count (None: from none), for the KV
    cache's key type (LoadOptions.key_type: f16 keys come only with f16 values, the split's other condition)."""
    return SPLIT_ATTENTION_FROM if flash_attention and key_type == "f16" else None


def ahead_threads(batch_threads: int) -> int:
    """Threads for the batches of a prefill while the user types, one fewer than the answer's batches take: one CPU
    is left to the prompt's redraw of each key, which beside every thread waited for them (a 7-token batch: 85-115
    ms on one thread, 230 ms and more on two beside the redraw, 2 cores); a batch of one token keeps the decode
    count, which changes no output."""
    return max(1, batch_threads - 1)


def busy_elsewhere(before: CpuSample, after: CpuSample) -> float | None:
    """CPUs' worth of time other processes took between two samples (None: not known or too short)."""
    wall = after.wall_s - before.wall_s
    if before.all_busy_s is None or after.all_busy_s is None or wall <= 0:
        return None
    others = (after.all_busy_s - before.all_busy_s) - (after.own_s - before.own_s)
    return max(0.0, others) / wall


@contextlib.contextmanager
def others_busy(found: Callable[[float], None], least_s: float) -> Iterator[None]:
    """Tell found how many CPUs' worth of time other processes took while the block ran, where it ran least_s or
    longer (shorter, the kernel's clock ticks make the figure too coarse)."""
    before = cpu_sample()
    try:
        yield
    finally:
        after = cpu_sample()
        busy = busy_elsewhere(before, after) if after.wall_s - before.wall_s >= least_s else None
        if busy is not None:
            found(busy)


def free_cpus(before: CpuSample, after: CpuSample, n_cpus: int) -> float | None:
    """CPUs' worth of time other processes left free between two samples (None: not known or too short)."""
    busy = busy_elsewhere(before, after)
    return None if busy is None else n_cpus - busy


class ThreadGovernor:
    """Chooses how many threads decode, from 1 to most, by the times of single-token decode steps."""

    def __init__(self, most: int, apply: Callable[[int], None], sample: Callable[[], CpuSample] = cpu_sample,
                 n_cpus: int | None = None, since: CpuSample | None = None, exact_from: int | None = None) -> None:
        """since: a sample taken earlier (before the model's load), from which the first prefill measures;
        exact_from: the position from which a one-token batch's output depends on the count (count_matters_from)."""
        self.most = most
        self._exact_from = exact_from
        self.current = self._applied = most  # the count in use, and the count applied last (a trial's, while one runs)
        self._trying: tuple[int, float] | None = None  # the count tried, and the current one's last window median
        self._held = False  # the count is held, as it changes the output (one_token_at)
        self._apply, self._sample = apply, sample
        self._n_cpus = n_cpus if n_cpus is not None else allowed_cpus()
        self._backoff = {-1: 0, 1: 0}  # windows still to wait before trying fewer (-1) or more (1) threads
        self._next_backoff = {-1: FIRST_BACKOFF, 1: FIRST_BACKOFF}
        self.start(since)
        self._held_from = self._since  # where the free CPUs a hold follows are measured from (one_token_at)

    def start(self, since: CpuSample | None = None) -> None:
        """Begin a generation: new windows, a new best (the steps' time grows with the context), measured from since
        (a sample now where none is given); a trial under way ends at the count in use, and a count held stays held
        (the prompt's last batch may have run with it)."""
        self._steps: list[float] = []
        self._best: dict[int, float] = {}
        self._skip = 0
        self._drop_trial()
        self._since = since or self._sample()

    def before_prefill(self) -> None:
        """Before a prompt is prefilled: the CPU time other processes took since the last sample (the model's load,
        the user's typing, the end of the last answer) sets the count the prefill starts with, fewer threads where
        they kept the CPUs busy and every one where they left them free. A prefill gives no single-token steps to
        time, so the decode windows that follow judge the count as before. A count held since the last answer ended
        (the prompt's part computed while it was typed ended in a one-token batch where the count matters) stays
        held, so that the whole answer follows one count."""
        now = self._sample()
        since, self._since = self._since, now
        if self._held:
            return
        self._held_from = now
        self._fit_free_cpus(since, now, "prefill")
        self._drop_trial()

    def finish(self) -> None:
        """End a generation: a count held is let go (none is applied), and the next prompt's one-token batch or
        first decode step measures the free CPUs from here."""
        self._held = False
        self._since = self._held_from = self._sample()

    def _fit_free_cpus(self, since: CpuSample, now: CpuSample, what: str) -> None:
        """Make the count in use the one the CPU time other processes left free between two samples allows, where
        they lie WINDOW_S or more apart (fewer threads where they kept the CPUs busy, every one where they left them
        free); the caller applies it."""
        free = free_cpus(since, now, self._n_cpus) if now.wall_s - since.wall_s >= WINDOW_S else None
        if free is None:
            return
        fitting = max(1, min(self.most, int(free + BUSY_MARGIN)))
        if fitting != self.current:
            log.debug("%s threads %d -> %d: other processes left %.1f CPUs free", what, self.current, fitting, free)
            self.current = fitting

    def step_done(self, seconds: float) -> None:
        """Count one single-token decode step's time; at the end of a window, perhaps try or keep another count."""
        if self._held:
            return
        if self._skip:  # the first step after a change pays for it (the thread team is resized)
            self._skip -= 1
            return
        steps = self._steps
        steps.append(seconds)
        if len(steps) < WINDOW_MAX_STEPS and (len(steps) < WINDOW_MIN_STEPS or sum(steps) < WINDOW_S):
            return
        median = median_of(steps)
        self._steps = []
        if self._trying is not None:
            self._end_try(median)
            return
        now = self._sample()
        free = free_cpus(self._since, now, self._n_cpus)
        self._since = self._held_from = now
        n = self.current
        best = self._best[n] = min(self._best.get(n, median), median)
        waiting = {direction: wait > 0 for direction, wait in self._backoff.items()}
        self._backoff = {direction: max(0, wait - 1) for direction, wait in self._backoff.items()}
        if n > 1 and not waiting[-1] and ((free is not None and free < n - BUSY_MARGIN) or median > SLOWER * best):
            fewer = n - 1 if free is None else int(free + BUSY_MARGIN)
            self._try(max(1, min(n - 1, fewer)), median)
        elif n < self.most and not waiting[1] and (free is None or free >= n + 1 - BUSY_MARGIN):
            self._try(n + 1, median)

    def _try(self, count: int, current_median: float) -> None:
        """Decode the next window with count threads."""
        self._trying = (count, current_median)
        self._set(count)

    def _end_try(self, tried_median: float) -> None:
        """Keep the tried count if its window was faster, else go back and wait longer before trying again."""
        assert self._trying is not None
        count, current_median = self._trying
        self._trying = None
        direction = -1 if count < self.current else 1
        if tried_median <= FASTER * current_median:
            log.debug("decode threads %d -> %d: a step took %.1f ms, now %.1f ms", self.current, count,
                      current_median * 1000, tried_median * 1000)
            self.current = count
            self._best[count] = tried_median
            self._next_backoff = {-1: FIRST_BACKOFF, 1: FIRST_BACKOFF}
            self._since = self._held_from = self._sample()  # the free CPUs measured from here on are the new count's
        else:
            self._set(self.current)
            self._backoff[direction] = self._next_backoff[direction]
            self._next_backoff[direction] = min(MOST_BACKOFF, 2 * self._next_backoff[direction])

    def one_token_at(self, position: int) -> None:
        """Before a one-token batch at this position (a decode step, a prompt's last batch): where the count changes
        its output, hold the count the CPU time left free since the last window (or the prefill's start) allows, the
        count in use where that time is too short to tell (a trial under way is given up), trying no other until the
        generation ends (finish); a batch before the position (a new answer over a shorter cache) lets the governor
        work again."""
        if self._exact_from is None:
            return
        if position < self._exact_from:
            self._held = False
            return
        if self._held:
            return
        self._fit_free_cpus(self._held_from, self._sample(), "held")
        self._drop_trial()
        log.debug("decode threads %d held from %d tokens on: the count changes flash attention's sums there",
                  self.current, position)
        self._held, self._steps = True, []

    def _drop_trial(self) -> None:
        """End a trial under way, if one is, and apply the count in use where another was applied last."""
        self._trying = None
        if self._applied != self.current:
            self._set(self.current)

    def reapply(self) -> None:
        """Apply the count in use (a trial's, while one runs) again: a new context starts with the load's count."""
        self._set(self._trying[0] if self._trying is not None else self.current)

    def _set(self, count: int) -> None:
        """Decode with count threads from the next step on."""
        self._apply(count)
        self._applied, self._skip = count, 1
