"""An integer's or number's bounds held by its grammar as a range of digits, whatever its size: checked with llama.cpp's
grammar sampler on the bundled model's vocabulary, against the JSON texts near each bound, and by real runs."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from tests.conftest import run_localgen
from tests.test_gen_hunt import _Vocab, _warnings

_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


def _grammar(schema: dict[str, object]) -> str:
    """The grammar of schema, which must hold every keyword it has (no warning)."""
    from localgen.json_schema import schema_grammar

    warn: list[str] = []
    grammar = schema_grammar(json.dumps(schema), warn)
    assert warn == [], warn
    return grammar


def _near(*bounds: int) -> list[str]:
    """JSON texts of integers near each bound and zero, and ones no reader wants: -0, a leading zero, an exponent."""
    values = {value + step for value in (*bounds, 0) for step in (-11, -10, -2, -1, 0, 1, 2, 9, 10)}
    return [*map(str, sorted(values)), "-0", "007", "-01", "1e3", "+1"]


def _obeys(schema: dict[str, object], text: str) -> bool:
    """Whether text is an integer's (or, for a number, a decimal's) canonical JSON text within schema's bounds."""
    pattern = _INTEGER if schema.get("type") == "integer" else _NUMBER
    if not pattern.fullmatch(text) or (text.startswith("-") and Fraction(text) == 0):
        return False
    value, draft_4 = Fraction(text), {key: schema.get(key) is True for key in ("exclusiveMinimum", "exclusiveMaximum")}
    checks = {"minimum": lambda bound: value > bound if draft_4["exclusiveMinimum"] else value >= bound,
              "maximum": lambda bound: value < bound if draft_4["exclusiveMaximum"] else value <= bound,
              "exclusiveMinimum": lambda bound: value > bound, "exclusiveMaximum": lambda bound: value < bound}
    within = all(check(Fraction(schema[key])) for key, check in checks.items()
                 if key in schema and not isinstance(schema[key], bool))
    fraction = text.partition(".")[2]  # at the bound away from zero only zeros could follow: one is written at most
    outer = schema.get("maximum" if value >= 0 else "minimum")
    return within and not (fraction.endswith("0") and fraction != "0" and value == outer)


_INTEGER_RANGES = [
    {"minimum": 0},
    {"exclusiveMinimum": 0},
    {"maximum": 0},
    {"exclusiveMaximum": 0},
    {"minimum": -5},
    {"maximum": -3},
    {"minimum": 1000, "maximum": 100000},
    {"minimum": -1000, "maximum": 1000},
    {"minimum": -12345, "maximum": -300},
    {"exclusiveMinimum": -1, "exclusiveMaximum": 5000},
    {"minimum": 123456, "maximum": 987654321},
    {"minimum": 99, "maximum": 10001},
    {"minimum": 0.5, "maximum": 999.5},
    {"minimum": 5, "exclusiveMinimum": True, "maximum": 1000, "exclusiveMaximum": True},
    {"minimum": 2 ** 64},
    {"maximum": -(2 ** 70), "minimum": -(2 ** 70) - 500},
    {"minimum": 10 ** 30 - 7, "maximum": 10 ** 30 + 1234},
]


@pytest.mark.parametrize("bounds", _INTEGER_RANGES, ids=json.dumps)
def test_an_integer_s_bounds_of_any_size_hold_exactly(vocab: _Vocab, bounds: dict[str, object]) -> None:
    """The converter ignored bounds leaving more than 256 integers (a warning said so): every integer was allowed,
    -0 and beyond its maximum too."""
    schema = {"type": "integer", **bounds}
    grammar = _grammar(schema)
    numbers = [value for value in bounds.values() if not isinstance(value, bool)]
    texts = _near(*(int(value) for value in numbers))  # type: ignore[call-overload]
    assert [text for text in texts if vocab.accepts(grammar, text)] == [text for text in texts if _obeys(schema, text)]


_NUMBER_RANGES = [
    {"minimum": 0},
    {"exclusiveMinimum": 0},
    {"maximum": 100},
    {"minimum": 0, "maximum": 100},
    {"minimum": -1, "exclusiveMaximum": 1},
    {"exclusiveMinimum": -20, "maximum": -3},
    {"minimum": 1.0, "maximum": 5000},
    {"minimum": 0, "exclusiveMinimum": True, "maximum": 1},
    {"maximum": 2 ** 64},
]


def _decimals(*bounds: int) -> list[str]:
    """JSON texts of numbers near each bound: the integers, and fractions just above and below each."""
    texts = _near(*bounds)
    for value in sorted({int(text) for text in texts if _INTEGER.fullmatch(text) and text != "-0"}):
        texts += [f"{value}.0", f"{value}.5", f"{value}.001", f"{value}.000"]
    return [*texts, "-0.0", "-0.5", "100.5", "1e2", "0.5e1", "1E3", "12.", ".5"]


@pytest.mark.parametrize("bounds", _NUMBER_RANGES, ids=json.dumps)
def test_a_number_s_bounds_at_integers_hold_exactly(vocab: _Vocab, bounds: dict[str, object]) -> None:
    """The converter ignored a number's bounds: 100.5 passed a maximum of 100, and 1e3 any bound; now the integer part
    is held to its range, the fraction kept to zero (or above it) at a bound, and no exponent is written."""
    schema = {"type": "number", **bounds}
    grammar = _grammar(schema)
    numbers = [value for value in bounds.values() if not isinstance(value, bool)]
    texts = _decimals(*(int(value) for value in numbers))  # type: ignore[call-overload]
    assert [text for text in texts if vocab.accepts(grammar, text)] == [text for text in texts if _obeys(schema, text)]


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "number", "minimum": 1e-150}, "minimum"),
    ({"type": "number", "maximum": 1e300}, "maximum"),
    ({"type": "integer", "minimum": 0, "multipleOf": 1009}, "multipleOf"),
    ({"type": "number", "minimum": 0, "maximum": 10, "multipleOf": 0.1234}, "multipleOf"),
    ({"type": ["integer", "null"], "minimum": 0, "maximum": 100000}, None),
    ({"minimum": 0}, None),
    ({"allOf": [{"type": "integer"}, {"minimum": 1, "maximum": 5000}]}, None),
], ids=["number-off-an-integer", "number-too-long", "multiple-of", "number-multiple-of", "type-list", "no-type",
        "all-of"])
def test_bounds_are_warned_of_only_where_the_grammar_cannot_hold_them(schema: dict[str, object],
                                                                      warned: str | None) -> None:
    bounds = [line for line in _warnings(schema) if "cannot be enforced" in line]
    assert bounds == ([f"the JSON schema's {warned} cannot be enforced (llama-cpp-python's converter ignores it): "
                       "check the answer"] if warned else [])


def test_a_number_whose_bounds_hold_none_is_one_usage_error() -> None:
    result = run_localgen("run", "--json-schema", '{"type": "number", "minimum": 3, "exclusiveMaximum": 3}', "hi")
    assert result.returncode == 2 and result.err.strip().splitlines() == [
        "localgen: error: the JSON schema's number of minimum 3, exclusiveMaximum 3 can be no number (hint: make its "
        "bounds hold a number)"], result.err


@pytest.mark.parametrize(("schema", "prompt"), [
    ({"type": "object", "required": ["year"],
      "properties": {"year": {"type": "integer", "minimum": 1900, "maximum": 2100}}},
     "When was the Eiffel Tower built?"),
    ({"type": "object", "required": ["debt"], "properties": {"debt": {"type": "integer", "maximum": -1000}}},
     "How much do I owe? Answer as a negative number."),
    ({"type": "object", "required": ["score"],
      "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10}}}, "Score this film from 0 to 10."),
    ({"type": "array", "minItems": 3, "maxItems": 3,
      "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 100}}, "Give three percentages."),
], ids=["years", "negative", "score", "percentages"])
def test_a_run_answers_numbers_within_their_bounds(schema: dict[str, object], prompt: str) -> None:
    """A real run on the bundled model: each answer parses and every number in it is within its bounds."""
    from jsonschema import validate

    for seed in ("1", "2", "3"):
        result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "160", "--seed", seed, prompt)
        assert result.returncode == 0 and result.err == "", result.err
        validate(json.loads(result.out), schema)


def _objects(vocab: _Vocab, schema: dict[str, object], values: list[dict[str, object]]) -> list[dict[str, object]]:
    """Those of values (objects) the grammar of schema lets an answer be, written as the converter orders them."""
    grammar = _grammar(schema)
    return [value for value in values if vocab.accepts(grammar, json.dumps(value))]


_A, _B, _AB, _ABC = {"a": 1}, {"b": "x"}, {"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": True}


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "minProperties": 1},
     [{}, _A, _B, _AB], [_A, _B, _AB]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "maxProperties": 1},
     [{}, _A, _B, _AB], [{}, _A, _B]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"],
      "additionalProperties": True, "minProperties": 2, "maxProperties": 2},
     [_A, _AB, {"a": 1, "z": 2}, _ABC, _B], [_AB, {"a": 1, "z": 2}]),
    ({"type": "object", "minProperties": 1, "maxProperties": 2},
     [{}, {"x": 1}, {"x": 1, "y": [2]}, {"x": 1, "y": 2, "z": 3}], [{"x": 1}, {"x": 1, "y": [2]}]),
], ids=["min", "max", "min-max-with-others", "any-object"])
def test_an_object_s_property_counts_hold(vocab: _Vocab, schema: dict[str, object], values: list[dict[str, object]],
                                          allowed: list[dict[str, object]]) -> None:
    """The converter ignored minProperties and maxProperties (a warning said so): {} passed a minProperties of 1."""
    assert _objects(vocab, schema, values) == allowed


@pytest.mark.parametrize(("names", "values", "allowed"), [
    ({"enum": ["red", "green"]}, [{"red": 1}, {"red": 1, "green": 2}, {"blue": 1}, {}],
     [{"red": 1}, {"red": 1, "green": 2}, {}]),
    ({"const": "id"}, [{"id": 1}, {"ID": 1}], [{"id": 1}]),
    ({"pattern": "^[a-z]+$"}, [{"abc": 1}, {"aBc": 1}, {"a1": 1}], [{"abc": 1}]),
    ({"maxLength": 3}, [{"abc": 1}, {"abcd": 1}, {"": 1}], [{"abc": 1}, {"": 1}]),
    ({"minLength": 2, "maxLength": 3}, [{"abc": 1}, {"a": 1}], [{"abc": 1}]),
], ids=["enum", "const", "pattern", "max-length", "min-max-length"])
def test_an_object_s_property_names_hold(vocab: _Vocab, names: dict[str, object], values: list[dict[str, object]],
                                         allowed: list[dict[str, object]]) -> None:
    """The converter ignored propertyNames: any string was a property's name."""
    assert _objects(vocab, {"type": "object", "propertyNames": names}, values) == allowed


def test_a_listed_property_property_names_refuses_is_left_out(vocab: _Vocab) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "integer"}, "Bad": {"type": "integer"}},
              "propertyNames": {"pattern": "^[a-z]+$"}}
    assert _objects(vocab, schema, [{"ok": 1}, {"Bad": 1}, {"ok": 1, "Bad": 2}]) == [{"ok": 1}]


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "object", "properties": {"Bad": {"type": "integer"}}, "required": ["Bad"],
      "propertyNames": {"pattern": "^[a-z]+$"}},
     "the JSON schema requires Bad, a name its propertyNames {\"pattern\": \"^[a-z]+$\"} "
     "refuses (hint: drop Bad from required, or allow it)"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2},
     "the JSON schema's object of minProperties 2 can be no object its properties allow (hint: make its "
     "minProperties and maxProperties fit its properties)"),
], ids=["required-name-refused", "too-few-properties"])
def test_an_object_its_counts_or_names_leave_none_is_one_usage_error(schema: dict[str, object],
                                                                     message: str) -> None:
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == f"localgen: error: {message}\n", result.err


def test_a_run_answers_an_object_of_its_counts_and_names() -> None:
    """A real run on the bundled model: each answer parses, and has 2 or 3 properties of lowercase names."""
    schema = {"type": "object", "minProperties": 2, "maxProperties": 3, "additionalProperties": {"type": "integer"},
              "propertyNames": {"pattern": "^[a-z]{1,8}$"}}
    from jsonschema import validate

    for seed in ("1", "2", "3"):
        result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "80", "--seed", seed,
                              "Give the ages of a few people.")
        assert result.returncode == 0 and result.err == (
            "localgen: warning: the JSON schema's minProperties cannot be enforced (a grammar cannot keep a name it "
            'does not list from repeating, as in {"a": 1, "a": 2}, which a parser reads as one property): check the '
            "answer, or list the names it needs (properties and required, or propertyNames' enum)\n"), result.err
        validate(json.loads(result.out), schema)


@pytest.mark.parametrize("schema", [
    {"allOf": [{"type": "string"}, {"anyOf": [{"type": "integer"}, {"maxLength": 3}]}]},
    {"type": "string", "anyOf": [{"type": "integer"}, {"maxLength": 3}]},
], ids=["all-of", "beside-keywords"])
def test_an_alternative_a_merge_drops_is_named_in_a_warning(schema: dict[str, object]) -> None:
    """An anyOf alternative of another type than an allOf part (or the keywords beside it) asks for was dropped
    unsaid."""
    assert [line for line in _warnings(schema) if "allows no value" in line] == [
        "the JSON schema's anyOf alternative {\"type\": \"integer\"} (the JSON schema's "
        + ("allOf" if "allOf" in schema else "anyOf with the keywords beside it")
        + " asks for a value of type \"string\" and of type \"integer\", which no value is) allows no value, so the "
        "answer is never it: fix it, or drop it"]


def test_a_ref_alternative_whose_target_allows_no_value_is_dropped(vocab: _Vocab) -> None:
    """Its target's refusal refused the whole schema, where any other alternative that allows no value is dropped."""
    schema = {"$defs": {"M": {"type": "integer", "minimum": 5, "maximum": 1}},
              "anyOf": [{"$ref": "#/$defs/M"}, {"type": "null"}]}
    assert _warnings(schema) == [
        "the JSON schema's anyOf alternative {\"$ref\": \"#/$defs/M\"} (the JSON schema's integer of minimum 5, "
        "maximum 1 can be no integer) allows no value, so the answer is never it: fix it, or drop it"]
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    assert [text for text in ("null", "3", "5") if vocab.accepts(grammar, text)] == ["null"]


@pytest.mark.parametrize(("schema", "message"), [
    ({"$defs": {"M": {"type": "integer", "minimum": 5, "maximum": 1}}, "anyOf": [{"$ref": "#/$defs/M"}]},
     "the JSON schema's integer of minimum 5, maximum 1 can be no integer"),
    ({"$defs": {"M": {"type": "integer", "minimum": 5, "maximum": 1}}, "type": "object",
      "properties": {"a": {"$ref": "#/$defs/M"}}},
     "the JSON schema's integer of minimum 5, maximum 1 can be no integer"),
    ({"$ref": "http://example.com/s"},
     "cannot turn the JSON schema into a grammar: a $ref to a remote schema (localgen does not fetch schemas)"),
], ids=["only-alternative", "property", "http-ref"])
def test_refused_refs_say_why(schema: dict[str, object], message: str) -> None:
    """A $ref whose target allows no value is refused where nothing else is left; an http:// $ref is named remote as
    an https:// one is, where it said "Unsupported ref"."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err.startswith(f"localgen: error: {message} (hint: "), result.err


@pytest.mark.parametrize("unused", [
    {"type": "string", "format": "email"},
    {"type": "string", "pattern": "^a+$", "maxLength": 3},
    {"type": "integer", "minimum": 5, "maximum": 1},
], ids=["format", "length-beside-pattern", "no-value"])
def test_an_unused_definition_is_not_warned_of(unused: dict[str, object]) -> None:
    """The format and string-length warnings read every definition in $defs, one no $ref reaches too."""
    assert _warnings({"$defs": {"Unused": unused}, "type": "integer"}) == []


def test_a_count_rule_does_not_take_the_name_of_a_property_s_rule(vocab: _Vocab) -> None:
    """A property named as a count rule is (count-0-0) had its value's rule written over by the count's."""
    schema = {"type": "object", "properties": {"count-0-0": {"type": "integer", "minimum": 1}}, "maxProperties": 1}
    assert _objects(vocab, schema, [{"count-0-0": 5}, {}, {"count-0-0": 0}]) == [{"count-0-0": 5}, {}]


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "integer", "oneOf": [{"minimum": 0, "maximum": 5}, {"minimum": 6, "maximum": 8}]}, False),
    ({"type": "integer", "oneOf": [{"maximum": -1}, {"minimum": 0, "maximum": 1000}, {"minimum": 1001}]}, False),
    ({"type": "number", "oneOf": [{"minimum": 0, "exclusiveMaximum": 5}, {"minimum": 5}]}, False),
    ({"oneOf": [{"type": "integer", "exclusiveMaximum": 6}, {"type": "integer", "minimum": 5.5}]}, False),
    ({"oneOf": [{"const": 3}, {"type": "integer", "minimum": 5, "maximum": 9}]}, False),
    ({"oneOf": [{"enum": [3, "a"]}, {"type": "number", "exclusiveMinimum": 3}]}, False),
    ({"oneOf": [{"enum": [2.5]}, {"type": "integer", "minimum": 0, "maximum": 9}]}, False),
    ({"oneOf": [{"const": 7}, {"type": "integer", "minimum": 5, "maximum": 9}]}, True),
    ({"type": "integer", "oneOf": [{"minimum": 0, "maximum": 5}, {"minimum": 5, "maximum": 8}]}, True),
    ({"type": "number", "oneOf": [{"minimum": 0, "maximum": 5}, {"minimum": 5}]}, True),
], ids=["listed-apart", "ranges-apart", "number-exclusive", "integers-between", "const-outside", "enum-outside",
        "enum-no-integer", "const-inside", "share-5", "number-share-5"])
def test_a_one_of_of_bounds_apart_is_not_warned_of(schema: dict[str, object], warned: bool) -> None:
    """Integers of bounds apart, once listed and told apart by their values, were said to be maybe shared."""
    assert any("oneOf cannot be held" in line for line in _warnings(schema)) is warned
