"""A saved conversation's text: byte for byte what json.dumps(indent=2) of its record wrote, built member by member,
each exchange's text written once and kept while the exchange stays as it was."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import localgen.conversation_json as conversation_json
from localgen.conversation import FORMAT_VERSION, Conversation
from localgen.conversation_store import let_go, load_conversation, save_conversation
from localgen.conversation_turn import AnswerDetails, Attachment, Turn, turn_record, with_extra

_SURROGATE = re.compile("[\ud800-\udfff]")


def _old_text(conversation: Conversation, updated: str) -> str:
    """The text the writer before this one saved (json.dumps of asdict, indent=2), kept to compare with."""
    record = {"format": FORMAT_VERSION, **asdict(conversation)} | {"updated": updated}
    del record["on_disk"], record["as_left"], record["link_target"]
    record["turns"] = [turn_record(turn) for turn in record["turns"]]
    text = json.dumps(with_extra(record), indent=2, ensure_ascii=False)
    return _SURROGATE.sub(lambda found: f"\\u{ord(found[0]):04x}", text) + "\n"


def _every_field() -> Conversation:
    details = AnswerDetails("stop", "smollm2-135m", 32, 10, 1.224, 21.2)
    turns = [
        Turn("hello", "Hello! How can I help?", details=details),
        Turn("doc\n\nSummarize \u00e9\u0301 \U0001f389", "Short.\t\"quoted\" \\ back\x07",
             details=AnswerDetails(finish_reason="length", duration_s=0.0, decode_tokens_per_s=1e-07),
             attached=(Attachment("docs/report.txt", 3), Attachment("b\udcffd.txt", 0)), typed="Summarize"),
        Turn("a cut emoji \ud83c and a lone \udcff", "no details", interrupted=True),
        Turn("later fields", "kept", extra={"tool": {"calls": [1, 2.5, None, True, {}], "note": "x\ud800"},
                                            "empty": [], "flag": False}),
        Turn("attached, nothing typed", "ok", attached=(Attachment("x", 1),), typed=None),
    ]
    return Conversation(name="every-field", system="Be brief.\n\u2028", turns=turns, model="/models/m\udcff.gguf",
                        settings={"temperature": 0.7, "seed": None, "stop": ["\n\n", "User:"], "max_tokens": 64},
                        created="2026-12-06T05:34:09+00:00", context_start=2, ctx_size=4096,
                        extra={"later": {"nested": [[], {"a": 1}]}, "n": 3})


@pytest.mark.parametrize("conversation", [_every_field(), Conversation(name="empty", system=""),
                                          Conversation(name="one", turns=[Turn("q", "a")], settings={})],
                         ids=["every-field", "empty", "one"])
def test_the_text_is_byte_for_byte_the_one_json_dumps_wrote(conversation: Conversation) -> None:
    assert conversation.to_json(touch=False) == _old_text(conversation, conversation.updated)


def test_an_exchange_changed_after_a_save_is_written_as_it_is_now() -> None:
    conversation = _every_field()
    conversation.to_json(touch=False)
    first, second, third, fourth = conversation.turns[:4]
    first.answer = "Regenerated."  # as /regen does, in place
    second.details = AnswerDetails(finish_reason="interrupted")
    third.interrupted = False
    fourth.extra["tool"]["note"] = "changed inside"  # type: ignore[index]  (a value inside a field not known)
    conversation.turns[4].extra["added"] = 1  # an exchange kept had none
    assert conversation.to_json(touch=False) == _old_text(conversation, conversation.updated)
    conversation.turns[1] = Turn(first.user, first.answer)  # another exchange in the same place
    assert conversation.to_json(touch=False) == _old_text(conversation, conversation.updated)


@settings(max_examples=60, deadline=None)
@given(user=st.text(), answer=st.text(), typed=st.none() | st.text(), name=st.text(min_size=1),
       duration=st.floats(min_value=0, allow_infinity=False), tokens=st.integers(min_value=0))
def test_any_text_is_written_as_json_dumps_wrote_it(user: str, answer: str, typed: str | None, name: str,
                                                    duration: float, tokens: int) -> None:
    turn = Turn(user, answer, details=AnswerDetails(prompt_tokens=tokens, duration_s=duration),
                attached=(Attachment(name, tokens),), typed=typed)
    conversation = Conversation(name="any", system=answer or None, turns=[Turn("q", "a"), turn])
    assert conversation.to_json(touch=False) == _old_text(conversation, conversation.updated)


def test_a_save_writes_out_only_the_exchanges_new_since_the_last(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    conversation = Conversation(name="long", turns=[Turn(f"question {i}", f"answer {i}") for i in range(50)])
    save_conversation(conversation)
    written: list[str] = []
    monkeypatch.setattr(conversation_json, "turn_record",
                        lambda record: written.append(record["user"]) or turn_record(record))
    conversation.turns.append(Turn("one more", "and its answer"))
    path = save_conversation(conversation)
    assert written == ["one more"]
    let_go(conversation)
    loaded = load_conversation("long")
    assert loaded.turns == conversation.turns
    written.clear()
    loaded.turns[-1].answer = "a new answer"
    save_conversation(loaded)
    assert written == [f"question {i}" for i in range(50)] + ["one more"], "a conversation read is written whole once"
    written.clear()
    save_conversation(loaded)
    assert written == [] and json.loads(path.read_text())["turns"][-1]["answer"] == "a new answer"


@pytest.mark.parametrize("written", ["\\ud83c", "\\uD83C", "\\uDCFF", "\ud83c"])
def test_a_lone_surrogate_escaped_in_any_case_or_raw_in_the_text_reads_as_a_replacement_character(
        written: str, tmp_path: Path) -> None:
    text = '{"format": 1, "name": "n", "model": "m-\\udcff.gguf", "turns": [{"user": "cut %s here", "answer": "a"}]}'
    conversation = Conversation.from_json(text % written, tmp_path / "n.json")
    assert conversation.turns[0].user == "cut \ufffd here" and conversation.model == "m-\udcff.gguf"


def test_text_with_no_lone_surrogate_is_not_walked_for_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import localgen.conversation as conversation_module

    walked: list[object] = []
    monkeypatch.setattr(conversation_module, "_without_lone_surrogates", lambda data: walked.append(data) or data)
    plain = Conversation(name="plain", turns=[Turn("caf\u00e9 \U0001f389 as typed", "a\n")])
    assert Conversation.from_json(plain.to_json(), tmp_path / "plain.json").turns == plain.turns
    assert walked == []
    Conversation.from_json(_every_field().to_json(touch=False), tmp_path / "every-field.json")
    assert len(walked) == 1
