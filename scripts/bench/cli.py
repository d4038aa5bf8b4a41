"""bench_features.py's command line: one subcommand a benchmark, each option described."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from bench.chatting import bench_chatturn, bench_fullchat, bench_keyecho, bench_prompttokens, bench_typing
from bench.decoding import bench_busy, bench_cells, bench_penalties, bench_promptcache
from bench.draftbound import bench_draftbound, cost_point
from bench.drafting import bench_batchcost, bench_draft

Bench = Callable[[argparse.Namespace], None]


def rounds(parser: argparse.ArgumentParser, default: int) -> None:
    """The --rounds option: how many times each measurement is repeated."""
    parser.add_argument("--rounds", type=int, default=default, help=f"repetitions of each measurement ({default})")


def model_and_threads(parser: argparse.ArgumentParser) -> None:
    """The --model and --threads options, as `localgen run` reads them (the model is never downloaded)."""
    parser.add_argument("--model", default=None, help="a model as `localgen run -m` takes it, already downloaded "
                        "(default: the default model)")
    parser.add_argument("--threads", type=int, default=None, help="threads, as `localgen run -t` (default: localgen's)")


def subcommand(sub: argparse._SubParsersAction, name: str, bench: Bench, summary: str,
               loads_model: bool = True) -> argparse.ArgumentParser:
    """A subcommand that runs bench, with its one-line help (and --model and --threads where it loads a model)."""
    parser = sub.add_parser(name, help=summary, description=summary)
    parser.set_defaults(bench=bench)
    if loads_model:
        model_and_threads(parser)
    return parser


def parser_of(description: str) -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True, metavar="{" + ",".join(SUBCOMMANDS) + "}")
    pc = subcommand(sub, "promptcache", bench_promptcache, "TTFT of a second `localgen run` over the same long "
                    "file, restored from the prompt cache, against the first", loads_model=False)
    rounds(pc, 5)
    pc.add_argument("--words", type=int, default=1600, help="words in the file (1600)")
    dr = subcommand(sub, "draft", bench_draft, "decode speed of `run --draft lookup` against `run`, and whether "
                    "its text equals plain decoding's with the same settings")
    rounds(dr, 5)
    dr.add_argument("--sampling", choices=["greedy", "default"], default="greedy",
                    help="greedy (temperature 0) or localgen's default sampling, seeded (greedy)")
    dr.add_argument("--n", type=int, default=512, help="tokens to decode per answer (512)")
    dr.add_argument("--kv-type", help="KV cache type, as `run --kv-type` (not given: f16, lookup's keys q8_0, as "
                    "`run` chooses)")
    dr.add_argument("--flash-attn", default="auto", help="as `run --flash-attn`: auto is on for lookup and as "
                    "`run` chooses for plain decoding (auto)")
    db = subcommand(sub, "draftbound", bench_draftbound, "the most any prompt-lookup drafter could gain per task, "
                    "and localgen's drafter replayed on the same tokens")
    rounds(db, 10)
    db.add_argument("--n", type=int, default=512, help="tokens of each greedy answer (512)")
    db.add_argument("--data", default=None, help="a JSON file: read the recording from it, or record into it")
    db.add_argument("--cost", nargs="+", type=cost_point, default=None, metavar="B:COST",
                    help="replay with these batch costs (linear between) instead of the timed ones, e.g. 2:1.9 17:8.6")
    bc = subcommand(sub, "batchcost", bench_batchcost, "the time of one llama_decode of b tokens relative to one "
                    "token, at given KV depths")
    rounds(bc, 20)
    bc.add_argument("--depths", type=int, nargs="+", default=[200, 700], help="KV cache depths (200 700)")
    bc.add_argument("--flash-attn", default="auto", help="as `run --draft lookup --flash-attn`: auto is on (auto)")
    fc = subcommand(sub, "fullchat", bench_fullchat, "a chat whose context is full: the time to make room for the "
                    "next question, and the prompt tokens reused after it")
    fc.add_argument("--turns", type=int, default=600, help="saved exchanges in the chat (600)")
    fc.add_argument("--ctx", type=int, default=2048, help="context size (2048)")
    ct = subcommand(sub, "chatturn", bench_chatturn, "TTFT of a chat's follow-up after ~2,000 tokens against the "
                    "same question in a new chat")
    rounds(ct, 5)
    ct.add_argument("--n", type=int, default=64, help="answer tokens (their decode speed is shown)")
    ct.add_argument("--flash-attn", nargs="+", default=["auto", "off"], help="flash attention settings to measure "
                    "in turn (auto off)")
    ct.add_argument("--typing", type=float, default=0.0,
                    help="keys/s at which the question is typed, prefilled meanwhile as in chat (0: sent whole)")
    pe = subcommand(sub, "penalties", bench_penalties, "the cost of sampling one token with the default "
                    "penalties, localgen's against llama.cpp's sampler; default sampling's decode speed beside greedy")
    rounds(pe, 5)
    pe.add_argument("--n", type=int, default=256, help="tokens to decode per measurement (256)")
    bz = subcommand(sub, "busy", bench_busy, "decode speed of `localgen run`'s default threads against fixed -t "
                    "counts, idle and beside busy processes", loads_model=False)
    rounds(bz, 5)
    bz.add_argument("--n", type=int, default=128, help="tokens to decode per run (128)")
    bz.add_argument("--burners", type=int, default=1, help="processes that each keep a CPU busy (0: the idle "
                    "machine alone) (1)")
    ce = subcommand(sub, "cells", bench_cells, "decode speed without flash attention in contexts of n_ctx cells "
                    "against the cells localgen allocates")
    rounds(ce, 8)
    ce.add_argument("--n", type=int, default=128, help="tokens to decode per measurement (128)")
    ce.add_argument("--ctx", type=int, nargs="+", default=[2048, 4096, 8192], help="context sizes (2048 4096 8192)")
    ty = subcommand(sub, "typing", bench_typing, "the chat's prefill while typing beside busy Python: a stop flag "
                    "read in C against a Python callback")
    rounds(ty, 5)
    ty.add_argument("--tokens", type=int, default=1000, help="prompt tokens to prefill (1000)")
    ke = subcommand(sub, "keyecho", bench_keyecho, "key echo latency at `localgen chat`'s prompt with a long paste "
                    "in it (needs pexpect)", loads_model=False)
    rounds(ke, 3)
    ke.add_argument("--chars", type=int, default=20000, help="characters pasted into the prompt (20000)")
    ke.add_argument("--keys", type=int, default=20, help="keys typed after the paste (20)")
    ke.add_argument("chat_args", nargs="*", help="more `localgen chat` options, after --")
    pt = subcommand(sub, "prompttokens", bench_prompttokens, "the CPU time of a follow-up's prompt tokens, "
                    "tokenized whole against in pieces reusing the conversation's")
    rounds(pt, 15)
    pt.add_argument("--tokens", type=int, nargs="+", default=[2000, 8000, 30000],
                    help="conversation lengths in tokens (2000 8000 30000)")
    return parser


SUBCOMMANDS = ("promptcache", "draft", "draftbound", "batchcost", "fullchat", "chatturn", "penalties", "busy",
               "cells", "typing", "keyecho", "prompttokens")


def main(description: str) -> None:
    """Parse arguments and run one benchmark, its models loaded as `localgen --offline` loads them."""
    args = parser_of(description).parse_args()
    from localgen.config import offline_given

    with offline_given(True):  # never from the network
        args.bench(args)
