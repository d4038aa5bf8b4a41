"""What a chat records of each answer, on the real bundled model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localgen import config
from localgen.conversation import Conversation, conversations_dir, let_go
from localgen.events import Finished


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path))
    monkeypatch.setattr(config, "_settings", None)
    return tmp_path


def _saved() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in conversations_dir().glob("*.json")}


def test_a_chat_records_each_answer_s_details(bundled_model: Path) -> None:
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=str(bundled_model), ctx_size=1024, threads=2)
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=None),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=5))
    try:
        done = [e for e in session.ask("Name a color.")[1] if isinstance(e, Finished)][-1]
        session.limits = GenerationLimits(max_tokens=64, stop=(" ",))  # stopped by a stop string: "stop"
        stopped = [e for e in session.ask("Thanks. Say OK.")[1] if isinstance(e, Finished)][-1]
    finally:
        session.loaded.close()
        let_go(session.conversation)
    first, second = session.conversation.turns
    assert first.details is not None and second.details is not None
    assert (first.details.finish_reason, first.details.model, first.details.completion_tokens) == (
        "length", str(bundled_model), 5)
    assert first.details.prompt_tokens == done.usage.prompt_tokens
    assert 0 < first.details.duration_s < 60 and first.details.decode_tokens_per_s > 0
    assert second.details.finish_reason == stopped.finish_reason == "stop" and not second.interrupted
    assert second.details.prompt_tokens > done.usage.prompt_tokens + 5, "the second prompt holds the first exchange"
    saved = _saved()[session.conversation.name]["turns"]
    assert [turn["finish_reason"] for turn in saved] == ["length", "stop"]
    assert saved[0]["completion_tokens"] == 5 and saved[0]["model"] == str(bundled_model)
