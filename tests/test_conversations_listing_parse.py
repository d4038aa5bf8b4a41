"""`localgen conversations` parses each saved conversation's file once."""

from __future__ import annotations

import json

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_store import let_go, save_conversation
from localgen.conversation_summary import summaries

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def test_the_listing_parses_each_file_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file's first exchange was written back to JSON and parsed again to be checked: 10,002 parses for 5,000
    conversations."""
    for n in range(3):
        kept = Conversation(name=f"notes-{n}", model="smollm2-135m",
                            turns=[Turn(f"Question {n}.{k}?", f"Answer {k}.") for k in range(4)])
        save_conversation(kept)
        let_go(kept)
    parsed: list[str] = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda text, **options: parsed.append(text) or real(text, **options))
    listed = summaries()
    assert [(s.name, s.exchanges, s.model, s.first_message, s.problem) for s in listed] == [
        (f"notes-{n}", 4, "smollm2-135m", f"Question {n}.0?", None) for n in (2, 1, 0)]
    assert len(parsed) == 3, "one parse a file"
