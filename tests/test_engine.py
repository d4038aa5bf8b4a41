"""The engine on the real bundled model: streaming, stops, limits, KV reuse, interruption."""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import gc
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localgen.engine import Engine, abort, core, lc
from localgen.engine.chunks import chunk_bounds, resume_point
from localgen.engine.kv import KvCache
from localgen.engine.prefix import restore_point
from localgen.errors import LocalgenError, UsageError
from localgen.events import Finished, PrefillProgress, TextChunk
from localgen.params import GenerationLimits, Grammar, LoadOptions, SamplingParams
from localgen.stop_flag import StopFlag
from tests.conftest import chat_prompt

# The engines run one thread, beside other tests (one thread computes this model as fast as two, and a stop polled
# between graph nodes in Python leaves a second thread spinning); the tests of a signal timed against a long chunk
# run two threads, as llama.cpp stops them all, alone (serial): two spinning threads stall on a CPU another process
# keeps busy.

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    with Engine(bundled_model, LoadOptions(n_ctx=2048, n_threads=1, n_threads_batch=1, n_batch=64)) as eng:
        yield eng


def _collect(events: Iterator) -> tuple[list[str], Finished, list[PrefillProgress]]:
    chunks, progress, done = [], [], None
    for event in events:
        if isinstance(event, TextChunk):
            chunks.append(event.text)
        elif isinstance(event, PrefillProgress):
            progress.append(event)
        else:
            done = event
    assert isinstance(done, Finished)
    return chunks, done, progress


def test_chunks_fold_into_the_completion_text(engine: Engine) -> None:
    chunks, done, _ = _collect(engine.generate(chat_prompt(engine, "What is 2+2?"), GREEDY,
                                               GenerationLimits(max_tokens=20)))
    assert "".join(chunks) == done.text and done.text
    assert done.usage.completion_tokens <= 20
    assert done.timings.ttft_s > 0 and done.timings.decode_tokens_per_s > 0


def test_prefill_is_chunked_and_reports_progress(engine: Engine) -> None:
    engine.reset()
    prompt = chat_prompt(engine, "word " * 100)  # three chunks of 64 and more
    _, done, progress = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=1)))
    assert len(progress) >= len(prompt) // 64 >= 2
    assert (progress[0].done, progress[0].total) == (0, len(prompt)), "a prompt of several chunks says so at once"
    assert progress[-1].done == progress[-1].total == len(prompt)
    assert done.usage.cached_tokens == 0


def test_stop_string_split_across_tokens(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Write two sentences about the ocean.")
    chunks, full, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=60)))
    # a stop string made of the end of one chunk and the start of the next
    index = next(i for i in range(3, len(chunks) - 1) if len(chunks[i]) >= 3 and len(chunks[i + 1]) >= 3)
    stop = chunks[index][-2:] + chunks[index + 1][:2]
    expected = full.text[: full.text.index(stop)]
    stopped_chunks, stopped, _ = _collect(engine.generate(prompt, GREEDY,
                                                          GenerationLimits(max_tokens=60, stop=(stop,))))
    assert stopped.text == expected == "".join(stopped_chunks)
    assert stopped.finish_reason == "stop"


def test_max_tokens_gives_length(engine: Engine) -> None:
    _, done, _ = _collect(engine.generate(chat_prompt(engine, "Tell a story."), GREEDY,
                                          GenerationLimits(max_tokens=4)))
    assert done.finish_reason == "length" and done.usage.completion_tokens == 4


def test_kv_prefix_is_reused_on_the_next_turn(engine: Engine) -> None:
    engine.reset()
    first = chat_prompt(engine, "Tell me about cats. " * 20)
    _, done1, _ = _collect(engine.generate(first, GREEDY, GenerationLimits(max_tokens=8)))
    assert done1.usage.cached_tokens == 0
    second = [*first, *engine.tokenize(" And dogs?", add_special=False)]
    _, done2, progress = _collect(engine.generate(second, GREEDY, GenerationLimits(max_tokens=4)))
    assert done2.usage.cached_tokens == len(first)
    assert progress[-1].total == len(second) - len(first)


def test_same_prompt_twice_gives_same_greedy_text_with_cache(engine: Engine) -> None:
    """As /regen at temperature 0: its last token computed again alone gave other logits than a cold prefill's,
    and with this prompt another answer."""
    prompt = chat_prompt(engine, "Write the word 'hello' in Chinese, Japanese and Korean characters only.")
    engine.reset()
    _, cold, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=12)))
    _, warm, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=12)))
    assert warm.text == cold.text
    assert warm.usage.cached_tokens == len(prompt) - 2  # the last token alone would take other kernels than cold


def test_a_message_prefilled_ahead_a_token_at_a_time_gives_the_cold_answer(engine: Engine) -> None:
    """Typed slowly, a message is prefilled a token or two at a time: the answer is the one it gets pasted."""
    prompt = chat_prompt(engine, "Write the word 'hello' in Chinese, Japanese and Korean characters only.")
    engine.reset()
    _, cold, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=16)))
    engine.reset()
    for typed in range(2, len(prompt) - 5):  # the chat template's end comes with Enter
        assert engine.prefill_ahead(prompt[:typed], _StopAfter()) == typed
    _, typed_slowly, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=16)))
    assert typed_slowly.usage.cached_tokens == len(prompt) - 6
    assert typed_slowly.text == cold.text


@pytest.mark.parametrize("most", [None, 4])
def test_no_prefill_resumed_anywhere_computes_a_token_alone_that_a_cold_prefill_computes_with_others(
        most: int | None) -> None:
    """llama.cpp computes a batch of one token by other kernels than a batch of several (chunks.resume_point)."""
    n_ubatch, n_batch = 8, 16
    for total in range(1, 40):
        cold = list(chunk_bounds(0, total, n_ubatch, n_batch, most))
        assert all(end - begin > 1 or begin % n_ubatch == 0 for begin, end in cold)
        for held in range(total):
            start = resume_point(held, total, n_ubatch, n_batch, most)
            assert held - 1 <= start <= held
            chunks = list(chunk_bounds(start, total, n_ubatch, n_batch, most))
            assert chunks[0][0] == start and chunks[-1][1] == total
            assert all(end - begin <= n_batch for begin, end in chunks)
            physical = [(at, min(end, at + n_ubatch)) for begin, end in chunks for at in range(begin, end, n_ubatch)]
            for begin, end in physical:  # as llama.cpp splits each chunk
                assert begin // n_ubatch == (end - 1) // n_ubatch, "aligned as a cold prefill's"
                assert end - begin > 1 or (begin % n_ubatch == 0 and end == total), (held, total, chunks)


def test_memory_that_cannot_drop_a_tail_is_cleared_and_recomputed(engine: Engine,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Recurrent and hybrid models refuse llama_memory_seq_rm on a tail: the engine must start over, not drift."""
    first = chat_prompt(engine, "Tell me about cats.")
    second = [*first, *engine.tokenize(" And dogs?", add_special=False)]
    engine.reset()
    _, fresh, _ = _collect(engine.generate(second, GREEDY, GenerationLimits(max_tokens=12)))
    engine.reset()
    _collect(engine.generate(first, GREEDY, GenerationLimits(max_tokens=8)))
    monkeypatch.setattr(lc, "llama_memory_seq_rm", lambda *args: False)
    _, done, _ = _collect(engine.generate(second, GREEDY, GenerationLimits(max_tokens=12)))
    assert done.usage.cached_tokens == 0, "nothing can be reused when the tail cannot be dropped"
    assert done.text == fresh.text
    monkeypatch.undo()
    assert int(lc.llama_memory_seq_pos_max(engine._kv.memory, 0)) + 1 == len(engine.kv_token_list)


class _StopAfter:
    """A should_stop for prefill_ahead that counts its polls and says stop after limit of them (None: never)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.polls = 0

    def __call__(self) -> bool:
        self.polls += 1
        return self.limit is not None and self.polls > self.limit


def test_a_prompt_prefilled_ahead_starts_at_once_with_the_same_text(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Tell me about the moon in two sentences.")
    engine.reset()
    _, plain, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=16)))
    engine.reset()
    assert engine.prefill_ahead(prompt, _StopAfter()) == len(prompt) == engine.kv_tokens
    _, ahead, progress = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=16)))
    assert progress == [], "nothing is left to prefill, not even the last token"
    assert ahead.usage.cached_tokens == ahead.ahead_tokens == len(prompt)
    assert ahead.text == plain.text
    _, again, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=16)))
    assert again.ahead_tokens == 0 and again.text == plain.text


def test_a_stop_flag_is_read_in_c_and_aborts_the_chunk_under_way(engine: Engine,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """prefill_ahead with a StopFlag (the chat's, while the user types): llama.cpp reads it through C's strlen, with
    no Python callback to wait for the GIL at each graph node; set as a chunk starts, it aborts that chunk."""
    flag, statuses = StopFlag(), []
    assert isinstance(abort.node_stopper(engine._ctx, flag), abort.StopOnFlag)
    evaluate = engine._kv.evaluate

    def stopped_as_it_starts(tokens: list[int]) -> int:
        flag.set()  # past the check between chunks: only the callback inside llama_decode can see it
        statuses.append(evaluate(tokens))
        return statuses[-1]

    monkeypatch.setattr(engine._kv, "evaluate", stopped_as_it_starts)
    engine.reset()
    prompt = chat_prompt(engine, "Tell me about the moon in two sentences.")
    assert engine.prefill_ahead(prompt, flag) == 0 and statuses == [core.ABORTED]
    flag.set(False)
    monkeypatch.undo()
    assert engine.prefill_ahead(prompt, flag) == len(prompt), "withdrawn, the flag lets it run"


def test_prefill_ahead_keeps_the_shared_prefix_and_never_uses_stale_logits(engine: Engine) -> None:
    longer = chat_prompt(engine, "List three colors and say why you like each of them.")
    shorter = chat_prompt(engine, "List three colors.")
    engine.reset()
    _, plain, _ = _collect(engine.generate(shorter, GREEDY, GenerationLimits(max_tokens=12)))
    engine.reset()
    engine.prefill_ahead(longer, _StopAfter())
    held = engine.prefill_ahead(shorter, _StopAfter())  # the message was edited back: the tail is dropped
    assert held == len(shorter) and engine.kv_token_list == shorter
    _, after, _ = _collect(engine.generate(shorter, GREEDY, GenerationLimits(max_tokens=12)))
    assert after.text == plain.text
    part = longer[:len(longer) - 4]  # a token prefix: every token of it is in the cache, but not its logits
    engine.reset()
    _, cold, _ = _collect(engine.generate(part, GREEDY, GenerationLimits(max_tokens=8)))
    engine.reset()
    engine.prefill_ahead(longer, _StopAfter())
    _, cut, _ = _collect(engine.generate(part, GREEDY, GenerationLimits(max_tokens=8)))
    assert cut.usage.cached_tokens == len(part) - 2, "the last prompt token is evaluated again, not alone"
    assert cut.text == cold.text
    engine.prefill_ahead(longer, _StopAfter())
    engine._kv.truncate(len(part))  # the cache holds exactly part now, with the logits of longer's last token
    _, stale, _ = _collect(engine.generate(part, GREEDY, GenerationLimits(max_tokens=8)))
    assert stale.usage.cached_tokens == len(part) - 2 and stale.text == cold.text
    engine.reset()
    engine.prefill_ahead(longer, _StopAfter())
    assert engine.prefill_ahead(part, _StopAfter()) == len(part) == engine.kv_tokens
    _, ready, progress = _collect(engine.generate(part, GREEDY, GenerationLimits(max_tokens=8)))
    assert progress == [] and ready.usage.cached_tokens == len(part), "cut back ahead, its logits were made ready"
    assert ready.text == cold.text


def test_a_prefill_ahead_stopped_part_way_leaves_a_consistent_cache(bundled_model: Path) -> None:
    options = LoadOptions(n_ctx=512, n_threads=1, n_threads_batch=1, n_batch=64, n_ubatch=64)
    with Engine(bundled_model, options) as small_batches:
        prompt = chat_prompt(small_batches, "Tell me about cats. " * 40)
        assert len(prompt) > 192, "a fourth batch comes after the one stopped"
        _, plain, _ = _collect(small_batches.generate(prompt, GREEDY, GenerationLimits(max_tokens=8)))
        small_batches.reset()
        one_batch = _StopAfter()
        small_batches.prefill_ahead(prompt[:64], one_batch)
        small_batches.reset()
        stop = _StopAfter(2 * one_batch.polls + one_batch.polls // 2)  # polled between graph nodes: in batch 3
        assert small_batches.prefill_ahead(prompt, stop) == 128 == small_batches.kv_tokens, \
            "the batches done stay, and the one stopped is dropped"
        assert stop.polls == stop.limit + 1, "it stopped at the first poll that said so"
        memory = lc.llama_get_memory(small_batches._ctx)
        assert small_batches.kv_tokens == lc.llama_memory_seq_pos_max(memory, 0) + 1
        _, done, _ = _collect(small_batches.generate(prompt, GREEDY, GenerationLimits(max_tokens=8)))
        assert done.usage.cached_tokens == done.ahead_tokens == 128
        assert done.text == plain.text


def test_a_prompt_stopped_part_way_through_a_chunk_keeps_the_physical_batches_it_finished(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a chunk of several physical batches is read: llama.cpp drops only the batch it stopped in, and
    the batches finished stay in the KV cache and its token list, for the next turn to reuse."""
    options = LoadOptions(n_ctx=512, n_threads=1, n_threads_batch=1, n_batch=64, n_ubatch=16)
    with Engine(bundled_model, options) as eng:
        prompt = chat_prompt(eng, "Tell me about cats. " * 12)
        assert len(prompt) > 64, "the first chunk is four physical batches"
        _, plain, _ = _collect(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=4)))
        stop = _StopAfter()
        real = core.StopBetweenNodes

        def stopping(ctx: lc.llama_context_p, should_stop: Callable[[], bool]) -> object:
            return real(ctx, lambda: (stop() and eng.request_stop()) or should_stop())

        monkeypatch.setattr(core, "StopBetweenNodes", stopping)
        eng.reset()
        _collect(eng.generate(prompt[:16], GREEDY, GenerationLimits(max_tokens=1)))
        eng.reset()
        stop.limit, stop.polls = 2 * stop.polls + stop.polls // 2, 0  # polled between graph nodes: in batch 3
        _, stopped, _ = _collect(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=4)))
        assert stopped.finish_reason == "interrupted"
        assert eng.kv_tokens == 32 == lc.llama_memory_seq_pos_max(lc.llama_get_memory(eng._ctx), 0) + 1
        stop.limit = None
        _, again, _ = _collect(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=4)))
        assert again.usage.cached_tokens == 32 and again.text == plain.text


def test_prefill_ahead_does_nothing_for_memory_that_cannot_roll_back(engine: Engine,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    engine.reset()
    monkeypatch.setattr(engine, "_facts", dataclasses.replace(engine._facts, rolls_back=False))
    assert engine.prefill_ahead(chat_prompt(engine, "Hello there."), _StopAfter()) == 0 == engine.kv_tokens


def test_lookup_drafting_is_off_for_memory_that_cannot_roll_back(engine: Engine,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    prompt = chat_prompt(engine, "Repeat: the cat sat on the mat, the cat sat on the mat.")
    engine.reset()
    _, on, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=8), draft="lookup"))
    assert on.draft is not None
    monkeypatch.setattr(engine, "_facts", dataclasses.replace(engine._facts, rolls_back=False))
    engine.reset()
    _, off, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=8), draft="lookup"))
    assert off.draft is None and off.text


def test_interrupt_keeps_kv_consistent(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Write a long story about a ship.")
    stream = engine.generate(prompt, SamplingParams(seed=5), GenerationLimits(max_tokens=500))
    seen = 0
    for event in stream:
        if isinstance(event, TextChunk):
            seen += 1
            if seen == 5:
                engine.request_stop()
        elif isinstance(event, Finished):
            assert event.finish_reason == "interrupted"
            assert event.usage.completion_tokens < 20
    assert engine.kv_tokens <= len(prompt) + 20
    assert engine.kv_tokens == lc.llama_memory_seq_pos_max(lc.llama_get_memory(engine._ctx), 0) + 1
    question = chat_prompt(engine, "What is 2+2?")
    _, after, _ = _collect(engine.generate(question, GREEDY, GenerationLimits(max_tokens=10)))
    assert after.text and after.finish_reason in {"stop", "length"}
    engine.reset()
    _, fresh, _ = _collect(engine.generate(question, GREEDY, GenerationLimits(max_tokens=10)))
    assert after.text == fresh.text


def _left_for_the_collector(engine: Engine, prompt: list[int]) -> None:
    """Start a generation, take its first text, and drop it in a reference cycle, which only gc collects."""
    left = engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=50))
    assert any(isinstance(event, TextChunk) for event in left)
    cycle: list[object] = [left]
    cycle.append(cycle)


def test_a_generation_left_unfinished_and_collected_during_another_leaves_that_one_alone(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its clean-up ran as gc collected it: it withdrew the running generation's stop request (Ctrl-C), and
    collected between a decode step's llama_decode and the token's record, it dropped the token from the cache."""
    prompt = chat_prompt(engine, "Write a long story about a ship.")
    engine.reset()
    _, fresh, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=8)))
    gc.disable()
    try:
        _left_for_the_collector(engine, prompt)
        running = engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=8))
        assert any(isinstance(event, TextChunk) for event in running)
        engine.request_stop()
        assert gc.collect()
        _, stopped, _ = _collect(running)
        assert stopped.finish_reason == "interrupted" and stopped.usage.completion_tokens == 1
        _left_for_the_collector(engine, prompt)
        real_decode = KvCache.decode
        collected: list[int] = []

        def decode_then_collect(kv: KvCache, batch: lc.llama_batch) -> None:
            real_decode(kv, batch)
            if not collected:
                collected.append(gc.collect())

        monkeypatch.setattr(KvCache, "decode", decode_then_collect)
        _, done, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=8)))
    finally:
        gc.enable()
    assert collected[0] and done.text == fresh.text


def test_a_stop_requested_before_the_generation_starts_stops_it(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Tell a story.")
    engine.request_stop()  # as Ctrl-C does while the prompt is still being rendered and tokenized
    _, stopped, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=20)))
    assert stopped.finish_reason == "interrupted" and stopped.usage.completion_tokens == 0
    assert stopped.timings.ttft_s is None and stopped.timings.prefill_tokens_per_s is None, "nothing prefilled"
    _, after, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=5)))
    assert after.finish_reason == "length" and after.usage.completion_tokens == 5


def test_an_empty_prompt_and_a_closed_engine_are_errors(bundled_model: Path) -> None:
    with (Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1)) as small,
          pytest.raises(UsageError, match="0 tokens")):
        list(small.generate([], GREEDY))
    with pytest.raises(LocalgenError, match="no model is loaded"):
        list(small.generate([1, 2, 3], GREEDY))
    with pytest.raises(LocalgenError, match="no model is loaded"):
        small.tokenize("hi", add_special=False)



def test_a_batch_llama_cpp_refuses_says_so_and_leaves_the_engine_working(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Tell a story.")
    with pytest.raises(LocalgenError) as refused:  # a token beyond the vocabulary: llama_decode returns -1
        list(engine.generate([*prompt, engine.n_vocab + 3], GREEDY, GenerationLimits(max_tokens=4)))
    assert refused.value.message == "llama.cpp refused the batch as invalid (llama_decode returned -1)"
    assert "--ctx-size" not in (refused.value.hint or ""), "a larger context does nothing for it"
    assert engine.kv_token_list == prompt[:len(engine.kv_token_list)]
    _, after, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=3)))
    assert after.usage.completion_tokens == 3


@pytest.mark.parametrize(("status", "message", "hint"), [
    (1, "found no room in the KV cache", "a larger --ctx-size"),
    (-2, "could not allocate the memory", "a smaller --batch-size, fewer --gpu-layers"),
    (-3, "failed to evaluate the batch", "LOCALGEN_DEBUG=1"),
])
def test_each_llama_decode_failure_names_its_cause(status: int, message: str, hint: str) -> None:
    failure = core.decode_failure(status)
    assert message in failure.message and f"(llama_decode returned {status})" in failure.message
    assert hint in (failure.hint or "")


def test_a_context_without_flash_attention_is_allocated_an_odd_number_of_pads_and_used_as_asked(
        engine: Engine) -> None:
    """V's transposed rows lie an odd multiple of 512 bytes apart (allocated_context); the room stays as asked."""
    assert (engine.n_ctx, lc.llama_n_ctx(engine._ctx)) == (2048, 2304)
    engine.check_fits(2047)
    with pytest.raises(LocalgenError, match="the context holds 2,048"):
        engine.check_fits(2048)


def test_context_end_stops_generation(bundled_model: Path) -> None:
    with Engine(bundled_model, LoadOptions(n_ctx=48, n_threads=1, n_threads_batch=1)) as small:
        _, done, _ = _collect(small.generate(chat_prompt(small, "Write a long essay."), GREEDY))
        assert done.finish_reason == "context"
        assert done.usage.prompt_tokens + done.usage.completion_tokens >= 48


def test_multibyte_text_is_never_split(engine: Engine) -> None:
    text = "日本語のテキスト 🎉 café"
    tokens = engine.tokenize(text, add_special=False)
    assert len(tokens) > len(text.split())  # the emoji and kana need several byte tokens
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [decoder.decode(engine._vocab.piece(t)) for t in tokens]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_multibyte_generation_streams_whole_characters(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Repeat exactly: 日本語 🎉🎉🎉 café")
    chunks, done, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=40)))
    assert any(ord(c) > 127 for c in done.text), done.text
    assert all("\ufffd" not in c for c in chunks), "a character the token limit cut short is left out"


def test_prefill_chunks_are_aligned_to_the_physical_batch(bundled_model: Path) -> None:
    options = LoadOptions(n_ctx=512, n_threads=1, n_threads_batch=1, n_batch=64, n_ubatch=32)
    with Engine(bundled_model, options) as small:
        sizes = small.n_ubatch, small.n_batch
        assert list(chunk_bounds(0, 150, *sizes)) == [(0, 64), (64, 128), (128, 150)]
        assert list(chunk_bounds(40, 150, *sizes)) == [(40, 64), (64, 128), (128, 150)]
        assert list(chunk_bounds(10, 20, *sizes)) == [(10, 20)]
        assert restore_point(60, 64, small.n_ubatch, saved=60) == 60  # a batch under FA_TILE_Q queries: no adjustment
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1)) as big:
        assert big.n_ubatch == 512
        ahead = chunk_bounds(100, 700, big.n_ubatch, big.n_batch, most=128)
        assert list(ahead) == [  # prefill ahead: smaller, still aligned
            (100, 128), (128, 256), (256, 384), (384, 512), (512, 640), (640, 700)]
    assert restore_point(400, 420, 512, saved=400) == 420 - 64  # a cold prefill runs 0..420 through the tiled kernel
    assert restore_point(300, 420, 512, saved=300) == 300
    assert restore_point(520, 530, 512, saved=520) == 520  # the cold batch 512..530 is small too
    # the saved prompt's last batch (256..266) was too small for the tiled kernel a cold 256..356 takes
    assert restore_point(266, 356, 128, saved=266) == 256
    assert restore_point(266, 356, 128, saved=400) == 266  # saved in a full batch: tiled, as cold
    assert restore_point(326, 356, 128, saved=326) == 356 - 64
    # the last token alone would take the one-query kernel that the cold batch 1024..1038 did not
    assert restore_point(1037, 1038, 512, saved=1038) == 1036
    assert restore_point(1024, 1025, 512, saved=1030) == 1024  # a cold batch of one query: as cold
    assert restore_point(1025, 1050, 512, saved=1025) == 1024  # the saved batch 1024..1025 had one query


def test_ignore_eog_decodes_the_full_budget(engine: Engine) -> None:
    prompt = chat_prompt(engine, "Say OK.")
    _, done, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=40)))
    assert done.finish_reason == "stop" and done.usage.completion_tokens < 40
    budget = done.usage.completion_tokens + 5
    _, forced, _ = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=budget), ignore_eog=True))
    assert forced.finish_reason == "length" and forced.usage.completion_tokens == budget


@pytest.mark.parametrize("fails_in", ["new_draft_batch", "read_facts"])
def test_a_load_that_fails_or_is_interrupted_part_way_frees_what_it_allocated(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch, fails_in: str) -> None:
    from localgen.engine import core

    freed: list[str] = []
    for name in ("llama_model_free", "llama_free", "llama_batch_free"):
        native = getattr(lc, name)
        monkeypatch.setattr(lc, name, lambda handle, name=name, native=native: (freed.append(name), native(handle)))

    def interrupted(*_: object, **__: object) -> object:
        raise KeyboardInterrupt  # what was allocated before this step stays allocated

    monkeypatch.setattr(core, fails_in, interrupted)
    with pytest.raises(KeyboardInterrupt):
        Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1))
    expected = ["llama_free", "llama_model_free"] if fails_in == "new_draft_batch" else \
        ["llama_batch_free", "llama_free", "llama_model_free"]
    assert freed == expected


@pytest.mark.parametrize(("field", "value"), [("repeat_last_n", 300_000_000), ("repeat_last_n", -2),
                                              ("top_k", 2**32 + 64)])
def test_sampling_values_that_native_code_would_wrap_or_allocate_for_are_refused(field: str, value: int) -> None:
    with pytest.raises(UsageError, match=f"{field.replace('_', '-')} {value:,} is out of range"):
        SamplingParams(**{field: value})


def _interrupting_load(monkeypatch: pytest.MonkeyPatch, *, before: bool) -> tuple[list[object], list[object]]:
    """Make the weights' load meet a Ctrl-C (before it starts, or as it returns); return (loaded, freed) models."""
    import os
    import signal

    real_load, real_free = lc.llama_model_load_from_file, lc.llama_model_free
    loaded: list[object] = []
    freed: list[object] = []

    def load(path: bytes, params: object) -> object:
        if before:
            os.kill(os.getpid(), signal.SIGINT)
        model = real_load(path, params)
        loaded.append(model)
        if not before:
            os.kill(os.getpid(), signal.SIGINT)
        return model

    def free(model: object) -> None:
        freed.append(model)
        real_free(model)

    monkeypatch.setattr(lc, "llama_model_load_from_file", load)
    monkeypatch.setattr(lc, "llama_model_free", free)
    return loaded, freed


def test_ctrl_c_as_the_weights_finish_loading_still_frees_them(bundled_model: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    loaded, freed = _interrupting_load(monkeypatch, before=False)
    with pytest.raises(KeyboardInterrupt):
        Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1))
    assert loaded and loaded[0] and freed == loaded, "the model the load returned was freed"


def test_ctrl_c_during_the_load_stops_it_early(bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded, freed = _interrupting_load(monkeypatch, before=True)
    with pytest.raises(KeyboardInterrupt):
        Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1))
    assert loaded == [None] and freed == [], "llama.cpp gave up the load at its first progress report"


def test_a_signal_whose_handler_does_not_raise_still_stops_the_load_cleanly(bundled_model: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    loaded, freed = _interrupting_load(monkeypatch, before=False)
    previous = signal.signal(signal.SIGINT, lambda *_: None)  # a handler that only asks to stop
    try:
        with pytest.raises(KeyboardInterrupt):
            Engine(bundled_model, LoadOptions(n_ctx=256, n_threads=1, n_threads_batch=1))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert freed == loaded, "no half-made engine: the model was freed"


@pytest.fixture(scope="module")
def one_chunk_engine(bundled_model: Path) -> Iterator[Engine]:
    """An engine that reads a long prompt in one llama_decode of several seconds."""
    options = LoadOptions(n_ctx=2048, n_threads=2, n_threads_batch=2, n_batch=2048, n_ubatch=2048)
    with Engine(bundled_model, options) as eng:
        yield eng


@contextlib.contextmanager
def _one_thread(engine: Engine) -> Iterator[None]:
    """The engine computes on one thread meanwhile: what follows a stop checks the KV cache, not the threads, and
    two threads that spin while they wait for each other cost many times one's CPU time on a busy machine."""
    lc.llama_set_n_threads(engine._ctx, 1, 1)
    try:
        yield
    finally:
        lc.llama_set_n_threads(engine._ctx, engine.options.n_threads, engine.options.n_threads_batch)


def _signal_soon(handler: Callable[[int, object], None]) -> threading.Timer:
    """Install handler for SIGUSR1 and send that signal to this process in 0.3 s (while a long chunk computes)."""
    signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    timer.start()
    return timer


@pytest.mark.serial  # a signal timed against a chunk two threads compute (conftest: serial)
def test_a_stop_asked_for_mid_chunk_ends_the_chunk(one_chunk_engine: Engine) -> None:
    """Ctrl-C while a long prompt is read acts between graph nodes, not after the whole chunk (seconds on CPU)."""
    engine = one_chunk_engine
    prompt = chat_prompt(engine, "Tell me about cats. " * 300)
    engine.reset()
    timer = _signal_soon(lambda _signum, _frame: engine.request_stop())
    try:
        _, done, progress = _collect(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=4)))
    finally:
        timer.join()
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    assert done.finish_reason == "interrupted" and progress == []
    assert (done.decode_threads, done.threads) == (engine.decode_threads, engine.options.n_threads) != (0, 0), \
        "--json names the thread counts of a run stopped while its prompt was read"
    assert engine.kv_tokens == 0 == lc.llama_memory_seq_pos_max(lc.llama_get_memory(engine._ctx), 0) + 1, \
        "the chunk was stopped part way and dropped, not finished"
    short = chat_prompt(engine, "What is 2+2?")
    with _one_thread(engine):
        _, after, _ = _collect(engine.generate(short, GREEDY, GenerationLimits(max_tokens=8)))
        engine.reset()
        _, fresh, _ = _collect(engine.generate(short, GREEDY, GenerationLimits(max_tokens=8)))
    assert after.text == fresh.text and after.finish_reason != "interrupted"


@pytest.mark.serial  # a signal timed against a chunk two threads compute (conftest: serial)
def test_a_signal_handler_that_raises_mid_chunk_raises_from_generate(one_chunk_engine: Engine,
                                                                      capfd: pytest.CaptureFixture[str]) -> None:
    """A second Ctrl-C or a SIGTERM raises in the abort callback, where ctypes would only print it."""
    engine = one_chunk_engine
    engine.reset()

    def raise_interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    timer = _signal_soon(raise_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            _collect(engine.generate(chat_prompt(engine, "Tell me about dogs. " * 300), GREEDY,
                                     GenerationLimits(max_tokens=4)))
    finally:
        timer.join()
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    assert capfd.readouterr().err == "", "nothing printed by ctypes"
    assert engine.kv_tokens == 0
    with _one_thread(engine):
        _, done, _ = _collect(engine.generate(chat_prompt(engine, "What is 2+2?"), GREEDY,
                                              GenerationLimits(max_tokens=4)))
    assert done.finish_reason != "interrupted", "the stop request ended with the generation it was meant for"


@pytest.mark.parametrize("stopped", [False, True], ids=["a limit ends it", "a Ctrl-C ends it"])
def test_a_stop_string_in_the_answer_s_held_back_start_names_it_only_where_it_ended_the_answer(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, stopped: bool) -> None:
    """With --hide-thinking the answer's leading whitespace is held back, and a stop string in it is met only as the
    answer ends: a limit's end is then the stop string's (finish stop, the string named), a Ctrl-C's stays interrupted
    and names no stop string, where it named the string beside "interrupted"."""
    step = engine._step

    def step_then_ctrl_c(*args: object) -> list[int]:
        """One decode step, then the Ctrl-C's request, as the chat's handler makes it."""
        out = step(*args)
        engine.request_stop()
        return out

    if stopped:
        monkeypatch.setattr(engine, "_step", step_then_ctrl_c)
    sampling = SamplingParams(temperature=0, grammar=Grammar('root ::= " \\n \\n \\n abc"', "--grammar"))
    limits = GenerationLimits(max_tokens=3, stop=("\n",), stops_in_answer_only=True)
    events = list(engine.generate(chat_prompt(engine, "Say abc."), sampling, limits))
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert (finished.finish_reason, finished.stop_string) == (("interrupted", None) if stopped else ("stop", "\n"))
