"""What outlives what in the engine: a generation left part way and collected later, after the engine freed or
replaced its context, touches no native memory; a context replaced while the user types leaves the model loaded."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localgen.conversation import Conversation
from localgen.engine import Engine, core, lc
from localgen.errors import LocalgenError
from localgen.events import Finished, PrefillProgress
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.runner import ModelOptions, load_model
from localgen.session import ChatSession
from tests.conftest import chat_prompt

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)
SMALL_BATCHES = LoadOptions(n_ctx=4096, n_threads=1, n_threads_batch=1, n_batch=64, n_ubatch=64)


@pytest.fixture
def small_batches(bundled_model: Path) -> Iterator[Engine]:
    """An engine whose prompts prefill in chunks of 64 tokens, its KV cache started smaller than its context."""
    with Engine(bundled_model, SMALL_BATCHES) as eng:
        yield eng


def _part_way(eng: Engine, text: str) -> Iterator:
    """A generation stopped between its first two prefill chunks (where it yields their progress)."""
    stream = eng.generate(chat_prompt(eng, text), GREEDY, GenerationLimits(max_tokens=4))
    first, second = next(stream), next(stream)
    assert isinstance(second, PrefillProgress) and first.done == 0 < second.done < second.total
    return stream


def _abort_callback_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record llama_set_abort_callback's calls from now on, passing none to llama.cpp (the context may be freed)."""
    calls: list[object] = []
    monkeypatch.setattr(lc, "llama_set_abort_callback", lambda ctx, *_: calls.append(ctx))
    return calls


@pytest.mark.parametrize("then", ["close", "grow"])
def test_a_generation_left_part_way_through_its_prefill_is_collected_without_touching_the_context(
        small_batches: Engine, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    """The abort callback is set around each chunk's llama_decode only: a generation left waiting between chunks holds
    none, so collecting it once close() freed the context, or a longer prompt replaced it with a larger one, calls
    nothing on the freed context (llama_set_abort_callback there crashed the process now and then, or cleared the
    live context's callback where the new one took the freed one's address)."""
    hook = sys.unraisablehook
    stale = _part_way(small_batches, "Tell me about cats. " * 30)
    waiting_with = sys.unraisablehook
    if then == "close":
        small_batches.close()
    else:
        assert small_batches._cells < small_batches._full_cells
        longer = small_batches.generate(chat_prompt(small_batches, "Tell me about dogs. " * 480), GREEDY)
        assert isinstance(next(longer), PrefillProgress) and small_batches._cells == small_batches._full_cells
        longer.close()
    calls = _abort_callback_calls(monkeypatch)
    del stale
    gc.collect()
    assert calls == []
    assert waiting_with is hook is sys.unraisablehook, "no stopper was in place while the generation waited"


def test_a_stale_generation_collected_leaves_the_running_prefill_s_stop_between_graph_nodes(
        small_batches: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generation left part way and collected while another is part way through its prompt: a stop requested
    between the graph nodes of the other's next chunk still ends that chunk (the stale one's exit cleared the abort
    callback of the context they share, and the prompt went on to its answer)."""
    polls: list[int] = []
    stop_at: list[int] = []
    real = core.StopBetweenNodes

    def counting(ctx: lc.llama_context_p, should_stop: Callable[[], bool]) -> object:
        def polled() -> bool:
            polls.append(1)
            if stop_at and len(polls) >= stop_at[0]:
                small_batches.request_stop()
            return should_stop()
        return real(ctx, polled)

    monkeypatch.setattr(core, "StopBetweenNodes", counting)
    hook = sys.unraisablehook
    stale = _part_way(small_batches, "Tell me about cats. " * 30)
    running = _part_way(small_batches, "Tell me about dogs. " * 30)
    held = small_batches.kv_tokens
    del stale
    gc.collect()
    stop_at.append(len(polls) + 1)  # the first poll of the next chunk's graph
    events = list(running)
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.finish_reason == "interrupted" and finished.text == ""
    assert len(polls) >= stop_at[0], "the next chunk was polled between its graph nodes"
    assert small_batches.kv_tokens == held, "the chunk stopped part way is dropped, those done before it kept"
    assert sys.unraisablehook is hook


@pytest.fixture
def chat(bundled_model: Path) -> Iterator[ChatSession]:
    """A chat with a system prompt, in a context of 4,096 tokens whose KV cache starts smaller."""
    options = ModelOptions(model=str(bundled_model), ctx_size=4096, threads=1)
    session = ChatSession(load_model(options), options, Conversation.new(system="Answer briefly.",
                                                                         model=str(bundled_model)),
                          GREEDY, GenerationLimits(max_tokens=8), autosave=False)
    yield session
    session.loaded.close()


def test_a_context_grown_while_the_user_types_leaves_the_model_loaded(chat: ChatSession,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """prefill_ahead, on the thread that prefills the message being typed, frees the small context before it makes
    the larger one: meanwhile the chat's thread still sees the model loaded, tokenizes, and counts the context the
    conversation uses (it got 'no model is loaded', and the toolbar said 'no model loaded · /model NAME')."""
    engine = chat.loaded.engine
    assert engine._cells < engine._full_cells
    hello = engine.tokenize("hello", add_special=False)
    before = (True, hello, chat.context_used())
    seen: list[tuple[bool, list[int] | str, int | None]] = []
    real = core.new_context

    def observed(*args: object) -> lc.llama_context_p:
        try:
            tokens: list[int] | str = engine.tokenize("hello", add_special=False)
        except LocalgenError as exc:
            tokens = exc.message
        seen.append((engine.is_open, tokens, chat.context_used()))
        return real(*args)

    monkeypatch.setattr(core, "new_context", observed)
    chat.prefill_ahead("Tell me about dogs. " * 480, lambda: bool(seen))
    assert seen == [before], "the chat's view while the context is replaced"
    assert engine._cells == engine._full_cells and engine.is_open


def test_a_context_replacement_that_fails_unexpectedly_unloads_the_model(small_batches: Engine,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded means a context too (but while one replaces another): where making the larger one fails with no
    smaller one made again, the model is freed at once, as when the smaller one could not be made again for want of
    memory, and the engine says no model is loaded rather than run without one (the model was held until close())."""
    def failing(*_: object) -> lc.llama_context_p:
        raise MemoryError

    real_free = lc.llama_model_free
    freed: list[object] = []

    def recorded(model: lc.llama_model_p) -> None:
        freed.append(model)
        real_free(model)

    prompt = chat_prompt(small_batches, "Tell me about dogs. " * 480)
    monkeypatch.setattr(core, "new_context", failing)
    monkeypatch.setattr(lc, "llama_model_free", recorded)
    with pytest.raises(MemoryError):
        next(small_batches.generate(prompt, GREEDY))
    assert len(freed) == 1, "the model's memory is freed with the context's, not left for close()"
    assert not small_batches.is_open
    with pytest.raises(LocalgenError, match="no model is loaded"):
        small_batches.tokenize("hello", add_special=False)


CONTEXT_CALLS: dict[str, Callable[[Engine, list[int], bytearray], object]] = {
    "reset": lambda eng, _prompt, _state: eng.reset(),
    "forget_after": lambda eng, _prompt, _state: eng.forget_after(0),
    "save_state": lambda eng, _prompt, _state: eng.save_state(),
    "load_state": lambda eng, _prompt, state: eng.load_state(eng.kv_token_list, state),
    "generate": lambda eng, prompt, _state: next(eng.generate(prompt, GREEDY)),
    "prefill_ahead": lambda eng, prompt, _state: eng.prefill_ahead(prompt, lambda: False),
}


@pytest.mark.parametrize("call", CONTEXT_CALLS)
def test_what_uses_the_context_says_it_is_being_replaced_while_it_is(small_batches: Engine, call: str) -> None:
    """While a context is replaced by a larger one (on the thread prefilling a message as it is typed) the old one is
    freed and the new one not yet made: the model is loaded and its vocabulary answers, but a call that computes or
    reads the KV cache says the context is being replaced rather than use the freed context the KV cache still holds
    (it said no model is loaded, while one was)."""
    list(small_batches.generate(chat_prompt(small_batches, "Hello"), GREEDY, GenerationLimits(max_tokens=2)))
    held, state = small_batches.kv_token_list, small_batches.save_state()
    prompt = chat_prompt(small_batches, "Tell me about cats. " * 30)  # two chunks: not held
    context, small_batches._ctx = small_batches._ctx, None  # the state between freeing the old and making the new
    try:
        assert small_batches.is_open and small_batches.tokenize("hello", add_special=False)
        with pytest.raises(LocalgenError, match=r"^the model's context is being replaced by a larger one$"):
            CONTEXT_CALLS[call](small_batches, prompt, state)
        assert small_batches.kv_token_list == held, "the KV cache is left as it was"
    finally:
        small_batches._ctx = context


def test_prefill_progress_says_where_the_batch_being_read_ends(small_batches: Engine) -> None:
    """The progress line moves between batches up to the end of the one being read, which each progress names."""
    stream = small_batches.generate(chat_prompt(small_batches, "word " * 150), GREEDY, GenerationLimits(max_tokens=1))
    progress = [event for event in stream if isinstance(event, PrefillProgress)]
    total = progress[0].total
    assert [event.done for event in progress] == [min(64 * n, total) for n in range(len(progress))], progress
    assert [event.until for event in progress] == [min(64 * (n + 1), total) for n in range(len(progress))], progress
