#!/usr/bin/env python3
"""Measure the prompt cache (TTFT of a second `localgen run` over the same long file) and speculative decoding.

Usage:
  python scripts/bench_features.py promptcache [--rounds 5] [--words 1600]
  python scripts/bench_features.py draft [--rounds 5] [--sampling greedy|default] [--kv-type f16|q8_0]
  python scripts/bench_features.py draftbound [--rounds 10] [--data FILE] [--cost B:COST ...]
  python scripts/bench_features.py batchcost [--depths 200 700]
  python scripts/bench_features.py fullchat [--turns 600] [--ctx 2048]
  python scripts/bench_features.py chatturn [--rounds 5] [--flash-attn auto off] [--typing 0]
  python scripts/bench_features.py penalties [--rounds 5] [--n 256]
  python scripts/bench_features.py busy [--rounds 5] [--n 128] [--burners 1]
  python scripts/bench_features.py cells [--rounds 8] [--ctx 2048 4096 8192]
  python scripts/bench_features.py typing [--rounds 5] [--tokens 1000]
  python scripts/bench_features.py keyecho [--rounds 3] [--chars 20000] [--keys 20]
  python scripts/bench_features.py prompttokens [--rounds 15] [--tokens 2000 8000 30000]

promptcache: per round, `localgen cache clear`, then `localgen run -f doc.txt "q1"` (cold; saves the prefill)
and `localgen run -f doc.txt "q2"` (restores it), plus `--no-cache "q2"` as a cold reference; TTFT is the
engine's (from the start of generate(), restore included), read from --json. Prints medians and spreads.

draft: per round, plain and `--draft lookup` decoding alternate on a copy-heavy task (fix the typos in ~300
words, the text piped as `run` sends it, then typed after the instruction in one message) and on free writing,
in one process through the same Engine.generate that `run` uses.

draftbound: the ceiling for any prompt-lookup drafter on this hardware: each task's greedy output is decoded
once, the cost of verify batches of every size is timed at that depth, and the speed-up is computed for an
oracle drafter that drafts exactly the tokens the model will accept (and for the best fixed draft length); for
the best drafter that picks its draft length from its run of right guesses, tuned to that output; and for
localgen's drafter, replayed on the same tokens with the batch costs as its timings. --data FILE keeps the
recording (read where FILE exists), so a replay can be repeated without timing noise; --cost replays with
given costs instead of the timed ones.

batchcost: the time of one llama_decode of b tokens relative to one token, at given KV depths.

fullchat: a chat with --turns saved exchanges in a --ctx context: the time to make room for the next question,
and how many prompt tokens the turns after it reuse.

chatturn: a real chat (ChatSession, as `localgen chat`) whose first question holds ~2,000 tokens of this
README, then a follow-up question; beside it, the same follow-up asked in a new conversation (template and
default system prompt included). TTFT is from ask() to the first text, per --flash-attn setting. With --typing
N both questions are typed at N keys/s first, as `localgen chat` prefills them (TTFT is then from Enter).

penalties: the cost of sampling one token with the default settings (repeat penalty 1.1 over the last 64
tokens, top-k, top-p, min-p, temperature) as localgen samples, against llama.cpp's chain with its own penalties
sampler, after a real answer; and the decode speed of `run`'s default sampling beside greedy.

busy: decode speed of `localgen run` with its default threads (fewer while other processes keep the CPUs busy)
against fixed `-t` counts, on an idle machine and beside --burners processes that each keep one CPU busy (--burners 0:
the idle machine alone).

cells: decode speed of 128 tokens from an empty cache without flash attention (--flash-attn auto on the CPU), in
a context of exactly n_ctx cells and in one of the cells localgen allocates (allocated_context), for each --ctx,
all contexts in one process and the rounds alternating.

typing: the speed of the chat's prefill while typing (Engine.prefill_ahead on another thread) beside a thread
that keeps running Python, as the chat's does while it draws the prompt: stopped by a StopFlag read in C (as the
chat does) against a Python callback (which takes the GIL at every graph node), and the same prefill on the main
thread with nothing beside it, in one process, the rounds alternating.

keyecho: `localgen chat` in a pty (pexpect, a test extra) with --chars characters pasted into its prompt as one
line, then --keys keys typed one at a time: the time from each key sent to its echo on the screen (the prompt
redrawn), per round a new chat.

prompttokens: the CPU time of a chat's follow-up prompt (a new question after a conversation of about --tokens
tokens of this README), rendered and tokenized whole against rendered and tokenized in pieces by a ReusingTokenizer
that made the conversation's prompt before (and, cold, the conversation's own prompt in pieces); the rounds
alternate, and each checks that both give the same tokens. A conversation longer than the model's context is
tokenized as a model with that context would (the pieces kept scale with it).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

TYPO_TEXT = (
    "The history of the printing press is a fascinating story of innovation and persistance. Before its invention, "
    "books were copied by hand, a slow and expensive proccess that kept knowledge in the hands of a few. Monks in "
    "monasteries spent years copying a single manuscript, and errors crept into every copy. In the middle of the "
    "fifteenth century, Johannes Gutenberg, a goldsmith from Mainz, developed a system of movable metal type that "
    "could be arranged, inked, and pressed onto paper again and again. His press was adapted from the screw presses "
    "used to make wine and olive oil, and his inks were based on oil rather than water, so they stuck to the metal "
    "type. The first major book he printed was the Bible, and around one hundred and eighty copies were made. "
    "Within a few decades, printing shops had spread to more than two hundred citys across Europe. The price of "
    "books fell dramaticaly, and literacy began to rise. Scholars could compare identical copies of a text, which "
    "made it easier to correct mistakes and build on the work of others. The printing press also helped spread new "
    "ideas quickly, from scientific discoveries to religious reforms, and it changed how people thought about "
    "authorship and ownership of words. Newspapers, pamphlets, and posters followed, and ordinary people began to "
    "read about events far from their own towns. Governments and churches tried to control what was printed, but "
    "the flood of paper was hard to stop. Today we take printed and digital text for granted, but every book on a "
    "shelf and every page on a screen owes something to that workshop in Mainz. The story reminds us that a single "
    "tecnology can reshape a whole society, often in ways its inventor never imagined. It also shows that access to "
    "information is a powerfull force for change, and that the tools we use to share words matter as much as the "
    "words themselves."
)
FREE_PROMPT = "Write a long, original story about a lighthouse keeper who finds a mysterious map."
DRAFT_TASKS = {  # each task's instruction and the text piped or attached with it (see draft_message)
    "copy-heavy (fix typos, ~300 words piped: `localgen run \"Fix the typos in this text:\" < text`)":
        ("Fix the typos in this text:", [TYPO_TEXT]),
    "copy-heavy (fix typos, ~300 words after the instruction, in one message)":
        (f"Fix the typos in this text:\n\n{TYPO_TEXT}", []),
    "free writing (story)": (FREE_PROMPT, [])}


def draft_message(instruction: str, attached: list[str]) -> str:
    """A draft task's user message as `localgen run` builds it: a piped or attached text first, then the
    instruction."""
    from localgen.chat import compose_user_message

    return compose_user_message(instruction, attached)


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[bench_features] {message}", file=sys.stderr, flush=True)


def spread(values: list[float], digits: int = 3) -> str:
    """Median (min-max)."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def document(words: int) -> str:
    """A long, varied, deterministic document."""
    colours = ["red", "green", "blue", "amber", "violet", "grey", "white"]
    places = ["harbour", "market", "library", "station", "orchard", "bridge", "mill"]
    lines, count = [], 0
    i = 0
    while count < words:
        line = (f"Record {i}: on day {i * 7 % 31 + 1} the {colours[i % 7]} cart left the {places[i * 3 % 7]} "
                f"with {i * 13 % 97} crates, and {places[(i + 2) % 7]} reported {i * 5 % 23} delays.")
        lines.append(line)
        count += len(line.split())
        i += 1
    return "\n".join(lines)


def localgen(*args: str, env: dict[str, str]) -> dict:
    """Run `python -m localgen ARGS --json` and parse the record."""
    out = subprocess.run([sys.executable, "-m", "localgen", *args], check=True, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL,
                         env=env, cwd=REPO_ROOT).stdout
    return json.loads(out) if out.strip().startswith("{") else {}


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


def bench_draft(args: argparse.Namespace) -> None:
    """Decode tok/s with and without prompt-lookup drafting, copy-heavy and free writing."""
    from localgen.chat import Message
    from localgen.events import Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, checked_prompt, load_model

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads, kv_type=args.kv_type))
    engine = loaded.engine
    sampling = SamplingParams(temperature=0.0) if args.sampling == "greedy" else SamplingParams(seed=11)
    for task, (instruction, attached) in DRAFT_TASKS.items():
        prompt = checked_prompt(loaded, [Message("user", draft_message(instruction, attached))])[1]
        speeds: dict[str, list[float]] = {"none": [], "lookup": []}
        ratios, acceptance, same = [], [], []
        for k in range(args.rounds):
            texts = {}
            for mode in (("none", "lookup") if k % 2 == 0 else ("lookup", "none")):
                engine.reset()
                events = engine.generate(prompt, sampling, GenerationLimits(max_tokens=args.n), draft=mode)
                done = [e for e in events if isinstance(e, Finished)][-1]
                speeds[mode].append(done.timings.decode_tokens_per_s)
                texts[mode] = done.text
                if done.draft is not None:
                    acceptance.append(done.draft.acceptance or 0.0)
                    log(f"{task} round {k + 1}: {done.usage.completion_tokens} tokens, lookup "
                        f"{done.timings.decode_tokens_per_s:.1f} tok/s, accepted {done.draft.accepted}/"
                        f"{done.draft.drafted}")
                else:
                    log(f"{task} round {k + 1}: plain {done.timings.decode_tokens_per_s:.1f} tok/s")
            ratios.append(speeds["lookup"][-1] / speeds["none"][-1])
            same.append(texts["none"] == texts["lookup"])
        print(f"\n{task}, {args.sampling} sampling, {args.kv_type} KV cache, {args.rounds} rounds (median, min-max)")
        print(f"  plain decode:   {spread(speeds['none'], 1)} tok/s")
        print(f"  --draft lookup: {spread(speeds['lookup'], 1)} tok/s, acceptance {spread(acceptance, 2)}")
        print(f"  speed-up (paired): {spread(ratios)}; identical text in {sum(same)}/{len(same)} rounds")
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

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    path, options = loaded.resolved.path, loaded.engine.options
    loaded.close()
    with Engine(path, LoadOptions(n_ctx=4096, n_threads=options.n_threads, n_threads_batch=options.n_threads,
                                  flash_attn=args.flash_attn)) as engine:
        for depth in args.depths:
            times = time_batches(engine, depth, args.rounds)
            print(f"\nKV depth {depth}, flash-attn {args.flash_attn}: median ms per llama_decode of b tokens "
                  f"(relative to b=1)")
            print("  " + "  ".join(f"b={b}: {t * 1000:.2f} ({t / times[1]:.2f}x)" for b, t in times.items()))


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

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    engine, data = loaded.engine, {}
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


def bench_fullchat(args: argparse.Namespace) -> None:
    """A chat whose context is full: the time to make room for a question, and the turns after it."""
    from localgen.conversation import Conversation, Turn
    from localgen.events import Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=args.model, ctx_size=args.ctx, threads=args.threads)
    chat = ChatSession(load_model(options), options, Conversation.new(system="Be brief.", model=None),
                       SamplingParams(temperature=0.0), GenerationLimits(max_tokens=8), autosave=False)
    chat.conversation.turns.extend(Turn(f"Question {i} about the sea?", f"Answer {i}: the sea is deep.")
                                   for i in range(args.turns))
    print(f"\n{args.turns} saved exchanges, context {args.ctx} tokens")
    for number, question in enumerate(("Name a fish.", "Name a bird.", "Name a tree.", "Name a stone.")):
        started = time.perf_counter()
        start, events = chat.ask(question)
        planned = time.perf_counter() - started
        done = [e for e in events if isinstance(e, Finished)][-1]
        total = time.perf_counter() - started
        print(f"  turn {number + 1}: making room {planned:.3f} s ({start.dropped} exchanges left the context), "
              f"turn {total:.2f} s, {done.usage.cached_tokens}/{done.usage.prompt_tokens} prompt tokens reused")
    chat.loaded.close()


def first_text_s(chat, question: str, typing: float = 0.0) -> tuple[float, object]:
    """Seconds from asking (Enter) to the first streamed text, and the turn's Finished event.

    typing: keys per second at which the question is typed first, prefilled meanwhile as `localgen chat` does
    (0: it arrives whole, as a paste with --no-prefill-while-typing).
    """
    from localgen.events import Finished, TextChunk
    from localgen.prefill_ahead import PrefillWhileTyping

    ahead = PrefillWhileTyping(chat.prefill_ahead) if typing else None
    if ahead is not None:
        ahead.arm()
        for end in range(1, len(question) + 1):
            ahead.typed(question[:end])
            time.sleep(1 / typing)  # the next key, the last time Enter
    started, first, done = time.perf_counter(), None, None
    if ahead is not None:
        ahead.settle(question)
        ahead.close()
    for event in chat.ask(question)[1]:
        if isinstance(event, TextChunk) and first is None:
            first = time.perf_counter() - started
        elif isinstance(event, Finished):
            done = event
    return (first if first is not None else float("nan")), done


def bench_chatturn(args: argparse.Namespace) -> None:
    """Issue target 2 as a chat meets it: a follow-up after ~2,000 tokens against the same message in a new chat."""
    from localgen.conversation import Conversation
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")[:7000]
    follow_up = ("Thanks. Now answer a follow-up question in one short paragraph: what are the three most "
                 "important points?")
    for flash_attn in args.flash_attn:
        options = ModelOptions(model=args.model, ctx_size=4096, threads=args.threads, flash_attn=flash_attn)
        loaded = load_model(options)

        def new_chat(loaded=loaded, options=options) -> ChatSession:
            return ChatSession(loaded, options, Conversation.new(system=None, model=None),
                               SamplingParams(temperature=0.0), GenerationLimits(max_tokens=args.n), autosave=False)

        after, fresh, ratios, decode = [], [], [], []
        for number in range(args.rounds):
            chat = new_chat()
            first_text_s(chat, f"Read this:\n\n{readme}")
            seconds, done = first_text_s(chat, follow_up, args.typing)
            after.append(seconds)
            decode.append(done.timings.decode_tokens_per_s)
            loaded.engine.reset()
            new_seconds, new_done = first_text_s(new_chat(), follow_up, args.typing)
            fresh.append(new_seconds)
            ratios.append(seconds / new_seconds)
            new_tokens = done.usage.prompt_tokens - done.usage.cached_tokens + done.ahead_tokens
            log(f"flash-attn {flash_attn}, round {number + 1}: {seconds * 1000:.0f} ms after "
                f"{done.usage.cached_tokens - done.ahead_tokens} cached tokens ({new_tokens} new, "
                f"{done.ahead_tokens} of them computed while typing); new chat {new_seconds * 1000:.0f} ms "
                f"({new_done.usage.prompt_tokens} tokens, {new_done.ahead_tokens} computed while typing)")
        typed = f"typed at {args.typing:g} keys/s" if args.typing else "sent whole"
        print(f"\nflash-attn {flash_attn}: follow-up after {done.usage.cached_tokens - done.ahead_tokens} cached "
              f"tokens, {typed}, {args.rounds} rounds (median, min-max)")
        print(f"  TTFT of the follow-up:        {spread([s * 1000 for s in after], 1)} ms")
        print(f"  TTFT of it in a new chat:     {spread([s * 1000 for s in fresh], 1)} ms")
        print(f"  ratio (paired):               {spread(ratios, 2)}")
        print(f"  decode of its answer at that depth: {spread(decode, 1)} tok/s")
        loaded.close()


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


def bench_typing(args: argparse.Namespace) -> None:
    """Prefill-ahead tok/s on a worker thread beside busy Python: a StopFlag read in C against a Python callback."""
    import threading

    from localgen.engine import Engine
    from localgen.params import LoadOptions
    from localgen.runner import ModelOptions, load_model
    from localgen.stop_flag import StopFlag

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    path, threads = loaded.resolved.path, loaded.engine.options.n_threads
    loaded.close()

    def prefill_then_set(engine: Engine, prompt: list[int], should_stop: object, done: threading.Event) -> None:
        engine.prefill_ahead(prompt, should_stop)
        done.set()

    def busy_python(done: threading.Event) -> None:
        while not done.is_set():  # Python work that holds the GIL, as drawing a prompt does
            sum(range(20_000))

    with Engine(path, LoadOptions(n_ctx=4096, n_threads=threads, n_threads_batch=threads)) as engine:
        prompt = engine.tokenize(document(2000), add_special=True)[:args.tokens]
        flag = StopFlag()
        variants = {"C flag, busy Python beside": flag, "Python callback, busy Python beside": lambda: flag(),
                    "main thread, nothing beside": None}
        speeds: dict[str, list[float]] = {name: [] for name in variants}
        for k in range(args.rounds):
            for name, should_stop in variants.items():
                engine.prefill_ahead(prompt[:1], lambda: False)
                started = time.perf_counter()
                if should_stop is None:
                    engine.prefill_ahead(prompt, lambda: False)
                else:
                    done = threading.Event()
                    worker = threading.Thread(target=prefill_then_set, args=(engine, prompt, should_stop, done))
                    worker.start()
                    busy_python(done)
                    worker.join()
                speeds[name].append((len(prompt) - 1) / (time.perf_counter() - started))
            log(f"round {k + 1}: " + ", ".join(f"{n} {v[-1]:.1f}" for n, v in speeds.items()))
    print(f"\nprefill of {len(prompt):,} tokens ahead, {threads} threads, {args.rounds} rounds: tok/s "
          "(median, min-max)")
    for name, values in speeds.items():
        print(f"  {name:38} {spread(values, 1)}")
    c_flag, callback, alone = speeds.values()
    over_callback = [a / b for a, b in zip(c_flag, callback, strict=True)]
    over_alone = [a / b for a, b in zip(c_flag, alone, strict=True)]
    print(f"  C flag / Python callback (paired): {spread(over_callback)}; C flag beside busy Python / main thread "
          f"alone: {spread(over_alone)}")


def read_away(child) -> None:
    """Drop what a pexpect child has written so far, so that the next expect matches only what comes after."""
    import pexpect

    child.buffer = ""
    while True:
        try:
            child.read_nonblocking(1 << 16, timeout=0)
        except pexpect.TIMEOUT:
            return


def bench_keyecho(args: argparse.Namespace) -> None:
    """Key echo latency at the chat's prompt with a long paste in it."""
    import pexpect

    pasted = document(args.chars // 4)[:args.chars].replace("\n", " ")
    medians, worst = [], []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "LOCALGEN_HOME": home, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
        for k in range(args.rounds):
            chat = pexpect.spawn(sys.executable, ["-m", "localgen", "chat", "--no-markdown", *args.chat_args],
                                 env=env, cwd=str(REPO_ROOT), dimensions=(40, 100), encoding="utf-8", timeout=120)
            chat.delaybeforesend = None
            chat.expect_exact(">>>")
            chat.send(f"\x1b[200~{pasted}\x1b[201~")
            while chat.expect([pexpect.TIMEOUT, r".+"], timeout=1.0) == 1:  # until the screen is quiet for 1 s
                pass
            latencies = []
            for key in ("zqxj" * args.keys)[:args.keys]:  # letters neither the paste nor escape sequences hold
                read_away(chat)  # the rest of the last redraw holds the keys before: it would match an earlier echo
                sent = time.perf_counter()
                chat.send(key)
                chat.expect_exact(key)
                latencies.append(time.perf_counter() - sent)
                time.sleep(0.15)  # a typist's pace
            chat.terminate(force=True)
            medians.append(statistics.median(latencies) * 1000)
            worst.append(max(latencies) * 1000)
            log(f"round {k + 1}: echo median {medians[-1]:.1f} ms, slowest {worst[-1]:.1f} ms")
    print(f"\nkey echo with {args.chars:,} characters at the prompt, {args.keys} keys, {args.rounds} rounds "
          f"(median, min-max): median {spread(medians, 1)} ms, slowest {spread(worst, 1)} ms")


def bench_prompttokens(args: argparse.Namespace) -> None:
    """A follow-up prompt's tokens: whole against in pieces, reusing the conversation's (prompt_tokens)."""
    from localgen.chat import Message
    from localgen.prompt_tokens import ReusingTokenizer
    from localgen.runner import ModelOptions, load_model

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    engine, fmt = loaded.engine, loaded.prompt_format
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")

    class WideEngine:
        """The engine, as a model whose context holds the conversation shows it."""

        def __init__(self, n_ctx: int) -> None:
            self.n_ctx = max(n_ctx, engine.n_ctx)

        def __getattr__(self, name: str) -> object:
            return getattr(engine, name)

    def prompt_ms(tokenizer: object, messages: list[Message]) -> tuple[list[int], float]:
        start = time.process_time()
        tokens = fmt.prompt(tokenizer, messages)[1]
        return tokens, (time.process_time() - start) * 1000

    started = time.process_time()
    engine.special_tokens()
    print(f"reading the special tokens of {engine.n_vocab:,} (once a model, after as many characters tokenized "
          f"whole): {(time.process_time() - started) * 1000:.1f} ms CPU")
    for target in args.tokens:
        before, offset = [], 0
        while len(fmt.prompt(engine, before)[1]) < target:
            for role in ("user", "assistant"):
                before.append(Message(role, readme[offset % len(readme):][:700]))
                offset += 700
        after = [*before, Message("user", "And now a follow-up question: what matters most?")]
        whole, pieces, cold = [], [], []
        for _ in range(args.rounds):
            expected, ms = prompt_ms(engine, after)
            whole.append(ms)
            tokenizer = ReusingTokenizer(WideEngine(2 * target), fmt)
            tokenizer.tokenize(readme * (engine.n_vocab // len(readme) + 1), add_special=False)
            ms = prompt_ms(tokenizer, before)[1]
            cold.append(ms)
            tokens, ms = prompt_ms(tokenizer, after)
            pieces.append(ms)
            assert tokens == expected, "the pieces must give the whole text's tokens"
        print(f"\nfollow-up after {len(expected):,} tokens ({len(after)} messages), {args.rounds} rounds, ms CPU "
              "(median, min-max)")
        print(f"  rendered, tokenized whole:          {spread(whole, 2)}")
        print(f"  rendered, tokenized in pieces:      {spread(pieces, 2)}")
        print(f"  the conversation's, pieces cold:    {spread(cold, 2)}")
    loaded.close()


def main() -> None:
    """Parse arguments and run one benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    pc = sub.add_parser("promptcache")
    pc.add_argument("--rounds", type=int, default=5)
    pc.add_argument("--words", type=int, default=1600)
    dr = sub.add_parser("draft")
    dr.add_argument("--rounds", type=int, default=5)
    dr.add_argument("--sampling", choices=["greedy", "default"], default="greedy")
    dr.add_argument("--n", type=int, default=512)
    dr.add_argument("--kv-type", default="f16", help="q8_0 keeps lookup output equal to plain decoding")
    dr.add_argument("--model", default=None)
    dr.add_argument("--threads", type=int, default=None)
    db = sub.add_parser("draftbound")
    db.add_argument("--rounds", type=int, default=10)
    db.add_argument("--n", type=int, default=512)
    db.add_argument("--model", default=None)
    db.add_argument("--threads", type=int, default=None)
    db.add_argument("--data", default=None, help="a JSON file: read the recording from it, or record into it")
    db.add_argument("--cost", nargs="+", type=cost_point, default=None, metavar="B:COST",
                    help="replay with these batch costs (linear between) instead of the timed ones, e.g. 2:1.9 17:8.6")
    bc = sub.add_parser("batchcost")
    bc.add_argument("--rounds", type=int, default=20)
    bc.add_argument("--depths", type=int, nargs="+", default=[200, 700])
    bc.add_argument("--flash-attn", default="auto")
    bc.add_argument("--model", default=None)
    bc.add_argument("--threads", type=int, default=None)
    fc = sub.add_parser("fullchat")
    fc.add_argument("--turns", type=int, default=600)
    fc.add_argument("--ctx", type=int, default=2048)
    fc.add_argument("--model", default=None)
    fc.add_argument("--threads", type=int, default=None)
    ct = sub.add_parser("chatturn")
    ct.add_argument("--rounds", type=int, default=5)
    ct.add_argument("--n", type=int, default=64, help="answer tokens (their decode speed is shown)")
    ct.add_argument("--flash-attn", nargs="+", default=["auto", "off"])
    ct.add_argument("--typing", type=float, default=0.0,
                    help="keys/s at which the question is typed, prefilled meanwhile as in chat (0: sent whole)")
    ct.add_argument("--model", default=None)
    ct.add_argument("--threads", type=int, default=None)
    pe = sub.add_parser("penalties")
    pe.add_argument("--rounds", type=int, default=5)
    pe.add_argument("--n", type=int, default=256)
    pe.add_argument("--model", default=None)
    pe.add_argument("--threads", type=int, default=None)
    bz = sub.add_parser("busy")
    bz.add_argument("--rounds", type=int, default=5)
    bz.add_argument("--n", type=int, default=128)
    bz.add_argument("--burners", type=int, default=1)
    ce = sub.add_parser("cells")
    ce.add_argument("--rounds", type=int, default=8)
    ce.add_argument("--n", type=int, default=128)
    ce.add_argument("--ctx", type=int, nargs="+", default=[2048, 4096, 8192])
    ce.add_argument("--model", default=None)
    ce.add_argument("--threads", type=int, default=None)
    ty = sub.add_parser("typing")
    ty.add_argument("--rounds", type=int, default=5)
    ty.add_argument("--tokens", type=int, default=1000)
    ty.add_argument("--model", default=None)
    ty.add_argument("--threads", type=int, default=None)
    ke = sub.add_parser("keyecho")
    ke.add_argument("--rounds", type=int, default=3)
    ke.add_argument("--chars", type=int, default=20000)
    ke.add_argument("--keys", type=int, default=20)
    ke.add_argument("chat_args", nargs="*", help="more `localgen chat` options, after --")
    pt = sub.add_parser("prompttokens")
    pt.add_argument("--rounds", type=int, default=15)
    pt.add_argument("--tokens", type=int, nargs="+", default=[2000, 8000, 30000])
    pt.add_argument("--model", default=None)
    pt.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    bench = {"penalties": bench_penalties, "promptcache": bench_promptcache, "draft": bench_draft,
             "batchcost": bench_batchcost, "draftbound": bench_draftbound, "fullchat": bench_fullchat,
             "chatturn": bench_chatturn, "busy": bench_busy, "cells": bench_cells, "typing": bench_typing,
             "keyecho": bench_keyecho, "prompttokens": bench_prompttokens}[args.what]
    from localgen.config import offline_given

    with offline_given(True):  # models loaded here as `localgen --offline` loads them: never from the network
        bench(args)


if __name__ == "__main__":
    main()
