"""`localgen bench`: prefill and decode speed, TTFT and KV-reuse TTFT, measured through the same Engine as `run`."""

from __future__ import annotations

import random
import signal
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from localgen.bench_load import BenchTest, bench_loader
from localgen.errors import LocalgenError, UsageError
from localgen.events import Event, Finished
from localgen.params import GenerationLimits, SamplingParams
from localgen.signals import SignalExit
from localgen.units import milliseconds, token_rate

if TYPE_CHECKING:
    from localgen.engine import Engine
    from localgen.engine.threads import CpuSample
    from localgen.runner import LoadedModel

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)
FOLLOW_UP_TEXT = ("Thanks. Now answer a follow-up question in one short paragraph: what are the three most "
                  "important points above, and why do they matter?")
CONTEXT_SLACK = 64
FOLLOW_UP_ROOM = 128  # tokens for FOLLOW_UP_TEXT and its first answer token, in any tokenizer
SEED = 1234
MAX_BENCH_VALUE = 1_000_000
BUSY_WINDOW_S = 1.0  # a test shorter than this is too short to tell how busy other processes kept the CPUs
TABLE_HEADER = ("test", "what", "result")


@dataclass(frozen=True)
class Stat:
    """Mean, standard deviation and the samples of one measurement."""

    mean: float
    stdev: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Iterable[float]) -> Stat:
        """Summarize samples."""
        values = tuple(samples)
        stdev = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(mean=statistics.fmean(values) if values else 0.0, stdev=stdev, samples=values)


@dataclass(frozen=True)
class BenchConfig:
    """What to measure: prompt and generation lengths, repetitions."""

    n_prompt: int = 512
    n_gen: int = 128
    reps: int = 5
    warmup: bool = True

    def __post_init__(self) -> None:
        for name, value, low in (("--n-prompt", self.n_prompt, 0), ("--n-gen", self.n_gen, 0),
                                 ("--repetitions", self.reps, 1)):
            if not low <= value <= MAX_BENCH_VALUE:
                raise UsageError(f"{name} {value} is out of range", hint=f"use {low} to {MAX_BENCH_VALUE}")
        if not self.n_prompt and not self.n_gen:
            raise UsageError("-p 0 and -n 0 leave nothing to measure", hint="0 skips one test: give the other a size")


@dataclass(frozen=True)
class Measurements:
    """The measured figures of one benchmark (None for a test skipped with -p 0 or -n 0)."""

    follow_up_tokens: int | None  # the follow-up turn's, measured with the prefill test (None where its TTFTs are)
    prefill_tokens_per_s: Stat | None
    decode_tokens_per_s: Stat | None
    ttft_s: Stat | None
    reuse_ttft_s: Stat | None
    fresh_ttft_s: Stat | None


@dataclass(frozen=True)
class BenchResult:
    """One `localgen bench` run: the setup and every measurement."""

    model: str
    model_path: str
    backend: str
    threads: int  # each setup field named as the option that sets it (--threads), as run's and fit's JSON name them
    threads_batch: int
    batch_size: int
    ubatch_size: int
    prefill_ctx_size: int | None  # the prefill test's context (None when -p 0)
    flash_attn: str
    kv_type: str
    n_prompt: int
    n_gen: int
    repetitions: int
    figures: Measurements
    repack: bool = True  # weights may go to the CPU backend's repacked buffers (not where AMX fails with this build)
    repack_off: str | None = None  # why they may not: "LOCALGEN_AMX=0", or "AMX fails with this build"
    decode_ctx_size: int | None = None  # the decode test's context (None when -n 0)
    gpu_layers: int = 0  # llama.cpp's count (the output head is one), as the load plan placed the model
    placement: str = "CPU only"  # the same in words: LoadPlan.placement
    stopped_by: int = 0  # the signal that stopped it (SIGINT: Ctrl-C): the figures are of the repetitions that ended
    busy_elsewhere: dict[str, float] = field(default_factory=dict)  # by test: CPUs others used (CPU work only)

    @property
    def setup_ctx(self) -> int:
        """The context of the test whose engine the setup (its batch sizes) is of: the prefill test's, else the
        decode test's."""
        ctx_size = self.prefill_ctx_size if self.prefill_ctx_size is not None else self.decode_ctx_size
        assert ctx_size is not None, "a test that measured something was loaded"
        return ctx_size

    @property
    def interrupted(self) -> bool:
        """Whether a signal stopped it before every repetition ended."""
        return self.stopped_by != 0

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict ("interrupted" says whether a signal stopped it)."""
        record = asdict(self)
        del record["stopped_by"]
        return record | {"interrupted": self.interrupted}


def _complete(engine: Engine, prompt: Sequence[int], max_tokens: int, *, ignore_eog: bool = False) -> Finished:
    """One greedy generation through Engine.generate (the `run` code path), folded to its Finished."""
    events: Iterable[Event] = engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=max_tokens),
                                              ignore_eog=ignore_eog)
    return [e for e in events if isinstance(e, Finished)][-1]


def _measured(figure: float | None) -> float:
    """A figure of a benchmark generation (each has one: its prompt is new, and it decodes past its first token)."""
    if figure is None:
        raise LocalgenError("a benchmark generation stopped before it could be measured",
                            hint="run the benchmark again")
    return figure


def _random_prompt(engine: Engine, n: int, rng: random.Random) -> list[int]:
    """n random tokens (BOS first when the model wants it), like llama-bench's pp test."""
    n_vocab = engine.n_vocab
    tokens = [rng.randrange(n_vocab) for _ in range(n)]
    if engine.adds_bos and n:
        tokens[0] = engine.bos_token
    return tokens


def _rounds(config: BenchConfig) -> Iterator[tuple[str, bool]]:
    """Each repetition's progress label and whether it counts (a warm-up comes first unless turned off)."""
    if config.warmup:
        yield "warm-up", False
    for rep in range(1, config.reps + 1):
        yield f"rep {rep}/{config.reps}", True


@dataclass(frozen=True)
class PrefillFigures:
    """The prefill test's samples: prefill speed, cold TTFT, and the follow-up turn's TTFT with and without the
    prompt in the KV cache."""

    follow_up_tokens: int
    prefill_tps: list[float]
    ttft_s: list[float]
    reuse_ttft_s: list[float]
    fresh_ttft_s: list[float]


def prefill_figures(engine: Engine) -> PrefillFigures:
    """The prefill test's figures before its first repetition: none yet."""
    return PrefillFigures(len(engine.tokenize(FOLLOW_UP_TEXT, add_special=False)), [], [], [], [])


def measure_prefill(engine: Engine, config: BenchConfig, progress: Callable[[str], None],
                    figures: PrefillFigures | None = None) -> PrefillFigures:
    """The prefill test: its warm-up and repetitions, each a cold prompt, a follow-up turn after it and the same
    turn in a new conversation; each repetition's samples go into figures as it ends (kept when Ctrl-C stops it)."""
    rng = random.Random(SEED)
    follow_up = engine.tokenize(FOLLOW_UP_TEXT, add_special=False)
    fresh = ([engine.bos_token] if engine.adds_bos else []) + follow_up
    figures = figures or prefill_figures(engine)
    for label, counted in _rounds(config):
        progress(f"bench: {label}: pp{config.n_prompt} + follow-up")
        prompt = _random_prompt(engine, config.n_prompt, rng)
        engine.reset()
        cold = _complete(engine, prompt, 1)
        warm = _complete(engine, [*prompt, *follow_up], 1)
        engine.reset()
        alone = _complete(engine, fresh, 1)
        if counted:
            figures.prefill_tps.append(_measured(cold.timings.prefill_tokens_per_s))
            figures.ttft_s.append(_measured(cold.timings.ttft_s))
            figures.reuse_ttft_s.append(_measured(warm.timings.ttft_s))
            figures.fresh_ttft_s.append(_measured(alone.timings.ttft_s))
    return figures


def measure_decode(engine: Engine, config: BenchConfig, progress: Callable[[str], None],
                   speeds: list[float] | None = None) -> list[float]:
    """The decode test: its warm-up and repetitions, each n_gen tokens generated from one, end of text ignored; each
    repetition's speed goes into speeds as it ends (kept when Ctrl-C stops it)."""
    start = [engine.bos_token] if engine.adds_bos else [random.Random(SEED).randrange(engine.n_vocab)]
    speeds = [] if speeds is None else speeds
    for label, counted in _rounds(config):
        progress(f"bench: {label}: tg{config.n_gen}")
        engine.reset()
        gen = _complete(engine, start, config.n_gen + 1, ignore_eog=True)
        if counted:
            speeds.append(_measured(gen.timings.decode_tokens_per_s))
    return speeds


def measurements(prefill: PrefillFigures | None, decode: list[float] | None) -> Measurements:
    """The figures of the tests run (None for one skipped with -p 0 or -n 0, or stopped before a repetition
    ended)."""
    decode_tps = Stat.of(decode) if decode else None
    if prefill is None or not prefill.prefill_tps:
        return Measurements(None, None, decode_tps, None, None, None)
    return Measurements(follow_up_tokens=prefill.follow_up_tokens, prefill_tokens_per_s=Stat.of(prefill.prefill_tps),
                        decode_tokens_per_s=decode_tps, ttft_s=Stat.of(prefill.ttft_s),
                        reuse_ttft_s=Stat.of(prefill.reuse_ttft_s), fresh_ttft_s=Stat.of(prefill.fresh_ttft_s))


def measured_any(figures: Measurements) -> bool:
    """Whether a repetition of either test ended (Ctrl-C may stop a benchmark before one does)."""
    return figures.prefill_tokens_per_s is not None or figures.decode_tokens_per_s is not None


def prefill_context(n_prompt: int) -> int:
    """The prefill test's context: room for the prompt and the follow-up turn."""
    return n_prompt + FOLLOW_UP_ROOM + CONTEXT_SLACK


def decode_context(n_gen: int) -> int:
    """The decode test's context: room for the tokens it generates from one, sized for the test as llama-bench
    sizes its tg test's (a larger context costs decode speed even while empty)."""
    return n_gen + 2 + CONTEXT_SLACK


def bench_context(n_prompt: int, n_gen: int) -> int:
    """The context of a benchmark's first test (the one with the larger context)."""
    return max(prefill_context(n_prompt) if n_prompt else 0, decode_context(n_gen) if n_gen else 0)


def run_bench(*, model: str | None, config: BenchConfig, threads: int | None, threads_batch: int | None,
              batch_size: int | None, ubatch_size: int, flash_attn: str, kv_type: str,
              progress: Callable[[str], None], started: Callable[[str, str], None] | None = None,
              gpu_layers: int | None = None, no_gpu: bool = False,
              warned: Callable[[str], None] | None = None) -> BenchResult:
    """Load a model the way `run` does and benchmark it: each test in a context of its own size, as llama-bench
    runs them, the one with the larger context first (so a size beyond the model is refused before any test).

    batch_size is None when no --batch-size was given (the default is used, and a cap on it is not worth a note).
    started hears the model's name and path once it is loaded, before the first test (the table's first line);
    warned, that other processes keep the CPUs busy, where they did from the start to the first test.
    Ctrl-C, SIGTERM or SIGHUP ends it with the repetitions that finished (stopped_by set); when none did, Ctrl-C
    raises BenchInterrupted and the others their SignalExit.
    """
    from localgen.engine.loading import extra_buffers_declined
    from localgen.engine.results import DecodeFailure, decode_hint

    tests = [test for test in (BenchTest(prefill_context(config.n_prompt), "prefill", "-p", config.n_prompt),
                               BenchTest(decode_context(config.n_gen), "decode", "-n", config.n_gen)) if test.size]
    from localgen.engine.threads import cpu_sample

    run = _BenchRun(started, warned, [test.name for test in tests], cpu_sample())
    load = bench_loader(tests, model=model, threads=threads, threads_batch=threads_batch, batch_size=batch_size,
                        ubatch_size=ubatch_size, flash_attn=flash_attn, kv_type=kv_type,
                        gpu_layers=gpu_layers, no_gpu=no_gpu, progress=progress)
    stopped_by, ending = 0, None
    try:
        for test in sorted(tests, key=lambda test: -test.ctx):
            loaded = load(test)
            try:
                run.measure(loaded, test.name, config, batch_size, progress)
            except DecodeFailure as exc:  # its hint in bench's terms: the test's context is sized by its option
                raise exc.with_hint(decode_hint(exc.status, sized_by=test.flag)) from exc
    except KeyboardInterrupt:
        stopped_by = signal.SIGINT
    except SignalExit as exc:  # SIGTERM or SIGHUP
        stopped_by, ending = exc.signum, exc
    figures = measurements(run.prefill, run.decode)
    if stopped_by and not measured_any(figures):
        if ending is not None:  # ends the program, as before any benchmark
            raise ending
        raise BenchInterrupted(stopped_by)
    declined = extra_buffers_declined()
    assert run.setup is not None, "a test that measured something was loaded"
    return BenchResult(**run.setup, n_prompt=config.n_prompt, n_gen=config.n_gen, repetitions=config.reps,
                       figures=figures, repack=not declined, repack_off=declined or None,
                       decode_ctx_size=run.decode_ctx, stopped_by=stopped_by, busy_elsewhere=run.busy)


class BenchInterrupted(Exception):
    """Ctrl-C stopped a benchmark before any repetition of its tests ended: there is nothing to report."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class _BenchRun:
    """What a benchmark has measured so far, and the setup it reports (the prefill test's engine's, else the decode
    test's)."""

    started: Callable[[str, str], None] | None = None  # told the model's name and path at the first load
    warned: Callable[[str], None] | None = None  # told that other processes keep the CPUs busy, before the tests
    tests: list[str] = field(default_factory=list)  # the names of the tests to run
    since: CpuSample | None = None  # the start, from which the CPUs are watched until the first test
    prefill: PrefillFigures | None = None
    decode: list[float] | None = None
    decode_ctx: int | None = None
    setup: dict[str, object] | None = None
    busy: dict[str, float] = field(default_factory=dict)  # by test: CPUs' worth of time other processes took

    def measure(self, loaded: LoadedModel, name: str, config: BenchConfig, batch_size: int | None,
                progress: Callable[[str], None]) -> None:
        """Run one test on the model loaded for it, and close it."""
        try:
            engine = loaded.engine
            o = engine.options
            on_cpu = loaded.plan is None or loaded.plan.where != "gpu"  # (the GPU's speed is not the CPUs' to take)
            if self.setup is None and self.started is not None:
                self.started(loaded.resolved.display_name, str(loaded.resolved.path))
            if self.setup is None and self.warned is not None and on_cpu:
                self._warn_if_busy(o.n_threads, o.n_threads_batch)
            if name == "prefill" or self.setup is None:  # known before a repetition, for one Ctrl-C may stop
                self.setup = dict(model=loaded.resolved.display_name, model_path=str(loaded.resolved.path),
                                  backend=engine.backend_version, threads=o.n_threads,
                                  threads_batch=o.n_threads_batch, batch_size=engine.n_batch,
                                  ubatch_size=engine.n_ubatch, prefill_ctx_size=engine.n_ctx if name == "prefill" else
                                  None, flash_attn=o.attention_mode, kv_type=o.kv_type)
                if loaded.plan is not None:
                    self.setup |= dict(gpu_layers=loaded.plan.n_gpu_layers, placement=loaded.plan.placement)
            from localgen.engine.threads import others_busy

            watch = others_busy(lambda cpus: self.busy.update({name: round(cpus, 2)}), least_s=BUSY_WINDOW_S)
            with watch if on_cpu else nullcontext():
                if name == "prefill":
                    if batch_size is not None and engine.n_batch < batch_size:  # a --batch-size given, and capped
                        progress(f"bench: --batch-size {batch_size} is capped at {engine.n_batch}, the cells "
                                 f"llama.cpp allocates for the prefill test's context of {engine.n_ctx:,} tokens")
                    self.prefill = prefill_figures(engine)
                    measure_prefill(engine, config, progress, self.prefill)
                else:
                    self.decode, self.decode_ctx = [], engine.n_ctx
                    measure_decode(engine, config, progress, self.decode)
        finally:
            loaded.close()

    def _warn_if_busy(self, threads: int, threads_batch: int) -> None:
        """Warn where other processes kept the CPUs busy from the start through the model's load, where that took
        BUSY_WINDOW_S or more (a shorter one tells too little: the warning after the tests covers it)."""
        from localgen.bench_contention import busy_before_note
        from localgen.engine.threads import busy_elsewhere, cpu_sample

        now = cpu_sample()
        if self.since is None or now.wall_s - self.since.wall_s < BUSY_WINDOW_S:
            return
        busy = busy_elsewhere(self.since, now)
        note = None if busy is None else busy_before_note(busy, {"prefill": threads_batch, "decode": threads},
                                                          self.tests)
        if note is not None and self.warned is not None:
            self.warned(note)


def model_line(model: str, path: str) -> str:
    """The table's first line: the model measured."""
    return f"model {model} ({path})"


def format_result(result: BenchResult, *, first_line: bool = True) -> str:
    """A llama-bench-like table of the result (without its first line, model_line, when that was printed when the
    model was loaded)."""
    r, f = result, result.figures
    rate, millis = token_rate, milliseconds  # as run --stats shows them
    prefill, decode = r.n_prompt > 0, r.n_gen > 0
    measured = [
        (f"pp{r.n_prompt}", "prefill", f.prefill_tokens_per_s, rate, prefill),
        (f"tg{r.n_gen}", "decode", f.decode_tokens_per_s, rate, decode),
        (f"ttft pp{r.n_prompt}", "time to first token, cold", f.ttft_s, millis, False),  # None with pp's
        (f"ttft +{f.follow_up_tokens} after pp{r.n_prompt}", "follow-up turn, prompt in KV cache", f.reuse_ttft_s,
         millis, False),
        (f"ttft +{f.follow_up_tokens} fresh", "same message, new conversation", f.fresh_ttft_s, millis, False),
    ]
    rows = [(test, what, _shown_figure(stat, shown, r)) for test, what, stat, shown, asked in measured
            if stat is not None or (asked and r.interrupted)]  # 0 skips a test
    width = [max(len(row[i]) for row in [TABLE_HEADER, *rows]) for i in range(3)]
    capped = _batch_cap(r)
    batches = f"batch {r.batch_size}, ubatch {r.ubatch_size} (both {capped})" \
        if capped and r.ubatch_size == r.batch_size else \
        f"batch {r.batch_size}{f' ({capped})' if capped else ''}, ubatch {r.ubatch_size}"
    stopped = f"\ninterrupted ({stopped_by(r.stopped_by)}): the figures are of the repetitions that finished" \
        if r.interrupted else ""
    head = (f"{model_line(r.model, r.model_path)}\n" if first_line else "") + (
            f"{r.backend}, {r.placement}, threads {r.threads}/{r.threads_batch}, "
            f"{batches}, flash-attn {r.flash_attn}, kv {r.kv_type}, "
            f"{'' if r.repack else f'repack off ({r.repack_off}), '}reps {r.repetitions}{stopped}\n")
    def line(cells: tuple[str, str, str]) -> str:
        """A row of the table, or its header: each column as wide as its widest cell, the results to the right."""
        return f"| {cells[0]:<{width[0]}} | {cells[1]:<{width[1]}} | {cells[2]:>{width[2]}} |"

    rule = f"|{'-' * (width[0] + 2)}|{'-' * (width[1] + 2)}|{'-' * (width[2] + 1)}:|"
    return head + "\n".join([line(TABLE_HEADER), rule, *map(line, rows)])


def stopped_by(signum: int) -> str:
    """The signal that stopped a benchmark, as people name it: Ctrl-C, SIGTERM, SIGHUP."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def _batch_cap(result: BenchResult) -> str:
    """What the header says of the batch size, and of the ubatch size when it is the same, where the context caps
    them ("" where it does not): llama.cpp allocates a context's cells in blocks, so a 208-token context caps them at
    its 256 cells, and the ubatch size at the batch size."""
    ctx_size = result.setup_ctx
    if result.batch_size > ctx_size:
        return f"capped at the {result.batch_size:,} cells llama.cpp allocates for the {ctx_size:,}-token context"
    return f"capped at the {ctx_size:,}-token context" if result.batch_size == ctx_size else ""


def _shown_figure(stat: Stat | None, shown: Callable[[float, float | None], str], result: BenchResult) -> str:
    """A figure as the table shows it: its mean ± its spread, the mean alone for one sample (whose spread means
    nothing); with the repetitions it is of when Ctrl-C stopped the test short of them."""
    if stat is None:
        return "not measured"
    figure = shown(stat.mean, stat.stdev if len(stat.samples) > 1 else None)
    if len(stat.samples) < result.repetitions:
        return f"{figure} ({len(stat.samples)} of {result.repetitions} reps)"
    return figure
