"""JSON schemas no value can meet, or whose number keywords are no numbers, refused in one line; items false allowing
only []."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_localgen
from tests.test_gen_hunt import _Vocab, _warnings

QUICK = ("--temperature", "0", "-n", "20")
_FORBIDDEN_A = ("the JSON schema requires a, which it does not list in properties and its additionalProperties "
                "false forbids (hint: add a to properties, or drop it from required)")
_FINITE = "not a finite number (a number past 1.8e308 reads as Infinity)"
_READ_AS_ZERO = 'a multipleOf is a number above 0 (a number too small for a double, such as 1e-400, reads as 0) ' \
                '(hint: e.g. "multipleOf": 2, or leave it out)'  # where 0.0 was written, or such a number


@pytest.mark.parametrize(("schema", "message"), [
    ('{"type": "object", "additionalProperties": false, "required": ["a"]}', _FORBIDDEN_A),
    ('{"type": "object", "properties": {"b": {}}, "additionalProperties": false, "required": ["a", "b"]}',
     _FORBIDDEN_A),
    ('{"type": "object", "properties": {"x": {"type": "object", "additionalProperties": false, "required": ["a"]}}}',
     _FORBIDDEN_A),
    ('{"allOf": [{"type": "object", "additionalProperties": false}, {"required": ["a"]}]}',
     "the JSON schema's allOf requires a, which a part's additionalProperties false forbids (hint: write the combined "
     "schema out in one object, or drop the allOf)"),
    ('{"type": "integer", "maximum": -Infinity}', f'the JSON schema\'s maximum is -Infinity, {_FINITE} (hint: e.g. '
                                                  '"maximum": 10)'),
    ('{"type": "integer", "minimum": 1e400}', f'the JSON schema\'s minimum is Infinity, {_FINITE} (hint: e.g. '
                                              '"minimum": 10)'),
    ('{"type": "integer", "minimum": NaN}', 'the JSON schema\'s minimum is NaN, not a finite number (hint: e.g. '
                                            '"minimum": 10)'),
    ('{"type": "integer", "exclusiveMaximum": "5"}', 'the JSON schema\'s exclusiveMaximum is "5", not a finite number '
                                                     '(hint: e.g. "exclusiveMaximum": 10)'),
    ('{"type": "number", "multipleOf": 0}', 'the JSON schema\'s multipleOf is 0: a multipleOf is a number above 0 '
                                            '(hint: e.g. "multipleOf": 2, or leave it out)'),
    ('{"type": "number", "multipleOf": -2}', 'the JSON schema\'s multipleOf is -2: a multipleOf is a number above 0 '
                                             '(hint: e.g. "multipleOf": 2, or leave it out)'),
    ('{"type": "number", "multipleOf": 1e-400}', f"the JSON schema's multipleOf is 0.0: {_READ_AS_ZERO}"),
    ('{"type": "number", "multipleOf": 0.0}', f"the JSON schema's multipleOf is 0.0: {_READ_AS_ZERO}"),
    ('{"type": "array", "items": false, "minItems": 1}', "the JSON schema's items false allows only an empty array, "
                                                         "but its minItems is 1 (hint: give items a schema, or drop "
                                                         "minItems)"),
], ids=["unlisted", "unlisted-beside-listed", "in-a-property", "all-of", "minus-infinity", "past-1.8e308", "nan",
        "a-string", "multiple-of-zero", "multiple-of-negative", "multiple-of-too-small-for-a-double",
        "multiple-of-zero-point-zero", "items-false-min-items"])
def test_a_schema_no_value_meets_is_refused_in_one_line(schema: str, message: str) -> None:
    """Each was warned of (or said in the converter's words) and answered with a value that broke it, exit 0."""
    result = run_localgen("run", *QUICK, "--json-schema", schema, "hi")
    assert (result.returncode, result.out, result.err) == (2, "", f"localgen: error: {message}\n")


@pytest.mark.parametrize("schema", [
    {"type": "object", "additionalProperties": False, "patternProperties": {"^a$": {"type": "integer"}},
     "required": ["a"]},
    {"type": "integer", "minimum": 1, "exclusiveMinimum": True},  # draft 4's
    {"type": "number", "multipleOf": 0.5, "maximum": 1e300},
], ids=["named-by-a-pattern", "draft-4-exclusive", "finite-bounds"])
def test_a_schema_some_value_meets_is_not_refused(schema: dict[str, object]) -> None:
    assert isinstance(_warnings(schema), list)


def test_an_object_a_required_name_rules_out_leaves_the_other_types(vocab: _Vocab) -> None:
    from localgen.json_schema import schema_grammar

    schema = {"type": ["object", "null"], "additionalProperties": False, "required": ["a"]}
    grammar = schema_grammar(json.dumps(schema), [])
    assert [text for text in ("null", "{}", '{"a": 1}') if vocab.accepts(grammar, text)] == ["null"]


@pytest.mark.parametrize(("schema", "allowed"), [
    ({"type": "array", "items": False}, ["[]"]),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "items": False}, ["[1]"]),  # the converter: a tuple
    ({"type": "object", "properties": {"x": {"type": "array", "items": False}}, "required": ["x"]}, ['{"x": []}']),
], ids=["items-false", "prefix-items", "in-a-property"])
def test_items_false_allows_no_items_past_prefix_items(vocab: _Vocab, schema: dict[str, object],
                                                       allowed: list[str]) -> None:
    """items false was refused as "the converter looked for 'prefixItems' and found none"."""
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    texts = ["[]", "[1]", "[1, 2]", '{"x": []}', '{"x": [1]}']
    assert [text for text in texts if vocab.accepts(grammar, text)] == allowed


def test_a_run_of_items_false_answers_an_empty_array() -> None:
    result = run_localgen("run", *QUICK, "--json-schema", '{"type": "array", "items": false}', "hi")
    assert (result.returncode, result.out, result.err) == (0, "[]\n", "")


@pytest.mark.parametrize(("schema", "allowed"), [
    ({"type": ["array", "string"], "items": False, "minItems": 1}, ['"a"']),
    ({"type": ["array", "null"], "items": False, "minItems": 2}, ["null"]),
    ({"items": False, "minItems": 1}, ['"a"', "null", "1"]),
    ({"allOf": [{"items": False}, {"minItems": 1}]}, ['"a"', "null", "1"]),
], ids=["with-string", "with-null", "no-type", "all-of"])
def test_items_false_beside_min_items_leaves_the_other_types(vocab: _Vocab, schema: dict[str, object],
                                                             allowed: list[str]) -> None:
    """items and minItems limit arrays alone: each was refused as allowing only an empty array."""
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    assert [text for text in ("[]", "[1]", '"a"', "null", "1") if vocab.accepts(grammar, text)] == allowed


@pytest.mark.parametrize(("schema", "allowed"), [
    ({"allOf": [{"type": "array", "items": False}, {"prefixItems": [{"type": "integer"}]}]}, ["[]"]),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "maxItems": 1}, ["[1]"]),
], ids=["all-of", "max-items"])
def test_prefix_items_hold_no_more_items_than_allowed(vocab: _Vocab, schema: dict[str, object],
                                                     allowed: list[str]) -> None:
    """Each answered every prefixItems item: an items false in another allOf part allows none past its own (none),
    and the converter ignored a maxItems beside prefixItems."""
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    assert [text for text in ("[]", "[1]", "[1, 2]") if vocab.accepts(grammar, text)] == allowed


@pytest.mark.parametrize("schema", [
    {"type": "array", "prefixItems": [{}], "maxItems": 0, "minItems": 1},
    {"type": "array", "prefixItems": [{}, {}, {}], "maxItems": 1, "minItems": 2},
], ids=["none", "some"])
def test_prefix_items_beside_a_max_items_below_min_items_is_refused_for_that(schema: dict[str, object]) -> None:
    """prefixItems past a maxItems below minItems was refused as "items false allows only an empty array", a keyword
    the schema does not hold: minItems above maxItems is what is said."""
    from localgen.errors import UsageError
    from localgen.json_schema import schema_grammar

    with pytest.raises(UsageError) as refused:
        schema_grammar(json.dumps(schema), [])
    assert "is above its maxItems" in refused.value.message, refused.value.message
