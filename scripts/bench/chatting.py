"""bench_features.py fullchat, chatturn, typing, keyecho and prompttokens: what a chat waits for."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from bench.common import REPO_ROOT, document, log, spread


def bench_fullchat(args: argparse.Namespace) -> None:
    """A chat whose context is full: the time to make room for a question, and the turns after it."""
    from localgen.conversation import Conversation, Turn
    from localgen.events import Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=args.model, ctx_size=args.ctx, threads=args.threads)
    chat = ChatSession(load_model(options), options, Conversation.new(system="Be brief.", model=None),
                       SamplingParams(temperature=0.0), GenerationLimits(max_tokens=8), autosave=False)
    chat.conversation.turns.extend(Turn(f"Question {i} about the sea?", f"Answer {i}: the sea is deep.")
                                   for i in range(args.turns))
    print(f"\n{args.turns} saved exchanges, context {args.ctx} tokens")
    for number, question in enumerate(("Name a fish.", "Name a bird.", "Name a tree.", "Name a stone.")):
        started = time.perf_counter()
        start, events = chat.ask(question)
        planned = time.perf_counter() - started
        done = [e for e in events if isinstance(e, Finished)][-1]
        total = time.perf_counter() - started
        print(f"  turn {number + 1}: making room {planned:.3f} s ({start.dropped} exchanges left the context), "
              f"turn {total:.2f} s, {done.usage.cached_tokens}/{done.usage.prompt_tokens} prompt tokens reused")
    chat.loaded.close()


def first_text_s(chat, question: str, typing: float = 0.0) -> tuple[float, object]:
    """Seconds from asking (Enter) to the first streamed text, and the turn's Finished event.

    typing: keys per second at which the question is typed first, prefilled meanwhile as `localgen chat` does
    (0: it arrives whole, as a paste with --no-prefill-while-typing).
    """
    from localgen.events import Finished, TextChunk
    from localgen.prefill_ahead import PrefillWhileTyping

    ahead = PrefillWhileTyping(chat.prefill_ahead) if typing else None
    if ahead is not None:
        ahead.arm()
        for end in range(1, len(question) + 1):
            ahead.typed(question[:end])
            time.sleep(1 / typing)  # the next key, the last time Enter
    started, first, done = time.perf_counter(), None, None
    if ahead is not None:
        ahead.settle(question)
        ahead.close()
    for event in chat.ask(question)[1]:
        if isinstance(event, TextChunk) and first is None:
            first = time.perf_counter() - started
        elif isinstance(event, Finished):
            done = event
    return (first if first is not None else float("nan")), done


def bench_chatturn(args: argparse.Namespace) -> None:
    """Issue target 2 as a chat meets it: a follow-up after ~2,000 tokens against the same message in a new chat."""
    from localgen.conversation import Conversation
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")[:7000]
    follow_up = ("Thanks. Now answer a follow-up question in one short paragraph: what are the three most "
                 "important points?")
    for flash_attn in args.flash_attn:
        options = ModelOptions(model=args.model, ctx_size=4096, threads=args.threads, flash_attn=flash_attn)
        loaded = load_model(options)

        def new_chat(loaded=loaded, options=options) -> ChatSession:
            return ChatSession(loaded, options, Conversation.new(system=None, model=None),
                               SamplingParams(temperature=0.0), GenerationLimits(max_tokens=args.n), autosave=False)

        after, fresh, ratios, decode = [], [], [], []
        for number in range(args.rounds):
            chat = new_chat()
            first_text_s(chat, f"Read this:\n\n{readme}")
            seconds, done = first_text_s(chat, follow_up, args.typing)
            after.append(seconds)
            decode.append(done.timings.decode_tokens_per_s)
            loaded.engine.reset()
            new_seconds, new_done = first_text_s(new_chat(), follow_up, args.typing)
            fresh.append(new_seconds)
            ratios.append(seconds / new_seconds)
            new_tokens = done.usage.prompt_tokens - done.usage.cached_tokens + done.ahead_tokens
            log(f"flash-attn {flash_attn}, round {number + 1}: {seconds * 1000:.0f} ms after "
                f"{done.usage.cached_tokens - done.ahead_tokens} cached tokens ({new_tokens} new, "
                f"{done.ahead_tokens} of them computed while typing); new chat {new_seconds * 1000:.0f} ms "
                f"({new_done.usage.prompt_tokens} tokens, {new_done.ahead_tokens} computed while typing)")
        typed = f"typed at {args.typing:g} keys/s" if args.typing else "sent whole"
        print(f"\nflash-attn {flash_attn}: follow-up after {done.usage.cached_tokens - done.ahead_tokens} cached "
              f"tokens, {typed}, {args.rounds} rounds (median, min-max)")
        print(f"  TTFT of the follow-up:        {spread([s * 1000 for s in after], 1)} ms")
        print(f"  TTFT of it in a new chat:     {spread([s * 1000 for s in fresh], 1)} ms")
        print(f"  ratio (paired):               {spread(ratios, 2)}")
        print(f"  decode of its answer at that depth: {spread(decode, 1)} tok/s")
        loaded.close()



def bench_typing(args: argparse.Namespace) -> None:
    """Prefill-ahead tok/s on a worker thread beside busy Python: a StopFlag read in C against a Python callback."""
    import threading

    from localgen.engine import Engine
    from localgen.params import LoadOptions
    from localgen.runner import ModelOptions, load_model
    from localgen.stop_flag import StopFlag

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    path, threads = loaded.resolved.path, loaded.engine.options.n_threads
    loaded.close()

    def prefill_then_set(engine: Engine, prompt: list[int], should_stop: object, done: threading.Event) -> None:
        engine.prefill_ahead(prompt, should_stop)
        done.set()

    def busy_python(done: threading.Event) -> None:
        while not done.is_set():  # Python work that holds the GIL, as drawing a prompt does
            sum(range(20_000))

    with Engine(path, LoadOptions(n_ctx=4096, n_threads=threads, n_threads_batch=threads)) as engine:
        prompt = engine.tokenize(document(2000), add_special=True)[:args.tokens]
        flag = StopFlag()
        variants = {"C flag, busy Python beside": flag, "Python callback, busy Python beside": lambda: flag(),
                    "main thread, nothing beside": None}
        speeds: dict[str, list[float]] = {name: [] for name in variants}
        for k in range(args.rounds):
            for name, should_stop in variants.items():
                engine.prefill_ahead(prompt[:1], lambda: False)
                started = time.perf_counter()
                if should_stop is None:
                    engine.prefill_ahead(prompt, lambda: False)
                else:
                    done = threading.Event()
                    worker = threading.Thread(target=prefill_then_set, args=(engine, prompt, should_stop, done))
                    worker.start()
                    busy_python(done)
                    worker.join()
                speeds[name].append((len(prompt) - 1) / (time.perf_counter() - started))
            log(f"round {k + 1}: " + ", ".join(f"{n} {v[-1]:.1f}" for n, v in speeds.items()))
    print(f"\nprefill of {len(prompt):,} tokens ahead, {threads} threads, {args.rounds} rounds: tok/s "
          "(median, min-max)")
    for name, values in speeds.items():
        print(f"  {name:38} {spread(values, 1)}")
    c_flag, callback, alone = speeds.values()
    over_callback = [a / b for a, b in zip(c_flag, callback, strict=True)]
    over_alone = [a / b for a, b in zip(c_flag, alone, strict=True)]
    print(f"  C flag / Python callback (paired): {spread(over_callback)}; C flag beside busy Python / main thread "
          f"alone: {spread(over_alone)}")


def read_away(child) -> None:
    """Drop what a pexpect child has written so far, so that the next expect matches only what comes after."""
    import pexpect

    child.buffer = ""
    while True:
        try:
            child.read_nonblocking(1 << 16, timeout=0)
        except pexpect.TIMEOUT:
            return


def bench_keyecho(args: argparse.Namespace) -> None:
    """Key echo latency at the chat's prompt with a long paste in it."""
    import pexpect

    pasted = document(args.chars // 4)[:args.chars].replace("\n", " ")
    medians, worst = [], []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "LOCALGEN_HOME": home, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
        for k in range(args.rounds):
            chat = pexpect.spawn(sys.executable, ["-m", "localgen", "chat", "--no-markdown", *args.chat_args],
                                 env=env, cwd=str(REPO_ROOT), dimensions=(40, 100), encoding="utf-8", timeout=120)
            chat.delaybeforesend = None
            chat.expect_exact(">>>")
            chat.send(f"\x1b[200~{pasted}\x1b[201~")
            while chat.expect([pexpect.TIMEOUT, r".+"], timeout=1.0) == 1:  # until the screen is quiet for 1 s
                pass
            latencies = []
            for key in ("zqxj" * args.keys)[:args.keys]:  # letters neither the paste nor escape sequences hold
                read_away(chat)  # the rest of the last redraw holds the keys before: it would match an earlier echo
                sent = time.perf_counter()
                chat.send(key)
                chat.expect_exact(key)
                latencies.append(time.perf_counter() - sent)
                time.sleep(0.15)  # a typist's pace
            chat.terminate(force=True)
            medians.append(statistics.median(latencies) * 1000)
            worst.append(max(latencies) * 1000)
            log(f"round {k + 1}: echo median {medians[-1]:.1f} ms, slowest {worst[-1]:.1f} ms")
    print(f"\nkey echo with {args.chars:,} characters at the prompt, {args.keys} keys, {args.rounds} rounds "
          f"(median, min-max): median {spread(medians, 1)} ms, slowest {spread(worst, 1)} ms")


def bench_prompttokens(args: argparse.Namespace) -> None:
    """A follow-up prompt's tokens: whole against in pieces, reusing the conversation's (prompt_tokens)."""
    from localgen.chat import Message
    from localgen.prompt_tokens import ReusingTokenizer
    from localgen.runner import ModelOptions, load_model

    loaded = load_model(ModelOptions(model=args.model, threads=args.threads))
    engine, fmt = loaded.engine, loaded.prompt_format
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")

    class WideEngine:
        """The engine, as a model whose context holds the conversation shows it."""

        def __init__(self, n_ctx: int) -> None:
            self.n_ctx = max(n_ctx, engine.n_ctx)

        def __getattr__(self, name: str) -> object:
            return getattr(engine, name)

    def prompt_ms(tokenizer: object, messages: list[Message]) -> tuple[list[int], float]:
        start = time.process_time()
        tokens = fmt.prompt(tokenizer, messages)[1]
        return tokens, (time.process_time() - start) * 1000

    started = time.process_time()
    engine.special_tokens()
    print(f"reading the special tokens of {engine.n_vocab:,} (once a model, after as many characters tokenized "
          f"whole): {(time.process_time() - started) * 1000:.1f} ms CPU")
    for target in args.tokens:
        before, offset = [], 0
        while len(fmt.prompt(engine, before)[1]) < target:
            for role in ("user", "assistant"):
                before.append(Message(role, readme[offset % len(readme):][:700]))
                offset += 700
        after = [*before, Message("user", "And now a follow-up question: what matters most?")]
        whole, pieces, cold = [], [], []
        for _ in range(args.rounds):
            expected, ms = prompt_ms(engine, after)
            whole.append(ms)
            tokenizer = ReusingTokenizer(WideEngine(2 * target), fmt)
            tokenizer.tokenize(readme * (engine.n_vocab // len(readme) + 1), add_special=False)
            ms = prompt_ms(tokenizer, before)[1]
            cold.append(ms)
            tokens, ms = prompt_ms(tokenizer, after)
            pieces.append(ms)
            assert tokens == expected, "the pieces must give the whole text's tokens"
        print(f"\nfollow-up after {len(expected):,} tokens ({len(after)} messages), {args.rounds} rounds, ms CPU "
              "(median, min-max)")
        print(f"  rendered, tokenized whole:          {spread(whole, 2)}")
        print(f"  rendered, tokenized in pieces:      {spread(pieces, 2)}")
        print(f"  the conversation's, pieces cold:    {spread(cold, 2)}")
    loaded.close()

