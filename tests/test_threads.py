"""Fewer decode threads while other processes keep the CPUs busy: the governor's rules, and the real engine."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from localgen.console import format_stats
from localgen.engine import Engine, core, lc
from localgen.engine.threads import (
    FIRST_BACKOFF,
    SPLIT_ATTENTION_FROM,
    WINDOW_MAX_STEPS,
    WINDOW_MIN_STEPS,
    WINDOW_S,
    CpuSample,
    ThreadGovernor,
    _busy_seconds,
    count_matters_from,
    free_cpus,
    others_busy,
)
from localgen.events import Finished, Timings, Usage
from localgen.gguf_split import validate_split
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.resolve import resolve_model
from localgen.runner import ModelOptions, plan_load
from tests.conftest import REPO_ROOT, run_localgen_in

# The tests that measure how busy the CPUs are, or run two llama.cpp threads, run alone (serial, conftest); the
# governor's rules, on a fake machine, run beside the others.

PROMPT = "Write a long story about a lighthouse keeper."


class Machine:
    """A fake machine: CPU samples with a chosen number of free CPUs, and the thread counts applied."""

    def __init__(self, n_cpus: int = 2, free: float | None = 2.0) -> None:
        self.n_cpus, self.free = n_cpus, free
        self.wall = self.all_busy = self.own = 0.0
        self.seconds_per_sample = 1.0  # the time from one sample to the next
        self.samples = 0  # the samples taken
        self.applied: list[int] = []
        self.changed = False  # a count was applied since the last step

    def sample(self) -> CpuSample:
        """seconds_per_sample later: others used n_cpus - free CPUs, this process 1.5, over each second of it."""
        seconds = self.seconds_per_sample
        self.samples += 1
        self.wall += seconds
        self.own += 1.5 * seconds
        self.all_busy += (1.5 + self.n_cpus - (self.free if self.free is not None else self.n_cpus)) * seconds
        return CpuSample(self.wall, None if self.free is None else self.all_busy, self.own)

    def governor(self, most: int = 2, exact_from: int | None = None) -> ThreadGovernor:
        """A governor of up to most threads on this machine."""
        return ThreadGovernor(most, self.apply, self.sample, n_cpus=self.n_cpus, exact_from=exact_from)

    def apply(self, count: int) -> None:
        """Record a thread count applied."""
        self.applied.append(count)
        self.changed = True


def busy_machine_governs(monkeypatch: pytest.MonkeyPatch) -> Machine:
    """Engines made from here on govern their threads on this machine, whose other processes take one of two CPUs."""
    machine = Machine(free=1.0)
    monkeypatch.setattr(core, "ThreadGovernor", functools.partial(ThreadGovernor, sample=machine.sample, n_cpus=2))
    monkeypatch.setattr(core, "load_started", machine.sample)
    return machine


def steps(machine: Machine, governor: ThreadGovernor, seconds: float, windows: int = 1) -> None:
    """Feed whole windows of equal step times, after the uncounted step that follows a change of count."""
    window: list[float] = []
    while len(window) < WINDOW_MAX_STEPS and (len(window) < WINDOW_MIN_STEPS or sum(window) < WINDOW_S):
        window.append(seconds)
    per_window = len(window)
    for _ in range(windows):
        if machine.changed:
            governor.step_done(seconds)
            machine.changed = False
        for _ in range(per_window):
            governor.step_done(seconds)


def test_an_idle_machine_keeps_every_thread() -> None:
    machine = Machine()
    governor = machine.governor()
    steps(machine, governor, 0.012, windows=20)
    assert (governor.current, machine.applied) == (2, [])


def test_busy_cpus_make_it_try_fewer_and_keep_them_when_faster() -> None:
    machine = Machine(free=1.0)
    governor = machine.governor()
    steps(machine, governor, 0.040)  # a window at 2 threads; one CPU's worth is taken: it tries 1
    assert machine.applied == [1]
    steps(machine, governor, 0.020)  # faster: kept
    assert (governor.current, machine.applied) == (1, [1])
    steps(machine, governor, 0.020, windows=10)  # still busy: no try of 2
    assert machine.applied == [1]


def test_fewer_threads_that_are_not_faster_are_given_up_and_tried_later() -> None:
    machine = Machine(free=1.0)
    governor = machine.governor()
    steps(machine, governor, 0.012)
    steps(machine, governor, 0.020)  # 1 thread is slower: back to 2
    assert (governor.current, machine.applied) == (2, [1, 2])
    steps(machine, governor, 0.012, windows=FIRST_BACKOFF)  # it waits before trying again...
    assert machine.applied == [1, 2]
    steps(machine, governor, 0.012)  # ...then tries once more
    assert machine.applied == [1, 2, 1]


def test_steps_that_slow_down_make_it_try_fewer_without_cpu_counters() -> None:
    machine = Machine(free=None)
    governor = machine.governor()
    steps(machine, governor, 0.012, windows=3)
    assert machine.applied == []
    steps(machine, governor, 0.030)  # 2.5x slower than its best window: contended
    steps(machine, governor, 0.015)
    assert (governor.current, machine.applied) == (1, [1])


def test_freed_cpus_bring_the_threads_back() -> None:
    machine = Machine(free=1.0)
    governor = machine.governor()
    steps(machine, governor, 0.040)
    steps(machine, governor, 0.020)
    assert governor.current == 1
    machine.free = 2.0
    steps(machine, governor, 0.020)  # a window at 1 thread sees two free CPUs: it tries 2
    steps(machine, governor, 0.012)
    assert (governor.current, machine.applied) == (2, [1, 2])


def test_the_step_after_a_change_is_not_counted() -> None:
    machine = Machine(free=1.0)
    governor = machine.governor()
    steps(machine, governor, 0.040)
    governor.step_done(5.0)  # resizing the thread team: not a measure of 1 thread
    machine.changed = False
    steps(machine, governor, 0.020)
    assert governor.current == 1


def test_a_new_context_gets_the_count_in_use_again_a_trial_s_included() -> None:
    """A context that replaces another (the KV cache grew) starts with the load's count: the one in use is applied
    again, and the step after it, which resizes the thread team, is not counted."""
    machine = Machine(free=1.0)
    governor = machine.governor()
    governor.reapply()
    assert machine.applied == [2]
    steps(machine, governor, 0.040)  # busy: it tries 1 thread
    assert machine.applied == [2, 1]
    governor.reapply()  # mid-trial: the trial's count
    assert machine.applied == [2, 1, 1]
    steps(machine, governor, 0.020)  # the trial is judged on its own steps: faster, kept
    assert (governor.current, machine.applied) == (1, [2, 1, 1])


def test_where_the_count_changes_flash_attention_s_sums_the_count_in_use_is_held() -> None:
    """Past that position a one-token batch holds the count the free CPUs allow, fewer threads on a busy machine
    and every one on an idle one; a trial under way ends, and no count is tried until the next prefill or a batch
    before the position; before it, and where the count changes nothing, the governor works."""
    machine = Machine(free=1.0)
    governor = machine.governor(exact_from=256)
    steps(machine, governor, 0.040)
    steps(machine, governor, 0.020)
    governor.one_token_at(255)
    assert (governor.current, machine.applied) == (1, [1])
    governor.one_token_at(256)
    assert (governor.current, machine.applied) == (1, [1]), "busy: the one thread in use is held, not both"
    machine.free = 2.0
    steps(machine, governor, 0.010, windows=10)  # the CPUs are free again: no trial of 2 while held
    assert (governor.current, machine.applied) == (1, [1])
    governor.finish()
    governor.before_prefill()  # the next prompt's batches of several tokens take what the free CPUs allow again
    governor.one_token_at(300)
    assert (governor.current, machine.applied) == (2, [1, 2]), "idle: every thread is held"
    machine.free = 1.0
    steps(machine, governor, 0.040, windows=10)  # busy and slow: no trial
    assert machine.applied == [1, 2]
    governor.start()  # a new generation over a shorter cache tries counts until the position again
    governor.one_token_at(100)
    steps(machine, governor, 0.040)
    assert machine.applied == [1, 2, 1]
    trying = machine.governor(exact_from=256)
    steps(machine, trying, 0.040)  # a trial of 1 thread under way
    tried = len(machine.applied)
    trying.one_token_at(300)
    assert (trying.current, machine.applied[tried:]) == (1, []), "busy: the free CPUs measured say 1, kept"
    steps(machine, trying, 0.020, windows=10)
    assert (trying.current, machine.applied[tried:]) == (1, [])
    unaffected = machine.governor(exact_from=None)
    unaffected.one_token_at(5000)
    steps(machine, unaffected, 0.040)
    assert machine.applied[-1:] == [1]
    assert count_matters_from(True, "f16") == SPLIT_ATTENTION_FROM
    assert count_matters_from(False, "f16") is count_matters_from(True, "q8_0") is None


def _greedy_text_and_logits(engine: Engine, prompt: list[int]) -> tuple[str, list[float], int]:
    """Four tokens decoded greedily, end-of-generation tokens included, the logits the last was chosen from, and
    the threads decoding at the end (Finished.decode_threads)."""
    events = engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=4), ignore_eog=True)
    finished = next(event for event in events if isinstance(event, Finished))
    return finished.text, lc.llama_get_logits_ith(engine._ctx, -1)[:engine._vocab.n_tokens], finished.decode_threads


def _pinned_answers(bundled_model: Path, options: LoadOptions, count: int, prompt: list[int],
                    saved: dict[int, tuple[list[int], bytearray]]) -> dict[int, tuple[str, list[float], int]]:
    """_greedy_text_and_logits, by tokens held, of an engine that --threads pins to count, from each saved cache."""
    answers = {}
    with Engine(bundled_model, replace(options, n_threads=count, n_threads_batch=count, adapt_threads=False)) as engine:
        for held, state in saved.items():
            assert engine.load_state(*state)
            answers[held] = _greedy_text_and_logits(engine, prompt[:held + 2])
    return answers


@pytest.mark.serial
def test_flash_attention_s_output_is_that_of_the_count_held_beside_a_busy_cpu_or_none(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp's flash attention over an f16 KV cache splits a one-token batch's keys among the threads from
    SPLIT_ATTENTION_FROM tokens on: decode steps there, and a prompt's last batch of one token, hold the count the
    free CPUs measured since the prefill began allow, one thread where another process keeps a CPU busy and both
    where none does, and the answer, logits bit for bit, is the one --threads with that count gives."""
    machine = busy_machine_governs(monkeypatch)
    options = LoadOptions(n_ctx=512, n_threads=2, n_threads_batch=2, n_batch=256, n_ubatch=256, flash_attn="on",
                          adapt_threads=True)
    batches: list[tuple[int, int, int]] = []  # (tokens, first position, threads) of each llama_decode
    with Engine(bundled_model, options) as engine:
        prompt = engine.tokenize("Tell me about cats and why they sleep so much. " * 40, add_special=True)
        saved = {}
        for held in (SPLIT_ATTENTION_FROM - 1, SPLIT_ATTENTION_FROM - 4):
            engine.prefill_ahead(prompt[:held], lambda: False)
            saved[held] = (engine.kv_token_list, engine.save_state())
        pinned = {count: _pinned_answers(bundled_model, options, count, prompt, saved) for count in (1, 2)}
        real_decode = lc.llama_decode

        def decode(ctx: object, batch: lc.llama_batch) -> int:
            batches.append((batch.n_tokens, engine.kv_tokens, lc.llama_n_threads(ctx)))
            return real_decode(ctx, batch)

        monkeypatch.setattr(lc, "llama_decode", decode)
        for held in saved:  # the prompt's last batch is one token past the position / steps start before it
            for free, count in ((2.0, 2), (1.0, 1)):
                machine.free = free
                assert engine.load_state(*saved[held])
                batches.clear()
                answer = _greedy_text_and_logits(engine, prompt[:held + 2])
                split = [threads for tokens, at, threads in batches if tokens == 1 and at >= SPLIT_ATTENTION_FROM]
                assert split and set(split) == {count}, batches  # the prompt's batches of several: the guess
                assert answer[0] == pinned[count][held][0]
                assert answer[1] == pinned[count][held][1], f"the last step's logits are --threads {count}'s"
                assert answer[2] == count, "decode_threads reports the count held"
        assert any(pinned[1][held][1] != pinned[2][held][1] for held in saved), "the count changes the logits here"


def test_free_cpus_leave_out_this_processes_own_time() -> None:
    before = CpuSample(wall_s=10.0, all_busy_s=100.0, own_s=50.0)
    after = CpuSample(wall_s=12.0, all_busy_s=104.0, own_s=53.0)  # 4 s busy, 3 of them this process's
    assert free_cpus(before, after, 2) == pytest.approx(1.5)
    assert free_cpus(before, CpuSample(12.0, None, 53.0), 2) is None


@pytest.mark.serial
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs a CPU to pin to")
def test_others_busy_counts_another_process_s_time() -> None:
    """A busy loop in another process counts (this process's own time is left out: the test of free_cpus), and too
    short a block says nothing."""
    found: list[float] = []
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    try:
        with others_busy(found.append, least_s=1.0):
            time.sleep(1.5)
    finally:
        burner.kill()
        burner.wait()
    with others_busy(found.append, least_s=60.0):
        pass
    assert len(found) == 1 and found[0] >= 0.8, found


def test_busy_time_counts_the_allowed_cpus_only(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    stat = tmp_path / "stat"
    lines = ["cpu  9 9 9 9 9 9 9 9 0 0"]
    lines += [f"cpu{cpu} 100 10 20 5000 7 1 2 3 0 0" for cpu in allowed]
    lines += [f"cpu{max(allowed) + 1} 999 999 999 1 1 1 1 1 0 0", "intr 12345", "ctxt 99"]
    stat.write_text("\n".join(lines) + "\n")
    ticks = os.sysconf("SC_CLK_TCK")
    assert _busy_seconds(stat) == pytest.approx(len(allowed) * 136 / ticks)  # idle and iowait are not busy
    assert _busy_seconds(tmp_path / "missing") is None


def test_threads_given_are_never_changed(bundled_model: Path) -> None:
    resolved = resolve_model(str(bundled_model), offline=True)
    header, _ = validate_split(resolved.path)
    given, _, _ = plan_load(ModelOptions(model=str(bundled_model), threads=2), resolved, header)
    default, _, _ = plan_load(ModelOptions(model=str(bundled_model)), resolved, header)
    bench, _, _ = plan_load(ModelOptions(model=str(bundled_model), adapt_threads=False), resolved, header)
    assert (given.adapt_threads, default.adapt_threads, bench.adapt_threads) == (False, True, False)


def test_stats_say_when_fewer_threads_decoded() -> None:
    done = Finished(text="x", finish_reason="length", usage=Usage(3, 0, 2),
                    timings=Timings(0.1, 0.1, 30.0, 0.1, 10.0), threads=2, decode_threads=1)
    assert "decoded with 1 of 2 threads: other processes kept the CPUs busy" in format_stats(done)
    assert "threads" not in format_stats(Finished(text="x", finish_reason="length", usage=Usage(3, 0, 2),
                                                  timings=done.timings, threads=2, decode_threads=2))


@pytest.mark.serial
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs to pin to")
@pytest.mark.parametrize("flash", [False, True], ids=["plain", "flash-attention-past-256-tokens"])
def test_a_busy_cpu_makes_the_real_engine_decode_with_fewer_threads_and_the_same_text(tmp_path: Path,
                                                                                     flash: bool) -> None:
    """`localgen run` on two CPUs, one of which a busy loop keeps busy: it ends with 1 thread, same text; with
    flash attention over an f16 KV cache and a prompt past SPLIT_ATTENTION_FROM tokens, where the count changes
    the output, too: its text is `-t 1`'s."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    text = tmp_path / "notes.md"
    text.write_text("The lighthouse keeper climbed the stairs each evening to light the lamp. " * 25)
    flash_args = ["--flash-attn", "on", "-f", str(text)] if flash else []
    n = 60 if flash else 160  # flash attention's count is held from the first step: no window to wait for
    command = [sys.executable, "-m", "localgen", "run", "--json", "--stats", "--no-cache", "-n", str(n),
               "--temperature", "0", *flash_args, PROMPT]

    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              preexec_fn=lambda: os.sched_setaffinity(0, {first}))
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300,
                              stdin=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, {first, second}))
    finally:
        burner.kill()
        burner.wait()
    assert proc.returncode == 0, proc.stderr
    busy = json.loads(proc.stdout)
    alone = run_localgen_in(env, "run", "-t", "1", *command[4:])  # forked: one thread's text is any CPUs' text
    assert alone.returncode == 0, alone.err
    assert (busy["threads"], busy["decode_threads"]) == (2, 1)
    assert "decoded with 1 of 2 threads" in proc.stderr
    assert busy["text"] == json.loads(alone.out)["text"] and busy["usage"]["completion_tokens"] == n
    assert busy["usage"]["prompt_tokens"] > SPLIT_ATTENTION_FROM or not flash


def test_a_prefill_starts_with_the_threads_the_free_cpus_allow() -> None:
    """Before a prompt's prefill, the CPU time other processes took since the last sample (the load, the user's
    typing) sets the count: fewer where they kept a CPU busy, every thread again once they left them free."""
    machine = Machine(free=1.0)
    governor = machine.governor()
    governor.before_prefill()
    assert (governor.current, machine.applied) == (1, [1])
    governor.before_prefill()
    assert machine.applied == [1], "still busy: no change"
    machine.free = 2.0
    governor.before_prefill()
    assert (governor.current, machine.applied) == (2, [1, 2])


def test_a_prefill_after_too_short_a_window_or_without_cpu_counters_keeps_the_count() -> None:
    machine = Machine(free=1.0)
    governor = machine.governor()
    machine.wall -= 0.9  # the next sample comes 0.1 s after the last one
    governor.before_prefill()
    assert (governor.current, machine.applied) == (2, [])
    blind = Machine(free=None)
    blind_governor = blind.governor()
    blind_governor.before_prefill()
    assert (blind_governor.current, blind.applied) == (2, [])


def test_the_first_prefill_measures_from_a_sample_before_the_load() -> None:
    machine = Machine(free=1.0)
    before_load = machine.sample()
    governor = ThreadGovernor(2, machine.apply, machine.sample, n_cpus=2, since=before_load)
    assert machine.samples == 1, "a governor given a sample takes none of its own (/proc/stat is read once)"
    governor.before_prefill()
    assert (governor.current, machine.applied) == (1, [1])


PREFILL_AFTER_A_WAIT = """
import logging, sys, time
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s: %(message)s")
from localgen.catalog import builtin_bundled_file
from localgen.engine import Engine
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
engine = Engine(builtin_bundled_file(), LoadOptions(n_ctx=512, n_threads=2, n_threads_batch=2, adapt_threads=True))
time.sleep(0.5)  # the user typing, while another process keeps a CPU busy
prompt = engine.tokenize("A line of plain text. " * 10, add_special=False)
list(engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=2)))
print(engine.decode_threads)
"""


@pytest.mark.serial
def test_the_real_engine_prefills_with_fewer_threads_after_a_busy_wait(tmp_path: Path) -> None:
    """An Engine on two CPUs, one of which a busy loop keeps busy while the prompt is awaited, prefills it with
    one thread (the two decode steps after it give no window of their own)."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              preexec_fn=lambda: os.sched_setaffinity(0, {first}))
    try:
        proc = subprocess.run([sys.executable, "-c", PREFILL_AFTER_A_WAIT], capture_output=True, text=True,
                              cwd=REPO_ROOT, timeout=300, stdin=subprocess.DEVNULL,
                              env={**os.environ, "LOCALGEN_HOME": str(tmp_path)},
                              preexec_fn=lambda: os.sched_setaffinity(0, {first, second}))
    finally:
        burner.kill()
        burner.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "localgen.engine: prefill threads 2 -> 1" in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.strip() == "1"


def test_the_first_engine_measures_from_the_engine_s_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.engine import threads

    imported = CpuSample(1.0, 2.0, 3.0)
    monkeypatch.setattr(threads, "_at_import", [imported])
    assert threads.load_started() is imported
    later = threads.load_started()
    assert later is not imported and later.wall_s > imported.wall_s


@pytest.mark.parametrize("values", [[0.5], [3.0, 1.0], [0.02, 0.01, 0.05, 0.03], [0.1, 0.3, 0.2, 0.2, 0.9]])
def test_the_governor_s_median_is_statistics_median(values: list[float]) -> None:
    import statistics

    from localgen.engine.threads import median_of

    assert median_of(values) == statistics.median(values)
