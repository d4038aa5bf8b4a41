"""bench_features.py draft and batchcost: prompt-lookup decoding against plain, and the cost of a verify batch."""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import DRAFT_TASKS, draft_message, log, spread

PLAIN, LOOKUP, REFERENCE = "plain", "lookup", "reference"


def draft_variants(args: argparse.Namespace) -> dict[str, tuple[object, str]]:
    """The loaded model and --draft mode of each variant: plain decoding as `run` loads it, `run --draft lookup`
    (flash_attn_for: auto is on), and plain decoding with lookup's settings, whose greedy text lookup must equal
    (left out where both load alike)."""
    from localgen.runner import ModelOptions, load_model
    from localgen.speculative import flash_attn_for

    def options_for(draft: str) -> ModelOptions:
        return ModelOptions(model=args.model, threads=args.threads, kv_type=args.kv_type or "f16",
                            flash_attn=flash_attn_for(args.flash_attn, draft),
                            keys_for_drafts=draft == "lookup" and args.kv_type is None)  # as `run` chooses them

    plain = load_model(options_for("none"))
    lookup = load_model(options_for("lookup"))
    if (lookup.engine.options.flash_attention, lookup.engine.options.key_type) == (
            plain.engine.options.flash_attention, plain.engine.options.key_type):
        lookup.close()  # loaded alike
        lookup = plain
    variants = {PLAIN: (plain, "none"), LOOKUP: (lookup, "lookup")}
    if lookup is not plain:
        variants[REFERENCE] = (lookup, "none")
    return variants


def bench_draft(args: argparse.Namespace) -> None:
    """Decode tok/s of `run --draft lookup` against `run`, and its text against plain decoding's with its settings."""
    from localgen.chat import Message
    from localgen.events import Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import checked_prompt

    variants = draft_variants(args)
    names = {name: f"flash attention {loaded.engine.options.attention_mode}, KV {loaded.engine.options.kv_layout}"
             for name, (loaded, _) in variants.items()}
    sampling = SamplingParams(temperature=0.0) if args.sampling == "greedy" else SamplingParams(seed=11)
    same_settings = REFERENCE if REFERENCE in variants else PLAIN
    for task, (instruction, attached) in DRAFT_TASKS.items():
        prompt = checked_prompt(variants[PLAIN][0], [Message("user", draft_message(instruction, attached))])[1]
        speeds: dict[str, list[float]] = {name: [] for name in variants}
        acceptance: list[float] = []
        same: dict[str, list[bool]] = {PLAIN: [], same_settings: []}
        for k in range(args.rounds):
            texts = {}
            order = list(variants)[k % len(variants):] + list(variants)[:k % len(variants)]  # each goes first in turn
            for name in order:
                loaded, mode = variants[name]
                loaded.engine.reset()
                events = loaded.engine.generate(prompt, sampling, GenerationLimits(max_tokens=args.n), draft=mode)
                done = [e for e in events if isinstance(e, Finished)][-1]
                speeds[name].append(done.timings.decode_tokens_per_s)
                texts[name] = done.text
                if done.draft is not None:
                    acceptance.append(done.draft.acceptance or 0.0)
                log(f"{task} round {k + 1}: {name} ({names[name]}) {done.usage.completion_tokens} tokens, "
                    f"{done.timings.decode_tokens_per_s:.1f} tok/s"
                    + (f", accepted {done.draft.accepted}/{done.draft.drafted}" if done.draft is not None else ""))
            for name in same:
                same[name].append(texts[LOOKUP] == texts[name])
        ratios = [d / p for d, p in zip(speeds[LOOKUP], speeds[PLAIN], strict=True)]
        print(f"\n{task}, {args.sampling} sampling, --kv-type {args.kv_type or '(not given)'}, {args.rounds} rounds "
              "(median, min-max)")
        print(f"  plain decode, as `run` ({names[PLAIN]}): {spread(speeds[PLAIN], 1)} tok/s")
        if REFERENCE in variants:
            print(f"  plain decode with lookup's settings ({names[REFERENCE]}): {spread(speeds[REFERENCE], 1)} tok/s")
        print(f"  --draft lookup ({names[LOOKUP]}): {spread(speeds[LOOKUP], 1)} tok/s, acceptance "
              f"{spread(acceptance, 2)}")
        print(f"  speed-up over `run` (paired): {spread(ratios)}")
        print(f"  identical text to plain decoding with lookup's settings ({names[same_settings]}): "
              f"{sum(same[same_settings])}/{args.rounds} rounds; to `run`'s plain decoding: "
              f"{sum(same[PLAIN])}/{args.rounds} rounds")
        if args.sampling == "greedy" and not all(same[same_settings]):
            print("  NOT IDENTICAL: greedy `run --draft lookup` parted from plain decoding with the same settings")
    for loaded in {id(loaded): loaded for loaded, _ in variants.values()}.values():
        loaded.close()


def time_batches(engine, depth: int, rounds: int) -> dict[int, float]:
    """Median seconds of one llama_decode of b tokens (b = 1..DRAFT_MAX + 1) after `depth` cached tokens."""
    from localgen.speculative import DRAFT_MAX

    engine.reset()
    list(engine._prefill([engine.bos_token] + [100 + i % 1000 for i in range(depth - 1)], 0))
    times: dict[int, list[float]] = {b: [] for b in range(1, DRAFT_MAX + 2)}
    for _ in range(rounds):
        for b in times:
            batch = engine._draft_batch
            for i in range(b):
                batch.token[i] = 200 + i
                batch.pos[i] = depth + i
            batch.n_tokens = b
            started = time.perf_counter()
            engine._kv.decode(batch)
            times[b].append(time.perf_counter() - started)
            engine._kv.truncate(depth)
    engine.reset()
    return {b: statistics.median(t) for b, t in times.items()}


def bench_batchcost(args: argparse.Namespace) -> None:
    """Time of one llama_decode of b tokens (b = 1..17) at a given KV depth, relative to b = 1."""
    from localgen.engine import Engine
    from localgen.params import LoadOptions
    from localgen.runner import ModelOptions, load_model
    from localgen.speculative import flash_attn_for

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    path, options = loaded.resolved.path, loaded.engine.options
    loaded.close()
    load = LoadOptions(n_ctx=4096, n_threads=options.n_threads, n_threads_batch=options.n_threads,
                       flash_attn=flash_attn_for(args.flash_attn, "lookup"), keys_for_drafts=True)  # as lookup's run
    with Engine(path, load) as engine:
        for depth in args.depths:
            times = time_batches(engine, depth, args.rounds)
            print(f"\nKV depth {depth}, flash attention {load.attention_mode}, KV {load.kv_layout}: median ms per "
                  "llama_decode of b tokens (relative to b=1)")
            print("  " + "  ".join(f"b={b}: {t * 1000:.2f} ({t / times[1]:.2f}x)" for b, t in times.items()))


