"""The benchmark scripts README points to run against localgen as it is: each subcommand at its smallest setting."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen.errors import LocalgenError
from tests.script_modules import script

SHORT_TASKS = {"copy (short, piped)": ("Fix the typos:", ["The cat sat on teh mat."])}
ONE_THREAD = ("--threads", "1")  # no thread spinning while it waits for another (the tests share the CPUs)
SMALLEST = {  # each subcommand's arguments that make it quickest, every code path it has still taken
    "batchcost": ["--rounds", "1", "--depths", "8", *ONE_THREAD],
    "draft": ["--rounds", "1", "--n", "4", *ONE_THREAD],
    "fullchat": ["--turns", "12", "--ctx", "256", *ONE_THREAD],  # more turns than the context holds
    "chatturn": ["--rounds", "1", "--n", "2", "--flash-attn", "auto", *ONE_THREAD],
    "penalties": ["--rounds", "1", "--n", "2", *ONE_THREAD],
    "cells": ["--rounds", "1", "--n", "1", "--ctx", "300", *ONE_THREAD],
    "typing": ["--rounds", "1", "--tokens", "8", *ONE_THREAD],
    "prompttokens": ["--rounds", "1", "--tokens", "60", *ONE_THREAD],
}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """scripts/bench_features.py as a module."""
    return script("bench_features")


def run_bench(bench: ModuleType, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """bench_features.py's main() with these arguments, as `python scripts/bench_features.py ARGS` runs it."""
    monkeypatch.setattr(sys, "argv", ["bench_features.py", *args])
    bench.main(bench.__doc__)


def short_inputs(bench: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Short texts in place of the ~300-word draft tasks and the 2,000-token README chatturn asks about."""
    for name in ("drafting", "draftbound"):
        monkeypatch.setattr(sys.modules[f"bench.{name}"], "DRAFT_TASKS", SHORT_TASKS)
    (tmp_path / "README.md").write_text("localgen runs local models. " * 20, encoding="utf-8")
    monkeypatch.setattr(sys.modules["bench.chatting"], "REPO_ROOT", tmp_path)


@pytest.mark.parametrize("what", sorted(SMALLEST))
def test_each_in_process_benchmark_runs_to_its_figures(what: str, bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short_inputs(bench, monkeypatch, tmp_path)
    run_bench(bench, monkeypatch, what, *SMALLEST[what])
    printed = capsys.readouterr().out
    assert "(median, min-max)" in printed or "relative to b=1" in printed or "reused" in printed, printed


def test_draft_measures_lookup_as_run_loads_it_and_its_text_against_plain_decoding_with_its_settings(
        bench: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short_inputs(bench, monkeypatch, tmp_path)
    run_bench(bench, monkeypatch, "draft", "--rounds", "1", "--n", "4", *ONE_THREAD)
    printed = capsys.readouterr().out
    assert "plain decode, as `run` (flash attention off (auto), KV f16)" in printed, printed
    assert "--draft lookup (flash attention on, KV f16 (q8_0 keys))" in printed, "lookup runs as `run` loads it"
    assert ("identical text to plain decoding with lookup's settings (flash attention on, KV f16 (q8_0 keys)): "
            "1/1 rounds") in printed
    assert "NOT IDENTICAL" not in printed


def test_batchcost_times_verify_batches_with_flash_attention_as_lookup_runs_them(
        bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    run_bench(bench, monkeypatch, "batchcost", *SMALLEST["batchcost"])
    assert "KV depth 8, flash attention on, KV f16 (q8_0 keys):" in capsys.readouterr().out


def test_draftbound_records_then_replays_its_recording(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short_inputs(bench, monkeypatch, tmp_path)
    data = tmp_path / "draft.json"
    for _ in range(2):  # recorded (the model loaded, its batches timed), then read back
        run_bench(bench, monkeypatch, "draftbound", "--rounds", "1", "--n", "6", "--data", str(data), *ONE_THREAD)
    captured = capsys.readouterr()
    printed = captured.out
    assert captured.err.count("flash attention on, KV f16 (q8_0 keys), as `run --draft lookup` decodes") == 1, \
        "recorded once, as run loads it"
    assert printed.count("localgen's drafter, replayed") == 2 * len(SHORT_TASKS), printed
    assert printed.count("(timed)") == 2 * len(SHORT_TASKS)


def test_the_benchmarks_that_start_localgen_run_to_their_figures(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run_bench(bench, monkeypatch, "promptcache", "--rounds", "1", "--words", "30")
    run_bench(bench, monkeypatch, "busy", "--rounds", "1", "--n", "2", "--burners", "0")
    run_bench(bench, monkeypatch, "keyecho", "--rounds", "1", "--chars", "40", "--keys", "1")
    printed = capsys.readouterr().out
    assert "greedy text identical with and without the cache: True" in printed, printed
    assert printed.count("busy processes beside it") == 1, "--burners 0: the idle machine, measured once"
    assert "default decoded with" in printed and "key echo with 40 characters" in printed, printed


def test_every_subcommand_is_run_here(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_features.py", "--help"])
    with pytest.raises(SystemExit):
        bench.main(bench.__doc__)
    listed = capsys.readouterr().out.split("{", 1)[1].split("}", 1)[0].split(",")
    assert set(listed) == {*SMALLEST, "draftbound", "promptcache", "busy", "keyecho"}


def test_a_benchmark_never_downloads_its_model(bench: ModuleType, hubenv: HubEnv,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    hubenv.server.add_repo("test/Bench-GGUF", {"bench-Q4_K_M.gguf": make_gguf_bytes("bench")})
    with pytest.raises(LocalgenError, match="offline"):
        run_bench(bench, monkeypatch, "batchcost", "--rounds", "1", "--depths", "8", "--model", "test/Bench-GGUF",
                  *ONE_THREAD)
    assert hubenv.server.count() == 0, "nothing asked of the Hub"


def test_bench_native_tables_a_localgen_bench_run_and_names_its_busy_rounds(bundled_model: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    native = script("bench_native")
    args = argparse.Namespace(model=bundled_model, threads=1, batch=512, ubatch=512, flash_attn="auto", n_prompt=16,
                              n_gen=2, reps=1, rounds=1, follow_up_tokens=None)
    measured = {**native.run_localgen(args), "round": 0, "busy": {"prefill": 1.0}}  # as if others kept a CPU busy
    native.print_table({"localgen bench": [measured], native.NATIVE: [{**measured, "round": 0}]}, args)
    printed = capsys.readouterr().out
    assert "| localgen bench" in printed and "follow-up turn of" in printed, printed
    assert "during localgen bench in round(s) 1 " in printed, printed


def test_bench_native_says_what_its_first_build_downloads_before_it_starts(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    native = script("bench_native")
    monkeypatch.setattr(native, "BENCH_DIR", tmp_path)

    def no_download(command: list[str], **_: object) -> None:
        raise RuntimeError(" ".join(command))

    monkeypatch.setattr(native.subprocess, "run", no_download)
    with pytest.raises(RuntimeError, match="pip download"):
        native.build_llama_bench("0.3.0", 1, shared=True)
    said = capsys.readouterr().err
    assert "downloads the llama-cpp-python 0.3.0 sdist from PyPI" in said and "takes minutes" in said, said
    assert "cached under .bench/" in said
    (tmp_path / "llama-cpp-python-0.3.0" / "vendor" / "llama.cpp").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="cmake"):
        native.build_llama_bench("0.3.0", 1, shared=False)
    said = capsys.readouterr().err
    assert "downloads" not in said and "builds it, which takes minutes" in said, "the sdist is already there"


def test_every_option_of_the_scripts_has_its_help(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = sys.modules["bench.cli"].parser_of(bench.__doc__)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert all(choice.help for choice in subparsers._choices_actions), "a line of help a subcommand"
    native_parser = script("bench_native").parser_of()
    for each in [native_parser, *subparsers.choices.values()]:
        unexplained = [a.dest for a in each._actions if not a.help and a.dest != "help"]
        assert not unexplained, f"{each.prog}: {unexplained}"
