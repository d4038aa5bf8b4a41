"""bench_features.py promptcache, penalties, busy and cells: what a `run` spends on its prompt and its decoding."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import FREE_PROMPT, document, localgen, log, spread


def bench_promptcache(args: argparse.Namespace) -> None:
    """TTFT of the second run over the same document, against the first."""
    home = Path(tempfile.mkdtemp(prefix="localgen-bench-"))
    env = {**os.environ, "LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1"}
    doc = home / "doc.txt"
    doc.write_text(document(args.words))
    common = ("--json", "-n", "16", "--temperature", "0", "-f", str(doc))
    first, second, cold2, ratio, same = [], [], [], [], []
    tokens = restored = 0
    for k in range(args.rounds):
        localgen("cache", "clear", env=env)
        a = localgen("run", *common, "What does record 12 say about the crates?", env=env)
        b = localgen("run", *common, "Which place reported the most delays?", env=env)
        c = localgen("run", *common, "--no-cache", "Which place reported the most delays?", env=env)
        tokens, restored = b["usage"]["prompt_tokens"], b["usage"].get("prompt_cache_tokens", 0)
        first.append(a["timings"]["ttft_s"])
        second.append(b["timings"]["ttft_s"])
        cold2.append(c["timings"]["ttft_s"])
        ratio.append(second[-1] / first[-1])
        same.append(b["text"] == c["text"])
        log(f"round {k + 1}: first {first[-1]:.3f} s, second {second[-1]:.3f} s (ratio {ratio[-1]:.3f}), "
            f"no-cache {cold2[-1]:.3f} s, identical text {same[-1]}")
    print(f"\nprompt cache, {args.rounds} rounds, prompt {tokens} tokens, {restored} restored from disk "
          f"(median, min-max)")
    print(f"  run 1 TTFT (cold, saves the entry):   {spread(first)} s")
    print(f"  run 2 TTFT (restores the prefix):     {spread(second)} s")
    print(f"  run 2 TTFT with --no-cache:           {spread(cold2)} s")
    print(f"  ratio run 2 / run 1 (paired):         {spread(ratio)}  (target <= 0.25)")
    print(f"  greedy text identical with and without the cache: {all(same)}")


def bench_penalties(args: argparse.Namespace) -> None:
    """Microseconds per sampled token, localgen's penalties against llama.cpp's sampler; default vs greedy decode."""
    from localgen.chat import Message
    from localgen.engine.sampling import build_sampler
    from localgen.events import Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, checked_prompt, load_model

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    engine = loaded.engine
    default = SamplingParams(seed=3)
    prompt = checked_prompt(loaded, [Message("user", FREE_PROMPT)])[1]

    def decode(sampling: SamplingParams) -> float:
        engine.reset()
        events = engine.generate(prompt, sampling, GenerationLimits(max_tokens=args.n), ignore_eog=True)
        return [e for e in events if isinstance(e, Finished)][-1].timings.decode_tokens_per_s

    decode(default)
    history = engine.kv_token_list
    ours, theirs, speeds = [], [], {"default": [], "greedy": []}
    for _ in range(args.rounds):
        ours.append(_sampling_cost(engine, history, lambda: build_sampler(engine._vocab.pointer, default, history, 0)))
        theirs.append(_sampling_cost(engine, history, lambda: _llama_cpp_chain(engine, default, history)))
        speeds["default"].append(decode(default))
        speeds["greedy"].append(decode(SamplingParams(temperature=0.0, repeat_penalty=1.0)))
    print(f"\nsampling one token, default settings, {engine.n_vocab:,}-token vocabulary, {args.rounds} rounds "
          "(median, min-max)")
    print(f"  localgen (penalties on the window's logits): {spread(ours, 1)} us")
    print(f"  llama.cpp's chain with its penalties sampler: {spread(theirs, 1)} us")
    print(f"  decode, {args.n} tokens: default sampling {spread(speeds['default'], 1)} tok/s, "
          f"greedy {spread(speeds['greedy'], 1)} tok/s")
    loaded.close()


def _llama_cpp_chain(engine, sampling, history: list[int]):
    """llama.cpp's own chain for these settings, its penalties sampler primed with history (the old way)."""
    from localgen.engine import lc
    from localgen.engine.sampling import Sampler, native_penalties

    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    lc.llama_sampler_chain_add(chain, native_penalties(engine.n_vocab, sampling, history))
    for sampler in (lc.llama_sampler_init_top_k(sampling.top_k), lc.llama_sampler_init_top_p(sampling.top_p, 1),
                    lc.llama_sampler_init_min_p(sampling.min_p, 1), lc.llama_sampler_init_temp(sampling.temperature),
                    lc.llama_sampler_init_dist(sampling.seed)):
        lc.llama_sampler_chain_add(chain, sampler)
    return Sampler(chain, None)


def _sampling_cost(engine, history: list[int], new_sampler, count: int = 400) -> float:
    """Microseconds per sample at the logits after history (the sampler primed with its last tokens, and each
    sampled token accepted, as in a generation)."""
    engine.reset()
    list(engine._prefill(history, 0))
    sampler = new_sampler()
    try:
        started = time.perf_counter()
        for _ in range(count):
            sampler.sample(engine._ctx, -1)
        return (time.perf_counter() - started) / count * 1e6
    finally:
        sampler.free()
        engine.reset()


def bench_busy(args: argparse.Namespace) -> None:
    """Decode tok/s of the default threads against fixed counts, idle and beside busy processes."""
    from localgen.hardware import physical_cores

    most = physical_cores()
    home = Path(tempfile.mkdtemp(prefix="localgen-bench-"))
    env = {**os.environ, "LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1"}
    common = ("run", "--json", "--no-cache", "-n", str(args.n), "--temperature", "0",
              "Write a long story about a lighthouse keeper.")
    variants = {"default": (), **{f"-t {t}": ("-t", str(t)) for t in sorted({most, max(1, most - 1)}, reverse=True)}}
    for burners in dict.fromkeys((0, args.burners)):  # --burners 0: the idle machine alone
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
        try:
            time.sleep(0.5 if busy else 0)
            speeds: dict[str, list[float]] = {name: [] for name in variants}
            used: list[int] = []
            for k in range(args.rounds):
                for name, extra in variants.items():
                    record = localgen(*common, *extra, env=env)
                    speeds[name].append(record["timings"]["decode_tokens_per_s"])
                    if name == "default":
                        used.append(record["decode_threads"])
                log(f"{burners} busy, round {k + 1}: " + ", ".join(f"{n} {v[-1]:.1f}" for n, v in speeds.items()))
        finally:
            for process in busy:
                process.kill()
                process.wait()
        print(f"\n{burners} busy processes beside it, {most} physical cores, {args.rounds} rounds, decode tok/s "
              f"(median, min-max)")
        for name, values in speeds.items():
            print(f"  {name:8} {spread(values, 1)}")
        print(f"  default decoded with {sorted(set(used))} threads at the end; ratio default / -t {most} (paired): "
              f"{spread([d / f for d, f in zip(speeds['default'], speeds[f'-t {most}'], strict=True)])}")


def bench_cells(args: argparse.Namespace) -> None:
    """Decode tok/s in contexts of n_ctx cells against the cells localgen allocates, without flash attention."""
    from localgen.engine.loading import load_weights
    from localgen.engine.native import FLASH_ATTN, lc
    from localgen.estimate import allocated_context
    from localgen.params import LoadOptions
    from localgen.runner import ModelOptions, load_model

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    path, threads = loaded.resolved.path, loaded.engine.options.n_threads
    loaded.close()
    model = load_weights(path, LoadOptions(n_ctx=256, n_threads=threads, n_threads_batch=threads), lambda: False)
    contexts = {}
    for n_ctx in args.ctx:
        for cells in sorted({n_ctx, allocated_context(n_ctx, flash_attn=False)}):
            params = lc.llama_context_default_params()
            params.n_ctx, params.n_threads, params.n_threads_batch = cells, threads, threads
            params.flash_attn_type, params.no_perf = FLASH_ATTN["off"], True
            contexts[cells] = lc.llama_init_from_model(model, params)
    token = (lc.llama_token * 1)()
    speeds: dict[int, list[float]] = {cells: [] for cells in contexts}
    for k in range(args.rounds):
        for cells, ctx in contexts.items():
            lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
            started = time.perf_counter()
            for i in range(args.n):
                token[0] = 100 + i
                lc.llama_decode(ctx, lc.llama_batch_get_one(token, 1))
            speeds[cells].append(args.n / (time.perf_counter() - started))
        log(f"round {k + 1}: " + ", ".join(f"{cells} {v[-1]:.1f}" for cells, v in speeds.items()))
    for ctx in contexts.values():
        lc.llama_free(ctx)
    lc.llama_model_free(model)
    print(f"\ndecode of {args.n} tokens without flash attention, {threads} threads, {args.rounds} rounds: tok/s "
          f"(median, min-max)")
    for n_ctx in args.ctx:
        chosen = allocated_context(n_ctx, flash_attn=False)
        line = f"  --ctx-size {n_ctx:>6}: {n_ctx} cells {spread(speeds[n_ctx], 1)}"
        if chosen != n_ctx:
            ratios = [a / b for a, b in zip(speeds[chosen], speeds[n_ctx], strict=True)]
            line += f"; {chosen} cells (localgen) {spread(speeds[chosen], 1)}; ratio (paired) {spread(ratios)}"
        print(line)


