"""The prefill-while-typing worker's hand-over rules, with a stand-in prefill (the real one runs in test_repl,
test_session and test_engine), and the threads the engine's prefill ahead computes with."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localgen import prefill_ahead
from localgen.engine import Engine, core, lc
from localgen.events import Finished
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.prefill_ahead import SETTLE_WAIT_S, TYPING_PAUSE_S, PrefillWhileTyping
from localgen.repl_input import message_text, typed_message
from tests.conftest import chat_prompt

# The tests that time typing or a signal against a prefill run alone (serial, conftest); those that only wait for the
# worker to get somewhere run beside the others.


class SlowPrefill:
    """A prefill that takes until released (or stopped), recording what it was given and how it ended."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[tuple[str, str]] = []  # (text, "done" | "stopped")
        self.release = threading.Event()
        self.running = threading.Event()
        self.thread_ids: list[int] = []  # the OS thread each prefill ran in

    def __call__(self, text: str, should_stop: Callable[[], bool]) -> None:
        self.started.append(text)
        self.thread_ids.append(threading.get_native_id())
        self.running.set()
        while not self.release.is_set():
            if should_stop():
                self.ended.append((text, "stopped"))
                return
            time.sleep(0.001)
        self.ended.append((text, "done"))


@pytest.fixture
def prefill() -> Iterator[SlowPrefill]:
    slow = SlowPrefill()
    yield slow
    slow.release.set()


def _thread_running(thread_id: int) -> bool:
    """Whether the OS thread is still one of this process's (the worker is no Python threading.Thread)."""
    return os.path.exists(f"/proc/self/task/{thread_id}")


def _os_threads() -> set[str]:
    """The ids of this process's threads, as Linux lists them."""
    return set(os.listdir("/proc/self/task"))


def _wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_enter_on_the_text_being_prefilled_waits_for_it(prefill: SlowPrefill,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefill_ahead, "SETTLE_WAIT_S", 60.0)  # the release comes first, however slow the machine
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("Hello")
    prefill.running.wait(5)
    threading.Timer(0.05, prefill.release.set).start()
    ahead.settle("Hello")
    assert prefill.ended == [("Hello", "done")]
    ahead.close()


@pytest.mark.serial
def test_enter_waits_only_a_moment_for_a_long_prefill_of_its_text(prefill: SlowPrefill) -> None:
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("A long file")
    prefill.running.wait(5)
    started = time.monotonic()
    assert ahead.settle("A long file") is True
    assert SETTLE_WAIT_S <= time.monotonic() - started < SETTLE_WAIT_S + 1
    assert prefill.ended == [("A long file", "stopped")], "the rest is left to the answer, which shows progress"
    ahead.close()


@pytest.mark.serial
def test_ctrl_c_while_enter_waits_stops_the_prefill_and_drops_the_line(prefill: SlowPrefill,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefill_ahead, "SETTLE_WAIT_S", 60.0)  # Ctrl-C comes first, however slow the machine
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("Hello")
    prefill.running.wait(5)
    threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()  # as the terminal sends it
    assert ahead.settle("Hello") is False
    assert prefill.ended == [("Hello", "stopped")]
    ahead.close()


def test_enter_on_other_text_abandons_the_prefill_and_the_text_waiting(prefill: SlowPrefill) -> None:
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("Hel")
    prefill.running.wait(5)
    ahead.typed("Hello")  # waits for the worker
    ahead.settle("Hello!")
    assert prefill.ended == [("Hel", "stopped")]
    ahead.close()
    assert prefill.started == ["Hel"], "text typed before Enter is never prefilled after it"


def test_nothing_is_prefilled_outside_the_prompt_or_for_a_command(prefill: SlowPrefill) -> None:
    ahead = PrefillWhileTyping(prefill)
    ahead.typed("before the prompt")
    ahead.arm()
    _wait(lambda: prefill.started == [""])  # what every next message begins with
    prefill.release.set()
    _wait(lambda: len(prefill.ended) == 1)
    ahead.typed(None)  # /regen being typed
    ahead.settle(None)
    ahead.typed("after Enter")
    ahead.close()
    assert prefill.started == [""]


def test_the_latest_text_is_prefilled_next_and_close_stops_the_worker(prefill: SlowPrefill) -> None:
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("a")
    prefill.running.wait(5)
    for text in ("ab", "abc", "abcd"):
        ahead.typed(text)
    prefill.release.set()
    _wait(lambda: len(prefill.ended) == 2)
    assert prefill.started == ["a", "abcd"]
    prefill.release.clear()
    ahead.typed("abcde")
    _wait(lambda: len(prefill.started) == 3)
    ahead.close()
    assert prefill.ended[-1] == ("abcde", "stopped")
    ahead.arm("after close")
    assert len(prefill.started) == 3


def test_the_worker_ends_when_it_has_nothing_to_prefill(prefill: SlowPrefill) -> None:
    """An idle worker kept llama.cpp's OpenMP thread team alive, and the answer decoded beside it at half speed."""
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("Hello")
    assert prefill.running.wait(5), "the worker never started"
    worker = prefill.thread_ids[0]
    assert worker != threading.get_native_id() and _thread_running(worker)
    prefill.release.set()
    ahead.settle("Hello")
    _wait(lambda: not _thread_running(worker))  # the process's thread count also falls as other tests' threads end
    prefill.release.clear()
    ahead.arm("Again")  # the next text typed starts another worker
    _wait(lambda: prefill.started == ["Hello", "Again"])
    prefill.release.set()
    ahead.close()


@pytest.mark.serial
def test_text_typed_without_a_pause_is_prefilled_once_typing_pauses(prefill: SlowPrefill,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendering, tokenizing and computing the prompt's end again at every key ran beside the prompt's redraw."""
    monkeypatch.setattr(prefill_ahead, "TYPING_PAUSE_S", 0.4)
    prefill.release.set()
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("a")
    for text in ("ab", "abc", "abcd", "abcde", "abcdef"):  # 0.5 s of keys 0.1 s apart: longer than the pause
        time.sleep(0.1)
        ahead.typed(text)
    last_key = time.monotonic()
    assert prefill.started == [], "nothing is prefilled while keys keep coming"
    _wait(lambda: len(prefill.ended) == 1)
    assert time.monotonic() - last_key >= 0.4
    assert prefill.started == ["abcdef"]
    ahead.typed("abcdefg")  # after a pause, the next text is prefilled too
    _wait(lambda: len(prefill.ended) == 2)
    assert prefill.started == ["abcdef", "abcdefg"]
    ahead.close()


@pytest.mark.serial
def test_enter_before_typing_pauses_leaves_the_text_to_the_answer(prefill: SlowPrefill) -> None:
    threads = _os_threads()
    ahead = PrefillWhileTyping(prefill)
    ahead.arm("Hello")
    started = time.monotonic()
    assert ahead.settle("Hello") is True
    assert time.monotonic() - started < TYPING_PAUSE_S, "Enter does not wait for typing to pause"
    _wait(lambda: _os_threads() <= threads)  # no thread started since (other tests' threads may have ended)
    assert prefill.started == []
    ahead.close()


@pytest.mark.parametrize(("line", "pasted", "sent", "typed"), [
    ("Hello", False, "Hello", "Hello"),
    ("/regen", False, None, None),
    ("/etc/hosts is a file", False, "/etc/hosts is a file", "/etc/hosts is a file"),
    ("//set is not a command", False, "/set is not a command", "/set is not a command"),
    ('"""\nline one\nline two\n"""', False, "line one\nline two", "line one\nline two"),
    ('"""\nline one\nline', False, '"""\nline one\nline', "line one\nline"),  # a block still open
    ("/regen pasted", True, "/regen pasted", "/regen pasted"),
])
def test_a_line_sends_the_message_typed_so_far(line: str, pasted: bool, sent: str | None,
                                               typed: str | None) -> None:
    assert message_text(line, pasted=pasted) == sent
    assert typed_message(line, pasted=pasted) == typed


def _answer_and_logits(engine: Engine, prompt: list[int]) -> tuple[str, list[float]]:
    """The greedy answer to prompt, and the logits its first token was chosen from."""
    greedy, n_vocab = SamplingParams(temperature=0.0, repeat_penalty=1.0), engine._vocab.n_tokens
    next(event for event in engine.generate(prompt, greedy, GenerationLimits(max_tokens=1))
         if isinstance(event, Finished))
    logits = lc.llama_get_logits_ith(engine._ctx, -1)[:n_vocab]
    answer = next(event.text for event in engine.generate(prompt, greedy, GenerationLimits(max_tokens=8))
                  if isinstance(event, Finished))
    return answer, logits


def _typed_slowly(engine: Engine, prompt: list[int]) -> None:
    """Prefill prompt ahead a word or two at each pause in typing; the chat template's end comes with Enter."""
    engine.reset()
    for typed in range(2, len(prompt) - 5, 29):
        assert engine.prefill_ahead(prompt[:typed], lambda: False) == typed


@pytest.mark.serial
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_a_prefill_ahead_leaves_a_cpu_to_the_redraw_and_the_answer_as_every_thread_gives_it(
        bundled_model: Path, flash_attn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Computed beside the prompt's redraw of each key, the message's batches take one thread of two; the answer
    then prefills and decodes with both, and its logits are those the message computed with both gives, bit for bit
    (a prompt computed cold, in other batches, can differ in their last bits: chunks.py), its answer the cold one.
    The cold prompt's batches take one thread: the count changes none of their sums (as the logits here show), and
    two threads that spin while they wait for each other cost many times one's CPU time on a busy machine."""
    options = LoadOptions(n_ctx=1024, n_threads=2, n_threads_batch=2, n_batch=64, n_ubatch=32, flash_attn=flash_attn)
    with Engine(bundled_model, options) as engine:
        prompt = chat_prompt(engine, "Tell me about cats and why they sleep so much, in short words. " * 16)
        assert len(prompt) > 256, "past 256 tokens, where a one-token batch's attention depends on the count"
        lc.llama_set_n_threads(engine._ctx, 2, 1)
        cold = _answer_and_logits(engine, prompt)
        lc.llama_set_n_threads(engine._ctx, 2, 2)
        with monkeypatch.context() as every_thread:
            every_thread.setattr(core, "ahead_threads", lambda batch_threads: batch_threads)
            _typed_slowly(engine, prompt)
            on_both = _answer_and_logits(engine, prompt)
        real_decode = lc.llama_decode
        batches: list[tuple[int, int]] = []  # threads for one token, threads for several

        def decode(ctx: object, batch: lc.llama_batch) -> int:
            batches.append((lc.llama_n_threads(ctx), lc.llama_n_threads_batch(ctx)))
            return real_decode(ctx, batch)

        monkeypatch.setattr(lc, "llama_decode", decode)
        _typed_slowly(engine, prompt)
        ahead, batches[:] = list(batches), []
        assert ahead and set(ahead) == {(2, 1)}, "the batches typed leave a CPU to the redraw"
        on_one = _answer_and_logits(engine, prompt)
        assert batches and set(batches) == {(2, 2)}, "the answer's own counts"
    assert on_one[1] == on_both[1], "the same logits, bit for bit"
    assert on_one[0] == on_both[0] == cold[0] and cold[0]


@pytest.mark.parametrize(("threads", "threads_batch", "adapt", "ahead"), [
    # --threads-batch 3: one fewer than the answer's batches, not than its decode; two threads computing in this
    # process, which spin while they wait for each other (conftest: serial): 32 s beside other tests in a run of the
    # suite, where the cases that prefill on one thread took 2 s
    pytest.param(2, 3, False, 2, marks=pytest.mark.serial),
    (3, 2, False, 1),  # and never more than the answer's batches take
    (2, 2, True, 1),  # the thread governor's counts (chat without -t), not the options', are put back
])
def test_a_prefill_ahead_takes_one_thread_fewer_than_the_answer_s_batches_and_gives_their_counts_back(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch, threads: int, threads_batch: int, adapt: bool,
        ahead: int) -> None:
    """With --threads-batch set, the message's batches typed take one thread fewer than the answer's batches, where
    they took one fewer than its decode (more than the answer's with -t 3 --threads-batch 2); after them the
    answer's counts are back, the governor's as much as the options'."""
    options = LoadOptions(n_ctx=512, n_threads=threads, n_threads_batch=threads_batch, n_batch=64, n_ubatch=32,
                          adapt_threads=adapt)
    with Engine(bundled_model, options) as engine:
        if adapt:  # other processes' load has left the governor one thread, not the options' two
            engine._governor.current = 1
            engine._governor.reapply()
        answer_s = (lc.llama_n_threads(engine._ctx), lc.llama_n_threads_batch(engine._ctx))
        real_decode, batches = lc.llama_decode, []

        def decode(ctx: object, batch: lc.llama_batch) -> int:
            batches.append(lc.llama_n_threads_batch(ctx))
            return real_decode(ctx, batch)

        monkeypatch.setattr(lc, "llama_decode", decode)
        prompt = chat_prompt(engine, "Tell me about cats.")
        assert engine.prefill_ahead(prompt[:-3], lambda: False) == len(prompt) - 3
        assert batches and set(batches) == {ahead}
        assert (lc.llama_n_threads(engine._ctx), lc.llama_n_threads_batch(engine._ctx)) == answer_s
