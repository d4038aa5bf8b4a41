#!/usr/bin/env python3
"""One benchmark per localgen feature: the prompt cache, speculative decoding, chat turns, sampling, threads, typing.

Usage:
  python scripts/bench_features.py promptcache [--rounds 5] [--words 1600]
  python scripts/bench_features.py draft [--rounds 5] [--sampling greedy|default] [--kv-type f16|q8_0]
        [--flash-attn auto]
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
in one process through the same Engine.generate that `run` uses, each loaded as `run` loads it: lookup with flash
attention on (where --flash-attn is auto), plain decoding as `run` chooses (off on the CPU with an f16 cache). The
speed-up is lookup's over that plain decoding; beside them, plain decoding with lookup's settings (flash attention
on, no drafting), whose greedy text lookup's must equal in every round (NOT IDENTICAL is printed where it does not).

draftbound: the ceiling for any prompt-lookup drafter on this hardware: each task's greedy output is decoded
once, the cost of verify batches of every size is timed at that depth, and the speed-up is computed for an
oracle drafter that drafts exactly the tokens the model will accept (and for the best fixed draft length); for
the best drafter that picks its draft length from its run of right guesses, tuned to that output; and for
localgen's drafter, replayed on the same tokens with the batch costs as its timings. --data FILE keeps the
recording (read where FILE exists), so a replay can be repeated without timing noise; --cost replays with
given costs instead of the timed ones. All with flash attention on, as `run --draft lookup` decodes.

batchcost: the time of one llama_decode of b tokens relative to one token, at given KV depths, with flash attention
as lookup's verify batches run (on where --flash-attn is auto).

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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench package beside this script

from bench.cli import main

if __name__ == "__main__":
    main(__doc__)
