#!/usr/bin/env python3
"""Build native llama.cpp `llama-bench` from the installed llama-cpp-python's sdist and compare it with localgen.

Usage: python scripts/bench_native.py [--model PATH] [--threads N] [--reps R] [--rounds K] [--build-only]

It downloads the sdist of the installed llama-cpp-python version (pip download, no install), builds only the
`llama-bench` target of its vendored llama.cpp with CMake (Release, CPU, no curl, and the AMX tile-configuration
fix that rebuild_llama_cpp.py builds llama-cpp-python with) twice, as llama.cpp builds by
default (shared libraries, the way llama-cpp-python ships the same code) and as one static binary, caches them
under .bench/ (git-ignored), then runs both native `llama-bench` builds, `localgen bench` and llama-cpp-python's
high-level `Llama.generate` alternately, K rounds each, and prints medians, spreads and the ratios to native
(the shared build: the same machine code localgen runs; the static build shows what the build mode costs).
It also times `localgen bench`'s follow-up turn after the prompt (KV reuse) against llama-bench prefilling as
many tokens at that depth (`-d`), the floor no engine can beat, and prints what exact attention over the cached
tokens costs in FLOPs against the weights.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from rebuild_llama_cpp import FIX_HEADER, tile_fix_cmake_args

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / ".bench"
NATIVE = "native llama-bench"  # llama.cpp's default build: shared libraries, as llama-cpp-python ships them
STATIC = "native llama-bench, static build"


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[bench_native] {message}", file=sys.stderr, flush=True)


def installed_version() -> str:
    """The installed llama-cpp-python version."""
    return metadata.version("llama-cpp-python")


def vendored_source(version: str) -> Path:
    """Where the unpacked sdist of this llama-cpp-python version keeps its llama.cpp."""
    return BENCH_DIR / f"llama-cpp-python-{version}" / "vendor" / "llama.cpp"


def fetch_sdist(version: str) -> Path:
    """Download (once) and unpack the llama-cpp-python sdist; return the vendored llama.cpp folder."""
    root = BENCH_DIR / f"llama-cpp-python-{version}"
    vendored = vendored_source(version)
    if vendored.is_dir():
        return vendored
    download = BENCH_DIR / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    log(f"downloading the llama-cpp-python {version} sdist")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={version}", "-d", str(download)], check=True)
    archive = next(download.glob(f"llama_cpp_python-{version}.tar.gz"), None) or next(
        download.glob("llama*cpp*python*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(BENCH_DIR, filter="data")
    unpacked = next(p for p in BENCH_DIR.iterdir() if p.is_dir() and p.name.lower().replace("_", "-")
                    == f"llama-cpp-python-{version}")
    if unpacked != root:
        unpacked.rename(root)
    return vendored


def build_llama_bench(version: str, jobs: int, *, shared: bool) -> Path:
    """Build (once) and cache the native llama-bench binary for this version.

    shared: llama.cpp's default build, with libllama and libggml as shared libraries, as llama-cpp-python ships
    them (the binary stays in its build folder, next to its libraries); else one static binary.
    """
    build = BENCH_DIR / f"build-{version}{'-shared' if shared else ''}-tilefix"
    binary = build / "bin" / "llama-bench" if shared else BENCH_DIR / f"llama-bench-{version}-tilefix"
    if binary.is_file():
        return binary
    fetches = "" if vendored_source(version).is_dir() else (
        f"downloads the llama-cpp-python {version} sdist from PyPI (tens of MB, pip download, LOCALGEN_OFFLINE "
        "or not) and ")
    log(f"native llama-bench ({'shared' if shared else 'static'}) is not built yet: this {fetches}builds it, which "
        "takes minutes; it is cached under .bench/ afterwards")
    source = fetch_sdist(version)
    log(f"configuring llama.cpp in {build}")
    subprocess.run(["cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    "-DLLAMA_CURL=OFF", "-DGGML_CUDA=OFF", "-DGGML_METAL=OFF", "-DGGML_VULKAN=OFF",
                    f"-DBUILD_SHARED_LIBS={'ON' if shared else 'OFF'}", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=ON",
                    *tile_fix_cmake_args(FIX_HEADER)], check=True)
    log(f"building llama-bench ({'shared' if shared else 'static'}) with {jobs} jobs (this takes minutes)")
    started = time.perf_counter()
    subprocess.run(["cmake", "--build", str(build), "--config", "Release", "--target", "llama-bench",
                    "-j", str(jobs)], check=True, stdin=subprocess.DEVNULL)
    log(f"built in {time.perf_counter() - started:.0f} s")
    if shared:
        return binary
    built = next(p for p in build.rglob("llama-bench") if p.is_file() and os.access(p, os.X_OK))
    shutil.copy2(built, binary)
    return binary


def default_threads() -> int:
    """The thread count `localgen` picks by default (physical cores)."""
    from localgen.hardware import physical_cores

    return physical_cores()


def native_flash_attn(args: argparse.Namespace) -> str:
    """llama-bench's -fa for what localgen bench runs with args.flash_attn (auto is localgen's choice, not
    llama.cpp's: off on the CPU for a context this size)."""
    from localgen.bench import bench_context
    from localgen.params import flash_attention_on

    return "on" if flash_attention_on(args.flash_attn, kv_type="f16", gpu=False,
                                      n_ctx=bench_context(args.n_prompt, args.n_gen)) else "off"


def repack_flag() -> str:
    """1 when localgen lets llama.cpp repack weights on this machine, else 0 (where its AMX kernels fail with the
    installed build): every tool measured loads the weights alike."""
    from localgen.engine import use_cpu_extra_buffers

    return "1" if use_cpu_extra_buffers() else "0"


def run_native(binary: Path, args: argparse.Namespace, *, follow_up: bool = True) -> dict[str, Any]:
    """One llama-bench run: mean tok/s of pp and tg, and every repetition's tok/s (and the KV-reuse floor)."""
    cmd = [str(binary), "-m", str(args.model), "-t", str(args.threads), "-b", str(args.batch), "-ub",
           str(args.ubatch), "-fa", native_flash_attn(args), "-p", str(args.n_prompt), "-n", str(args.n_gen),
           "-r", str(args.reps), "--repack", repack_flag(), "-o", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout
    result: dict[str, Any] = {}
    for test in json.loads(out):
        key = "pp" if test["n_prompt"] and not test["n_gen"] else "tg"
        result[key] = float(test["avg_ts"])
        result[f"{key}_samples"] = [float(x) for x in test["samples_ts"]]
    if follow_up and args.follow_up_tokens:
        result |= run_native_follow_up(binary, args)
    return result


def run_native_follow_up(binary: Path, args: argparse.Namespace) -> dict[str, float]:
    """The physics floor of KV reuse: llama-bench prefilling the follow-up's tokens on an empty context and on top
    of n_prompt cached tokens (`-d`), as milliseconds."""
    cmd = [str(binary), "-m", str(args.model), "-t", str(args.threads), "-b", str(args.batch), "-ub",
           str(args.ubatch), "-fa", native_flash_attn(args), "-p", str(args.follow_up_tokens), "-n", "0",
           "-d", f"0,{args.n_prompt}", "-r", str(args.reps), "--repack", repack_flag(), "-o", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout
    ms = {int(t.get("n_depth", 0)): 1000 * args.follow_up_tokens / float(t["avg_ts"]) for t in json.loads(out)}
    return {"fresh_ttft_ms": ms[0], "reuse_ttft_ms": ms[args.n_prompt]}


def follow_up_tokens(args: argparse.Namespace) -> int:
    """How many tokens `localgen bench`'s follow-up turn has for this model (one short localgen bench run)."""
    cmd = [sys.executable, "-m", "localgen", "bench", "-m", str(args.model), "--threads", str(args.threads),
           "-p", "16", "-n", "2", "-r", "1", "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         cwd=REPO_ROOT).stdout
    return int(json.loads(out)["figures"]["follow_up_tokens"])


def run_localgen(args: argparse.Namespace) -> dict[str, Any]:
    """One `localgen bench` run: mean tok/s of pp and tg, and the TTFTs."""
    cmd = [sys.executable, "-m", "localgen", "bench", "-m", str(args.model), "--threads", str(args.threads),
           "--batch-size", str(args.batch), "--ubatch-size", str(args.ubatch), "--flash-attn", args.flash_attn,
           "-p", str(args.n_prompt), "-n", str(args.n_gen), "-r", str(args.reps), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         cwd=REPO_ROOT).stdout
    record = json.loads(out)
    figures = record["figures"]
    prefill, decode = figures["prefill_tokens_per_s"], figures["decode_tokens_per_s"]
    return {"busy": record["busy_elsewhere"], "pp": prefill["mean"], "tg": decode["mean"],
            "pp_samples": prefill["samples"], "tg_samples": decode["samples"],
            "ttft_ms": figures["ttft_s"]["mean"] * 1000, "reuse_ttft_ms": figures["reuse_ttft_s"]["mean"] * 1000,
            "fresh_ttft_ms": figures["fresh_ttft_s"]["mean"] * 1000}


HIGH_LEVEL = r'''
import json, random, sys, time
import llama_cpp
model, threads, batch, ubatch, n_prompt, n_gen, reps, fa = sys.argv[1:9]
kwargs = {} if threads == "default" else {"n_threads": int(threads), "n_threads_batch": int(threads)}
llm = llama_cpp.Llama(model_path=model, n_ctx=int(n_prompt) + int(n_gen) + 64, n_batch=int(batch),
                      n_ubatch=int(ubatch), flash_attn=(fa != "off"), verbose=False, **kwargs)
rng = random.Random(1)
bos = llm.token_bos()
pp, tg = [], []
for rep in range(int(reps) + 1):
    prompt = [bos] + [rng.randrange(llm.n_vocab()) for _ in range(int(n_prompt) - 1)]
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    pp_s = time.perf_counter() - t0
    llm.reset()
    stamps = []
    for token in llm.generate([bos], temp=0.0, repeat_penalty=1.0, reset=True):
        stamps.append(time.perf_counter())
        if len(stamps) == int(n_gen) + 1:
            break
    if rep:
        pp.append(int(n_prompt) / pp_s)
        tg.append(int(n_gen) / (stamps[-1] - stamps[0]))
print(json.dumps({"pp": sum(pp) / len(pp), "tg": sum(tg) / len(tg), "pp_samples": pp, "tg_samples": tg}))
'''


def run_high_level(args: argparse.Namespace, threads: str) -> dict[str, Any]:
    """llama-cpp-python's high-level Llama.eval (prefill) and Llama.generate (decode)."""
    from localgen.engine import bare_llama_prelude

    cmd = [sys.executable, "-c", bare_llama_prelude() + HIGH_LEVEL, str(args.model), threads, str(args.batch),
           str(args.ubatch), str(args.n_prompt), str(args.n_gen), str(args.reps), native_flash_attn(args)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout)


def attempt(tool: Callable[[], dict[str, Any]], tries: int = 2) -> dict[str, Any] | None:
    """Run one measurement, retrying once (the working tree may be mid-edit); None when it keeps failing."""
    for i in range(tries):
        try:
            return tool()
        except subprocess.CalledProcessError as exc:
            log(f"  failed (exit {exc.returncode}): {(exc.stderr or '').strip()[-400:]}")
            if i + 1 < tries:
                time.sleep(5)
    return None


def summarize(values: list[float]) -> str:
    """Median with the min-max spread over rounds."""
    if not values:
        return "-"
    return f"{statistics.median(values):8.1f} ({min(values):.1f}-{max(values):.1f})"


def paired(mine: list[dict[str, Any]], native: list[dict[str, Any]], key: str) -> list[float]:
    """Per-round ratios mine / native, for the rounds where both ran."""
    by_round = {r["round"]: r[key] for r in native}
    return [r[key] / by_round[r["round"]] for r in mine if r["round"] in by_round]


def print_table(rounds: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> dict[str, object]:
    """The comparison table: median of each round's mean (min-max), the best repetition, and ratios to native."""
    def series(name: str, key: str) -> list[float]:
        return [r[key] for r in rounds[name] if key in r]

    def best(name: str, key: str) -> float:
        return max((x for r in rounds[name] for x in r.get(f"{key}_samples", [])), default=0.0)

    native = NATIVE
    print(f"\nmodel {args.model.name}, threads {args.threads}, batch {args.batch}/{args.ubatch}, "
          f"flash-attn {args.flash_attn}, {args.reps} reps x {args.rounds} rounds")
    print("tok/s: median of the rounds' means (min-max); best = fastest single repetition; ratios to native: "
          "median of the per-round ratios, and best / best\n")
    header = (f"| {'engine':<50} | {'pp' + str(args.n_prompt):>24} | {'best':>6} | {'tg' + str(args.n_gen):>24} |"
              f" {'best':>6} | {'pp ratio':>8} | {'pp best':>7} | {'tg ratio':>8} | {'tg best':>7} |")
    print(header)
    print("|" + "|".join("-" * (len(c) - 1) + (":" if i else "-") for i, c in enumerate(header.split("|")[1:-1])) + "|")
    summary: dict[str, object] = {}
    for name in rounds:
        pp, tg = series(name, "pp"), series(name, "tg")
        pp_ratio, tg_ratio = paired(rounds[name], rounds[native], "pp"), paired(rounds[name], rounds[native], "tg")
        pp_best = best(name, "pp") / (best(native, "pp") or 1)
        tg_best = best(name, "tg") / (best(native, "tg") or 1)
        summary[name] = {"pp": pp, "tg": tg, "pp_ratio": pp_ratio, "tg_ratio": tg_ratio, "pp_best": best(name, "pp"),
                         "tg_best": best(name, "tg"), "pp_best_ratio": pp_best, "tg_best_ratio": tg_best}
        med = (lambda v: f"{statistics.median(v):.3f}" if v else "-")  # noqa: E731
        print(f"| {name:<50} | {summarize(pp):>24} | {best(name, 'pp'):6.1f} | {summarize(tg):>24} |"
              f" {best(name, 'tg'):6.1f} | {med(pp_ratio):>8} | {pp_best:7.3f} | {med(tg_ratio):>8} | {tg_best:7.3f} |")
    from localgen.bench_contention import BUSY_NOTE_CPUS

    busy = [r["round"] + 1 for r in rounds["localgen bench"] if max(r["busy"].values(), default=0) >= BUSY_NOTE_CPUS]
    if busy:  # (the other engines' rounds, between them, likely were too)
        print(f"\nother processes used {BUSY_NOTE_CPUS} CPUs or more during localgen bench in round(s) "
              f"{', '.join(map(str, busy))} (busy_elsewhere in the raw figures): a quiet machine measures better")
    ttft = series("localgen bench", "ttft_ms")
    if ttft:
        print(f"\nlocalgen TTFT pp{args.n_prompt}: {summarize(ttft)} ms")
        print_follow_up(rounds, args, summary)
    return summary


def print_follow_up(rounds: dict[str, list[dict[str, Any]]], args: argparse.Namespace,
                    summary: dict[str, object]) -> None:
    """KV reuse: a follow-up turn's TTFT with n_prompt tokens cached against the same message fresh, for localgen
    and for native llama.cpp prefilling the same number of tokens at that depth (the floor no engine beats)."""
    what = f"{args.follow_up_tokens} tokens" if args.follow_up_tokens else "localgen bench's size (no native run)"
    print(f"\nfollow-up turn of {what}: TTFT in ms, median (min-max)\n")
    print(f"| {'engine':<20} | {'after pp' + str(args.n_prompt):>24} | {'fresh':>24} | {'ratio':>6} |")
    print(f"|{'-' * 22}|{'-' * 25}:|{'-' * 25}:|{'-' * 7}:|")
    for name in ("localgen bench", NATIVE):
        reuse = [r["reuse_ttft_ms"] for r in rounds[name] if "reuse_ttft_ms" in r]
        fresh = [r["fresh_ttft_ms"] for r in rounds[name] if "fresh_ttft_ms" in r]
        if not reuse:
            continue
        ratio = statistics.median(a / b for a, b in zip(reuse, fresh, strict=True))
        summary[f"{name} follow-up"] = {"reuse_ttft_ms": reuse, "fresh_ttft_ms": fresh, "ratio": ratio}
        print(f"| {name:<20} | {summarize(reuse):>24} | {summarize(fresh):>24} | {ratio:6.2f} |")
    share = attention_share(args.model, args.n_prompt)
    summary["attention share of weight FLOPs"] = share
    print(f"\nAttending to {args.n_prompt} cached tokens costs {share:.0%} of the weights' FLOPs per token: an engine "
          f"whose attention ran as fast per FLOP as its matmuls would still take {1 + share:.2f}x the fresh TTFT.")


def attention_share(model: Path, depth: int) -> float:
    """FLOPs of exact attention over depth cached tokens, per new token, as a fraction of the weight matmuls' FLOPs."""
    from localgen.gguf_reader import read_gguf

    info = read_gguf(model)
    tied = not any(t.name == "output.weight" for t in info.tensors)
    weights = sum(t.n_elements for t in info.tensors
                  if len(t.shape) >= 2 and (t.name != "token_embd.weight" or tied))
    per_layer = (info.head_count or 0) * ((info.key_length or 0) + (info.value_length or 0))  # QK^T and softmax.V
    return (info.block_count or 0) * per_layer * depth / weights


def parser_of() -> argparse.ArgumentParser:
    """The command line's options, each with its help."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file (default: the bundled model)")
    parser.add_argument("--threads", type=int, default=None, help="threads for every tool (default: the physical "
                        "cores)")
    parser.add_argument("--batch", type=int, default=512, help="logical batch size, as llama-bench -b (512)")
    parser.add_argument("--ubatch", type=int, default=512, help="physical batch size, as llama-bench -ub (512)")
    parser.add_argument("--flash-attn", default="auto", choices=["auto", "on", "off"],
                        help="flash attention for every tool; native auto follows localgen's choice (auto)")
    parser.add_argument("--n-prompt", type=int, default=512, help="prompt tokens of the prefill test (512)")
    parser.add_argument("--n-gen", type=int, default=128, help="tokens of the decode test (128)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions inside each tool run (3)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of every tool (5)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel jobs of the native build "
                        "(default: the CPUs)")
    parser.add_argument("--no-high-level", action="store_true", help="skip llama-cpp-python's Llama.generate")
    parser.add_argument("--no-follow-up", action="store_true", help="skip native llama-bench's KV-reuse floor")
    parser.add_argument("--no-static", action="store_true", help="skip the static native build")
    parser.add_argument("--build-only", action="store_true", help="build (or find cached) native llama-bench, print "
                        "its path and stop; the first build downloads the sdist and takes minutes")
    parser.add_argument("--output", type=Path, default=None, help="write the raw figures as JSON here")
    return parser


def main() -> None:
    """Build llama-bench if needed, then measure alternately and print the table."""
    parser = parser_of()
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))  # localgen from this checkout, installed or not
    if args.n_prompt < 1 or args.n_gen < 1:
        parser.error("--n-prompt and --n-gen compare both tests: give each at least 1")
    binary = build_llama_bench(installed_version(), args.jobs, shared=True)
    static = None if args.no_static else build_llama_bench(installed_version(), args.jobs, shared=False)
    if args.build_only:
        print(binary, static or "")
        return
    from localgen.catalog import builtin_bundled_file

    args.model = (args.model or builtin_bundled_file()).resolve()
    if args.threads is None:
        args.threads = default_threads()
    args.follow_up_tokens = 0 if args.no_follow_up else follow_up_tokens(args)
    tools = {NATIVE: lambda: run_native(binary, args), "localgen bench": lambda: run_localgen(args)}
    if static is not None:
        tools[STATIC] = lambda: run_native(static, args, follow_up=False)
    if not args.no_high_level:
        tools[f"llama-cpp-python Llama.generate, {args.threads} threads"] = lambda: run_high_level(
            args, str(args.threads))
        tools["llama-cpp-python Llama.generate, default threads"] = lambda: run_high_level(args, "default")
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in tools}
    order = list(tools)
    for k in range(args.rounds):
        for name in order[k % len(order):] + order[:k % len(order)]:  # rotate who goes first
            log(f"round {k + 1}/{args.rounds}: {name}")
            figures = attempt(tools[name])
            if figures is not None:
                rounds[name].append(figures | {"round": k})
                log(f"  {figures}")
    summary = print_table(rounds, args)
    output = args.output or BENCH_DIR / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    output.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds,
                                  "summary": summary}, indent=1))
    log(f"raw figures in {output}")


if __name__ == "__main__":
    main()
