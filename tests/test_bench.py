"""`localgen bench` on the real bundled model: figures, validation, the table and the JSON output."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from localgen.bench import (
    BenchConfig,
    BenchResult,
    Measurements,
    Stat,
    format_result,
    measure_decode,
    measure_prefill,
    measurements,
    run_bench,
)
from localgen.bench_contention import BusyWarnings, busy_before_note, contention_note
from localgen.bench_load import BenchTest, in_test_sizes
from localgen.config import DEFAULT_BATCH_SIZE, offline_given
from localgen.console import format_stats
from localgen.engine import Engine, supports_gpu_offload, use_cpu_extra_buffers
from localgen.errors import InsufficientMemoryError, ModelLoadError, UsageError
from localgen.estimate import padded_context
from localgen.events import DraftStats, Finished, Timings, Usage
from localgen.params import LoadOptions
from tests.conftest import REPO_ROOT, popen_localgen, run_localgen, run_localgen_process

# A test that runs a benchmark on two threads runs alone (serial): llama.cpp's threads spin while they wait for each
# other, so a CPU another process keeps busy stalls them all (a minute for a benchmark of seconds). One that checks
# what bench says rather than how fast it goes runs it on one thread (-t 1), beside other tests.


def test_stat_summarizes_samples() -> None:
    stat = Stat.of([1.0, 2.0, 3.0])
    assert (stat.mean, stat.stdev, stat.samples) == (2.0, 1.0, (1.0, 2.0, 3.0))
    assert Stat.of([5.0]).stdev == 0.0


@pytest.mark.parametrize("values", [{"reps": 0}, {"n_prompt": -1}, {"n_gen": -1}, {"n_prompt": 0, "n_gen": 0}])
def test_config_rejects_nonsense(values: dict[str, int]) -> None:
    with pytest.raises(UsageError):
        BenchConfig(**values)


def test_measure_on_the_real_engine(bundled_model: Path) -> None:
    seen: list[str] = []
    config = BenchConfig(n_prompt=48, n_gen=6, reps=2)
    with Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1, n_batch=64)) as engine:
        prefill = measure_prefill(engine, config, seen.append)
        figures = measurements(prefill, measure_decode(engine, config, seen.append))
    assert len(figures.prefill_tokens_per_s.samples) == len(figures.decode_tokens_per_s.samples) == 2
    assert figures.prefill_tokens_per_s.mean > 0 and figures.decode_tokens_per_s.mean > 0
    assert figures.ttft_s.mean > 0 and figures.reuse_ttft_s.mean > 0 and figures.fresh_ttft_s.mean > 0
    assert figures.follow_up_tokens > 10
    assert any("warm-up" in line for line in seen) and any("rep 2/2" in line for line in seen)
    tests = ["pp" if "pp48" in line else "tg" for line in seen if "pp48" in line or "tg6" in line]
    assert tests == ["pp"] * 3 + ["tg"] * 3  # each test's warm-up and repetitions together, as llama-bench runs them


def test_table_names_every_test() -> None:
    stat = Stat.of([100.0, 110.0])
    figures = Measurements(follow_up_tokens=29, prefill_tokens_per_s=stat, decode_tokens_per_s=stat,
                           ttft_s=Stat.of([0.5]), reuse_ttft_s=Stat.of([0.05]), fresh_ttft_s=Stat.of([0.04]))
    result = BenchResult(model="m", model_path="/m.gguf", backend="llama-cpp-python x", threads=2, threads_batch=2,
                         batch_size=512, ubatch_size=512, prefill_ctx_size=1024, flash_attn="auto", kv_type="f16",
                         n_prompt=512, n_gen=128, repetitions=2, figures=figures)
    table = format_result(result)
    for needle in ("pp512", "tg128", "105.0 ± 7.1 tok/s", "ttft +29 after pp512", " 500 ms (1 of 2 reps) |"):
        assert needle in table, table
    slow = format_result(replace(result, figures=replace(figures, ttft_s=Stat.of([10.6850, 10.6856]),
                                                          prefill_tokens_per_s=Stat.of([1234.5, 1234.7]))))
    assert "10,685 ± 0.4 ms" in slow and "1,234.6 ± 0.1 tok/s" in slow, "as run --stats shows them: 8,881 ms"
    small = format_result(replace(result, figures=replace(figures, decode_tokens_per_s=Stat.of([0.04, 0.04]),
                                                           prefill_tokens_per_s=Stat.of([9.5, 9.5]))))
    assert "0.04 ± 0.0 tok/s" in small and "9.5 ± 0.0 tok/s" in small, "a figure that is not 0 never shows as 0.0"
    once = format_result(replace(result, repetitions=1, figures=replace(figures, prefill_tokens_per_s=Stat.of([9.5]))))
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in once.splitlines()[3:]}
    assert (rows["pp512"], rows["ttft pp512"]) == ("9.5 tok/s", "500 ms"), "one sample: the value alone"
    assert "batch 512, ubatch 512, flash-attn" in table and "repack" not in table
    assert "llama-cpp-python x, CPU only, threads 2/2," in table
    offloaded = format_result(replace(result, gpu_layers=31, placement="all 30 layers on the GPU"))
    assert "llama-cpp-python x, all 30 layers on the GPU, threads 2/2," in offloaded
    declined = replace(result, repack=False, repack_off="AMX fails with this build")
    assert "kv f16, repack off (AMX fails with this build), reps 2" in format_result(declined)
    capped = format_result(replace(result, batch_size=352, ubatch_size=352, prefill_ctx_size=352))
    assert "batch 352, ubatch 352 (both capped at the 352-token context), flash-attn" in capped
    padded = format_result(replace(result, batch_size=256, ubatch_size=256, prefill_ctx_size=208))
    assert "batch 256, ubatch 256 (both capped at the 256 cells llama.cpp allocates for the 208-token context)," \
        in padded
    batch_only = format_result(replace(result, batch_size=256, ubatch_size=1, prefill_ctx_size=208))
    assert "batch 256 (capped at the 256 cells llama.cpp allocates for the 208-token context), ubatch 1, " \
        "flash-attn" in batch_only, "the note goes with what was capped"
    decode_only = format_result(replace(result, batch_size=256, ubatch_size=256, prefill_ctx_size=None,
                                        decode_ctx_size=70, n_prompt=0))
    assert "ubatch 256 (both capped at the 256 cells llama.cpp allocates for the 70-token context)," in decode_only
    assert json.loads(json.dumps(result.to_dict()))["figures"]["decode_tokens_per_s"]["mean"] == 105.0


def test_an_interrupted_table_says_so_and_what_each_figure_is_of() -> None:
    figures = Measurements(follow_up_tokens=29, prefill_tokens_per_s=Stat.of([100.0]), decode_tokens_per_s=None,
                           ttft_s=Stat.of([0.5]), reuse_ttft_s=Stat.of([0.05]), fresh_ttft_s=Stat.of([0.04]))
    result = BenchResult(model="m", model_path="/m.gguf", backend="llama-cpp-python x", threads=2, threads_batch=2,
                         batch_size=512, ubatch_size=512, prefill_ctx_size=1024, flash_attn="auto", kv_type="f16",
                         n_prompt=512, n_gen=128, repetitions=3, figures=figures, stopped_by=signal.SIGINT)
    table = format_result(result, first_line=False)
    assert not table.startswith("model ")
    assert "\ninterrupted (Ctrl-C): the figures are of the repetitions that finished\n" in table
    assert " 100.0 tok/s (1 of 3 reps) |" in table and " 500 ms (1 of 3 reps) |" in table, "one sample: no spread"
    assert re.search(r"\| tg128 +\| decode +\| +not measured \|", table), table
    assert "reps)" not in format_result(replace(result, repetitions=1, stopped_by=0)), "every repetition finished"
    assert "\ninterrupted (SIGTERM): the figures" in format_result(replace(result, stopped_by=signal.SIGTERM))


def _bars(table: str) -> set[tuple[int, ...]]:
    """Where the | of each of a table's rows (its header and rule among them) stand: one set of places where the
    columns line up."""
    return {tuple(i for i, char in enumerate(line) if char == "|") for line in table.splitlines() if line[:1] == "|"}


def test_a_table_of_labels_shorter_than_its_header_words_lines_up() -> None:
    figures = Measurements(None, None, Stat.of([9.5]), None, None, None)
    result = BenchResult(model="m", model_path="/m.gguf", backend="x", threads=2, threads_batch=2, batch_size=256,
                         ubatch_size=256, prefill_ctx_size=None, decode_ctx_size=70, flash_attn="auto",
                         kv_type="f16", n_prompt=0, n_gen=4, repetitions=3, figures=figures, stopped_by=signal.SIGINT)
    stopped = format_result(result)
    assert "| test | what   |" in stopped and "| tg4  | decode | 9.5 tok/s (1 of 3 reps) |" in stopped, stopped
    assert len(_bars(stopped)) == 1, stopped
    finished = format_result(replace(result, repetitions=1, stopped_by=0))
    assert "\n|------|--------|----------:|\n" in finished and len(_bars(finished)) == 1, finished


def test_a_test_whose_threads_lost_cpu_time_to_other_processes_is_said_to_be_low() -> None:
    stat = Stat.of([100.0])
    figures = Measurements(29, stat, stat, stat, stat, stat)
    result = BenchResult(model="m", model_path="/m.gguf", backend="x", threads=2, threads_batch=2, batch_size=512,
                         ubatch_size=512, prefill_ctx_size=1024, flash_attn="auto", kv_type="f16", n_prompt=512,
                         n_gen=128, repetitions=2,
                         figures=figures, busy_elsewhere={"prefill": 0.3, "decode": 1.04})
    assert contention_note(result, 2) == ("other processes kept CPUs busy (0.30 during the prefill test and 1.04 "
                                          "during the decode test): these figures are below this machine's when it "
                                          "is idle; beside them, -t 1 --threads-batch 2 may measure more (localgen "
                                          "run decodes with fewer threads on its own while the CPUs are busy)")
    both = contention_note(replace(result, busy_elsewhere={"prefill": 1.6, "decode": 1.6}), 2) or ""
    assert both.endswith("; beside them, -t 1 --threads-batch 1 may measure more (localgen run decodes with "
                         "fewer threads on its own while the CPUs are busy)"), both
    prefill = contention_note(replace(result, busy_elsewhere={"prefill": 1.6}), 2) or ""
    assert prefill.endswith("; beside them, --threads-batch 1 may measure more (localgen run decodes with fewer "
                            "threads on its own while the CPUs are busy)"), prefill
    three = contention_note(replace(result, threads=3, busy_elsewhere={"decode": 1.6}), 4) or ""
    assert "(1.60 during the decode test)" in three and "; beside them, -t 2 --threads-batch 2 may" in three, three
    half = contention_note(replace(result, threads=4, busy_elsewhere={"decode": 1.5}), 4) or ""  # 2.5 CPUs left
    assert "; beside them, -t 3 --threads-batch 2 may" in half, half
    fits = contention_note(replace(result, busy_elsewhere={"decode": 2.3}), 4) or ""  # 1.7 CPUs left for 2 threads
    assert fits.endswith("below this machine's when it is idle"), fits
    assert contention_note(replace(result, busy_elsewhere={"prefill": 0.2, "decode": 0.1}), 2) is None
    one_thread = replace(result, threads=1, threads_batch=1)  # a second CPU spare: another process may use it
    assert contention_note(one_thread, 2) is None
    assert "1.30 during the decode test" in contention_note(replace(one_thread, busy_elsewhere={"decode": 1.3}), 2)
    assert contention_note(replace(result, busy_elsewhere={}), 2) is None, "no test ran long enough to tell"
    assert result.to_dict()["busy_elsewhere"] == {"prefill": 0.3, "decode": 1.04}


def test_cpus_busy_before_the_tests_are_said_to_lower_the_figures_to_come() -> None:
    threads = {"prefill": 2, "decode": 2}
    assert busy_before_note(1.6, threads, ["prefill", "decode"], 2) == (
        "other processes kept 1.60 CPUs busy before the tests: the figures will be below this machine's when it is "
        "idle; beside them, -t 1 --threads-batch 1 may measure more (localgen run decodes with fewer threads on its "
        "own while the CPUs are busy)")
    assert "; beside them, --threads-batch 1 may measure" in (busy_before_note(1.6, threads, ["prefill"], 2) or "")
    assert busy_before_note(0.2, threads, ["prefill", "decode"], 2) is None
    assert busy_before_note(1.6, {"prefill": 1, "decode": 1}, ["decode"], 4) is None, "3 CPUs left for 1 thread"


def test_the_warning_after_the_tests_refers_to_the_threads_the_first_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where bench warned as it began and again after its tests, the same hint was written twice."""
    from localgen import bench_contention

    monkeypatch.setattr(bench_contention, "allowed_cpus", lambda: 2)
    result = BenchResult(model="m", model_path="/m.gguf", backend="b", threads=2, threads_batch=2, batch_size=512,
                         ubatch_size=512, prefill_ctx_size=256, flash_attn="off", kv_type="f16", n_prompt=16, n_gen=4,
                         repetitions=1, figures=measurements(None, [1.0]), busy_elsewhere={"decode": 1.6})
    warnings: list[str] = []
    busy = BusyWarnings(warnings.append)
    busy.before(busy_before_note(1.6, {"prefill": 2, "decode": 2}, ["decode"], 2) or "")
    busy.after(result)
    assert warnings[1] == ("other processes kept CPUs busy (1.60 during the decode test): these figures are below "
                           "this machine's when it is idle; beside them, the thread counts named above may measure "
                           "more"), warnings
    alone = BusyWarnings(warnings.append)
    alone.after(result)
    assert warnings[2].endswith("; beside them, -t 1 --threads-batch 2 may measure more (localgen run decodes with "
                                "fewer threads on its own while the CPUs are busy)"), warnings


@pytest.mark.parametrize(("loaded_s", "warned"), [(0.5, False), (1.5, True)])
def test_the_warning_as_bench_begins_needs_a_load_long_enough_to_tell(monkeypatch: pytest.MonkeyPatch,
                                                                       loaded_s: float, warned: bool) -> None:
    """bench slept to watch the CPUs 0.3 s before its tests, too short a time to tell how busy they are: it warns as
    it begins only where the model's load took BUSY_WINDOW_S or more, and waits for nothing."""
    from localgen import bench_contention
    from localgen.bench import BUSY_WINDOW_S, _BenchRun
    from localgen.engine.threads import cpu_sample

    monkeypatch.setattr(bench_contention, "allowed_cpus", lambda: 2)
    now = cpu_sample()
    if now.all_busy_s is None:
        pytest.skip("no /proc/stat to tell the CPUs' time by")
    assert BUSY_WINDOW_S == 1.0
    started = replace(now, wall_s=now.wall_s - loaded_s, all_busy_s=now.all_busy_s - 2 * loaded_s)  # 2 CPUs busy
    warnings: list[str] = []
    begun = time.monotonic()
    _BenchRun(warned=warnings.append, tests=["decode"], since=started)._warn_if_busy(2, 2)
    assert time.monotonic() - begun < 0.2, "no wait"
    assert bool(warnings) == warned and all("CPUs busy before the tests" in note for note in warnings), warnings


@pytest.mark.serial
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs to pin to")
def test_bench_beside_busy_processes_says_its_figures_are_low(tmp_path: Path) -> None:
    """`localgen bench` on two CPUs that two busy loops keep busy: the JSON says how many CPUs they took during the
    decode test, and stderr says the figures are low."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu})) for cpu in cpus]
    try:
        proc = subprocess.run([sys.executable, "-m", "localgen", "bench", "-p", "0", "-n", "96", "-r", "1", "-t", "1",
                               "--json"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                              stdin=subprocess.DEVNULL, env={**os.environ, "LOCALGEN_HOME": str(tmp_path)},
                              preexec_fn=lambda: os.sched_setaffinity(0, set(cpus)))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    busy = json.loads(proc.stdout)["busy_elsewhere"]
    assert list(busy) == ["decode"] and busy["decode"] >= 1.25, busy
    assert f"other processes kept CPUs busy ({busy['decode']:.2f} during the decode test): these figures are " \
        "below this machine's when it is idle" in proc.stderr, proc.stderr
    before = re.search(r"localgen: warning: other processes kept ([0-9.]+) CPUs busy before the tests: the "
                       r"figures will be below this machine's when it is idle\n", proc.stderr)
    if before:  # where the model's load took a second or more, long enough to tell
        assert float(before[1]) >= 1.25, proc.stderr
        assert proc.stderr.index("before the tests") < proc.stderr.index("warm-up"), "said before the tests start"


def _bench_interrupted_at(progress: str, *args: str, signum: int = signal.SIGINT,
                          env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run `localgen bench -t 1 ARGS` (with env added to the environment), Ctrl-C (or signum) once its progress on
    stderr says progress; its exit code, stdout, stderr."""
    proc = popen_localgen([sys.executable, "-m", "localgen", "bench", "-t", "1", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=REPO_ROOT,
                          env={**os.environ, **(env or {})})
    said = ""
    try:
        while progress not in said:
            line = proc.stderr.readline() if proc.stderr else ""
            assert line, f"bench ended before {progress!r}: {said}"
            said += line
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out, said + err


# The repetition a test interrupts (pp256) lasts about half a second or more on an idle machine, not the 20-80 ms of
# pp16 or tg4: a signal sent once its progress line is read must land before it ends, on a busy machine too (where one
# thread only slows, as two that spin stall).
LONG_PROMPT = 256
LONG_GENERATION = 128


def test_ctrl_c_during_bench_prints_what_was_measured_and_exits_130() -> None:
    code, out, err = _bench_interrupted_at(f"rep 2/3: pp{LONG_PROMPT}", "-p", str(LONG_PROMPT), "-n", "4", "-r", "3")
    assert code == 130 and "Traceback" not in err, err
    assert out.startswith("model smollm2-135m (") and "interrupted (Ctrl-C)" in out, out
    assert re.search(rf"\| pp{LONG_PROMPT} +\| prefill +\| +[0-9.,]+ tok/s \(1 of 3 reps\) \|", out), out
    assert re.search(r"\| tg4 +\| decode +\| +not measured \|", out), out


def test_sigterm_during_bench_gives_the_json_of_what_was_measured_and_exits_143() -> None:
    code, out, err = _bench_interrupted_at(f"rep 2/2: tg{LONG_GENERATION}", "-p", "16", "-n", str(LONG_GENERATION),
                                           "-r", "2", "--json", signum=signal.SIGTERM)
    assert code == 143 and "Traceback" not in err, err
    record = json.loads(out)
    assert record["interrupted"] is True and "stopped_by" not in record
    figures = record["figures"]
    prefill, decode = figures["prefill_tokens_per_s"], figures["decode_tokens_per_s"]
    assert len(prefill["samples"]) == 2 and len(decode["samples"]) == 1, figures


def test_ctrl_c_before_a_repetition_ends_says_nothing_was_measured() -> None:
    code, out, err = _bench_interrupted_at(f"warm-up: pp{LONG_PROMPT}", "-p", str(LONG_PROMPT), "-n", "4", "-r", "3")
    assert code == 130 and "Traceback" not in err, err
    assert err.endswith("localgen: interrupted before any repetition finished: nothing was measured\n"), err
    assert out.count("\n") == 1 and out.startswith("model smollm2-135m ("), "only the line printed once it loaded"


def test_a_stdout_that_cannot_be_written_fails_before_the_benchmark() -> None:
    with open("/dev/full", "wb") as full:
        proc = run_localgen_process([sys.executable, "-m", "localgen", "bench", "-p", "16", "-n", "4", "-r", "1"],
                                    stdout=full, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                    cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 1 and proc.stderr.endswith(
        "localgen: error: cannot write to stdout: No space left on device: it is /dev/full, where every write fails "
        "(hint: send the output elsewhere)\n"), proc.stderr
    assert "warm-up" not in proc.stderr, "no test runs for a table that cannot be printed"


def test_stats_name_the_prompt_cache_and_the_drafts() -> None:
    timings = Timings(ttft_s=0.1, prefill_s=0.1, prefill_tokens_per_s=1.0, decode_s=1.0, decode_tokens_per_s=1.0)
    done = Finished(text="x", finish_reason="stop", usage=Usage(10, 8, 5), timings=timings,
                      draft=DraftStats(drafted=10, accepted=7, batches=3), restored_tokens=8)
    main, extra = format_stats(done, context=(15, 2048)).splitlines()
    assert "prompt 10 tok (8 cached)" in main and "context 15/2,048" in main and main.endswith("finish stop")
    assert "8 tokens restored" in extra and "7/10" in extra and "70%" in extra
    assert len(format_stats(replace(done, draft=None, restored_tokens=0)).splitlines()) == 1
    busy = replace(done, draft=None, restored_tokens=0, decode_threads=1, threads=2)
    assert "decoded with 1 of 2 threads" in format_stats(busy)
    unread = replace(busy, finish_reason="interrupted", usage=Usage(10, 0, 0))  # Ctrl-C while the prompt was read
    assert len(format_stats(unread).splitlines()) == 1, "no token was decoded, with any number of threads"
    all_cached = replace(done, timings=replace(timings, prefill_tokens_per_s=None))  # computed while typing
    one = replace(busy, usage=Usage(10, 0, 1), timings=replace(timings, decode_s=None, decode_tokens_per_s=None))
    assert "generated 1 tok, decode -, finish stop" in format_stats(one), "a token from the prompt's logits: no decode"
    assert "threads" not in format_stats(one), "nothing decoded, with any number of threads"
    assert "TTFT 100 ms, prefill -, generated" in format_stats(all_cached)
    long = replace(done, usage=Usage(6037, 6000, 1200), ahead_tokens=1024, restored_tokens=4096,
                   draft=DraftStats(drafted=1500, accepted=1100, batches=300))
    assert "prompt 6,037 tok (6,000 cached)" in format_stats(long) and "generated 1,200 tok" in format_stats(long), \
        "thousands separated, as the context's figures are"
    assert "1,024 prompt tokens computed" in format_stats(long) and "4,096 tokens restored" in format_stats(long)
    assert "1,100/1,500 drafted" in format_stats(long)
    undrafted = replace(done, draft=DraftStats(drafted=0, accepted=0, batches=0))
    assert "draft lookup: 0/0 drafted tokens accepted in 0 batches" in format_stats(undrafted), "no rate of nothing"


@pytest.mark.serial
def test_cli_bench_json() -> None:
    result = run_localgen("bench", "-p", "32", "-n", "4", "-r", "1", "--json")
    assert result.returncode == 0, result.err
    record = json.loads(result.out)
    assert record["n_prompt"] == 32 and record["n_gen"] == 4 and record["repetitions"] == 1
    assert record["repack"] is use_cpu_extra_buffers()
    assert record["repack_off"] == (None if record["repack"] else "LOCALGEN_AMX=0"), "the suite runs with AMX off"
    assert record["figures"]["decode_tokens_per_s"]["mean"] > 0
    assert record["figures"]["follow_up_tokens"] > 10, "the follow-up turn's size, measured with the prefill test"
    assert (record["prefill_ctx_size"], record["decode_ctx_size"]) == (32 + 128 + 64, 4 + 2 + 64), \
        "each test in a context its size"
    assert "bench: loading smollm2-135m" in result.err, "progress goes to stderr"
    assert "--batch-size" not in result.err and record["batch_size"] < 512, "the default batch size is not the user's"
    assert record["batch_size"] == padded_context(record["prefill_ctx_size"]), "the prefill test's cells"
    offloads = supports_gpu_offload()
    assert (record["gpu_layers"] == 0) != offloads and (record["placement"] == "CPU only") != offloads


def test_cli_bench_json_says_what_it_makes_of_the_sizes_given() -> None:
    """A --batch-size past the prefill test's cells is capped at them, as the default is, and -ngl reaches the plan;
    on one thread, which stalls on no busy CPU, beside the other tests."""
    given = run_localgen("bench", "-p", "32", "-n", "4", "-r", "1", "-t", "1", "--json", "--batch-size", "1024",
                         "-ngl", "3")
    assert given.returncode == 0, given.err
    placed = json.loads(given.out)
    assert placed["prefill_ctx_size"] == 32 + 128 + 64 and placed["batch_size"] == padded_context(32 + 128 + 64)
    assert f"--batch-size 1024 is capped at {placed['batch_size']}" in given.err
    if supports_gpu_offload():
        assert (placed["gpu_layers"], placed["placement"]) == (3, "3/30 layers on the GPU"), placed
    else:  # -ngl reaches the plan, which says it cannot be done
        assert "bench: this llama.cpp build cannot offload to a GPU: --gpu-layers ignored" in given.err
        assert placed["placement"] == "CPU only"
    assert f"the prefill test's context of {placed['prefill_ctx_size']} tokens" in given.err, \
        "the context the header names"


def test_an_explicit_batch_size_equal_to_the_default_still_gets_the_note() -> None:
    given = run_localgen("bench", "-p", "32", "-n", "4", "-r", "1", "-t", "1", "--json", "--batch-size",
                         str(DEFAULT_BATCH_SIZE), "--no-gpu")
    assert given.returncode == 0, given.err
    n_batch = json.loads(given.out)["batch_size"]
    assert n_batch < DEFAULT_BATCH_SIZE
    assert f"--batch-size {DEFAULT_BATCH_SIZE} is capped at {n_batch}" in given.err, "given, even if the default"


def test_zero_skips_a_test_as_in_llama_bench() -> None:
    decode_only = run_localgen("bench", "-p", "0", "-n", "4", "-r", "1", "-t", "1", "--json")
    assert decode_only.returncode == 0, decode_only.err
    record = json.loads(decode_only.out)
    assert (record["prefill_ctx_size"], record["decode_ctx_size"]) == (None, 4 + 2 + 64), \
        "prefill_ctx_size is the prefill test's"
    figures = record["figures"]
    assert [key for key, value in figures.items() if value is None] == [
        "follow_up_tokens", "prefill_tokens_per_s", "ttft_s", "reuse_ttft_s", "fresh_ttft_s"], \
        "no follow-up turn was measured: its tokens are null with its TTFTs"
    assert len(figures["decode_tokens_per_s"]["samples"]) == 1 and figures["decode_tokens_per_s"]["mean"] > 0
    assert "pp0" not in decode_only.err, "no prefill test was run"
    table = run_localgen("bench", "-p", "0", "-n", "4", "-r", "1", "-t", "1")
    assert table.returncode == 0 and "| test | what   |" in table.out and "| tg4  | decode |" in table.out, table.out
    assert len(_bars(table.out)) == 1, f"the header's words set the columns' widths too: {table.out}"
    prefill_only = run_localgen("bench", "-p", "16", "-n", "0", "-r", "1", "-t", "1")
    assert prefill_only.returncode == 0, prefill_only.err
    assert "| pp16 " in prefill_only.out and "| tg" not in prefill_only.out and "fresh" in prefill_only.out
    neither = run_localgen("bench", "-p", "0", "-n", "0")
    assert neither.returncode == 2 and "-p 0 and -n 0 leave nothing to measure" in neither.err


def test_cli_bench_rejects_bad_counts() -> None:
    result = run_localgen("bench", "-r", "0")
    assert result.returncode == 2 and "repetitions" in result.err


@pytest.mark.parametrize(("args", "message"), [
    (("-p", "512,1024"), "-p/--n-prompt takes one value, not a list or range as llama-bench's does (512,1024) "
                         "(hint: run localgen bench once per value: for n in 512 1024; do localgen bench -p $n; done)"),
    (("--n-gen", "64-256*2"), "-n/--n-gen takes one value, not a list or range as llama-bench's does (64-256*2) "
                              "(hint: run localgen bench once per value: for n in 64 128 256; do localgen bench "
                              "--n-gen $n; done)"),
    (("-p", "128-512+128"), "(hint: run localgen bench once per value: for n in $(seq 128 128 512); do localgen bench "
                            "-p $n; done)"),
    (("-t", "2,4"), "-t/--threads takes one value, not a list or range as llama-bench's does (2,4) (hint: run localgen "
                    "bench once per value: for n in 2 4; do localgen bench -t $n; done)"),
    (("--batch-size", "256,512"), "--batch-size takes one value, not a list or range as llama-bench's does (256,512) "
                                  "(hint: run localgen bench once per value: for n in 256 512; do localgen bench "
                                  "--batch-size $n; done)"),
    (("-ngl", "0,99"), "-ngl/--gpu-layers takes one value, not a list or range as llama-bench's does (0,99) (hint: "
                       "run localgen bench once per value: for n in 0 99; do localgen bench -ngl $n; done)"),
    (("--n-prompt", "256,512"), "(hint: run localgen bench once per value: for n in 256 512; do localgen bench "
                                "--n-prompt $n; done)"),  # the loop gives the option as typed, where it gave -p
    (("--repetitions=3,5",), "for n in 3 5; do localgen bench --repetitions $n; done)"),
    (("--threads", "2,4"), "for n in 2 4; do localgen bench --threads $n; done)"),
    (("--gpu-layers", "0,99"), "for n in 0 99; do localgen bench --gpu-layers $n; done)"),
    (("-p", "10,500"), "-p/--n-prompt takes one value, and 10,500 may be one number with its thousands set apart or "
                       "llama-bench's list of 10 and 500 (hint: as one number, write it without separators: -p 10500; "
                       "as a list, run localgen bench once per value: for n in 10 500; do localgen bench -p $n; done)"),
])
def test_llama_bench_s_lists_of_sizes_are_refused_with_a_loop_that_runs_each(args: tuple[str, ...],
                                                                             message: str) -> None:
    result = run_localgen("bench", *args)
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err.startswith("localgen: error: ") and result.err.endswith(f"{message}\n"), result.err
    assert result.err.count("\n") == 1, result.err


def test_a_prompt_beyond_the_model_is_refused_before_loading() -> None:
    result = run_localgen("bench", "-p", "100000", "-n", "16", "-r", "1")
    assert result.returncode == 2 and "Traceback" not in result.err
    assert result.err.count("\n") == 1, "one line: no progress about a model that will not be loaded"
    last = result.err.strip()
    assert last == ("localgen: error: -p 100,000 needs a context of 100,192 tokens, beyond the model's "
                    "maximum of 8,192 (hint: use -p 8000 or less)")
    result = run_localgen("bench", "-p", "16", "-n", "9000", "-r", "1")
    assert result.err.strip() == ("localgen: error: -n 9,000 needs a context of 9,066 tokens, beyond the "
                                  "model's maximum of 8,192 (hint: use -n 8126 or less)")
    both = run_localgen("bench", "-p", "9000", "-n", "9000", "-r", "1")
    assert both.err.strip() == ("localgen: error: -p 9,000 needs a context of 9,192 tokens, beyond the model's "
                                "maximum of 8,192 (hint: use -p 8000 -n 8126 or less)")


def test_a_test_beyond_this_machine_s_memory_is_refused_naming_the_size_that_fits() -> None:
    small = {"LOCALGEN_MEMORY_LIMIT": "200MiB"}
    prefill = run_localgen("bench", "-p", "8000", "-n", "0", "-r", "1", env=small)
    assert prefill.returncode == 1 and prefill.out == "" and prefill.err.count("\n") == 1, prefill.err
    assert "at a context of 8,192 tokens" in prefill.err and "--ctx-size" not in prefill.err, "bench takes none"
    assert "or a smaller context (-p 576, the most that fits), or" in prefill.err, prefill.err
    just_over = run_localgen("bench", "-p", "577", "-n", "0", "-r", "1", env=small)
    assert just_over.returncode == 1 and "(-p 576, the most that fits)" in just_over.err, "576 and its room fit"
    code, _, said = _bench_interrupted_at("warm-up: pp576", "-p", "576", "-n", "0", "-r", "1", env=small)
    assert code == 130 and "nothing was measured" in said, "the size hinted fits: its test starts"
    decode = run_localgen("bench", "-p", "0", "-n", "8000", "-r", "1", env=small)
    assert decode.returncode == 1 and "(-n 702, the most that fits)" in decode.err, decode.err
    decode_just_over = run_localgen("bench", "-p", "0", "-n", "703", "-r", "1", env=small)
    assert decode_just_over.returncode == 1 and "(-n 702, the most that fits)" in decode_just_over.err


def test_a_memory_refusal_of_both_tests_names_each_size_that_fits() -> None:
    small = {"LOCALGEN_MEMORY_LIMIT": "200MiB"}
    both = run_localgen("bench", "-p", "8000", "-n", "8000", "-r", "1", env=small)
    assert both.returncode == 1 and "(-p 576 -n 702, the most that fits)" in both.err, both.err
    only_one_over = run_localgen("bench", "-p", "8000", "-n", "100", "-r", "1", env=small)
    assert only_one_over.returncode == 1 and "(-p 576, the most that fits)" in only_one_over.err, only_one_over.err
    prompt_under = run_localgen("bench", "-p", "500", "-n", "8000", "-r", "1", env=small)
    assert prompt_under.returncode == 1 and "(-n 702, the most that fits)" in prompt_under.err, prompt_under.err


def test_a_context_llama_cpp_cannot_make_is_refused_naming_bench_s_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.engine import loading

    monkeypatch.setattr(loading.lc, "llama_init_from_model", lambda _model, _params: None)  # as out of VRAM
    with pytest.raises(ModelLoadError) as refused, offline_given(True):
        run_bench(model=None, config=BenchConfig(n_prompt=16, n_gen=8, reps=1), threads=1, threads_batch=1,
                  batch_size=None, ubatch_size=512, flash_attn="auto", kv_type="f16",
                  progress=lambda _text: None)
    assert refused.value.message.startswith("could not create a context of 208 tokens for "), refused.value.message
    assert refused.value.hint == "try a smaller -p, or --kv-type q8_0", refused.value.hint


@pytest.mark.parametrize(("status", "n_prompt", "message", "hint"), [
    (1, 16, "llama.cpp found no room in the KV cache for the batch (llama_decode returned 1)",
     "the context is sized from -p with room to spare: run with LOCALGEN_DEBUG=1 for llama.cpp's log, which says "
     "why, and report it"),
    (-2, 0, "llama.cpp could not allocate the memory to evaluate the batch (llama_decode returned -2)",
     "try a smaller --batch-size, fewer --gpu-layers or a smaller -n"),
], ids=["no-kv-room-prefill", "no-memory-decode"])
def test_a_decode_failure_in_a_test_hints_bench_s_options(monkeypatch: pytest.MonkeyPatch, status: int,
                                                          n_prompt: int, message: str, hint: str) -> None:
    """A llama_decode that fails as a test runs hints what bench takes (-p, -n), not run's --ctx-size."""
    from localgen.engine import kv
    from localgen.engine.results import DecodeFailure

    monkeypatch.setattr(kv.lc, "llama_decode", lambda _ctx, _batch: status)  # as a full KV cache, or out of memory
    with pytest.raises(DecodeFailure) as failed, offline_given(True):
        run_bench(model=None, config=BenchConfig(n_prompt=n_prompt, n_gen=8, reps=1), threads=1, threads_batch=1,
                  batch_size=None, ubatch_size=512, flash_attn="auto", kv_type="f16",
                  progress=lambda _text: None)
    assert (failed.value.message, failed.value.hint, failed.value.status) == (message, hint, status)
    assert "--ctx-size" not in failed.value.hint


def test_a_decode_failure_s_hint_names_run_s_context_option_or_bench_s() -> None:
    from localgen.engine.results import decode_failure, decode_hint

    assert decode_failure(1).hint == "the context may be full; try a larger --ctx-size"
    assert decode_failure(-2).hint == "try a smaller --batch-size, fewer --gpu-layers or a smaller --ctx-size"
    assert decode_hint(-2, sized_by="-p") == "try a smaller --batch-size, fewer --gpu-layers or a smaller -p"
    assert decode_hint(-3, sized_by="-n") == decode_failure(-3).hint
    assert decode_hint(-1, sized_by="-n") == decode_failure(-1).hint


def test_each_context_a_refusal_offers_is_named_as_the_sizes_of_the_tests_over_it() -> None:
    refusal = InsufficientMemoryError("m needs about 1 GiB", "try a smaller context (--ctx-size 1024, the most that "
                                      "fits); ORG/REPO:Q2_K fits with --ctx-size 2048 or less", n_ctx=4096)
    prefill, decode = BenchTest(1192, "prefill", "-p", 1000), BenchTest(4066, "decode", "-n", 4000)
    said = in_test_sizes(refusal, [prefill, decode], decode)
    assert said.hint == ("try a smaller context (-p 832 -n 958, the most that fits); ORG/REPO:Q2_K fits with -n 1982 "
                         "or less")
    assert (said.message, said.n_ctx, said.exit_code, type(said)) == (refusal.message, 4096, refusal.exit_code,
                                                                       InsufficientMemoryError)
    assert (said.needed_bytes, said.short) == (refusal.needed_bytes, refusal.short)
    unmade = ModelLoadError("could not create a context", "try a smaller --ctx-size; or try fewer --gpu-layers than 9")
    assert in_test_sizes(unmade, [prefill, decode], decode).hint == "try a smaller -n; or try fewer --gpu-layers than 9"


def test_an_unknown_model_is_one_error_line() -> None:
    result = run_localgen("bench", "-m", "nosuch", "-r", "1")
    assert result.returncode == 1
    assert result.err.startswith("localgen: error: unknown model 'nosuch'") and result.err.count("\n") == 1


def test_one_draft_batch_is_singular() -> None:
    timings = Timings(ttft_s=0.1, prefill_s=0.1, prefill_tokens_per_s=1.0, decode_s=1.0, decode_tokens_per_s=1.0)
    done = Finished(text="x", finish_reason="stop", usage=Usage(10, 0, 3), timings=timings,
                    draft=DraftStats(drafted=2, accepted=1, batches=1))
    assert format_stats(done).splitlines()[1].endswith("accepted (50%) in 1 batch")


@pytest.mark.parametrize(("args", "hint"), [
    (("-p", "4,096"), "write it without separators: -p 4096"),
    (("--n-gen", "1,024"), "write it without separators: --n-gen 1024"),
    (("--batch-size=16,384",), "write it without separators: --batch-size 16384"),  # a power of two
    (("-p", "1,024,000"), "write it without separators: -p 1024000"),
    (("-p", "128,256,512"), "run localgen bench once per value: for n in 128 256 512; do localgen bench -p $n; "
                            "done"),  # sizes listed, as llama-bench takes them
    (("-p", "0,512"), "run localgen bench once per value: for n in 0 512; do localgen bench -p $n; done"),  # 0 skips
    (("--n-prompt", "10,500"), "as one number, write it without separators: --n-prompt 10500; as a list, run "
                               "localgen bench once per value: for n in 10 500; do localgen bench --n-prompt $n; "
                               "done"),  # either, where it was read as a list
    (("-n", "1,500"), "as one number, write it without separators: -n 1500; as a list, run localgen bench once per "
                      "value: for n in 1 500; do localgen bench -n $n; done"),
])
def test_a_size_with_its_thousands_set_apart_is_told_to_drop_the_commas_not_to_loop(args: tuple[str, ...],
                                                                                    hint: str) -> None:
    """-p 4,096 is one number, where it was refused as a llama-bench list (for n in 4 096; ...)."""
    result = run_localgen("bench", *args)
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err.endswith(f" (hint: {hint})\n") and result.err.count("\n") == 1, result.err
