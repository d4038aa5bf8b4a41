"""bench_features.py draftbound: the most a prompt-lookup drafter could gain, and localgen's drafter replayed."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
from pathlib import Path

from bench.common import DRAFT_TASKS, draft_message, log
from bench.drafting import time_batches


def lookup_speedup(prompt: list[int], output: list[int], cost: dict[int, float], length: int | None) -> float:
    """Decode speed-up of prompt lookup on a known greedy output, from the cost of each batch size.

    length=None is the oracle: the drafter is told how many of its matched tokens the model will accept and
    drafts exactly those, so no batch is wasted. An integer drafts that many whenever the n-gram matches.
    """
    from localgen.speculative import DRAFT_MAX, PromptLookup
    from localgen.tokens import common_prefix

    drafter = PromptLookup(prompt, fixed_length=DRAFT_MAX)
    drafter.extend(output[:1])
    done, spent = 1, 0.0
    while done < len(output):
        guesses = drafter.draft(DRAFT_MAX)
        accepted = common_prefix(guesses, output[done:done + len(guesses)])
        drafted = accepted if length is None else min(length, len(guesses))
        accepted = min(accepted, drafted)
        spent += cost[drafted + 1] / cost[1]
        new = output[done:done + accepted + 1]
        drafter.extend(new)
        done += len(new)
    return (len(output) - 1) / spent


def record_draft_data(args: argparse.Namespace) -> dict[str, dict]:
    """Per draft task: the prompt's tokens, the greedy output's and the cost of verify batches of 1..17 tokens (in
    one-token decodes), timed at the middle of the output."""
    from localgen.chat import Message
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, checked_prompt, load_model
    from localgen.speculative import flash_attn_for

    flash_attn = flash_attn_for("auto", "lookup")  # as `run --draft lookup` decodes
    loaded = load_model(ModelOptions(model=args.model, threads=args.threads, flash_attn=flash_attn,
                                     keys_for_drafts=True))
    engine, data = loaded.engine, {}
    log(f"flash attention {engine.options.attention_mode}, KV {engine.options.kv_layout}, as `run --draft lookup` "
        "decodes")
    for task, (instruction, attached) in DRAFT_TASKS.items():
        prompt = checked_prompt(loaded, [Message("user", draft_message(instruction, attached))])[1]
        engine.reset()
        list(engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=args.n)))
        output = engine.kv_token_list[len(prompt):]
        times = time_batches(engine, len(prompt) + len(output) // 2, args.rounds)
        data[task] = {"prompt": prompt, "output": output, "cost": {b: t / times[1] for b, t in times.items()}}
        log(f"{task}: {len(prompt)} prompt tokens, {len(output)} output tokens")
    loaded.close()
    return data


def draft_data(args: argparse.Namespace) -> dict[str, dict]:
    """The recording behind draftbound: read from --data where that file exists, else recorded (and saved there)."""
    path = Path(args.data) if args.data else None
    if path is not None and path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            for task in data.values():
                task["cost"] = {int(b): float(c) for b, c in task["cost"].items()}
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            message = f"error: {path} is not a draftbound recording ({error}); delete it to record anew"
            raise SystemExit(message) from None
        return data
    data = record_draft_data(args)
    if path is not None:
        path.write_text(json.dumps(data), encoding="utf-8")
    return data


def cost_point(text: str) -> tuple[int, float]:
    """One --cost B:COST point: a batch size of 2 or more and its cost in one-token decodes."""
    size, _, cost = text.partition(":")
    try:
        point = int(size), float(cost)
    except ValueError:
        point = (0, 0.0)
    if point[0] < 2 or point[1] < 1.0:
        raise argparse.ArgumentTypeError(f"'{text}' is not B:COST (a batch size of 2 or more, a cost of 1 or more)")
    return point


def cost_curve(points: list[tuple[int, float]]) -> dict[int, float]:
    """A verify batch's cost for b = 1..DRAFT_MAX + 1 from (b, cost) points (b=1 costs 1), linear between them."""
    from localgen.speculative import DRAFT_MAX

    known = sorted({1: 1.0, **dict(points)}.items())
    curve = {}
    for b in range(1, DRAFT_MAX + 2):
        (b0, c0), (b1, c1) = next(((x, y) for x, y in itertools.pairwise(known) if x[0] <= b <= y[0]), known[-2:])
        curve[b] = c0 + (c1 - c0) * (b - b0) / (b1 - b0)
    return curve


@dataclasses.dataclass
class Replay:
    """What a drafter did over a known greedy output: its speed-up and where it spent its batches."""

    speedup: float
    batches: int
    drafted: int
    accepted: int
    wasted: float  # one-token decodes spent on drafted tokens the model rejected
    undrafted_right: int  # plain steps where the lookup's guess was right
    undrafted_none: int  # plain steps where nothing matched


def replay_drafter(prompt: list[int], output: list[int], cost: dict[int, float]) -> Replay:
    """localgen's drafter over a known greedy output, fed the batch costs as its timings: each batch accepts the
    common prefix of the draft and the output, plus the model's own token."""
    from localgen.speculative import DRAFT_MAX, PromptLookup
    from localgen.tokens import common_prefix

    drafter, guesser = PromptLookup(prompt), PromptLookup(prompt, fixed_length=1)  # guesser: the lookup's guess
    unit = 0.03  # seconds of a one-token decode (only the ratios matter)
    done, spent, out = 1, 0.0, output[:1]
    wasted, right, none = 0.0, 0, 0
    while done < len(output):
        drafter.extend(out)
        guesser.extend(out)
        drafts = drafter.draft(min(DRAFT_MAX, len(output) - done))
        accepted = common_prefix(drafts, output[done:])
        spent += cost[len(drafts) + 1]
        drafter.observe(len(drafts) + 1, cost[len(drafts) + 1] * unit)
        drafter.record(len(drafts), accepted)
        wasted += cost[len(drafts) + 1] - cost[accepted + 1]
        if not drafts:
            guess = guesser.draft(1)  # what the lookup guessed without drafting it
            right += guess == output[done:done + 1]
            none += not guess
        out = output[done:done + accepted + 1]
        done += len(out)
    stats = drafter.stats()
    return Replay((len(output) - 1) / spent, stats.batches, stats.drafted, stats.accepted, wasted, right, none)


def run_length_bound(prompt: list[int], output: list[int], cost: dict[int, float]) -> tuple[float, list[int]]:
    """The best speed-up of any drafter that picks its draft length from how many tokens in a row the lookup
    has guessed right, tuned to this very output: dynamic programming over its runs of right guesses.

    The output splits into runs: L tokens the lookup guesses right, then one it does not (L >= 0; the last run
    ends with the output, counted as if one more token followed). At j right guesses into a run, k drafts cost
    cost[k + 1] and, where the run holds j + k + 1 or more, lead to j + k + 1 (else the run ends). Returns the
    speed-up and the best draft length at j = 0, 1, ...
    """
    from localgen.speculative import DRAFT_MAX, PromptLookup

    lookup = PromptLookup(prompt, fixed_length=1)
    lookup.extend(output[:1])
    runs, run = [], 0
    for token in output[1:]:
        if lookup.draft(1) == [token]:
            run += 1
        else:
            runs.append(run)
            run = 0
        lookup.extend([token])
    runs.append(run)
    top = max(runs) + DRAFT_MAX + 2
    alive = [sum(1 for length in runs if length >= j) for j in range(top + 1)]  # runs still going at j
    best_cost, best_length = [0.0] * (top + 1), [0] * (top + 1)
    for j in range(top, -1, -1):
        if alive[j]:
            options = [(cost[k + 1] + (alive[j + k + 1] * best_cost[j + k + 1] / alive[j] if j + k + 1 <= top
                                       else 0.0), k) for k in range(DRAFT_MAX + 1)]
            best_cost[j], best_length[j] = min(options)
    return sum(length + 1 for length in runs) / (len(runs) * best_cost[0]), best_length[:max(runs) + 1]


def bench_draftbound(args: argparse.Namespace) -> None:
    """The most any prompt-lookup drafter could gain on each task, from its greedy output and timed batches, and
    localgen's drafter replayed on the same tokens and costs."""
    from localgen.speculative import DRAFT_MAX

    for task, recorded in draft_data(args).items():
        prompt, output = recorded["prompt"], recorded["output"]
        cost = cost_curve(args.cost) if args.cost else recorded["cost"]
        fixed = {k: lookup_speedup(prompt, output, cost, k) for k in range(1, DRAFT_MAX + 1)}
        best = max(fixed, key=fixed.__getitem__)
        print(f"\n{task}: prompt {len(prompt)} tokens, greedy output {len(output)} tokens")
        print(f"  verify batch of b tokens, in one-token decodes ({'given' if args.cost else 'timed'}): "
              + " ".join(f"{b}:{c / cost[1]:.2f}" for b, c in cost.items()))
        oracle = lookup_speedup(prompt, output, cost, None)
        print(f"  oracle drafter (drafts exactly what will be accepted): {oracle:.3f}x")
        print(f"  best fixed draft length ({best} whenever the n-gram matches):  {fixed[best]:.3f}x")
        bound, lengths = run_length_bound(prompt, output, cost)
        print(f"  best draft length per run of right guesses, tuned to this output: {bound:.3f}x "
              f"(lengths {' '.join(map(str, lengths[:24]))})")
        replay = replay_drafter(prompt, output, cost)
        print(f"  localgen's drafter, replayed: {replay.speedup:.3f}x, {replay.batches} batches, "
              f"{replay.accepted}/{replay.drafted} drafts accepted, {replay.wasted:.1f} decodes on rejected drafts; "
              f"plain steps: {replay.undrafted_right} with a right guess, {replay.undrafted_none} with none")

