"""A multipleOf of any step (0.25, 0.5, 1.5, 2, 3, 5, 7) held by the grammar of an integer's or number's digits,
within its bounds: checked with llama.cpp's grammar sampler on the bundled model's vocabulary against every JSON text
near the bounds, and by real runs whose answers jsonschema validates."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from tests.conftest import run_localgen
from tests.test_gen_hunt import _Vocab, _warnings
from tests.test_schema_ranges import _grammar, _obeys

_NOT_HELD = ("the JSON schema's multipleOf cannot be enforced (llama-cpp-python's converter ignores it): check the "
             "answer")


def _places(step: object) -> int:
    """The decimals of a step's multiples: those of the step as written (0.25: 2)."""
    return len(repr(step).partition(".")[2]) if isinstance(step, float) and not step.is_integer() else 0


def _multiple_obeys(schema: dict[str, object], text: str) -> bool:
    """Whether text is a canonical JSON number within schema's bounds, a multiple of its multipleOf of at most the
    step's decimals."""
    step = schema["multipleOf"]
    decimals = text.partition(".")[2]
    if schema.get("type") == "number" and len(decimals) > _places(step):
        return False
    return _obeys(schema, text) and (Fraction(text) / Fraction(repr(step))).denominator == 1


def _texts(*bounds: float) -> list[str]:
    """JSON texts of numbers near each bound and zero: integers, halves, quarters, tenths, trailing zeros, -0, an
    exponent, a leading zero."""
    texts: list[str] = []
    for centre in {int(bound) for bound in (*bounds, 0)}:
        for whole in range(centre - 13, centre + 14):
            texts.append(str(whole))
            sign, size = ("-" if whole < 0 else ""), abs(whole)
            texts += [f"{sign}{size}.{digits}" for digits in ("0", "00", "5", "50", "25", "75", "3", "1", "125")]
    return [*dict.fromkeys(texts), "-0", "-0.0", "05", "1e1", "2.5e0", "+5", ".5", "5."]


_STEPS = [
    {"type": "integer", "multipleOf": 5},
    {"type": "integer", "multipleOf": 3, "minimum": -2000, "maximum": 1700},
    {"type": "integer", "multipleOf": 7, "exclusiveMinimum": 0},
    {"type": "integer", "multipleOf": 2, "minimum": 1, "exclusiveMaximum": 100000},
    {"type": "integer", "multipleOf": 2.5},
    {"type": "integer", "multipleOf": 0.5, "minimum": -3000, "maximum": 3000},
    {"type": "number", "multipleOf": 0.25},
    {"type": "number", "multipleOf": 0.5, "minimum": 0, "maximum": 10},
    {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": -2, "exclusiveMaximum": 2.5},
    {"type": "number", "multipleOf": 1.5, "minimum": -4.5, "maximum": 9},
    {"type": "number", "multipleOf": 2},
    {"type": "number", "multipleOf": 5, "maximum": -5},
    {"type": "number", "multipleOf": 0.25, "minimum": 0.3, "maximum": 2.1},
    {"type": "number", "multipleOf": 0.125, "exclusiveMinimum": 0, "maximum": 1},
]


@pytest.mark.parametrize("schema", _STEPS, ids=json.dumps)
def test_a_multiple_of_any_step_holds_exactly_within_its_bounds(vocab: _Vocab, schema: dict[str, object]) -> None:
    """multipleOf 0.25, 0.5, 1.5, 2, 3, 5, 7 were warned of and not held: any number passed (with its bounds
    alone where it had bounds); now only the multiples are written, of no more decimals than the step's."""
    grammar = _grammar(schema)
    bounds = [float(value) for key, value in schema.items() if key not in ("type", "multipleOf")]
    texts = _texts(*bounds)
    assert [text for text in texts if vocab.accepts(grammar, text)] == [
        text for text in texts if _multiple_obeys(schema, text)]


def test_a_multiple_of_in_an_object_holds_beside_its_other_properties(vocab: _Vocab) -> None:
    """Each property's step is its own rules, named apart."""
    schema = {"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "integer", "multipleOf": 3}, "b": {"type": "number", "multipleOf": 0.25, "minimum": 0}}}
    grammar = _grammar(schema)
    values = [{"a": 9, "b": 1.75}, {"a": 10, "b": 1.75}, {"a": 9, "b": 1.7}, {"a": -3, "b": 0}, {"a": 3, "b": -0.25}]
    assert [value for value in values if vocab.accepts(grammar, json.dumps(value))] == [values[0], values[3]]


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "integer", "multipleOf": 7}, False),
    ({"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 100}, False),
    ({"type": "integer", "multipleOf": 1009}, True),
    ({"type": "number", "multipleOf": 0.0007, "minimum": 0}, False),
    ({"type": "number", "multipleOf": 0.1234, "minimum": 0}, True),
    ({"type": "number", "multipleOf": 1 / 3, "maximum": 1}, True),
], ids=["seven", "quarter-bounded", "large-prime", "small-step", "four-digit-step", "third"])
def test_a_multiple_of_is_warned_of_only_beyond_what_its_digits_hold(schema: dict[str, object],
                                                                      warned: bool) -> None:
    """A step of over 1,000 units of its last decimal is still warned of, its bounds held alone."""
    assert [line for line in _warnings(schema) if "cannot be enforced" in line] == ([_NOT_HELD] if warned else [])


def test_bounds_that_hold_no_multiple_are_one_usage_error() -> None:
    schema = {"type": "number", "minimum": 0.3, "maximum": 0.45, "multipleOf": 0.25}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema's number of minimum 0.3, maximum 0.45, multipleOf 0.25 can be no number "
        "(hint: make its bounds hold a number (a multiple of its multipleOf))\n"), result.err


@pytest.mark.parametrize(("schema", "prompt"), [
    ({"type": "object", "required": ["price"],
      "properties": {"price": {"type": "number", "multipleOf": 0.25, "minimum": 0}}}, "What does a coffee cost?"),
    ({"type": "object", "required": ["rating"],
      "properties": {"rating": {"type": "number", "multipleOf": 0.5, "minimum": 0, "maximum": 5}}},
     "Rate this film from 0 to 5 stars."),
    ({"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "integer", "multipleOf": 5, "minimum": 0}},
     "Give three round numbers of minutes."),
    ({"type": "object", "required": ["dozen"], "properties": {"dozen": {"type": "integer", "multipleOf": 12}}},
     "How many eggs are in three dozen?"),
], ids=["quarters", "half-stars", "fives", "dozens"])
def test_a_run_answers_multiples_of_their_step(schema: dict[str, object], prompt: str) -> None:
    """A real run on the bundled model, greedy and sampled: each answer parses and jsonschema validates it."""
    from jsonschema import validate

    for extra in (["--temperature", "0"], ["--seed", "1"], ["--seed", "2"]):
        result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "120", *extra, prompt)
        assert result.returncode == 0 and result.err == "", result.err
        validate(json.loads(result.out), schema)


_NO_GRAMMAR_HOLDS = {
    "uniqueItems": "the JSON schema's uniqueItems cannot be enforced (a grammar cannot compare an array's items with "
                   "each other, so one may repeat): check the answer",
    "not": "the JSON schema's not cannot be enforced (a grammar cannot leave out the values another schema allows): "
           "check the answer",
    "minProperties": "the JSON schema's minProperties cannot be enforced (a grammar cannot keep a name it does not "
                     'list from repeating, as in {"a": 1, "a": 2}, which a parser reads as one property): check the '
                     "answer, or list the names it needs (properties and required, or propertyNames' enum)",
}


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, ["uniqueItems"]),
    ({"type": "integer", "not": {"const": 3}}, ["not"]),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2}, ["minProperties"]),
    ({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}},
      "additionalProperties": True, "minProperties": 3, "not": {"maxProperties": 5}},
     ["minProperties", "not", "uniqueItems"]),
], ids=["unique-items", "not", "min-properties-by-repeats", "all-three"])
def test_a_keyword_no_grammar_holds_is_warned_of_with_why(schema: dict[str, object], warned: list[str]) -> None:
    """uniqueItems, not and a minProperties met only by repeating a name were said to be ignored by the converter,
    as if another converter could hold them: each is now said to be beyond a grammar, and why."""
    assert _warnings(schema) == [_NO_GRAMMAR_HOLDS[key] for key in warned]


def test_a_min_properties_left_unheld_for_its_size_is_still_said_to_be_ignored() -> None:
    """An object of too many optional properties to count keeps the converter's warning, beside uniqueItems'."""
    properties = {f"p{index}": {"type": "integer"} for index in range(50)}
    schema = {"type": "object", "properties": properties, "minProperties": 1, "maxProperties": 50,
              "additionalProperties": {"type": "array", "uniqueItems": True}}
    assert _warnings(schema) == [
        "the JSON schema's maxProperties, minProperties cannot be enforced (llama-cpp-python's converter ignores "
        "them): check the answer", _NO_GRAMMAR_HOLDS["uniqueItems"]]


@pytest.mark.parametrize(("pattern", "lengths"), [
    ("^[a-z]+$", {"maxLength": 5}),
    ("^[a-z]*$", {"minLength": 2, "maxLength": 4}),
    ("^[A-Z][a-z]*-\\d{2}$", {"minLength": 6, "maxLength": 8}),
    ("^x.{2,}$", {"maxLength": 5}),
    ("^[^ ]+?$", {"minLength": 3}),
    ("^a{1,9}b$", {"minLength": 4, "maxLength": 6}),
    ("^[ab]{3}$", {"maxLength": 3}),
], ids=["plus", "star", "one-varying", "open-count", "lazy", "bounded-count", "fixed"])
def test_lengths_beside_a_pattern_of_one_repeat_hold(vocab: _Vocab, pattern: str, lengths: dict[str, int]) -> None:
    """minLength and maxLength beside a pattern were dropped with a warning: "abcdefg" passed ^[a-z]+$ with a
    maxLength of 5; now the pattern's one repeat is counted to fit them."""
    import re

    schema = {"type": "string", "pattern": pattern, **lengths}
    grammar = _grammar(schema)
    texts = ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "Ab-12", "Abc-12", "Abcd-12", "Abcde-12",
             "A-12", "xyz", "x1234", "xy", "x123456", "aab", "aaab", "aaaaab", "aaaaaab", "ab b", "aba", "abab"]
    low, high = lengths.get("minLength", 0), lengths.get("maxLength", 99)
    assert [text for text in texts if vocab.accepts(grammar, json.dumps(text))] == [
        text for text in texts if re.fullmatch(pattern[1:-1], text) and low <= len(text) <= high]


def test_lengths_beside_a_pattern_of_two_repeats_are_still_warned_of() -> None:
    assert _warnings({"type": "string", "pattern": "^[a-z]+[0-9]+$", "maxLength": 5}) == [
        "the JSON schema's maxLength beside a pattern cannot be enforced (llama-cpp-python's converter follows the "
        "pattern alone): check the answer, or count the characters in the pattern, e.g. ^[a-z]{1,20}$"]


def test_lengths_no_string_of_a_pattern_meets_are_one_usage_error() -> None:
    schema = {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 4}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema's pattern ^[A-Z]{3}$ matches no string of minLength 4 (hint: make its "
        "minLength and maxLength fit the pattern, or drop them)\n"), result.err


def test_a_run_answers_a_code_of_its_pattern_and_lengths() -> None:
    """A real run on the bundled model, greedy and sampled: each code matches its pattern and its lengths."""
    from jsonschema import validate

    schema = {"type": "object", "required": ["code"],
              "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$", "minLength": 2, "maxLength": 3}}}
    for extra in (["--temperature", "0"], ["--seed", "1"], ["--seed", "2"]):
        result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "60", *extra,
                              "What is the airport code of Paris Charles de Gaulle?")
        assert result.returncode == 0 and result.err == "", result.err
        validate(json.loads(result.out), schema)


def test_properties_of_one_step_and_bounds_share_one_set_of_rules() -> None:
    """Fifty properties of multipleOf 137 make the rules of one (1,720 of them), named after the step's grammar, not
    after each property: a run started in about 2 s, where the grammar held 86,002 rules, 18 MB of text, and the run
    took 78 s and 1.4 GB to start."""
    from localgen.json_schema import schema_grammar

    step = {"type": "integer", "multipleOf": 137}
    one = schema_grammar(json.dumps({"type": "object", "properties": {"p": step}, "required": ["p"]}), [])
    names = [f"p{i}" for i in range(50)]
    fifty = schema_grammar(json.dumps({"type": "object", "properties": dict.fromkeys(names, step),
                                       "required": names}), [])
    assert one.count("\n") > 1000
    assert fifty.count("\n") < one.count("\n") + 200, (one.count("\n"), fifty.count("\n"))


def test_an_alternative_whose_bounds_hold_no_multiple_of_its_step_is_left_out_with_a_warning() -> None:
    """An anyOf of a number of multipleOf 0.25 within 0.3 and 0.45 (no multiple there) and a string: the number's
    alternative is left out, said in a warning, as one whose bounds hold no number is, where the whole schema was
    refused."""
    from localgen.json_schema import schema_grammar

    warn: list[str] = []
    schema_grammar(json.dumps({"anyOf": [{"type": "number", "multipleOf": 0.25, "minimum": 0.3, "maximum": 0.45},
                                         {"type": "string"}]}), warn)
    assert any("anyOf alternative" in line and "multipleOf 0.25 can be no number" in line and
               "allows no value" in line for line in warn), warn


@pytest.mark.parametrize("pattern", ["^\\S+$", "^\\s+$", "^\\x41$", "^\\u00e9+$", "^\\b[a-z]+$"])
def test_a_pattern_of_an_escape_the_converter_refuses_is_refused_as_written_beside_lengths(pattern: str) -> None:
    """Lengths beside a pattern of an escape llama-cpp-python's converter does not take (\\S, \\s, \\x41, \\u00e9) or
    one that matches no character (\\b) leave the pattern as written: a refusal quotes it and says its escape is not
    supported, where it quoted the pattern narrowed to the lengths (^\\S{1,2}$) or said no string of those lengths
    matched it (\\x41 counted as three characters)."""
    from localgen.errors import LocalgenError
    from localgen.json_schema import schema_grammar

    warn: list[str] = []
    try:
        schema_grammar(json.dumps({"type": "string", "pattern": pattern, "maxLength": 2}), warn)
    except LocalgenError as exc:
        assert exc.message.startswith(f"the JSON schema's pattern {pattern}: its \\"), exc.message
        assert "is not supported" in exc.message, exc.message
        return
    assert any("maxLength" in line for line in warn), warn  # taken as written, the lengths warned of
