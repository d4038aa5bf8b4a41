"""What ends run's answer: a context too small for the -n given is said before the answer (in a conversation too),
the refusal of a prompt that leaves no room counts the -n in the --ctx-size it hints, and --json names the stop
string that ended it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_localgen, user_registry

# The greedy model never ends it by itself (a limit or the context does); complete after each ab: a cut is no error.
ENDLESS = ("--grammar", 'root ::= "ab" (" ab")*', "--temperature", "0")
QUESTION = "Say ab."


@pytest.fixture(scope="module")
def tokens() -> int:
    """The tokens of the prompt run makes of QUESTION, as --print-prompt counts them (a models.toml's max_tokens
    leaves them as they are)."""
    printed = run_localgen("run", "--print-prompt", "--json", QUESTION)
    assert printed.returncode == 0, printed.err
    return json.loads(printed.out)["prompt_tokens"]


def test_a_context_too_small_for_the_n_given_is_said_before_the_answer_which_goes_on(tokens: int) -> None:
    """-n 20 in a context with room for fewer: one warning line (the room, the --ctx-size that holds them all), the
    answer given as far as the context goes, --json one record; that --ctx-size holds all 20; no -n, no warning."""
    small = run_localgen("run", "-c", str(tokens + 12), "-n", "20", *ENDLESS, "--json", QUESTION)
    assert small.returncode == 0, small.err
    record = json.loads(small.out)
    assert record["finish_reason"] == "context" and record["usage"]["completion_tokens"] == 13, record
    assert small.err == (f"localgen: warning: the prompt takes {tokens} of the context's {tokens + 12} tokens, which "
                         "leaves room for 13 of the 20 tokens asked for (-n/--max-tokens), so the answer may end early:"
                         f" --ctx-size {tokens + 19} or more holds them all\n"), small.err
    held = run_localgen("run", "-c", str(tokens + 19), "-n", "20", *ENDLESS, "--json", QUESTION)
    assert held.returncode == 0 and held.err == "", held.err
    whole = json.loads(held.out)
    assert whole["finish_reason"] == "length" and whole["usage"]["completion_tokens"] == 20, whole
    unlimited = run_localgen("run", "-c", str(tokens + 12), *ENDLESS, QUESTION)
    assert unlimited.returncode == 0 and "warning" not in unlimited.err, "no limit given: the context is the limit"


def test_a_models_toml_max_tokens_the_context_cannot_hold_is_said_naming_it(tmp_path: Path, tokens: int) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    user_registry(tmp_path / "home", "[models.smollm2-135m]\nmax_tokens = 40\n")
    result = run_localgen("run", "-c", str(tokens + 9), *ENDLESS, "--json", QUESTION, env=env)
    assert result.returncode == 0 and json.loads(result.out)["usage"]["completion_tokens"] == 10
    assert result.err == (f"localgen: warning: the prompt takes {tokens} of the context's {tokens + 9} tokens, which "
                          "leaves room for 10 of the 40 tokens asked for (max_tokens in models.toml; -n overrides it), "
                          f"so the answer may end early: --ctx-size {tokens + 39} or more holds them all\n"), result.err


def test_a_conversation_run_is_warned_as_a_plain_run_is_naming_a_limit_saved_with_the_conversation(
        tmp_path: Path, tokens: int) -> None:
    """--conversation's and --continue's prompt is checked as well: models.toml's max_tokens, then the one saved in
    the conversation's settings, named as the limit."""
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    user_registry(tmp_path / "home", "[models.smollm2-135m]\nmax_tokens = 40\n")
    small = ("-c", str(tokens + 12), *ENDLESS, "--json")
    started = run_localgen("run", "--conversation", "k", *small, QUESTION, env=env)
    assert started.returncode == 0 and json.loads(started.out)["usage"]["completion_tokens"] == 13
    assert started.err == (f"localgen: warning: the prompt takes {tokens} of the context's {tokens + 12} tokens, which "
                           "leaves room for 13 of the 40 tokens asked for (max_tokens in models.toml; -n overrides it),"
                           f" so the answer may end early: --ctx-size {tokens + 39} or more holds them all\n"), \
        started.err
    (path,) = (tmp_path / "home").rglob("conversations/k.json")
    path.write_text(json.dumps(json.loads(path.read_text()) | {"settings": {"max_tokens": 50}}))
    continued = run_localgen("run", "--continue", *small, QUESTION, env=env)  # the earlier exchange leaves the context
    assert continued.returncode == 0 and json.loads(continued.out)["finish_reason"] == "context"
    assert continued.err.endswith(f"localgen: warning: the prompt takes {tokens} of the context's {tokens + 12} "
                                  "tokens, which leaves room for 13 of the 50 tokens asked for (max_tokens of "
                                  f"conversation 'k'; -n overrides it), so the answer may end early: --ctx-size "
                                  f"{tokens + 49} or more holds them all\n"), continued.err


def test_a_prompt_refused_for_the_context_hints_a_size_that_holds_the_n_given_too(tokens: int) -> None:
    refused = run_localgen("run", "-c", str(tokens - 4), "-n", "50", *ENDLESS, QUESTION)
    assert refused.returncode == 1 and refused.out == ""
    assert refused.err.endswith(f"but the context holds {tokens - 4} (hint: raise --ctx-size to {tokens + 49} or more, "
                                "which holds the prompt and the 50 tokens asked for (-n/--max-tokens), or shorten the "
                                "input)\n"), refused.err
    plain = run_localgen("run", "-c", str(tokens - 4), *ENDLESS, QUESTION)
    assert plain.returncode == 1 and f"(hint: raise --ctx-size past {tokens} (the model" in plain.err, plain.err
    most = run_localgen("run", "-c", str(tokens - 4), "-n", "9000", *ENDLESS, QUESTION)  # more than the model takes
    assert most.err.endswith(f"(hint: raise --ctx-size to 8192, the most this model takes, which leaves room for "
                             f"{8192 - tokens + 1:,} of the 9,000 tokens asked for (-n/--max-tokens), or shorten the "
                             "input)\n"), most.err
    beyond = run_localgen("run", "-c", str(tokens + 12), "-n", "9000", *ENDLESS, QUESTION)
    assert beyond.returncode == 0 and beyond.err.startswith("localgen: warning: ") and \
        "of the 9,000 tokens asked for (-n/--max-tokens), so the answer may end early: --ctx-size 8192, the most " \
        f"this model takes, leaves room for {8192 - tokens + 1:,}\n" in beyond.err, beyond.err


FRUITS = ("--grammar", 'root ::= "apple banana cherry"', "--temperature", "0")  # the model ends it after cherry


def test_the_json_record_names_the_stop_string_that_ended_the_answer() -> None:
    """finish_reason is stop whether the model ended its answer or a stop string matched: stop_string says which."""
    def record(*args: str, code: int = 0) -> dict:
        result = run_localgen("run", *FRUITS, *args, "--json", "Fruits?")
        assert result.returncode == code and (result.err == "") == (code == 0), result.err
        return json.loads(result.out)

    stopped = record("--stop", "kiwi", "--stop", "banana")
    assert (stopped["text"], stopped["finish_reason"], stopped["stop_string"]) == ("apple ", "stop", "banana")
    ended = record("--stop", "kiwi")
    assert (ended["text"], ended["finish_reason"], ended["stop_string"]) == ("apple banana cherry", "stop", None)
    cut = record("--stop", "cherry", "-n", "2", code=1)  # before the grammar could end
    assert (cut["finish_reason"], cut["stop_string"], cut["grammar_complete"]) == ("length", None, False)
    hidden = run_localgen("run", "--grammar", 'root ::= "<think>banana</think>apple banana"', "--temperature", "0",
                          "--hide-thinking", "--stop", "banana", "--json", "Fruits?")
    assert json.loads(hidden.out)["stop_string"] == "banana", "matched in the answer, past the reasoning"
    held = run_localgen("run", "--grammar", r'root ::= "\n\n\nabc"', "--temperature", "0", "--hide-thinking",
                        "--stop", "\n", "-n", "1", "--json", "x")
    assert [json.loads(held.out)[key] for key in ("text", "finish_reason", "stop_string")] == ["", "stop", "\n"], \
        "the answer's start, held back past the -n, meets its stop string: it is a stop's end, not the limit's"
