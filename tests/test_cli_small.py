"""Small promises of `localgen bench` and `localgen conversations`, each checked end to end: the real engine on the
bundled model, real files, real subprocesses."""

from __future__ import annotations

import json

from tests.conftest import run_localgen


def test_bench_without_a_prefill_test_gives_no_follow_up_tokens() -> None:
    decode_only = run_localgen("bench", "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--json")
    assert decode_only.returncode == 0, decode_only.err
    figures = json.loads(decode_only.out)["figures"]
    assert figures["follow_up_tokens"] is None and figures["reuse_ttft_s"] is None, \
        "no follow-up turn was measured: its size is null, as its TTFTs are"
    both = json.loads(run_localgen("bench", "-p", "8", "-n", "2", "-r", "1", "-t", "1", "--json").out)["figures"]
    assert both["follow_up_tokens"] > 10 and both["reuse_ttft_s"]["mean"] > 0
