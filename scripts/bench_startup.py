#!/usr/bin/env python3
"""Start-up time and peak memory: `localgen --help`, `--version`, `run -n 1 "hi"` against bare llama-cpp-python scripts.

Usage: python scripts/bench_startup.py [--rounds 10] [--threads N]

Every command runs once per round, in a rotating order (the CPU may be shared, so rounds alternate and the
table shows medians with the min-max spread). Wall time, CPU time (user + sys, less sensitive to other load)
and peak RSS come from wait4(). The bare scripts load the same model with the same context size and threads
and generate one token for the same chat message; one uses the high-level `Llama` API, one the low-level
bindings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

HIGH_LEVEL = r"""
import sys
import llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), n_threads=int(sys.argv[3]),
                      n_threads_batch=int(sys.argv[3]), verbose=False)
out = llm.create_chat_completion([{"role": "user", "content": "hi"}], max_tokens=1)
print(out["choices"][0]["message"]["content"])
"""

LOW_LEVEL = r"""
import sys
import llama_cpp as lc
quiet = lc.llama_log_callback(lambda *a: None)
lc.llama_log_set(quiet, None)
mp = lc.llama_model_default_params()
model = lc.llama_model_load_from_file(sys.argv[1].encode(), mp)
cp = lc.llama_context_default_params()
cp.n_ctx, cp.n_threads, cp.n_threads_batch = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[3])
ctx = lc.llama_init_from_model(model, cp)
vocab = lc.llama_model_get_vocab(model)
text = b"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
toks = (lc.llama_token * 64)()
n = lc.llama_tokenize(vocab, text, len(text), toks, 64, True, True)
lc.llama_decode(ctx, lc.llama_batch_get_one(toks, n))
chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_greedy())
tok = lc.llama_sampler_sample(chain, ctx, -1)
buf = __import__("ctypes").create_string_buffer(64)
k = lc.llama_token_to_piece(vocab, tok, buf, 64, 0, False)
print(buf.raw[:k].decode(errors="replace"))
"""


def default_threads() -> int:
    """The thread count `localgen` picks by default (physical cores)."""
    from localgen.hardware import physical_cores

    return physical_cores()


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run a command once: wall seconds, CPU seconds (user + sys) and peak RSS in MiB."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=env, cwd=REPO_ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def installed_script() -> Path:
    """The `localgen` script pip installed beside this interpreter: PATH may find a version manager's shim first
    (pyenv's is a bash script that adds about 0.1 s), which is not localgen's start-up."""
    return Path(sys.executable).parent / "localgen"


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    """Median (min-max)."""
    v = [x * scale for x in values]
    return f"{statistics.median(v):.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})"


def main() -> None:
    """Measure every command alternately and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--ctx", type=int, default=8192, help="the context size `localgen run` picks for the model")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))
    threads = str(args.threads or default_threads())
    from localgen.catalog import builtin_bundled_file

    model = str(builtin_bundled_file())
    from localgen.engine import bare_llama_prelude

    prelude = bare_llama_prelude()  # the bare scripts load weights as localgen does
    script = installed_script()
    base = [str(script)] if script.is_file() else [sys.executable, "-m", "localgen"]
    # an installed package has its bytecode cached; let the warm-up runs write it as an install would
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"LOCALGEN_OFFLINE": "1"}
    commands = {
        "localgen --help": [*base, "--help"],
        "localgen --version": [*base, "--version"],
        'localgen run -n 1 "hi"': [*base, "run", "-n", "1", "--threads", threads, "hi"],
        "bare script, Llama (high-level)": [sys.executable, "-c", prelude + HIGH_LEVEL, model, str(args.ctx), threads],
        "bare script, low-level bindings": [sys.executable, "-c", prelude + LOW_LEVEL, model, str(args.ctx), threads],
    }
    for cmd in commands.values():  # warm the page cache and the bytecode cache once
        measure(cmd, env)
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    names = list(commands)
    for k in range(args.rounds):
        for name in names[k % len(names):] + names[:k % len(names)]:
            results[name].append(measure(commands[name], env))
        print(f"[bench_startup] round {k + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"\n{args.rounds} rounds, threads {threads}, median (min-max)\n")
    print(f"| {'command':<34} | {'wall s':>22} | {'CPU s':>22} | {'peak RSS MiB':>22} |")
    print(f"|{'-' * 36}|{'-' * 23}:|{'-' * 23}:|{'-' * 23}:|")
    for name, rows in results.items():
        wall, cpu, rss = zip(*rows, strict=True)
        print(f"| {name:<34} | {spread(list(wall)):>22} | {spread(list(cpu)):>22} | {spread(list(rss), 1, 1):>22} |")
    run = results['localgen run -n 1 "hi"']
    for bare in ("bare script, Llama (high-level)", "bare script, low-level bindings"):
        diffs = [(a[0] - b[0], a[1] - b[1], a[2] - b[2]) for a, b in zip(run, results[bare], strict=True)]
        dw, dc, dr = zip(*diffs, strict=True)
        print(f"\nlocalgen run minus {bare} (paired by round): wall {spread(list(dw))} s, "
              f"CPU {spread(list(dc))} s, peak RSS {spread(list(dr), 1, 1)} MiB")


if __name__ == "__main__":
    main()
