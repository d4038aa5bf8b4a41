"""Every command's --json speaks one vocabulary: a file is `path` and `size` (bytes), a model `model` (its name) and
`model_path`, other byte counts `*_bytes`, times ISO 8601 in UTC, a setting the name of its option (`threads`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from tests.conftest import run_localgen

RETIRED = {"file", "file_size", "reference", "kept", "parts", "prefill_tps", "decode_tps", "ram_total",
           "ram_available", "ram_budget", "vram_budget", "total", "free",  # each said now by one name everywhere
           "threads_chosen", "n_threads", "n_threads_batch", "n_batch", "n_ubatch", "n_ctx", "n_ctx_decode",
           "n_gpu_layers", "n_layers", "reps",  # llama.cpp's names for what run's options name (--threads: threads)
           "load_plan"}  # models show's plan, a sentence where fit's is structured
TIMES = {"created", "updated", "last_used"}
COMMANDS = [("models", "list", "--json"), ("models", "list", "--all", "--json"), ("models", "show", "--json"),
            ("models", "show", "--json", "qwen2.5-1.5b"), ("cache", "--json"), ("conversations", "--json"),
            ("conversations", "show", "--json", "talk"), ("fit", "--json"),
            ("bench", "--json", "-p", "8", "-n", "2", "-r", "1", "-t", "1")]


def _objects(value: object, where: str) -> Iterator[tuple[str, dict[str, object]]]:
    """Every JSON object in value, with where it is."""
    if isinstance(value, dict):
        yield where, value
        for key, item in value.items():
            yield from _objects(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _objects(item, f"{where}[{index}]")


def test_every_json_output_names_a_file_a_model_a_size_and_a_time_the_same_way(home: Path, tmp_path: Path,
                                                                                 bundled_model: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("The quick brown fox jumps over the lazy dog. " * 24)  # 276 tokens: past the 256 an entry takes
    env = {"LOCALGEN_OFFLINE": "1"}
    ran = run_localgen("run", "--json", "-n", "2", "-t", "1", "--temperature", "0", "--conversation", "talk",
                       "-f", str(doc), "Sum it up.", env=env)
    assert ran.returncode == 0, ran.err
    records = {"run": json.loads(ran.out)}
    for args in COMMANDS:
        result = run_localgen(*args, env=env)
        assert result.returncode == 0, (args, result.err)
        records[" ".join(args)] = json.loads(result.out)
    for command, record in records.items():
        for where, found in _objects(record, command):
            assert not RETIRED & found.keys(), (where, sorted(RETIRED & found.keys()))
            if isinstance(found.get("path"), str) and "defined_in" not in found:  # a models.toml entry names a file
                assert isinstance(found.get("size"), int), (where, "a file's object gives its size")
            for key, value in found.items():
                if key == "path" or key.endswith("_path"):
                    assert value is None or (isinstance(value, str) and os.path.isabs(value)), (where, key, value)
                if key == "model":
                    assert value is None or isinstance(value, str), (where, "a model is named by its name")
                if key == "size" or key.endswith("_bytes"):
                    assert value is None or isinstance(value, int), (where, key, value)
                if key in TIMES and value is not None:
                    assert datetime.fromisoformat(str(value)).utcoffset() == timedelta(0), (where, key, value)
    size = bundled_model.stat().st_size
    assert (records["run"]["model"], records["run"]["model_path"]) == ("smollm2-135m", str(bundled_model))
    shown, (listed,) = records["models show --json"], records["models list --json"]
    shared = ("name", "quant", "size", "path", "source", "verified", "missing_shards")
    assert [shown.get(key) for key in shared] == [listed[key] for key in shared], "one model, said alike"
    assert (shown["size"], shown["source"], shown["verified"]) == (size, "bundled", True)
    for row in (*records["conversations --json"], *records["cache --json"]["entries"]):
        assert row["problem"] is None, row  # null, as in fit's and models show's records, where it was left out
    (entry,) = records["cache --json"]["entries"]
    assert (entry["model_path"], Path(entry["path"]).parent) == (str(bundled_model), Path(records["cache --json"][
        "directory"]))
    bench = records["bench --json -p 8 -n 2 -r 1 -t 1"]
    assert (bench["model"], bench["model_path"]) == ("smollm2-135m", str(bundled_model))
    assert bench["figures"]["prefill_tokens_per_s"]["mean"] > 0 and bench["figures"]["decode_tokens_per_s"]["mean"] > 0
    assert bench["threads"] == records["run"]["threads"] == 1, "-t 1: one name for the threads in run and bench"
    fitted = records["fit --json"]
    assert (fitted["model"], fitted["options"][0]["size"], fitted["hardware"]["ram_total_bytes"] > 0) == (
        "smollm2-135m", size, True)


def test_every_json_document_that_fills_its_file_is_taken_back_off_it(home: Path, tmp_path: Path) -> None:
    """Each command's --json to a file that fills up (here `ulimit -f` one byte past what it held) leaves the file as
    it was, with run's one-line error and exit 1, where a listing's or a report's half document stayed in it."""
    import resource
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    env = {**os.environ, "LOCALGEN_OFFLINE": "1"}
    ran = run_localgen("run", "-n", "2", "-t", "1", "--temperature", "0", "--conversation", "talk", "Hi.", env=env)
    assert ran.returncode == 0, ran.err
    before = b"kept from before\n" * 8

    def one_byte_more() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 1, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    left_in_part = []
    for args in [*COMMANDS, ("run", "--json", "-n", "2", "-t", "1", "hi"), ("run", "--print-prompt", "--json", "hi")]:
        out = tmp_path / "out.json"
        out.write_bytes(before)
        with out.open("ab") as appended:
            proc = subprocess.run([sys.executable, "-m", "localgen", *args], stdout=appended, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT, env=env,
                                  preexec_fn=one_byte_more)
        last_line = proc.stderr.decode().splitlines()[-1:]
        if args[:3] == ("run", "--json", "-n"):  # an answer's text that outgrows the room stops it as it does
            assert proc.returncode == 1 and re.fullmatch(
                r"localgen: error: cannot write to stdout: File too large: \S+ has no room for the answer \(\d+ bytes "
                r"so far\) under the size limit on files this process writes \(137 bytes\) \(hint: raise it with "
                r"`ulimit -f`, or send the output elsewhere\)", "".join(last_line)), (args, proc)
        else:
            assert (proc.returncode, last_line) == (1, [
                "localgen: error: cannot write to stdout: File too large (hint: the file it goes to has reached a "
                "size limit (`ulimit -f`, or the file system's: 4 GiB on FAT32): send the output elsewhere)"]), \
                (args, proc)
        if out.read_bytes() != before:
            left_in_part.append(" ".join(args))
    assert left_in_part == []
