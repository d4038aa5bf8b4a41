"""The chat service on the real bundled model: failed turns keep the conversation sound; /model switches."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from localgen import model_switch
from localgen import session as session_module
from localgen.chat import Message
from localgen.config import DEFAULT_BATCH_SIZE
from localgen.conversation import Conversation, Turn
from localgen.engine import Engine, lc
from localgen.errors import (
    ContextOverflowError,
    LocalgenError,
    ModelLoadError,
    ModelNotFoundError,
    TemplateError,
    UsageError,
)
from localgen.events import Event, Finished, PrefillProgress, TextChunk
from localgen.held_tokens import with_held_tokens
from localgen.params import CHAT_SETTINGS, GenerationLimits, SamplingParams
from localgen.runner import ModelOptions, load_model
from localgen.session import ChatSession
from localgen.session_turns import UnsavedChangeError
from tests import gguf_builders as gb


def _session(model: Path, ctx_size: int | None, batch_size: int = DEFAULT_BATCH_SIZE) -> ChatSession:
    options = ModelOptions(model=str(model), ctx_size=ctx_size, threads=1, batch_size=batch_size)
    return ChatSession(load_model(options), options, Conversation.new(system=None, model=str(model)),
                       SamplingParams(temperature=0.0), GenerationLimits(max_tokens=8), autosave=False)


@pytest.fixture
def session(bundled_model: Path) -> Iterator[ChatSession]:
    chat = _session(bundled_model, 1024)
    yield chat
    chat.loaded.close()


@pytest.fixture
def chat(bundled_model: Path) -> Iterator[ChatSession]:
    """A session with a small context (512 tokens), where making room is quick to reach."""
    small = _session(bundled_model, 512)
    yield small
    small.loaded.close()


def _answer(events: Iterable[Event]) -> Finished:
    return [e for e in events if isinstance(e, Finished)][-1]


def _exchanges(chat: ChatSession) -> list[tuple[str, str | None]]:
    return [(t.user, t.answer) for t in chat.conversation.turns]


def test_a_turn_that_fails_before_answering_leaves_no_question_behind(session: ChatSession,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    first = _answer(session.ask("Name a color.")[1]).text
    assert first

    def broken(*_: object) -> tuple[str, list[int]]:
        raise TemplateError("the chat template failed", hint="fix it")

    monkeypatch.setattr(session, "_prompt", broken)
    with pytest.raises(TemplateError):
        _answer(session.regenerate()[1])
    assert _exchanges(session) == [("Name a color.", first)], "a failed /regen keeps the previous answer"
    with pytest.raises(TemplateError):
        _answer(session.ask("Name an animal.")[1])
    assert _exchanges(session) == [("Name a color.", first)], "a failed question is not left unanswered"


def test_a_failing_autosave_does_not_hide_the_error_that_ended_the_turn(session: ChatSession,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> tuple[str, list[int]]:
        raise TemplateError("the chat template failed", hint="fix it")

    def full_disk(*_: object, **__: object) -> Path:
        raise LocalgenError("cannot save the conversation: No space left on device")

    monkeypatch.setattr(session, "_prompt", broken)
    monkeypatch.setattr(session_module, "save_conversation", full_disk)
    session.autosave = True
    with pytest.raises(TemplateError):
        _answer(session.ask("Name an animal.")[1])
    monkeypatch.undo()
    monkeypatch.setattr(session_module, "save_conversation", full_disk)
    session.autosave = True
    with pytest.raises(LocalgenError, match="No space left"):  # a turn that went well reports its failed save
        _answer(session.ask("Name an animal.")[1])


def test_ctrl_c_before_any_text_keeps_the_previous_answer(session: ChatSession) -> None:
    first = _answer(session.ask("Name a color.")[1]).text
    events = session.regenerate()[1]
    session.loaded.engine.request_stop()  # Ctrl-C while the prompt is prepared
    assert _answer(events).finish_reason == "interrupted"
    assert _exchanges(session) == [("Name a color.", first)]
    assert _answer(session.regenerate()[1]).text == first


def test_regen_after_a_message_that_got_no_answer_sends_that_message(session: ChatSession) -> None:
    first = _answer(session.ask("Name a color.")[1]).text
    events = session.ask("Name an animal.")[1]
    session.loaded.engine.request_stop()  # Ctrl-C while the prompt is prepared
    assert _answer(events).finish_reason == "interrupted"
    assert _exchanges(session) == [("Name a color.", first)] and session.dropped_question == "Name an animal."
    second = _answer(session.regenerate()[1]).text
    assert _exchanges(session) == [("Name a color.", first), ("Name an animal.", second)]
    assert session.dropped_question is None
    events = session.ask("Name a fruit.")[1]
    session.loaded.engine.request_stop()
    _answer(events)
    session.undo()  # the conversation changed: /regen answers its last question again
    assert _answer(session.regenerate()[1]).text == first and len(session.conversation.turns) == 1


def test_a_failed_model_switch_keeps_a_working_model(session: ChatSession, bundled_model: Path,
                                                     tmp_path: Path) -> None:
    before = session.loaded
    with pytest.raises(ModelNotFoundError):
        session.switch_model("no-such-model")
    assert session.loaded is before, "a reference that does not resolve frees nothing"
    tiny = gb.tiny_model(tmp_path / "tiny.gguf", n_ctx=256)
    with pytest.raises(UsageError, match="beyond the model's maximum"):  # --ctx-size 1024 > 256
        session.switch_model(str(tiny))
    assert session.loaded is not before, "the current model was freed before planning, then loaded again"
    with pytest.raises(LocalgenError, match="no model is loaded"):
        before.engine.tokenize("hi", add_special=False)
    assert session.loaded.resolved.path == bundled_model and session.options.model == str(bundled_model)
    assert _answer(session.ask("Name a color.")[1]).text


def test_model_switch_frees_the_old_model_and_keeps_the_conversation(bundled_model: Path, tmp_path: Path) -> None:
    chat = _session(bundled_model, None)
    try:
        _answer(chat.ask("Name a color.")[1])
        old = chat.loaded
        tiny = gb.tiny_model(tmp_path / "tiny.gguf", n_ctx=256)
        chat.switch_model(str(tiny))
        assert chat.loaded.resolved.path == tiny and chat.conversation.model == str(tiny)
        with pytest.raises(LocalgenError, match="no model is loaded"):
            old.engine.tokenize("hi", add_special=False)
        assert len(chat.conversation.turns) == 1
        assert _answer(chat.ask("Hello")[1]).usage.completion_tokens > 0
    finally:
        chat.loaded.close()


def test_a_template_error_while_making_room_leaves_the_conversation_as_it_was(session: ChatSession,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    first = _answer(session.ask("Name a color.")[1]).text
    session.attachments = ["a note"]

    def broken(_: object) -> int:
        raise TemplateError("the chat template failed", hint="fix it")

    monkeypatch.setattr(session, "_count", broken)
    with pytest.raises(TemplateError):
        session.ask("Name an animal.")
    assert _exchanges(session) == [("Name a color.", first)] and session.attachments == ["a note"]


def test_exchanges_dropped_for_a_question_that_gets_no_answer_come_back(chat: ChatSession) -> None:
    old = [Turn("word " * 150, "answer " * 20), Turn("more " * 150, "reply " * 20)]
    chat.conversation.turns.extend(old)
    start, events = chat.ask("thing " * 150)
    assert start.dropped == 2 and chat.conversation.context_start == 0, "planned, not yet applied"
    chat.loaded.engine.request_stop()  # Ctrl-C before any text
    assert _answer(events).finish_reason == "interrupted"
    assert chat.conversation.turns == old and chat.conversation.context_start == 0


def test_a_full_context_makes_room_once_and_the_next_turns_reuse_the_kv_cache(chat: ChatSession) -> None:
    chat.conversation.turns.extend(Turn(f"Tell me fact number {i} about the sea. " * 4, "The sea is deep. " * 8)
                                   for i in range(12))
    start, events = chat.ask("Name a fish.")
    assert start.dropped > 0
    _answer(events)
    assert len(chat.conversation.turns) == 13, "the exchanges out of context stay in the conversation"
    kept = chat.conversation.context_start
    for question in ("Name a bird.", "Name a tree."):
        start, events = chat.ask(question)
        done = _answer(events)
        assert start.dropped == 0 and chat.conversation.context_start == kept
        assert done.usage.cached_tokens > done.usage.prompt_tokens - 40, "only the new turn is prefilled"


def test_when_even_the_reload_fails_the_session_has_no_model_and_says_so(session: ChatSession,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(_options: ModelOptions, *, release: object = None, **_: object) -> None:
        if callable(release):
            release()
        raise ModelLoadError("llama.cpp could not load it")

    monkeypatch.setattr(model_switch, "load_model", failing)
    with pytest.raises(LocalgenError, match=r"failed too .*no model is loaded"):
        session.switch_model("other-model")
    engine = session.loaded.engine
    assert not engine.is_open and engine.n_ctx == 1024, "the facts a chat shows stay readable"
    with pytest.raises(LocalgenError, match="no model is loaded"):
        session.ask("Name a color.")
    assert session.conversation.turns == []


@pytest.mark.parametrize("during", ["switch", "reload"])
def test_sigterm_during_a_model_switch_ends_it_without_a_reload(session: ChatSession, during: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.signals import SignalExit

    calls: list[str] = []

    def loading(options: ModelOptions, *, release: object = None, **_: object) -> None:
        calls.append(options.model or "")
        if callable(release):
            release()
        if during == "switch" or len(calls) > 1:
            raise SignalExit(15)
        raise ModelLoadError("llama.cpp could not load it")

    monkeypatch.setattr(model_switch, "load_model", loading)
    with pytest.raises(SignalExit):
        session.switch_model("other-model")
    assert len(calls) == (1 if during == "switch" else 2)


def test_ctrl_c_while_a_switch_frees_the_model_reloads_it(session: ChatSession,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    real_free = lc.llama_free

    def free_then_ctrl_c(ctx: object) -> None:
        real_free(ctx)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands between freeing the context and dropping its pointer

    monkeypatch.setattr(lc, "llama_free", free_then_ctrl_c)
    before = session.loaded
    with pytest.raises(KeyboardInterrupt):
        session.switch_model(str(before.resolved.path))
    monkeypatch.setattr(lc, "llama_free", real_free)
    assert not before.engine.is_open, "no pointer to freed memory is left behind"
    assert session.loaded is not before and session.loaded.engine.is_open, "the model was loaded again"
    assert _answer(session.ask("Name a color.")[1]).text


def test_a_turn_renders_and_tokenizes_the_conversation_once(session: ChatSession,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    fmt = session.loaded.prompt_format
    calls: list[int] = []
    tokenize = type(fmt).tokenize

    def counted(self: object, *args: object, **kwargs: object) -> list[int]:
        calls.append(1)
        return tokenize(self, *args, **kwargs)

    monkeypatch.setattr(type(fmt), "tokenize", counted)
    events = session.ask("Name a color.")[1]
    next(events)  # the answer has started: what the REPL's thinking check reads now
    assert session.prompt_text().endswith("Name a color.<|im_end|>\n<|im_start|>assistant\n")
    assert _answer(events).text and len(calls) == 1


def test_while_regenerating_the_prompt_text_is_the_one_being_answered(session: ChatSession) -> None:
    first = _answer(session.ask("Name a color.")[1]).text
    events = iter(session.regenerate()[1])
    next(events)  # the generation has started: what the REPL's thinking check reads now
    assert session.prompt_text().endswith("<|im_start|>assistant\n") and first not in session.prompt_text()
    assert _answer(events).text == first


def test_attachments_of_a_question_without_an_answer_wait_for_the_next_one(session: ChatSession) -> None:
    session.attachments = ["The secret word is kiwi."]
    _, events = session.ask("What is the secret word?")
    session.loaded.engine.request_stop()  # Ctrl-C before any text
    _answer(events)
    assert session.unanswered and session.attachments == ["The secret word is kiwi."]
    assert session.last is None, "/stats and the toolbar show the last answer's figures, not a dropped question's"
    answered = _answer(session.ask("What is the secret word?")[1])
    assert not session.unanswered and session.attachments == []
    assert session.conversation.turns[0].user.startswith("The secret word is kiwi.")
    _, events = session.ask("And again?")
    session.loaded.engine.request_stop()
    _answer(events)
    assert session.unanswered and session.last is answered


def _stopped_part_way(events: Iterable[Event], session: ChatSession) -> Finished:
    """Run an answer, asking the engine to stop (as Ctrl-C does) once its third piece of text has come (the KV cache
    then holds the tokens before it)."""
    finished, pieces = None, 0
    for event in events:
        pieces += isinstance(event, TextChunk)
        if pieces >= 3:
            session.loaded.engine.request_stop()
        if isinstance(event, Finished):
            finished = event
    assert finished is not None
    return finished


def test_a_regen_stopped_part_way_keeps_the_earlier_answer_and_its_kv_cache_only_the_question(
        session: ChatSession) -> None:
    """The conversation, /stats and /undo are as before the stopped /regen, and the KV cache holds no token of the
    stopped answer, so the next question gets the greedy answer a fresh KV cache gives for the same history."""
    engine = session.loaded.engine
    first = _answer(session.ask("Name a color.")[1])
    question = session.loaded.prompt_format.prompt(engine, session.conversation.messages()[:-1])[1]
    stopped = _stopped_part_way(session.regenerate()[1], session)
    assert stopped.finish_reason == "interrupted" and stopped.usage.completion_tokens >= 3, "stopped after some text"
    assert session.earlier_kept and not session.unanswered
    assert [(t.user, t.answer, t.interrupted) for t in session.conversation.turns] == [
        ("Name a color.", first.text, False)]
    assert session.last is first, "/stats shows the answer kept"
    assert engine.kv_token_list == question, "the KV cache holds the question, not the stopped answer's tokens"
    second = _answer(session.ask("Name an animal.")[1]).text
    assert not session.earlier_kept
    session.undo()
    engine.reset()
    assert _answer(session.ask("Name an animal.")[1]).text == second, "as a fresh KV cache gives"
    session.undo()
    events = session.regenerate()[1]
    next(event for event in events if isinstance(event, TextChunk))
    with pytest.raises(BrokenPipeError):
        events.throw(BrokenPipeError())  # the answer could not be shown
    assert session.earlier_kept and _exchanges(session) == [("Name a color.", first.text)]
    events = session.regenerate()[1]
    engine.request_stop()  # Ctrl-C before any text
    assert _answer(events).text == "" and session.earlier_kept and session.unanswered
    assert session.undo().answer == first.text and not session.conversation.turns


def test_set_speaks_the_chat_s_language(session: ChatSession) -> None:
    assert session.set_value("seed", "-1") == ("seed", "none") and session.sampling.seed is None
    assert session.set_value("Repeat-Last-N", "32") == ("repeat_last_n", "32") and session.sampling.repeat_last_n == 32
    with pytest.raises(UsageError) as info:
        session.set_value("max_tokens", "0")
    assert info.value.hint == "use 1 to 10000000 tokens, or -1 for no limit: /set max_tokens VALUE"


def test_set_takes_the_command_line_s_names_for_settings(session: ChatSession) -> None:
    assert session.set_value("temp", "0.5") == ("temperature", "0.5")
    assert session.set_value("--top-p", "0.8") == ("top_p", "0.8")
    assert session.set_value("-n", "12") == ("max_tokens", "12") and session.limits.max_tokens == 12
    assert session.set_value("--repeat-penalty", "1.2") == ("repeat_penalty", "1.2")
    with pytest.raises(UsageError, match="unknown setting 'tmp'"):
        session.set_value("tmp", "1")


def test_context_used_is_what_the_conversation_holds_not_an_unanswered_prefill(bundled_model: Path) -> None:
    session = _session(bundled_model, 1024, batch_size=64)  # a question of 180 tokens is read in chunks of 64
    try:
        _context_used_leaves_out_an_unanswered_prefill(session)
    finally:
        session.loaded.close()


def _context_used_leaves_out_an_unanswered_prefill(session: ChatSession) -> None:
    """context_used() counts the conversation: before and after an answer, not a question stopped as it is read."""
    engine, prompt_format = session.loaded.engine, session.loaded.prompt_format
    own = prompt_format.default_system()  # SmolLM2's template writes its own where none is set
    assert own and session.context_used() == len(prompt_format.prompt(engine, [Message("system", own)])[1])
    session.set_system("")  # the template's own left out: an empty system prompt
    assert session.context_used() == len(prompt_format.prompt(engine, [Message("system", "")])[1])
    session.set_system("Be brief.")
    rendered = session.loaded.prompt_format.prompt(engine, session.conversation.messages())[1]
    assert session.context_used() == len(rendered)
    _answer(session.ask("Name a color.")[1])
    answered = session.context_used()
    assert answered is not None and abs(answered - engine.kv_tokens) <= 8
    events = session.ask(" ".join(f"Line {i}: the crate holds {i * 7 % 13} apples." for i in range(12)))[1]
    for event in events:
        if isinstance(event, PrefillProgress) and event.done:
            engine.request_stop()  # Ctrl-C while the prompt is read, once a chunk of it is
    assert session.unanswered and engine.kv_tokens > answered, "the KV cache holds part of the question"
    assert session.context_used() == answered


def test_context_used_renders_the_template_s_own_system_prompt_once_not_at_every_toolbar_redraw(
        session: ChatSession, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import chat

    renders: list[int] = []

    def counted(*args: typing.Any, **kwargs: typing.Any) -> str:
        renders.append(1)
        return render_template(*args, **kwargs)

    render_template = chat.render_template
    monkeypatch.setattr(chat, "render_template", counted)
    own = session.context_used()
    assert own is not None and renders, "the first count renders the template"
    renders.clear()
    assert [session.context_used() for _ in range(5)] == [own] * 5 and renders == [], "a redraw renders nothing"
    session.set_system("Be brief.")
    brief = session.context_used()
    assert brief is not None and brief < own and renders, "a system prompt set is counted afresh"
    renders.clear()
    assert [session.context_used() for _ in range(5)] == [brief] * 5 and renders == []
    session.set_system(None)
    assert session.context_used() == own, "the template's own again"
    renders.clear()
    assert [session.context_used() for _ in range(5)] == [own] * 5 and renders == []


def test_context_used_is_unknown_when_the_template_fails_or_no_model_is_loaded(session: ChatSession,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> tuple[str, list[int]]:
        raise TemplateError("the chat template failed", hint="fix it")

    session.conversation.system = "Be brief."
    monkeypatch.setattr(session, "_prompt", broken)
    assert session.context_used() is None
    monkeypatch.undo()
    session.loaded.close()
    assert session.context_used() is None


def test_every_chat_setting_is_typed_as_its_field(session: ChatSession) -> None:
    hints = typing.get_type_hints(SamplingParams) | typing.get_type_hints(GenerationLimits)
    run_only = {"grammar"}  # run's --grammar and --json-schema: no chat setting, never saved with a conversation
    assert set(CHAT_SETTINGS) == {f.name for f in dataclasses.fields(SamplingParams)} - run_only | {"max_tokens"}
    assert set(session.settings()) == set(CHAT_SETTINGS)
    for name, kind in CHAT_SETTINGS.items():
        assert kind in (typing.get_args(hints[name]) or (hints[name],)), name
        value = session.set_value(name, "1")
        assert value == (name, "1") and type(session.settings()[name]) is kind  # said in its shortest form
        with pytest.raises(UsageError, match=f"'x' is not a valid value for {name}"):
            session.set_value(name, "x")
        with pytest.raises(UsageError, match=f"is not a valid value for {name}"):
            session.set_value(name, "\u0663")  # an Arabic-Indic three
        with pytest.raises(UsageError, match=f"'1_0' is not a valid value for {name}"):
            session.set_value(name, "1_0")  # Python's digit grouping: no one means 10
    with pytest.raises(UsageError, match="not a valid value for top_k"):
        session.set_value("top_k", "0.5")


def test_resuming_applies_saved_settings_then_flags_without_writing(session: ChatSession,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Resuming must not rewrite the file once per setting (a full disk would stop the chat from starting)."""
    writes: list[str] = []
    monkeypatch.setattr(session_module, "save_conversation", lambda conv, name=None, **_: writes.append(conv.name))
    session.autosave = True
    saved = Conversation(name="old", turns=[Turn("q", "a")], settings={"temperature": 0.3, "top_k": 5})
    session.replace_conversation(saved, {"top_k": "7"})
    assert writes == [] and session.conversation is saved
    assert session.sampling.temperature == 0.3 and session.sampling.top_k == 7
    session.set_value("seed", "4")
    assert writes == ["old"]


@pytest.mark.parametrize("drop", ["close", "forget"])
def test_a_question_whose_answer_never_started_changes_nothing(session: ChatSession, drop: str) -> None:
    """Ctrl-C between ask() and the first step of its stream (the REPL is still setting up) drops the stream."""
    first = _answer(session.ask("Name a color.")[1]).text
    session.attachments = ["The secret word is kiwi."]
    start, events = session.ask("What is the secret word?")
    if drop == "close":
        events.close()
    del events
    assert _exchanges(session) == [("Name a color.", first)] and session.attachments == ["The secret word is kiwi."]
    second = _answer(session.ask("What is the secret word?")[1]).text
    assert start.dropped == 0 and second and not session.unanswered and session.attachments == []
    assert [t.user.startswith("The secret word is kiwi.") for t in session.conversation.turns] == [False, True]
    assert [t.answer for t in session.conversation.turns] == [first, second]


def test_an_error_after_some_text_keeps_that_text_as_an_interrupted_answer(session: ChatSession,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    session.limits = GenerationLimits(max_tokens=40)
    decode = lc.llama_decode
    calls: list[int] = []

    def failing(ctx: object, batch: object) -> int:
        calls.append(1)
        return -1 if len(calls) == 4 else decode(ctx, batch)  # the prompt, two tokens, then a failure

    monkeypatch.setattr(lc, "llama_decode", failing)
    events = session.ask("Write a sentence about the sea.")[1]
    shown: list[str] = []
    with pytest.raises(LocalgenError, match="llama_decode returned -1"):
        shown.extend(e.text for e in events if isinstance(e, TextChunk))
    assert shown and session.conversation.turns == [Turn("Write a sentence about the sea.", "".join(shown), True)]
    assert not session.unanswered
    monkeypatch.setattr(lc, "llama_decode", decode)
    assert _answer(session.ask("Name a color.")[1]).text and len(session.conversation.turns) == 2


def test_a_local_model_is_recorded_by_its_absolute_path(bundled_model: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """--resume must find the model from any folder, whatever form of path chose it."""
    (tmp_path / "models").mkdir()
    tiny = gb.tiny_model(tmp_path / "models" / "tiny.gguf", n_ctx=256)
    monkeypatch.setenv("HOME", str(tmp_path / "models"))
    monkeypatch.chdir(tmp_path / "models")
    chat = _session(Path("../models/tiny.gguf"), None)
    try:
        assert chat.conversation.model == str(tiny)
        chat.switch_model(str(bundled_model))
        chat.switch_model("./tiny.gguf")
        assert chat.conversation.model == str(tiny)
        chat.switch_model("~/tiny.gguf")
        assert chat.conversation.model == str(tiny)
    finally:
        chat.loaded.close()


@pytest.mark.parametrize(("reference", "recorded"), [
    ("smollm2-135m", "smollm2-135m"), ("smollm2:latest", "smollm2-135m"), ("smollm2:q8_0", "smollm2-135m:Q8_0"),
    ("Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m", "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"),
    ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF", "bartowski/Llama-3.2-1B-Instruct-GGUF")])
def test_registry_and_hub_references_are_recorded_as_models_default_records_them(reference: str, recorded: str,
                                                                                 tmp_path: Path) -> None:
    """They were recorded as typed (smollm2, hf.co/...), which a second size of smollm2 left meaning none."""
    from localgen.registry import load_registry
    from localgen.resolve import ResolvedModel
    from localgen.session import model_reference

    registry = load_registry(tmp_path / "none.toml")
    ref = registry.reference(reference)
    resolved = ResolvedModel(ref=ref, path=Path("/cache/model.gguf"), spec=registry.spec_for(ref), source="cache")
    assert model_reference(resolved) == recorded


def test_a_loaded_conversation_goes_on_with_the_model_in_use(session: ChatSession, bundled_model: Path) -> None:
    """/load keeps the model; the conversation then names it, so its next save and --resume use that model."""
    saved = Conversation(name="old", turns=[Turn("q", "a")], model="qwen2.5-1.5b")
    session.replace_conversation(saved)
    assert session.conversation is saved and saved.model == str(bundled_model)


def test_regen_makes_room_when_the_conversation_no_longer_fits(chat: ChatSession) -> None:
    chat.conversation.turns.extend(Turn("word " * 100, "answer " * 20) for _ in range(4))  # ~560 tokens
    start, events = chat.regenerate()
    assert start.dropped > 0 and _answer(events).finish_reason in ("stop", "length")
    assert len(chat.conversation.turns) == 4 and chat.conversation.context_start == start.dropped


def test_undo_after_the_context_moved_leaves_a_conversation_that_loads_again(chat: ChatSession) -> None:
    chat.conversation.turns.extend(Turn(f"Fact {i} about the sea. " * 8, "The sea is deep. " * 8)
                                   for i in range(10))
    start, events = chat.ask("Name a fish.")
    _answer(events)
    assert start.dropped > 2
    for _ in range(4):
        chat.undo()
    conversation = chat.conversation
    assert conversation.context_start <= len(conversation.turns) - 1
    again = Conversation.from_json(conversation.to_json(), Path("saved.json"))
    assert again.context_start == conversation.context_start and again.messages() == conversation.messages()


def test_undo_keeps_every_exchange_the_context_held_and_the_kv_cache_with_them(chat: ChatSession) -> None:
    """Where no earlier exchange fits again, /undo leaves the prompt as it was (a plan from the first exchange keeps
    half the context's worth), so the next message reuses the KV cache."""
    chat.conversation.turns.extend(Turn("word " * 60, "answer " * 20) for _ in range(6))  # ~90 tokens each
    chat.conversation.context_start = 2  # the last four: more than half the 504 tokens free, all six: more than all
    _answer(chat.ask("Name a fish.")[1])
    assert chat.conversation.context_start == 2
    chat.undo()
    assert chat.conversation.context_start == 2
    again = _answer(chat.ask("Name a fish.")[1])
    assert again.usage.cached_tokens >= again.usage.prompt_tokens - 20, again.usage


def test_a_resumed_conversation_brings_back_the_exchanges_that_fit_the_new_context(session: ChatSession) -> None:
    turns = [Turn(f"Question {i}?", f"Answer {i}.") for i in range(6)]
    session.replace_conversation(Conversation(name="resumed", turns=turns, context_start=5))
    assert session.conversation.context_start == 0, "all six fit in 1,024 tokens"
    long = [Turn("word " * 150, "answer " * 30) for _ in range(6)]
    session.replace_conversation(Conversation(name="long", turns=long, context_start=5))
    assert 0 < session.conversation.context_start < 5, "as many as fit half the context come back"
    session.replace_conversation(Conversation(name="huge", turns=[Turn("word " * 2000)], context_start=0))
    assert session.conversation.context_start == 0


def test_a_new_system_prompt_moves_the_context_at_once(session: ChatSession) -> None:
    session.replace_conversation(Conversation(name="long", turns=[Turn("word " * 100, "answer " * 20)
                                                                  for _ in range(6)]))
    before = session.conversation.context_start
    session.set_system("You are a careful assistant who explains every step. " * 30)
    assert session.conversation.context_start > before, "the exchanges beside it are the ones /show counts"
    session.set_system("Be brief.")
    assert session.conversation.context_start == before


def test_a_system_prompt_that_leaves_no_room_for_a_message_is_refused(session: ChatSession) -> None:
    with pytest.raises(UsageError, match=r"the system prompt with the chat template's markup takes [\d,]+ tokens, "
                                         "and the context leaves"):
        session.set_system("You are a pirate who speaks only in rhymes. " * 120)
    assert session.conversation.system is None
    session.set_system("You are a pirate.")
    assert session.conversation.system == "You are a pirate."


def test_a_system_prompt_too_long_by_its_size_is_refused_untokenized(session: ChatSession,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    count = session._count

    def never_it(messages: list[Message]) -> int:  # the other system prompts the hint weighs are counted
        if any(len(message.content) > 1000 for message in messages):
            raise AssertionError("tokenized a system prompt that cannot fit")
        return count(messages)

    monkeypatch.setattr(session, "_count", never_it)
    with pytest.raises(UsageError, match=r"the system prompt takes at least 1,234 tokens, and the context leaves"):
        session.set_system("x " * 100_000)  # 200,000 bytes: at least 1,234 tokens, however they tokenize
    assert session.conversation.system is None


def test_a_context_too_small_for_the_template_s_own_system_prompt_says_so_with_the_ctx_size_that_holds_it(
        bundled_model: Path) -> None:
    """-c 16: SmolLM2's template adds a system prompt of its own that leaves no room for a message. The chat is told
    so (no_room_warning) and a message is not blamed for it; the --ctx-size hinted is the smallest that holds it."""
    tiny = _session(bundled_model, 16)
    try:
        with pytest.raises(ContextOverflowError) as refused:
            tiny.ask("hi")
        assert re.fullmatch(r"this message takes 1 token, but the chat template's own system prompt with its markup "
                            r"takes \d+ tokens, and the context leaves 12 for the whole conversation",
                            refused.value.message), refused.value.message
        hinted = re.fullmatch(r"--ctx-size (\d+) or more \(up to 8,192 for this model; it is 16 now\)",
                              refused.value.hint or "")
        assert hinted, refused.value.hint
        warning = tiny.no_room_warning() or ""
        assert re.fullmatch(r"the chat template's own system prompt with its markup takes \d+ tokens, and the "
                            r"context leaves 12 for the whole conversation, so no message fits: --ctx-size \d+ or "
                            r"more \(up to 8,192 for this model; it is 16 now\)", warning), warning
        for text, part in ((None, "the chat template's own system prompt with its markup"),
                           ("", "the chat template's markup"),
                           ("Be brief.", "the system prompt with the chat template's markup")):
            with pytest.raises(UsageError, match=re.escape(part) + r" takes \d+ tokens"):
                tiny.set_system(text)
        assert tiny.conversation.system is None and not tiny.own_system
    finally:
        tiny.loaded.close()
    for size in (int(hinted[1]) - 1, int(hinted[1])):
        sized = _session(bundled_model, size)
        try:
            if size < int(hinted[1]):
                assert sized.no_room_warning() is not None
                with pytest.raises(ContextOverflowError, match="this message takes 1 token"):
                    sized.ask("hi")
            else:
                assert sized.no_room_warning() is None
                assert _answer(sized.ask("hi")[1]).text
        finally:
            sized.loaded.close()


def test_save_as_writes_the_settings_in_use(session: ChatSession, home: Path) -> None:
    import json

    session.replace_conversation(Conversation(name="orig", settings={"temperature": 0.0}), {"temperature": "0.3"})
    path = session.save("copy")
    assert json.loads(path.read_text())["settings"]["temperature"] == 0.3


def test_stop_strings_the_chat_chose_are_saved_and_come_back_and_models_toml_s_are_not(session: ChatSession,
                                                                                        home: Path) -> None:
    session.model_stop = session._start_stop = ("<from models.toml>",)  # as a chat without --stop starts
    session.replace_conversation(Conversation(name="plain"))
    assert session.limits.stop == ("<from models.toml>",) and not session.own_stop
    assert "stop" not in json.loads(session.save().read_text())["settings"], "models.toml's apply afresh"
    session.set_stop(("###", "User:"))
    assert json.loads(session.save("chosen").read_text())["settings"]["stop"] == ["###", "User:"]
    session.set_stop(())
    assert json.loads(session.save("none").read_text())["settings"]["stop"] == [], "none chosen is saved too"
    session.replace_conversation(Conversation(name="other", settings={"stop": ["END"]}))
    assert (session.limits.stop, session.own_stop) == (("END",), True)
    session.replace_conversation(Conversation(name="plain"))
    assert (session.limits.stop, session.own_stop) == (("<from models.toml>",), False), "not the last one's"
    with pytest.raises(LocalgenError):  # an unusable saved conversation leaves the chat's as they were
        session.replace_conversation(Conversation(name="bad", settings={"stop": ["END"], "top_k": -5}))
    assert (session.limits.stop, session.own_stop) == (("<from models.toml>",), False)
    session._stop_flag, session._start_stop = True, ("--stop",)  # as a chat given --stop starts
    session.replace_conversation(Conversation(name="other", settings={"stop": ["END"]}), {})
    assert (session.limits.stop, session.own_stop) == (("--stop",), True), "--stop given with --resume wins"
    session.replace_conversation(Conversation(name="loaded", settings={"stop": ["END"]}))
    assert (session.limits.stop, session.own_stop) == (("END",), True), "/load takes the saved ones, as settings"
    session.replace_conversation(Conversation(name="plain"))
    assert (session.limits.stop, session.own_stop) == (("--stop",), True), "else --stop's"


def test_a_message_too_long_even_alone_is_refused_with_what_helps_here(chat: ChatSession, bundled_model: Path) -> None:
    long = "word " * 700
    with pytest.raises(ContextOverflowError, match="tokens but only") as refused:
        chat.ask(long)
    assert refused.value.hint == "shorten the message; --ctx-size 738 or more (up to 8,192 for this model; it is 512 " \
                                 "now)", "counted: the size that holds it"
    with pytest.raises(ContextOverflowError, match="needs at least 617 tokens") as refused:  # by its size: uncounted
        chat.ask("x " * 50_000)
    assert refused.value.hint == "shorten the message; a larger --ctx-size (up to 8,192 for this model; it is 512 now)"
    for too_long in ("1234567890" * 900, "x " * 700_000):  # 9,000 tokens (a digit each), or at least 8,642 by size
        with pytest.raises(ContextOverflowError, match="too long for the model's maximum of 8,192 tokens") as refused:
            chat.ask(too_long)
        assert refused.value.hint == "shorten the message", "not even the model's largest context (8,184 free) holds it"
    chat.attachments.append("a file")
    with pytest.raises(ContextOverflowError) as refused:
        chat.ask(long)
    assert "/file none drops the attached files" in (refused.value.hint or "")
    widest = _session(bundled_model, 8192)
    try:
        with pytest.raises(ContextOverflowError) as refused:
            widest.ask("word " * 9000)
        assert refused.value.hint == "shorten the message", "the context is already the model's largest"
    finally:
        widest.loaded.close()


def test_a_load_that_fails_after_the_weights_are_in_frees_them(bundled_model: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import runner

    opened: list[Engine] = []
    original_init = Engine.__init__

    def recording_init(self: Engine, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)
        opened.append(self)

    def broken(*_: object) -> None:
        raise TemplateError("the chat template failed", hint="fix it")

    monkeypatch.setattr(Engine, "__init__", recording_init)
    monkeypatch.setattr(runner, "_prompt_format", broken)
    with pytest.raises(TemplateError):
        load_model(ModelOptions(model=str(bundled_model), ctx_size=512, threads=1))
    assert len(opened) == 1 and not opened[0].is_open, "the engine opened for the failed load is closed"


def test_a_conversation_that_cannot_be_continued_leaves_the_chat_as_it_was(session: ChatSession) -> None:
    from localgen.conversation_lock import _held, lock_path, release
    from localgen.conversation_store import conversations_dir, load_conversation, save_conversation

    save_conversation(Conversation(name="other", turns=[Turn("q", "a")], settings={"top_k": 5}))
    release(conversations_dir(), "other")  # as if another chat had saved it and ended
    before, sampling = session.conversation, session.sampling
    other = load_conversation("other")
    assert lock_path(conversations_dir(), "other") in _held
    with pytest.raises(UsageError, match="not a valid value for top_k"):
        session.replace_conversation(other, {"top_k": "x"})
    assert session.conversation is before and session.sampling == sampling
    assert lock_path(conversations_dir(), "other") not in _held, "the conversation that was not taken is let go"


def test_a_first_question_without_an_answer_saves_no_conversation(session: ChatSession,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation_store import conversations_dir

    def broken(*_: object) -> tuple[str, list[int]]:
        raise TemplateError("the chat template failed", hint="fix it")

    session.conversation = Conversation(name="never-answered")
    session.autosave = True
    monkeypatch.setattr(session, "_prompt", broken)
    with pytest.raises(TemplateError):
        _answer(session.ask("Name an animal.")[1])
    assert not (conversations_dir() / "never-answered.json").exists()


def test_a_chat_that_only_changed_settings_is_saved_with_its_first_exchange(session: ChatSession) -> None:
    from localgen.conversation_store import conversations_dir

    session.conversation = Conversation(name="settings-first")
    session.autosave = True
    session.set_value("temperature", "0")
    session.set_system("Be brief.")
    assert not (conversations_dir() / "settings-first.json").exists(), "nothing to resume or continue yet"
    _answer(session.ask("Name an animal.")[1])
    saved = json.loads((conversations_dir() / "settings-first.json").read_text())
    assert saved["settings"]["temperature"] == 0.0 and saved["system"] == "Be brief."
    session.undo()
    assert not (conversations_dir() / "settings-first.json").exists(), "its only exchange undone: unsaved again"
    assert not (conversations_dir() / ".locks" / "settings-first.lock").exists()
    _answer(session.ask("Name a bird.")[1])
    saved = json.loads((conversations_dir() / "settings-first.json").read_text())
    assert [turn["user"] for turn in saved["turns"]] == ["Name a bird."] and saved["system"] == "Be brief."


def test_a_conversation_saved_by_command_or_loaded_stays_saved_when_its_only_exchange_is_undone(
        session: ChatSession, home: Path) -> None:
    from localgen.conversation_store import conversations_dir, load_conversation, save_conversation

    session.autosave = True
    _answer(session.ask("Name an animal.")[1])
    path = session.save()  # /save: the user's to keep
    session.undo()
    assert json.loads(path.read_text())["turns"] == []
    save_conversation(Conversation(name="from-run", turns=[Turn("q", "a")]))
    session.replace_conversation(load_conversation("from-run"))
    session.undo()
    assert json.loads((conversations_dir() / "from-run.json").read_text())["turns"] == []


def _never() -> bool:
    return False


def test_a_message_prefilled_ahead_is_answered_without_prefill(session: ChatSession) -> None:
    _answer(session.ask("Name a color.")[1])
    session.attachments = ["A note: the sky is green here."]
    session.prefill_ahead("What color is the sky?", _never)
    before = session.loaded.engine.kv_tokens
    start, events = session.ask("What color is the sky?")
    done = _answer(events)
    assert done.usage.cached_tokens == done.usage.prompt_tokens == before, "attachments and all were computed"
    assert done.ahead_tokens > 10 and start.dropped == 0
    assert session.conversation.turns[-1].user.startswith("A note: the sky is green here.")


def test_prefill_ahead_leaves_a_message_too_long_to_ask_and_changes_nothing(chat: ChatSession) -> None:
    chat.conversation.turns.extend(Turn(f"Tell me fact number {i} about the sea. " * 4, "The sea is deep. " * 8)
                                   for i in range(12))
    turns, start = list(chat.conversation.turns), chat.conversation.context_start
    chat.prefill_ahead("word " * 2000, _never)
    assert chat.loaded.engine.kv_tokens == 0
    chat.prefill_ahead("Name a fish.", _never)  # earlier exchanges must leave the context: planned, not done
    assert chat.conversation.turns == turns and chat.conversation.context_start == start
    start_turn, events = chat.ask("Name a fish.")
    done = _answer(events)
    assert start_turn.dropped > 0 and done.usage.cached_tokens == done.usage.prompt_tokens


def test_a_message_typed_long_enough_to_drop_exchanges_leaves_the_conversation_computed(bundled_model: Path) -> None:
    """Typed past the room left, a message would move earlier exchanges out of the context: computed ahead, the KV
    cache dropped the conversation, and the message shortened again prefilled it all once more."""
    chat = _session(bundled_model, 256)  # a conversation of 180 tokens; a message of 125 fits alone, not beside it
    try:
        chat.conversation.turns.extend([Turn("word " * 75, "answer " * 10), Turn("more " * 50, "reply " * 10)])
        _answer(chat.ask("Name a fish.")[1])
        engine = chat.loaded.engine
        held = engine.kv_token_list
        chat.prefill_ahead("thing " * 125, _never)
        assert engine.kv_token_list == held, "a message not sent yet costs the conversation nothing"
        chat.prefill_ahead("Name a bird.", _never)
        start, events = chat.ask("Name a bird.")
        done = _answer(events)
        assert start.dropped == 0 and done.usage.cached_tokens == done.usage.prompt_tokens
    finally:
        chat.loaded.close()


def test_a_message_too_long_by_its_size_is_refused_unrendered_ahead_and_on_enter(
        chat: ChatSession, monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*_: object) -> typing.NoReturn:
        raise AssertionError("rendered and tokenized a message that cannot fit")

    chat.attachments = ["x " * 100_000]  # 200,000 bytes: at least 1,234 tokens, however they tokenize
    monkeypatch.setattr(chat, "_prompt", never)
    chat.prefill_ahead("Sum it.", _never)
    with pytest.raises(ContextOverflowError, match="this message needs at least 1,234 tokens but only 504 are free"):
        chat.ask("Sum it.")
    assert chat.attachments and not chat.conversation.turns


def test_file_refuses_a_file_too_long_for_the_context_by_its_size_and_the_chat_goes_on(
        chat: ChatSession, tmp_path: Path) -> None:
    from localgen.chat_commands_conversation import file_command
    from localgen.repl_state import ChatState
    from localgen.repl_unsaved import LeaveGuard

    state = ChatState(chat, LeaveGuard(chat), show_answer=lambda *_: None, escapes=False, markdown=False,
                      show_thinking=False)
    chat.attachments = ["A note."]
    (tmp_path / "big.txt").write_text("x " * 100_000)
    with pytest.raises(ContextOverflowError) as refused:
        file_command(state, str(tmp_path / "big.txt"))
    assert refused.value.message == (f"{tmp_path / 'big.txt'} is too long to attach: with it the next message needs "
                                     "at least 1,234 tokens but only 504 are free in the context")
    assert refused.value.hint is not None and "/file none drops the files attached already" in refused.value.hint
    assert refused.value.hint.endswith("; a larger --ctx-size (up to 8,192 for this model; it is 512 now)")
    (tmp_path / "huge.txt").write_text("x " * 700_000)  # at least 8,642 tokens: more than 8,192 leave free
    with pytest.raises(ContextOverflowError) as refused:
        file_command(state, str(tmp_path / "huge.txt"))
    assert refused.value.hint == "split it and attach a part at a time; /file none drops the files attached already"
    assert chat.attachments == ["A note."]


def _file_state(chat: ChatSession) -> typing.Any:
    """The chat's state, as /file gets it."""
    from localgen.repl_state import ChatState
    from localgen.repl_unsaved import LeaveGuard

    return ChatState(chat, LeaveGuard(chat), show_answer=lambda *_: None, escapes=False, markdown=False,
                     show_thinking=False)


NUMBERS = "Numbers: " + " ".join(str(i) for i in range(600)) + "\n"  # 2,290 bytes: some 2,300 tokens


def test_file_refuses_a_file_its_size_allows_once_its_tokens_are_counted(chat: ChatSession, tmp_path: Path) -> None:
    from localgen.chat_commands_conversation import file_command

    (tmp_path / "numbers.txt").write_text(NUMBERS)  # at least 15 tokens by its size: only counting shows it
    with pytest.raises(ContextOverflowError) as refused:
        file_command(_file_state(chat), str(tmp_path / "numbers.txt"))
    needed = chat._count([Message("user", NUMBERS.strip())])
    assert needed > 504
    assert refused.value.message == (f"{tmp_path / 'numbers.txt'} is too long to attach: with it the next message "
                                     f"needs {needed:,} tokens but only 504 are free in the context")
    assert refused.value.hint is not None and refused.value.hint.startswith("split it and attach a part at a time; "
                                                                            "--ctx-size ")
    assert not chat.attachments
    (tmp_path / "short.txt").write_text(NUMBERS[:200])
    file_command(_file_state(chat), str(tmp_path / "short.txt"))
    assert chat.attachments == [NUMBERS[:200]], "a file that fits is attached"


def test_file_refuses_a_long_file_by_its_first_lines_without_counting_it_all(
        chat: ChatSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64
    import random

    from localgen.chat_commands_conversation import file_command

    noise = base64.encodebytes(random.Random(7).randbytes(60_000)).decode()  # 81,000 bytes: at least 500 tokens
    (tmp_path / "noise.txt").write_text(noise)

    def never(*_: object) -> typing.NoReturn:
        raise AssertionError("rendered and tokenized a file whose first lines cannot fit")

    monkeypatch.setattr(chat, "_prompt", never)
    with pytest.raises(ContextOverflowError, match=r"the prompt is too long for the model's maximum of 8,192 tokens: "
                                                   r"it takes at least [\d,]+ tokens with \S+noise.txt$"):
        file_command(_file_state(chat), str(tmp_path / "noise.txt"))
    assert not chat.attachments


def test_regen_leaves_files_attached_for_the_next_message(session: ChatSession) -> None:
    first = _answer(session.ask("Name a color.")[1]).text
    session.attachments = ["A note about the sea."]
    assert _answer(session.regenerate()[1]).text == first
    assert session.attachments == ["A note about the sea."]
    _answer(session.ask("What is the note about?")[1])
    assert session.conversation.turns[-1].user.startswith("A note about the sea.") and session.attachments == []


def test_a_resumed_chat_s_settings_are_its_own_where_they_differ_from_the_model_s_defaults(
        session: ChatSession, bundled_model: Path) -> None:
    """A saved value that no default gives was chosen, and stays when /model switches; the rest follow the model."""
    session.model_settings = {"temperature": 0.3, "top_k": 5, "seed": 7}  # as models.toml gave the loaded model
    session.sampling = SamplingParams(temperature=0.3, top_k=5, seed=7)  # and the chat started with them
    saved = Conversation.new(system=None, model=str(bundled_model))
    saved.settings = {**session.default_settings(), "top_k": 7, "seed": None}  # /set seed none: random
    session.replace_conversation(saved, {"min_p": "0.1", "max_tokens": "8"})  # flags given now
    assert session.settings()["seed"] is None, "a saved 'none' is a value, not a gap for the entry to fill"
    assert session.own_settings == {"top_k", "seed", "min_p", "max_tokens"}
    session.switch_model(str(bundled_model))  # a path: no models.toml entry, no settings from it
    values = session.settings()
    assert (values["temperature"], values["top_k"], values["min_p"], values["seed"]) == (0.8, 7, 0.1, None)
    assert session.model_settings == {}


@pytest.mark.parametrize("chosen_by", ["/system", "-s", "resumed"])
def test_a_system_prompt_the_chat_chose_stays_through_model_even_when_it_equals_the_entry_s(
        session: ChatSession, bundled_model: Path, chosen_by: str) -> None:
    session.model_system = session.conversation.system = "Be brief."  # as models.toml gave the loaded model
    if chosen_by == "/system":
        session.set_system("Be brief.")
    else:
        saved = Conversation.new(system="Be brief.", model=str(bundled_model))
        session.model_system = None if chosen_by == "resumed" else "Be brief."  # saved under another model
        session.replace_conversation(saved, system_given=chosen_by == "-s")
    session.switch_model(str(bundled_model))  # a path: no models.toml entry, so no system prompt from it
    assert session.conversation.system == "Be brief."


def test_a_system_prompt_that_came_with_the_model_goes_with_it(session: ChatSession, bundled_model: Path) -> None:
    session.model_system = session.conversation.system = "Be brief."
    session.switch_model(str(bundled_model))
    assert session.conversation.system is None and session.model_system is None


def test_an_answer_cut_at_the_end_of_the_context_never_counts_more_than_the_context(bundled_model: Path) -> None:
    small = _session(bundled_model, 64)  # the template and the question take about 45 tokens
    try:
        small.limits = GenerationLimits(max_tokens=None)
        done = _answer(small.ask("Write a very long story about a dragon and a knight.")[1])
        assert done.finish_reason == "context"
        assert small.context_used() == small.loaded.engine.n_ctx  # the closing tokens would make it more
    finally:
        small.loaded.close()


def test_a_loaded_conversation_does_not_take_the_settings_set_for_the_one_before(session: ChatSession) -> None:
    session.set_value("temperature", "1.7")
    session.set_value("n", "7")
    session.replace_conversation(Conversation(name="from-run", turns=[Turn("q", "a")], settings={}))
    assert session.sampling.temperature == 0.0 and session.limits.max_tokens == 8, "as the chat started"
    session.replace_conversation(Conversation(name="tuned", turns=[Turn("q", "a")], settings={"top_k": 3}))
    assert session.sampling.top_k == 3 and session.sampling.temperature == 0.0


def test_a_chat_s_save_keeps_settings_it_does_not_know(session: ChatSession, home: Path) -> None:
    import json

    session.replace_conversation(Conversation(name="later", turns=[Turn("q", "a")],
                                              settings={"temperature": 0.5, "mirostat": 2}))
    saved = json.loads(session.save().read_text())["settings"]
    assert saved["mirostat"] == 2 and saved["temperature"] == 0.5


def test_a_change_a_save_missed_is_kept_said_and_saved_with_the_next(session: ChatSession, home: Path) -> None:
    from localgen.conversation_store import conversations_dir

    session.autosave = True
    session.conversation.turns.append(Turn("Say no.", "No."))
    _answer(session.ask("Say yes.")[1])
    path = conversations_dir() / f"{session.conversation.name}.json"
    path.unlink()
    path.mkdir()  # in the way of the next save
    assert session.set_value("top_k", "5") == ("top_k", "5"), "the change is made, and said"
    assert session.unsaved and isinstance(session.save_error, UnsavedChangeError)
    assert "a folder is in its place" in session.save_error.message
    path.rmdir()
    session.undo()
    assert not session.unsaved and path.is_file() and [t.user for t in session.conversation.turns] == ["Say no."]


def test_a_change_a_save_missed_then_undone_leaves_nothing_unsaved_and_ctrl_d_leaves_at_once(
        session: ChatSession, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import conversation_store
    from localgen.repl_unsaved import LeaveGuard

    session.autosave = True
    _answer(session.ask("Say yes.")[1])
    saved = (conversation_store.conversations_dir() / f"{session.conversation.name}.json").read_text()

    def read_only(path: Path, text: str, **_: object) -> None:
        raise LocalgenError(f"could not write {path}: Permission denied")

    monkeypatch.setattr(conversation_store, "atomic_write_text", read_only)  # the folder made read-only
    with pytest.raises(UnsavedChangeError):
        _answer(session.ask("Say no.")[1])
    assert session.unsaved and not LeaveGuard(session).may_leave("Ctrl-D"), "warned first"
    session.undo()  # back to what the file holds
    assert not session.unsaved and session.save_error is None
    assert LeaveGuard(session).may_leave("Ctrl-D"), "nothing unsaved: it leaves at once"
    session.set_value("top_k", "5")  # a change the file does not hold
    assert session.unsaved and isinstance(session.save_error, UnsavedChangeError)
    assert (conversation_store.conversations_dir() / f"{session.conversation.name}.json").read_text() == saved


def test_a_first_exchange_never_written_then_undone_leaves_nothing_unsaved(session: ChatSession,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(conversation: Conversation, name: str | None = None, **_: object) -> Path:
        raise LocalgenError("could not write it: No space left on device")

    monkeypatch.setattr(session_module, "save_conversation", full_disk)
    session.autosave = True
    with pytest.raises(UnsavedChangeError):
        _answer(session.ask("Say yes.")[1])
    assert session.unsaved
    session.undo()  # nothing is left to save
    assert not session.unsaved


def _hold(engine: Engine, tokens: list[int]) -> None:
    """Make the KV cache hold exactly tokens, as after a turn whose answer the model gave as those tokens (a
    generation of one token computes the prompt and never feeds its token back)."""
    _answer(engine.generate(tokens, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=1)))
    assert engine.kv_token_list == tokens


def _spelled(engine: Engine, text: str) -> list[int]:
    """Text as tokens of one character each: tokens a model may give, but no tokenizer gives back for the text."""
    spelled = [token for char in text for token in engine.tokenize(char, add_special=False, parse_special=False)]
    assert spelled != engine.tokenize(text, add_special=False, parse_special=False)
    return spelled


def _text(engine: Engine, tokens: list[int]) -> str:
    return "".join(engine.token_text(token) for token in tokens)


@pytest.mark.parametrize("typed_ahead", [False, True])
def test_the_next_turn_reuses_an_answer_as_the_model_gave_its_tokens(session: ChatSession, typed_ahead: bool) -> None:
    engine = session.loaded.engine
    first = _answer(session.ask("Who travels in time?")[1])
    answer = "The time traveler does, twice."
    held = engine.kv_token_list[:first.usage.prompt_tokens] + _spelled(engine, answer)
    _hold(engine, held)
    session.conversation.turns[-1].answer = answer
    if typed_ahead:
        session.prefill_ahead("Why?", _never)
    done = _answer(session.ask("Why?")[1])
    # the cache held all but the answer's end, '<|im_end|>', which the template writes after it, and what follows
    assert done.usage.cached_tokens - done.ahead_tokens == len(held)
    prompt = engine.kv_token_list[:done.usage.prompt_tokens]
    assert prompt[:len(held)] == held
    assert _text(engine, prompt) == session.prompt_text(session.conversation.messages()[:-1]), "the rendered text"
    again = _answer(session.regenerate()[1])
    assert again.usage.cached_tokens == again.usage.prompt_tokens - 2 and again.text == done.text
    session.undo()
    assert _answer(session.ask("When?")[1]).usage.cached_tokens > len(held), "the first answer stays in the cache"


def test_an_answer_kept_as_the_model_s_tokens_never_takes_the_room_the_budget_left_for_the_next_answer(
        bundled_model: Path) -> None:
    chat = _session(bundled_model, 256)  # 8 tokens kept for the answer: the budget is 248
    try:
        engine = chat.loaded.engine
        first = _answer(chat.ask("Who travels in time?")[1])
        answer = "The time traveler does. " * 9
        held = engine.kv_token_list[:first.usage.prompt_tokens] + _spelled(engine, answer)
        assert 248 < len(held) < 256
        assert first.usage.prompt_tokens + len(engine.tokenize(answer, add_special=False)) + 16 < 248
        _hold(engine, held)
        chat.conversation.turns[-1].answer = answer
        done = _answer(chat.ask("Why?")[1])  # the model's tokens would leave no room: the rendered ones are sent
        assert done.usage.prompt_tokens <= 248 and done.text
    finally:
        chat.loaded.close()


def test_an_answer_that_tokenizes_back_leaves_the_next_prompt_as_a_cold_render_gives_it(session: ChatSession) -> None:
    """The KV cache holds the prompt a chat resumed from its file would compute (its numerics may differ: the answer's
    tokens were computed one at a time, a cold prefill computes them together, and greedy answers can part there)."""
    engine, fmt = session.loaded.engine, session.loaded.prompt_format
    _answer(session.ask("Name a color.")[1])
    held = engine.kv_token_list
    second = _answer(session.ask("Name another one.")[1])
    rendered = fmt.prompt(engine, session.conversation.messages()[:-1])[1]
    assert rendered[:len(held)] == held, "the first answer's tokens are the ones its text gives"
    assert engine.kv_token_list[:second.usage.prompt_tokens] == rendered


def test_an_answer_s_reasoning_that_the_template_drops_is_computed_again_not_reused(session: ChatSession) -> None:
    engine = session.loaded.engine
    fmt = session.loaded.prompt_format
    dropping = fmt.template.replace("message['content']", "message['content'].split('</think>')[-1]")
    assert dropping != fmt.template
    session.loaded = dataclasses.replace(session.loaded, prompt_format=dataclasses.replace(fmt, template=dropping))
    first = _answer(session.ask("Capital of France?")[1])
    answer = "<think>It is Paris.</think>Paris."
    held = engine.kv_token_list[:first.usage.prompt_tokens] + _spelled(engine, answer)
    _hold(engine, held)
    session.conversation.turns[-1].answer = answer
    done = _answer(session.ask("And of Spain?")[1])
    assert done.usage.cached_tokens == first.usage.prompt_tokens, "the cache is cut where the reasoning began"
    prompt = engine.kv_token_list[:done.usage.prompt_tokens]
    assert _text(engine, prompt) == session.prompt_text(session.conversation.messages()[:-1])
    assert "It is Paris" not in session.prompt_text()


def test_characters_an_answer_spells_over_several_tokens_are_kept_as_the_model_gave_them(
        session: ChatSession) -> None:
    engine = session.loaded.engine
    opening = engine.tokenize("<|im_start|>assistant\n", add_special=False)
    answer = "Un café ☕ et 日本."
    spelled = _spelled(engine, answer)
    assert len(spelled) > len(answer), "some characters take more than one token"
    _hold(engine, opening + spelled)
    prompt = opening + engine.tokenize(answer + "<|im_end|>\n<|im_start|>user\n", add_special=False)
    ending = engine.tokenize("<|im_end|>\n<|im_start|>user\n", add_special=False)
    assert with_held_tokens(engine, prompt) == opening + spelled + ending
