"""An object's counts and property names held by its grammar only as far as a grammar can hold them: names a finite
list gives written at most once each, counts refused where no object meets them, and what cannot be held warned of."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_localgen
from tests.test_gen_hunt import _Vocab, _warnings

_COLOURS = {"type": "object", "minProperties": 2, "maxProperties": 4,
            "propertyNames": {"enum": ["red", "green", "blue", "cyan"]},
            "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 255}}


def _accepted(vocab: _Vocab, schema: dict[str, object], texts: list[str]) -> list[str]:
    """Those of texts the grammar of schema lets an answer be (its warnings aside)."""
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    return [text for text in texts if vocab.accepts(grammar, text)]


def _refusal(schema: dict[str, object]) -> str:
    """The one line of stderr a run with schema is refused with (exit 2)."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err.count("\n") == 1, result.err
    return result.err


def test_a_name_of_a_finite_property_names_list_is_written_once(vocab: _Vocab) -> None:
    """A name could repeat, each repeat counted toward minProperties while the object parsed kept one."""
    texts = ['{"red": 1, "red": 2}', '{"red": 1, "green": 2}', '{"red": 1, "green": 2, "green": 3}', '{"red": 1}',
             '{"red": 1, "green": 2, "blue": 3, "cyan": 4}', '{"red": 1, "green": 2, "blue": 3, "blue": 4}']
    assert _accepted(vocab, _COLOURS, texts) == [texts[1], texts[4]]
    assert _warnings(_COLOURS) == []


def test_counts_a_finite_property_names_list_cannot_meet_are_refused() -> None:
    """{"propertyNames": {"const": "x"}, "minProperties": 2} was taken, and met by repeating x."""
    assert _refusal({"type": "object", "propertyNames": {"const": "x"}, "minProperties": 2}) == (
        "localgen: error: the JSON schema's object of minProperties 2 can be no object its properties allow (hint: "
        "make its minProperties and maxProperties fit its properties)\n")


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "object", "minProperties": 2}, True),
    ({"type": "object", "minProperties": 1}, False),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
      "additionalProperties": True, "minProperties": 2}, False),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True,
      "minProperties": 2}, True),
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "minProperties": 3}, True),
    ({"type": "object", "maxProperties": 3}, False),
], ids=["free-names", "one-name", "required-and-one", "optional-and-two", "pattern-names", "max-alone"])
def test_a_min_properties_repeated_names_may_meet_is_warned_of(schema: dict[str, object], warned: bool) -> None:
    """A repeated free name met minProperties silently: where more than one name not listed counts toward it, a
    grammar cannot keep them apart, and a warning says so."""
    assert any(line.startswith("the JSON schema's minProperties cannot be enforced (a grammar cannot keep a name it "
                               "does not list from repeating") for line in _warnings(schema)) is warned


def test_a_run_answers_colours_each_named_once() -> None:
    """A real run on the bundled model repeated a colour's name on every seed."""
    from jsonschema import validate

    for seed in ("1", "2", "3"):
        result = run_localgen("run", "--json-schema", json.dumps(_COLOURS), "-n", "80", "--seed", seed,
                              "Give a colour.")
        assert result.returncode == 0 and result.err == "", result.err
        pairs = json.loads(result.out, object_pairs_hook=list)
        assert len({name for name, _ in pairs}) == len(pairs), result.out
        validate(json.loads(result.out), _COLOURS)


def test_free_names_are_still_counted_as_written(vocab: _Vocab) -> None:
    """Where a name may repeat, the grammar still writes at least minProperties of them, and maxProperties at most."""
    schema = {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 3}
    texts = ['{"x": 1}', '{"x": 1, "y": 2}', '{"x": 1, "y": 2, "z": 3}', '{"x": 1, "y": 2, "z": 3, "w": 4}',
             '{"x": 1, "y": "2"}']
    assert _accepted(vocab, schema, texts) == texts[1:3]


def test_a_required_name_property_names_refuses_is_refused_wherever_it_is_listed() -> None:
    """Only the first name refused was checked: a required one listed after it was left out, and {"ok": 3} answered."""
    schema = {"type": "object", "properties": {"Opt": {"type": "integer"}, "Req": {"type": "integer"},
                                               "ok": {"type": "integer"}},
              "required": ["Req"], "propertyNames": {"pattern": "^[a-z]+$"}}
    assert _refusal(schema) == ("localgen: error: the JSON schema requires Req, a name its propertyNames "
                                "{\"pattern\": \"^[a-z]+$\"} refuses (hint: drop Req from required, or allow it)\n")


@pytest.mark.parametrize("schema", [
    {"type": "object", "minProperties": 3, "maxProperties": 2},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "minProperties": 3, "maxProperties": 2},
], ids=["any-names", "pattern-names"])
def test_a_min_properties_above_max_properties_is_one_usage_error(schema: dict[str, object]) -> None:
    """It failed with an internal grammar error naming a repetition {2,1} the user never wrote."""
    assert _refusal(schema) == (
        "localgen: error: the JSON schema's object of minProperties 3, maxProperties 2 can be no object its "
        "properties allow (hint: make its minProperties and maxProperties fit its properties)\n")


@pytest.mark.parametrize("counts", [{}, {"maxProperties": 5}, {"minProperties": 0}], ids=["none", "max", "min-0"])
def test_counts_do_not_change_which_names_an_empty_properties_allows(vocab: _Vocab, counts: dict[str, int]) -> None:
    """{"properties": {}} allows only {}, but a maxProperties beside it let any other name in."""
    schema = {"type": "object", "properties": {}, **counts}
    assert _accepted(vocab, schema, ['{}', '{"x": 1}']) == ['{}']


@pytest.mark.parametrize("names", [
    {"type": "integer"}, {"type": ["integer", "null"]}, {"enum": [5]}, {"const": 5}, {"const": None}, False,
], ids=json.dumps)
def test_property_names_that_allow_no_string_allow_only_the_empty_object(vocab: _Vocab, names: object) -> None:
    """A type other than string was written over with string, letting any name in, and an enum or const of no string
    was refused as an enum that holds no value."""
    schema = {"type": "object", "propertyNames": names}
    assert _warnings(schema) == []
    assert _accepted(vocab, schema, ['{}', '{"a": 1}', '{"5": 1}']) == ['{}']


@pytest.mark.parametrize(("names", "quoted"), [
    ({"minLength": 3}, '{"minLength": 3}'), ({"const": 5}, '{"const": 5}'),
    ({"type": "integer"}, '{"type": "integer"}'),
], ids=["min-length", "const", "integer"])
def test_a_required_name_refusal_quotes_property_names_as_written(names: dict[str, object], quoted: str) -> None:
    """It quoted the schema as rewritten ({"anyOf": [{"minLength": 3, "type": "string"}, …) or as an enum."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "propertyNames": names}
    assert _refusal(schema) == (f"localgen: error: the JSON schema requires a, a name its propertyNames {quoted} "
                                "refuses (hint: drop a from required, or allow it)\n")


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "number", "maximum": 5}, {"type": "string"}], "minimum": 2},
    {"anyOf": [{"type": "integer"}, {"type": "object"}], "maximum": 9, "maxProperties": 2},
], ids=["minimum", "maximum-and-max-properties"])
def test_a_bound_spread_over_alternatives_of_other_types_is_not_warned_of(vocab: _Vocab,
                                                                          schema: dict[str, object]) -> None:
    """A bound beside an anyOf, spread over each alternative, was warned of for a string's, which it does not limit,
    though the grammar held it for the number's."""
    assert _warnings(schema) == []
    texts = ['1', '2', '5', '6', '9', '10', '"a"', '{"a": 1, "b": 2}', '{"a": 1, "b": 2, "c": 3}']
    allowed = ['2', '5', '"a"'] if "minimum" in schema else ['1', '2', '5', '6', '9', '{"a": 1, "b": 2}']
    assert _accepted(vocab, schema, texts) == allowed


def test_an_all_of_merged_on_its_own_keeps_what_it_drops_to_itself() -> None:
    """merged_all_of's default wording was one shared object: what one merge dropped stayed in it for every later
    one."""
    from localgen.json_schema_allof import ALL_OF, merged_all_of

    schema = {"allOf": [{"type": "string"}, {"anyOf": [{"type": "integer"}, {"maxLength": 3}]}]}
    merged_all_of(schema, lambda ref: None)
    assert ALL_OF.dropped == []


@pytest.mark.parametrize("template", ['{"type": "integer", "maximum": %s}', '{"type": "number", "minimum": -%s}',
                                      '{"enum": [%s]}'], ids=["maximum", "minimum", "enum"])
def test_an_integer_of_thousands_of_digits_is_one_usage_error(template: str) -> None:
    """An integer of 5,000 digits failed as an internal error: Python reads at most 4,300 by default."""
    result = run_localgen("run", "--json-schema", template % ("9" * 5000), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema holds an integer of more than 4,300 digits, more than localgen reads "
        "(hint: write it shorter: a bound of over 100 digits cannot be held anyway)\n"), result.err
