"""The figures localgen reports (usage, timings, /stats) checked against counts made apart from them, on the real
bundled model: the tokenizer's count of the prompt printed, the tokens the KV cache holds after an answer, the time
each part of a generation took."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from localgen.chat_commands_settings import last_decode_speed, say_stats
from localgen.conversation import AnswerDetails, Conversation, Turn
from localgen.engine import Engine, core, decoding, lc
from localgen.engine.kv import KvCache
from localgen.events import Event, Finished, PrefillProgress
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.promptcache import PromptCache
from localgen.runner import ModelOptions, load_model
from localgen.session import ChatSession
from tests.conftest import chat_prompt, run_localgen

GREEDY = SamplingParams(temperature=0.0)
DOC = " ".join(f"Item {i}: the {['red', 'green', 'blue'][i % 3]} box holds {i * 7 % 13} marbles." for i in range(24))


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    """The bundled model on one thread, its prompt computed in chunks of 64 tokens."""
    with Engine(bundled_model, LoadOptions(n_ctx=2048, n_threads=1, n_threads_batch=1, n_batch=64)) as eng:
        yield eng


def _finished(events: Iterable[Event]) -> Finished:
    """The generation's Finished event, its other events consumed."""
    return [e for e in events if isinstance(e, Finished)][-1]


def _answer_held(engine: Engine, prompt: list[int]) -> list[int]:
    """The answer's tokens the KV cache holds: every one fed back to the model, so all but the last sampled."""
    held = engine.kv_token_list
    assert held[:len(prompt)] == prompt
    return held[len(prompt):]


def test_completion_tokens_count_every_token_sampled_the_end_of_generation_token_included(engine: Engine) -> None:
    """As llama-server's usage.completion_tokens and timings.predicted_n (its n_decoded) count them."""
    engine.reset()
    prompt = chat_prompt(engine, "Say hi in three words.")
    done = _finished(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=64)))
    held = _answer_held(engine, prompt)
    assert done.finish_reason == "stop" and done.stop_string is None, "the model ended it"
    assert engine.detokenize(held) == done.text, "the end token is no part of the text"
    assert done.usage.prompt_tokens == len(prompt)
    assert done.usage.completion_tokens == len(held) + 1, "the answer's tokens and the end token after them"
    assert done.usage.total_tokens == len(prompt) + len(held) + 1


def test_a_stop_string_counts_the_tokens_up_to_the_one_that_completed_it(engine: Engine) -> None:
    engine.reset()
    prompt = chat_prompt(engine, "Say hi in three words.")
    whole = _finished(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=64)))
    stop = whole.text[len(whole.text) // 2:][:5]
    engine.reset()
    done = _finished(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=64, stop=(stop,))))
    held = _answer_held(engine, prompt)
    assert done.stop_string == stop and done.text == whole.text[:whole.text.index(stop)]
    assert stop not in engine.detokenize(held), "the token that completed the stop string is the last sampled"
    assert done.usage.completion_tokens == len(held) + 1 < whole.usage.completion_tokens


def test_a_token_limit_counts_the_tokens_it_allowed(engine: Engine) -> None:
    engine.reset()
    prompt = chat_prompt(engine, "Write a long story about a dragon.")
    done = _finished(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=9)))
    assert done.finish_reason == "length" and done.usage.completion_tokens == 9
    assert len(_answer_held(engine, prompt)) == 8, "the last token sampled is never fed back"


def test_decode_and_prefill_count_the_passes_llama_cpp_counts(bundled_model: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The first token comes from the prompt's pass, TTFT's, as llama.cpp's own counters count it: decode speed is
    the tokens after it per second from it to the last, and llama.cpp's time for each part falls within localgen's,
    the prompt's ending where prefill_s does (its work synchronized), not at the first token's sampling after it."""
    make_context = lc.llama_init_from_model
    stop_matcher = decoding.StopMatcher

    def counting(model: object, params: lc.llama_context_params) -> object:
        params.no_perf = False
        return make_context(model, params)

    def slow_to_make(*args: object) -> object:
        time.sleep(0.02)  # work between the prompt's pass and the first token's sampling: no prefill time
        return stop_matcher(*args)

    monkeypatch.setattr(lc, "llama_init_from_model", counting)
    monkeypatch.setattr(decoding, "StopMatcher", slow_to_make)
    with Engine(bundled_model, LoadOptions(n_ctx=512, n_threads=1, n_threads_batch=1)) as eng:
        prompt = chat_prompt(eng, "Say hi in three words.")
        done = _finished(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=64)))
        counted = lc.llama_perf_context(eng._ctx)
    usage, t = done.usage, done.timings
    assert t.decode_s is not None and t.decode_tokens_per_s is not None
    assert counted.n_p_eval == usage.prompt_tokens - usage.cached_tokens
    assert counted.n_eval == usage.completion_tokens - 1, "one pass for each token after the first"
    assert t.decode_tokens_per_s == pytest.approx(counted.n_eval / t.decode_s)
    # llama.cpp times a pass in whole microseconds from its llama_decode to the llama_synchronize that ends it, which
    # each fall within localgen's timing: each pass's count may round up by a microsecond
    assert counted.t_p_eval_ms / 1000 <= t.prefill_s + counted.n_p_eval * 1e-6
    assert counted.t_eval_ms / 1000 <= t.decode_s + counted.n_eval * 1e-6


def test_prefill_speed_leaves_out_the_time_a_prefix_restored_from_disk_took(
        engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The restore is TTFT's time: prefill_s is the time the tokens past it took to compute, each of their chunks."""
    cache = PromptCache(tmp_path, "model-a", max_bytes=1 << 30, min_new_tokens=1, min_gain_tokens=1)
    saved = chat_prompt(engine, DOC + "\n\nHow many boxes are red?")
    engine.reset()
    _finished(engine.generate(saved, GREEDY, GenerationLimits(max_tokens=2), prefix_cache=cache))
    engine.reset()
    prompt = chat_prompt(engine, DOC + "\n\n" + " ".join(f"How many marbles does box {i} hold?" for i in range(12)))
    restores: list[float] = []
    restore = core.restore_prefix

    def timed(*args: object, **kwargs: object) -> int:
        began = time.perf_counter()
        try:
            return restore(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            restores.append(time.perf_counter() - began)

    chunks: list[float] = []
    evaluate = KvCache.evaluate

    def timed_chunk(kv: KvCache, chunk: list[int]) -> int:
        began = time.perf_counter()
        try:
            return evaluate(kv, chunk)
        finally:
            chunks.append(time.perf_counter() - began)

    monkeypatch.setattr(core, "restore_prefix", timed)
    monkeypatch.setattr(KvCache, "evaluate", timed_chunk)
    done = _finished(engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=2), prefix_cache=cache))
    t, usage = done.timings, done.usage
    assert done.restored_tokens == usage.cached_tokens > 0 and len(restores) == 1 and len(chunks) > 1
    assert t.ttft_s is not None and t.prefill_tokens_per_s is not None
    assert t.prefill_s <= t.ttft_s - restores[0], "the restore counted as prefill time"
    assert t.prefill_s >= sum(chunks), "a chunk of the prompt computed was left out of prefill time"
    assert t.prefill_tokens_per_s == pytest.approx((usage.prompt_tokens - usage.cached_tokens) / t.prefill_s)


def test_prefill_time_leaves_out_the_time_the_consumer_of_its_progress_takes(engine: Engine) -> None:
    """A consumer slow to take the prefill's progress (a terminal held with Ctrl-S) leaves prefill_s as the chunks'
    own time: it and the consumer's time fit in TTFT side by side."""
    engine.reset()
    held, progress = 0.0, 0

    def slow_to_take(events: Iterable[Event]) -> Iterator[Event]:
        nonlocal held, progress
        for event in events:
            yield event
            if isinstance(event, PrefillProgress):
                began = time.perf_counter()
                time.sleep(0.05)
                held += time.perf_counter() - began
                progress += 1

    events = engine.generate(chat_prompt(engine, DOC), GREEDY, GenerationLimits(max_tokens=2))
    t = _finished(slow_to_take(events)).timings
    assert progress > 2 and t.ttft_s is not None, "several chunks"
    assert t.prefill_s <= t.ttft_s - held, "the consumer's time counted as prefill time"


def test_prompt_tokens_are_the_tokens_of_the_prompt_printed(bundled_model: Path) -> None:
    import llama_cpp

    printed = run_localgen("run", "--print-prompt", "Name a color.")
    answered = run_localgen("run", "--json", "-n", "3", "--temperature", "0", "Name a color.")
    assert printed.returncode == answered.returncode == 0, printed.stderr + answered.stderr
    vocab = llama_cpp.Llama(str(bundled_model), vocab_only=True, verbose=False)
    counted = len(vocab.tokenize(printed.stdout, add_bos=False, special=True))
    assert json.loads(answered.stdout)["usage"]["prompt_tokens"] == counted


def _session(model: Path) -> ChatSession:
    """A chat on the model that saves nothing, answering greedily in at most 8 tokens."""
    options = ModelOptions(model=str(model), ctx_size=1024, threads=1)
    return ChatSession(load_model(options), options, Conversation.new(system=None, model=str(model)),
                       GREEDY, GenerationLimits(max_tokens=8), autosave=False)


def test_stats_after_undo_are_those_of_the_answer_now_last(bundled_model: Path) -> None:
    session = _session(bundled_model)
    try:
        first = _finished(session.ask("Name a color.")[1])
        second = _finished(session.ask("Name an animal.")[1])
        assert session.last is second
        session.undo()
        assert session.last is first, "/stats and the toolbar showed the figures of the answer undone"
        session.undo()
        assert session.last is None, "no answer is left"
        again = _finished(session.ask("Name a color.")[1])
        assert session.last is again
        session.reset()
        assert session.last is None, "a new conversation has no answer yet"
    finally:
        session.loaded.close()


def test_stats_of_a_conversation_loaded_say_its_last_answer_was_not_computed_here(
        bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _session(bundled_model)
    try:
        _finished(session.ask("Name a color.")[1])
        loaded = Conversation.new(system=None, model=str(bundled_model))
        loaded.turns.append(Turn("Name a fruit.", "A pear."))
        session.replace_conversation(loaded)
        capsys.readouterr()
        say_stats(session)
        assert capsys.readouterr().err == ("no figures for the last answer: it came with the conversation loaded, "
                                           "or an error cut it short\n"), "the figures of the conversation left behind"
        session.undo()
        say_stats(session)
        assert capsys.readouterr().err == "no answer yet\n"
    finally:
        session.loaded.close()


def test_stats_of_a_conversation_loaded_give_the_figures_saved_with_its_last_answer(
        bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _session(bundled_model)
    try:
        loaded = Conversation.new(system=None, model=str(bundled_model))
        details = AnswerDetails(finish_reason="length", model="smollm2-135m", prompt_tokens=31, completion_tokens=8,
                                duration_s=0.42, decode_tokens_per_s=57.3)
        loaded.turns.append(Turn("Name a fruit.", "A pear, a plum", details=details))
        session.replace_conversation(loaded)
        capsys.readouterr()
        say_stats(session)
        assert capsys.readouterr().err == ("the saved answer's figures (it came with the conversation loaded): "
                                           "smollm2-135m · 8 tokens · 0.4 s · 57 tok/s · stopped at the token limit\n")
        assert last_decode_speed(session) == 57.3, "the toolbar showed no speed"
        asked = _finished(session.ask("Name a color.")[1])
        assert last_decode_speed(session) == asked.timings.decode_tokens_per_s, "this chat's answer's own figure"
    finally:
        session.loaded.close()
