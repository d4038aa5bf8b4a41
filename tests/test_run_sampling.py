"""Sampling on the real engine through `localgen run`: seeds, random seeds, and the top-k, top-p and min-p filters."""

from __future__ import annotations

import pytest

from tests.conftest import run_localgen

POEM = "Write a short poem about the sea."
COLORS = "Name three colors."
OPEN = {"--top-k": "0", "--top-p": "1", "--min-p": "0"}  # no filter: any token of the vocabulary may be drawn
HOT = ("--temperature", "2")


def _answer(prompt: str, *options: str, tokens: int = 8) -> str:
    """The text `localgen run PROMPT -n TOKENS OPTIONS` printed, checked to have succeeded with some text (8 tokens
    leave the greedy path where a hot, unfiltered draw does, and part seeds 1, 2 and 3)."""
    result = run_localgen("run", prompt, "-n", str(tokens), *options)
    assert result.returncode == 0, result.err
    assert result.out.strip(), f"no text generated with {options}"
    return result.out


def _filters(**given: str) -> tuple[str, ...]:
    """The filter options, open but for those given (top_k="1" is --top-k 1)."""
    chosen = OPEN | {"--" + name.replace("_", "-"): value for name, value in given.items()}
    return tuple(part for option in chosen.items() for part in option)


@pytest.fixture(scope="module")
def greedy_colors() -> str:
    """The greedy answer to COLORS."""
    return _answer(COLORS, "--temperature", "0")


@pytest.fixture(scope="module")
def open_colors() -> str:
    """COLORS sampled hot with seed 1 and no filter."""
    return _answer(COLORS, *HOT, "--seed", "1", *_filters())


def test_different_seeds_give_different_text() -> None:
    texts = [_answer(POEM, "--temperature", "0.9", "--seed", str(seed)) for seed in (1, 2, 3)]
    assert len(set(texts)) >= 2, f"seeds 1, 2 and 3 all gave {texts[0]!r}"


@pytest.mark.parametrize("seed", [(), ("--seed", "-1")], ids=["no-seed", "seed-minus-1"])
def test_a_random_seed_differs_from_run_to_run(seed: tuple[str, ...]) -> None:
    first, second = (_answer(POEM, *seed, tokens=20) for _ in range(2))  # the default temperature, 0.8: 20 tokens,
    assert first != second, f"two runs both gave {first!r}"  # where two draws of 6 came out alike one time in 30


@pytest.mark.parametrize("knob", [{"top_k": "1"}, {"top_p": "1e-9"}, {"min_p": "1"}],
                         ids=["top-k-1", "top-p-tiny", "min-p-1"])
def test_a_filter_that_keeps_only_the_likeliest_token_gives_the_greedy_text(
        knob: dict[str, str], greedy_colors: str, open_colors: str) -> None:
    assert open_colors != greedy_colors, "sampling hot without a filter must leave the greedy path"
    for seed in ("1", "2"):
        assert _answer(COLORS, *HOT, "--seed", seed, *_filters(**knob)) == greedy_colors, (knob, seed)


def test_the_seed_a_random_run_drew_is_reported_and_reproduces_its_answer() -> None:
    import json

    first = run_localgen("run", POEM, "-n", "8", "--json", *HOT, *_filters())
    assert first.returncode == 0, first.err
    record = json.loads(first.out)
    assert isinstance(record["seed"], int), record
    again = run_localgen("run", POEM, "-n", "8", "--json", *HOT, *_filters(), "--seed", str(record["seed"]))
    assert json.loads(again.out)["text"] == record["text"] and json.loads(again.out)["seed"] == record["seed"]
    stats = run_localgen("run", POEM, "-n", "2", "--stats", "--seed", "7")
    assert ", seed 7" in stats.err, stats.err
    greedy = run_localgen("run", POEM, "-n", "2", "--json", "--temperature", "0", "--seed", "7")
    assert json.loads(greedy.out)["seed"] is None, "greedy sampling uses no seed, even one given"
