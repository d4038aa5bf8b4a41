"""The chat's leftovers, mended: an empty system prompt in the restart command, the data limit's check counting
repacked weights, the history trim keeping its newest entry whatever follows it."""

from __future__ import annotations

import ctypes
import resource
import shlex
import shutil
from pathlib import Path

import pytest

from tests.test_chat_leftovers import hinted_command


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_command_that_starts_a_chat_again_gives_an_empty_system_prompt_as_an_empty_word(
        tmp_path: Path, bundled_model: Path) -> None:
    """The command a chat started with an empty system prompt (-s '') is given to start again writes it as '', so
    that the chat it starts has it (it wrote `-s -c 1024`, which localgen refused as -s with no value)."""
    from tests.gguf_builders import copy_with_metadata
    from tests.test_chat_leftovers import _said
    from tests.test_repl import Chat

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    chat = Chat(tmp_path / "home", "-c", "4096", "-s", "")
    try:
        shown = _said(chat, "/show system")
        said = _said(chat, f"/model {shlex.quote(str(small))}")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    command = hinted_command(said, r"/exit, then start the chat again with `([^`]*)`, as")
    assert command == ["localgen", "chat", "-m", str(small), "-s", "", "-c", "1024"], command
    again = Chat(tmp_path / "home", *command[2:])
    try:
        assert _said(again, "/show system") == shown
        assert again.quit() == 0
    finally:
        if again.child.isalive():
            again.child.terminate(force=True)


@pytest.fixture(scope="module")
def q4_0_model(tmp_path_factory: pytest.TempPathFactory, bundled_model: Path) -> Path:
    """The bundled model requantized to Q4_0, whose weights llama.cpp repacks for the CPU's matrix kernels."""
    import llama_cpp

    path = tmp_path_factory.mktemp("q4_0") / "q4_0.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0, True, 1
    assert llama_cpp.llama_model_quantize(str(bundled_model).encode(), str(path).encode(), ctypes.byref(params)) == 0
    return path


@pytest.mark.parametrize("extra_buffers", [True, False])
def test_the_data_limit_s_check_counts_the_weights_llama_cpp_repacks_into_its_own_buffers(
        q4_0_model: Path, monkeypatch: pytest.MonkeyPatch, extra_buffers: bool) -> None:
    """The check of `ulimit -d` before a KV cache starts small counts the weights llama.cpp repacks into the CPU
    backend's buffers, which the limit holds, where it uses them (845 MiB at 32,768 tokens for a Q4_0 SmolLM2, where
    it counted 788 as with none: an 8B Q4_K_M's 4.5 GB left out, the cache could fail to grow in an answer)."""
    from localgen import engine, estimate
    from localgen.engine import growth
    from localgen.hardware import cpu_repack_types
    from localgen.params import LoadOptions

    if "Q4_0" not in cpu_repack_types():
        pytest.skip("llama.cpp repacks no Q4_0 weights on this CPU")
    monkeypatch.setattr(engine, "use_cpu_extra_buffers", lambda: extra_buffers)
    used: list[estimate.MemoryEstimate] = []

    def estimate_used(*args: object, **kwargs: object) -> estimate.MemoryEstimate:
        used.append(estimate.estimate_memory(*args, **kwargs))  # type: ignore[arg-type]
        return used[-1]

    monkeypatch.setattr(growth, "estimate_memory", estimate_used)
    real_limit = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1 << 40, 1 << 40) if which == resource.RLIMIT_DATA
                        else real_limit(which))
    options = LoadOptions(n_ctx=32768, n_threads=1, n_threads_batch=1)
    shape = estimate.read_shape(q4_0_model)
    assert growth._data_limit_tight(options, shape, growth.FIRST_TOKENS) is False
    repacked = sum(s.nbytes for s in shape.slots if s.matmul and s.type_name == "Q4_0")
    as_stored = estimate.estimate_memory(shape, n_ctx=options.n_ctx, flash_attn=options.flash_attention)
    assert repacked > 50 * 2**20 and len(used) == 1
    assert used[0].private_ram_bytes == as_stored.private_ram_bytes + (repacked if extra_buffers else 0), (
        used[0].private_ram_bytes >> 20, as_stored.private_ram_bytes >> 20)


@pytest.mark.parametrize("tail", [b"\n", b"# note\n", b"\n# 2026-01-01 10:00:02\n"])
def test_a_start_s_trim_keeps_the_newest_entry_whatever_lines_without_text_follow_it(tmp_path: Path,
                                                                                     tail: bytes) -> None:
    """A chat start's trim of a history whose newest entry, past the bound of 16 MiB, has lines with no text after
    it (an empty line, a comment, a header of none) keeps that entry with them, and Up recalls it (the file was cut
    to those lines alone, and no entry recalled)."""
    from prompt_toolkit.history import FileHistory

    from localgen.history_bound import MAX_HISTORY_BYTES, check_and_trim_history
    from localgen.repl_input import SafeFileHistory

    history = tmp_path / "history"
    text = "y" * (MAX_HISTORY_BYTES + 1_750_000)
    newest = b"\n# 2026-01-01 10:00:01\n+" + text.encode() + b"\n" + tail
    history.write_bytes(b"\n# 2026-01-01 10:00:00\n+small\n" + newest)
    assert check_and_trim_history(history) is None
    assert history.read_bytes() == newest
    recalled = list(SafeFileHistory(history).load_history_strings())
    assert recalled == list(FileHistory(str(history)).load_history_strings()) == [text], [len(r) for r in recalled]
