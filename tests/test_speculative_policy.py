"""The replay behind `bench_features.py draftbound`: drafters run over a known greedy output and batch costs."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from localgen.speculative import DRAFT_MAX
from tests.conftest import REPO_ROOT

PROMPT = list(range(100, 160))
COPY = [1, *PROMPT[:40], 2, 3, *PROMPT[10:50]]  # an answer that copies, departs for two tokens, copies again


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """scripts/bench/draftbound.py, the module of bench_features.py draftbound."""
    if str(REPO_ROOT / "scripts") not in sys.path:
        sys.path.append(str(REPO_ROOT / "scripts"))
    return importlib.import_module("bench.draftbound")


def test_cost_curve_is_linear_between_the_given_points(bench: ModuleType) -> None:
    curve = bench.cost_curve([bench.cost_point(p) for p in ("2:1.9", "4:2.8", "17:8.6")])
    assert sorted(curve) == list(range(1, DRAFT_MAX + 2))
    assert curve[1] == 1.0 and curve[2] == 1.9 and curve[3] == pytest.approx(2.35)
    assert curve[17] == pytest.approx(8.6)


def test_nothing_pays_where_a_batch_costs_its_size(bench: ModuleType) -> None:
    linear = {b: float(b) for b in range(1, DRAFT_MAX + 2)}
    assert bench.run_length_bound(PROMPT, COPY, linear)[0] == pytest.approx(1.0)
    replay = bench.replay_drafter(PROMPT, COPY, linear)
    assert replay.speedup == pytest.approx(1.0), "each drafted token costs what it saves"


def test_cheap_batches_order_the_drafters(bench: ModuleType) -> None:
    cost = bench.cost_curve([(2, 1.2), (17, 3.0)])
    oracle = bench.lookup_speedup(PROMPT, COPY, cost, None)
    bound, lengths = bench.run_length_bound(PROMPT, COPY, cost)
    replay = bench.replay_drafter(PROMPT, COPY, cost)
    assert oracle >= bound > replay.speedup > 1.0, "the oracle knows the most, the real drafter the least"
    assert lengths[0] == 0 and max(lengths) == DRAFT_MAX, "no draft before a right guess, then the longest"
    assert replay.accepted <= replay.drafted and replay.batches > 0


def test_a_recording_is_read_back_with_batch_sizes_as_numbers(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "draft.json"
    path.write_text(json.dumps({"task": {"prompt": PROMPT, "output": COPY, "cost": {"1": 1.0, "2": 1.9}}}))
    data = bench.draft_data(argparse.Namespace(data=str(path)))
    assert data["task"]["cost"] == {1: 1.0, 2: 1.9} and data["task"]["output"] == COPY


def test_a_bad_cost_point_is_a_usage_error(bench: ModuleType) -> None:
    for bad in ("2-1.9", "1:1.0", "4:x", "3:0.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not B:COST"):
            bench.cost_point(bad)
