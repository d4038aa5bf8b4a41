"""`localgen conversations` reads what it lists of each saved conversation without building every exchange."""

from __future__ import annotations

import json

import pytest

from localgen import conversation
from localgen.conversation import Conversation, Turn
from localgen.conversation_store import conversations_dir, holds_as_is, let_go, save_conversation
from localgen.conversation_summary import summaries
from tests.conftest import run_localgen

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _save(name: str, exchanges: int) -> dict:
    """Save a conversation of that many exchanges; its file's JSON."""
    kept = Conversation(name=name, model="smollm2-135m",
                        turns=[Turn(f"Question {n}?", f"Answer {n}.") for n in range(exchanges)])
    path = save_conversation(kept)
    let_go(kept)
    return json.loads(path.read_text())


def test_the_listing_builds_only_the_first_exchange_of_each_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 3,000 conversations of 50 exchanges, the listing took 5-6 s where json.load of every file took 0.8 s:
    each exchange was built and checked for a count and a first message."""
    _save("long", 50)
    built: list[object] = []
    real = conversation.turn_from_json
    monkeypatch.setattr(conversation, "turn_from_json", lambda item: built.append(item) or real(item))
    [listed] = summaries()
    assert (listed.exchanges, listed.model, listed.first_message, listed.problem) == (50, "smollm2-135m",
                                                                                      "Question 0?", None)
    assert len(built) == 1


@pytest.mark.parametrize(("turn", "problem"), [
    ("not an exchange", "a turn is not an object"),
    ({"user": "Question?"}, "a turn has no answer"),
    ({"user": "Question?", "answer": "Yes.", "interrupted": "no"}, "a turn has fields of the wrong type"),
    ({"user": "Question?", "answer": "Yes.", "completion_tokens": -5}, "a turn's 'completion_tokens' is not a count "
                                                                        "of at least 0"),
    ({"user": "Question?", "answer": "Yes.", "duration_s": "slow"}, "a turn's 'duration_s' is not a number of at "
                                                                    "least 0"),
    ({"user": "Question?", "answer": "Yes.", "finish_reason": 1}, "a turn's 'finish_reason' is not text"),
    ({"user": "Question?", "answer": "Yes.", "attached": [{"name": "doc.txt"}]}, "a turn's 'attached' is not a list "
                                                                                 "of files, each with a 'name' and "
                                                                                 "'characters'"),
])
def test_a_later_exchange_that_is_damaged_is_listed_as_damaged_as_before(turn: object, problem: str) -> None:
    data = _save("damaged", 3)
    data["turns"][2] = turn
    (conversations_dir() / "damaged.json").write_text(json.dumps(data))
    listed = run_localgen("conversations", "--json")
    assert listed.returncode == 0, listed.err
    [record] = json.loads(listed.out)
    assert (record["exchanges"], record["problem"]) == (None, problem), record


def test_what_the_listing_shows_is_what_the_whole_file_holds() -> None:
    """The first message as a whole read gives it (a lone half of a UTF-16 pair as U+FFFD); a foreign format kept."""
    data = _save("odd", 2)
    data["turns"][0]["user"] = "Castles \ud83c and towers"
    (conversations_dir() / "odd.json").write_text(json.dumps(data))
    (conversations_dir() / "future.json").write_text(json.dumps({**data, "format": 99}))
    by_name = {summary.name: summary for summary in summaries()}
    assert (by_name["odd"].exchanges, by_name["odd"].first_message) == (2, "Castles \ufffd and towers")
    assert by_name["future"].problem == "format 99, from another localgen version" and by_name["future"].kept


def test_a_conversation_nested_deeper_than_the_parser_goes_is_listed_as_damaged_beside_the_others() -> None:
    """Every listing failed with an internal RecursionError, where `conversations show` said it was nested too
    deeply."""
    _save("fine", 1)
    data = json.dumps({**_save("deep", 1), "note": None})
    (conversations_dir() / "deep.json").write_text(data.replace("null", "[" * 3000 + "]" * 3000))
    listed = run_localgen("conversations", "--json")
    assert listed.returncode == 0, listed.err
    assert {(r["name"], r["exchanges"], r["problem"]) for r in json.loads(listed.out)} == {
        ("fine", 1, None), ("deep", None, "nested too deeply")}
    table = run_localgen("conversations")
    assert table.returncode == 0 and "(damaged: nested too deeply)" in table.out, table.err
    assert sorted((s.name, s.problem) for s in summaries()) == [("deep", "nested too deeply"), ("fine", None)]  # /list


def test_a_file_nested_too_deeply_is_not_the_conversation_as_it_is() -> None:
    """What a failed save checks (the change undone: the file holds it) read such a file with a RecursionError."""
    kept = Conversation(name="deep", turns=[Turn("Question?", "Answer.")])
    path = save_conversation(kept)
    assert holds_as_is(kept)
    path.write_text(path.read_text().replace('"Answer."', "[" * 3000 + "]" * 3000))
    assert not holds_as_is(kept)
