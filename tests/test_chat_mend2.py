"""More of the chat's mends and run's that match them, in a real pseudo-terminal on the bundled model for the chat:
the note of an answer that fills the context (run's, as the chat's), /undo of a message with an attachment, /model
of a model too small for the last exchange, Ctrl-C amid /load, and the wrapped notes' line breaks."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_localgen

ENDLESS = ("--grammar", 'root ::= "ab " root', "--temperature", "0")  # never ends by itself: the context ends it


def test_run_s_answer_that_fills_the_context_says_how_large_a_one_the_model_takes(tmp_path: Path,
                                                                                  bundled_model: Path) -> None:
    """run's answer stopped at the end of the context says the model takes up to 8,192 where its context is 96, and
    that the context is the most the model takes where it is (it said to raise --ctx-size, which that model
    refuses), in the chat's words."""
    from gguf_builders import copy_with_metadata

    larger = run_localgen("run", "-c", "96", *ENDLESS, "Say ab.")
    assert larger.returncode == 0, larger.err
    assert larger.err == ("localgen: stopped at the end of the context window (raise --ctx-size for longer output: up "
                          "to 8,192 for this model; it is 96 now)\n"), larger.err
    small = copy_with_metadata(bundled_model, tmp_path / "small.gguf", set_values={"llama.context_length": 96})
    most = run_localgen("run", "-m", str(small), *ENDLESS, "Say ab.")
    assert most.returncode == 0, most.err
    assert most.err == "localgen: stopped at the end of the context window (96 tokens, the most this model takes)\n", \
        most.err
