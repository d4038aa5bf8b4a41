"""The loading knobs (--ctx-size, --batch-size, --ubatch-size, --threads, --threads-batch, --flash-attn, --kv-type)
reach llama.cpp: checked against what its context reports and the attention nodes its graph holds; and the weight
buffers llama.cpp may use."""

from __future__ import annotations

import re

import pytest

from localgen.engine import loading
from localgen.engine.devices import cpu_extra_buffer_types
from localgen.hardware import cpu_repack_types
from localgen.params import flash_attention_on
from tests.conftest import run_localgen


def _loaded_context(*options: str) -> tuple[str, str]:
    """A one-token run with these options: localgen's line on the context llama.cpp made, and llama.cpp's log."""
    result = run_localgen("run", "-n", "1", "--temperature", "0", *options, "hi", env={"LOCALGEN_DEBUG": "1"})
    assert result.returncode == 0, result.err[-2000:]
    found = re.search(r"^localgen\.engine: context: (.*)$", result.err, re.MULTILINE)
    assert found, result.err[-2000:]
    return found.group(1), result.err


def test_batch_sizes_threads_and_context_size_are_what_llama_cpp_holds() -> None:
    context, log = _loaded_context("--ctx-size", "1536", "--batch-size", "128", "--ubatch-size", "64",
                                   "--threads", "1", "--threads-batch", "2", "--kv-type", "q8_0",
                                   "--flash-attn", "on")
    assert context == ("1536 tokens (1536 cells), batch 128, ubatch 64, threads 1, threads for batches 2, "
                       "flash attention on, KV type q8_0")
    assert re.search(r"n_ubatch\s+= 64\b", log) and re.search(r"n_batch\s+= 128\b", log)
    assert re.search(r"K \(q8_0\).*V \(q8_0\)", log), "llama.cpp's KV cache is not q8_0"


@pytest.mark.parametrize(("options", "layout", "keys"), [
    (("--draft", "lookup"), "f16 (q8_0 keys)", "q8_0"), (("--flash-attn", "on"), "f16", "f16"),
    (("--draft", "lookup", "--kv-type", "q4_0"), "q4_0", "q4_0"),
    (("--draft", "lookup", "--kv-type", "f16"), "f16", "f16")],
    ids=["lookup", "plain", "lookup-q4_0", "lookup-f16-given"])
def test_lookup_keeps_an_f16_caches_keys_at_q8_0_and_its_values_at_f16(options: tuple[str, ...], layout: str,
                                                                        keys: str) -> None:
    """Flash attention's one-token kernel splits f16 keys among threads, unlike a verified batch's: lookup's are
    q8_0 (speculative decoding, README); plain decoding and a --kv-type given keep --kv-type's."""
    context, log = _loaded_context(*options)
    assert context.endswith(f"flash attention on, KV type {layout}"), context
    values = "q4_0" if keys == "q4_0" else "f16"
    assert re.search(rf"K \({keys}\).*V \({values}\)", log), "llama.cpp's KV cache"


@pytest.mark.parametrize(("mode", "fused", "cells"), [("on", True, 1024), ("off", False, 1280)])
def test_flash_attention_on_and_off_build_different_graphs(mode: str, fused: bool, cells: int) -> None:
    """Without flash attention the context gets an odd multiple of 256 cells (allocated_context), as asked with it."""
    context, log = _loaded_context("--flash-attn", mode, "--ctx-size", "1024")
    assert re.search(r"flash_attn\s+= (enabled|disabled)", log).group(1) == ("enabled" if fused else "disabled")
    assert ("FLASH_ATTN_EXT" in log) is fused
    assert context.startswith(f"1024 tokens ({cells} cells)") and re.search(rf"n_ctx\s+= {cells}\b", log), context


def test_weights_go_to_amx_buffers_only_where_localgen_uses_them() -> None:
    """Where the CPU backend offers AMX buffers, weights go to them only when localgen's verdict (the probe, or
    LOCALGEN_AMX, which the test session sets from it) allows; otherwise a one-line note in the debug log."""
    offered = "AMX" in cpu_extra_buffer_types()
    used = loading.use_cpu_extra_buffers()
    _, log = _loaded_context("--ctx-size", "512")  # the chat template makes a prompt of several tokens
    assert ("AMX model buffer" in log) is (offered and used), log[-2000:]
    assert ("weights stay unpacked" in log) is (offered and not used), log[-2000:]


def test_the_cpu_backend_names_its_extra_buffer_types() -> None:
    if "Q4_0" not in cpu_repack_types():
        pytest.skip("this CPU has no repacked kernels (no AVX2 nor ARM dot products)")
    names = cpu_extra_buffer_types()
    assert "CPU_REPACK" in names and all(isinstance(name, str) and name for name in names), names


@pytest.mark.parametrize(("mode", "kv_type", "gpu", "n_ctx", "expected"), [
    ("auto", "f16", False, 8192, False),  # the CPU: slower with a context cached (README, Performance)
    ("auto", "q8_0", False, 8192, True),  # a quantized KV cache needs it
    ("auto", "f16", True, 8192, True),  # layers on a GPU
    ("auto", "f16", False, 16384, True),  # the scores of a batch would take much memory without it
    ("on", "f16", False, 512, True),
    ("off", "f16", True, 65536, False),
])
def test_auto_flash_attention_is_off_on_the_cpu_unless_needed(mode: str, kv_type: str, gpu: bool, n_ctx: int,
                                                              expected: bool) -> None:
    assert flash_attention_on(mode, kv_type=kv_type, gpu=gpu, n_ctx=n_ctx) is expected


def test_a_default_run_on_the_cpu_builds_no_flash_attention_graph() -> None:
    context, log = _loaded_context("--ctx-size", "512")
    assert "flash attention off (auto)" in context
    assert re.search(r"flash_attn\s+= disabled", log) and "FLASH_ATTN_EXT" not in log
