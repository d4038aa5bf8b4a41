"""Where a constrained answer ends: cut before its grammar could end (an error, exit 1), or complete, and a JSON
schema's answer without the blank space its grammar allows after the value; on the real engine."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_localgen

GREEDY = ("--temperature", "0", "--seed", "1")
CITY = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
YES_NO = 'root ::= "yes" | "no"'


def test_a_json_schema_answer_cut_by_n_is_an_error_after_its_text() -> None:
    result = run_localgen("run", "--json-schema", CITY, "-n", "3", *GREEDY, "Where is the Eiffel tower?")
    assert result.returncode == 1, result.err
    assert result.out.startswith("{") and result.out.endswith("\n"), result.out  # the text so far, as it came
    assert result.err == ("localgen: error: the answer stopped at the limit of 3 tokens (-n/--max-tokens) before the "
                          "grammar of --json-schema could end: it is not complete JSON (hint: give a larger "
                          "-n/--max-tokens)\n"), result.err


def test_a_cut_answer_s_json_record_says_its_grammar_is_incomplete() -> None:
    result = run_localgen("run", "--json", "--json-schema", CITY, "-n", "3", *GREEDY, "Where is the Eiffel tower?")
    assert result.returncode == 1, result.err
    record = json.loads(result.out)
    assert record["finish_reason"] == "length" and record["grammar_complete"] is False, record
    assert "grammar of --json-schema could end" in result.err and len(result.err.splitlines()) == 1, result.err


def test_a_grammar_cut_by_n_is_an_error_naming_the_grammar_as_given(tmp_path: Path) -> None:
    result = run_localgen("run", "--grammar", 'root ::= "abc" [a-z]{20}', "-n", "2", *GREEDY, "Say abc.")
    assert result.returncode == 1, result.err
    assert result.err == ("localgen: error: the answer stopped at the limit of 2 tokens (-n/--max-tokens) before the "
                          "grammar of --grammar could end (hint: give a larger -n/--max-tokens)\n"), result.err
    (tmp_path / "abc.gbnf").write_text('root ::= "abc" [a-z]{20}\n')
    from_file = run_localgen("run", "--grammar-file", str(tmp_path / "abc.gbnf"), "-n", "2", *GREEDY, "Say abc.")
    assert from_file.returncode == 1, from_file.err
    assert f"before the grammar of --grammar-file {tmp_path / 'abc.gbnf'} could end" in from_file.err, from_file.err


def test_an_answer_complete_at_the_limit_is_no_error() -> None:
    """yes and no are one token each: -n 1 stops at the limit, with the grammar complete."""
    result = run_localgen("run", "--json", "--grammar", YES_NO, "-n", "1", *GREEDY, "Is the sky blue?")
    assert result.returncode == 0, result.err
    record = json.loads(result.out)
    assert record["text"] in ("yes", "no") and record["grammar_complete"] is True, record
    assert result.err == ""
    free = run_localgen("run", "--json", "-n", "1", *GREEDY, "Is the sky blue?")
    assert free.returncode == 0 and "grammar_complete" not in json.loads(free.out), free.err


def test_a_json_schema_answer_ends_without_the_space_its_grammar_allows_after_it() -> None:
    """The converter's grammar ends each value with an optional space, which this greedy answer took: `[1] `."""
    schema = json.dumps({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    printed = run_localgen("run", "--json-schema", schema, *GREEDY, "Give 3 and 5 as a JSON array.")
    assert printed.returncode == 0 and printed.out == "[1]\n", (printed.out, printed.err)
    recorded = run_localgen("run", "--json", "--json-schema", schema, *GREEDY, "Give 3 and 5 as a JSON array.")
    assert json.loads(recorded.out)["text"] == "[1]", recorded.out


def test_a_json_schema_answer_n_stops_just_after_its_value_s_space_ends_with_its_value() -> None:
    """-n 4 stops right after the space the greedy answer takes after `[1]`: complete, so left out all the same."""
    schema = json.dumps({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    result = run_localgen("run", "--json", "--json-schema", schema, "-n", "4", *GREEDY, "Give 3 and 5 as a JSON array.")
    assert result.returncode == 0 and result.err == "", result.err
    record = json.loads(result.out)
    assert (record["text"], record["finish_reason"], record["grammar_complete"]) == ("[1]", "length", True), record
