"""The prompt cache across runs, used hard: model files changed under it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
from gguf import GGUFReader

from tests.conftest import bundled_model_file, run_localgen

DOC = " ".join(f"Item {i}: the {['red', 'green', 'blue'][i % 3]} box holds {i * 7 % 13} marbles." for i in range(20))
# 253 tokens: with the chat template's, over the 256 new tokens a run saves an entry for
GREEDY = ("--json", "-n", "4", "--temperature", "0")


def _other_weights(model: Path, copy: Path) -> bytes:
    """The bytes of another model of the same size: model's, with its first attention norm scaled by 0.7."""
    shutil.copyfile(model, copy)
    (norm,) = [tensor for tensor in GGUFReader(copy).tensors if tensor.name == "blk.0.attn_norm.weight"]
    with copy.open("r+b") as handle:
        handle.seek(norm.data_offset)
        scaled = np.frombuffer(handle.read(norm.n_bytes), dtype=np.float32) * np.float32(0.7)
        handle.seek(norm.data_offset)
        handle.write(scaled.astype(np.float32).tobytes())
    return copy.read_bytes()


def test_a_model_rewritten_in_place_with_its_old_size_and_times_restores_no_state_of_the_old(tmp_path: Path) -> None:
    """cp -p of another model of the same size over the file (or rsync --inplace -t) keeps its inode, size and
    modification time: the old weights' saved state was restored, and the greedy answer was not the new model's."""
    model = tmp_path / "model.gguf"
    shutil.copyfile(bundled_model_file(), model)
    other = _other_weights(model, tmp_path / "other.gguf")
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    first = run_localgen("run", *GREEDY, "-m", str(model), "-f", str(doc), "Which box holds 5 marbles?", env=env)
    assert first.returncode == 0 and list((tmp_path / "home").rglob("*.lgpc")), first.err
    saved = model.stat()
    with model.open("r+b") as handle:  # as cp -p writes over it
        handle.write(other)
    os.utime(model, ns=(saved.st_atime_ns, saved.st_mtime_ns))
    now = model.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (saved.st_ino, saved.st_size, saved.st_mtime_ns)
    args = (*GREEDY, "-m", str(model), "-f", str(doc), "Which box holds 3 marbles?")
    second = run_localgen("run", *args, env=env)
    cold = run_localgen("run", *args, "--no-cache", env=env)
    assert second.returncode == 0 and cold.returncode == 0, second.err + cold.err
    record, reference = json.loads(second.out), json.loads(cold.out)
    assert record["usage"]["prompt_cache_tokens"] == 0, "the old weights' state"
    assert record["text"] == reference["text"]
