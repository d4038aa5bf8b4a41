"""A number's bounds off an integer (0.5, -2.75, 1e-3) held by its grammar over the decimal digits, exactly, as its
integer bounds are: checked with llama.cpp's grammar sampler on the bundled model's vocabulary against the JSON texts
near each bound, and by real runs whose answers jsonschema validates."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction

import pytest

from tests.conftest import run_localgen
from tests.test_gen_hunt import _Vocab, _warnings

_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]{1,16})?")


def _grammar(text: str) -> str:
    """The grammar of the schema in text, which must hold every keyword it has (no warning)."""
    from localgen.json_schema import schema_grammar

    warn: list[str] = []
    grammar = schema_grammar(text, warn)
    assert warn == [], warn
    return grammar


def _decimal(value: object) -> Fraction:
    """A bound as the decimal it is written as."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(str(value))


def _obeys(schema: dict[str, object], text: str) -> bool:
    """Whether text is a number's plain JSON text (no exponent, no -0, at most 16 decimals) within schema's bounds,
    written without zeros after the digits of the bound it meets on the side away from zero (but one: "1.0")."""
    if not _NUMBER.fullmatch(text) or (text.startswith("-") and Fraction(text) == 0):
        return False
    value = Fraction(text)
    checks = {"minimum": value.__ge__, "maximum": value.__le__, "exclusiveMinimum": value.__gt__,
              "exclusiveMaximum": value.__lt__}
    if not all(check(_decimal(schema[key])) for key, check in checks.items() if key in schema):
        return False
    outer = "maximum" if value >= 0 else "minimum"
    fraction = text.partition(".")[2]
    padded = fraction.endswith("0") and fraction != "0"
    return not (padded and outer in schema and value == _decimal(schema[outer]))


def _texts(*bounds: object) -> list[str]:
    """JSON texts of numbers at, above and below each bound by a few decimals, padded ones, and ones no reader wants
    (an exponent, -0, a leading zero or point)."""
    values = {Decimal(repr(bound) if isinstance(bound, float) else str(bound)) for bound in bounds} | {Decimal(0)}
    steps = [Decimal(0), *(Decimal(10) ** -places * sign for places in range(1, 5) for sign in (1, -1)),
             Decimal("0.5"), Decimal("-0.5"), Decimal(1), Decimal(-1)]
    texts = {format(value + step, "f") for value in values for step in steps}
    texts |= {format(-Decimal(text), "f") for text in texts}
    texts |= {f"{text}0" if "." in text else f"{text}.0" for text in list(texts)}
    texts |= {f"{text}00" if "." in text else f"{text}.00" for text in list(texts)}
    return [*sorted(texts), "-0", "-0.0", "5e-1", "1E-3", "-2.75e0", "00.5", ".5", "0.", "+0.5"]


_NUMBER_RANGES = [
    {"maximum": 0.5},
    {"minimum": -2.75},
    {"exclusiveMinimum": 0.1},
    {"exclusiveMaximum": -1.5},
    {"minimum": -2.75, "maximum": 0.5},
    {"exclusiveMinimum": 0.1, "exclusiveMaximum": 0.25},
    {"exclusiveMinimum": -0.5, "exclusiveMaximum": 0},
    {"minimum": 0.25, "maximum": 0.25},
    {"minimum": 12.345, "maximum": 12.35},
    {"minimum": -100.5, "exclusiveMaximum": -99.99},
    {"minimum": 0.001, "maximum": 15},
]


@pytest.mark.parametrize("bounds", _NUMBER_RANGES, ids=json.dumps)
def test_a_number_s_bounds_off_integers_hold_exactly(vocab: _Vocab, bounds: dict[str, object]) -> None:
    """A bound off an integer was warned of and not held: 0.7 passed a maximum of 0.5, -3 a minimum of -2.75."""
    schema = {"type": "number", **bounds}
    grammar = _grammar(json.dumps(schema))
    texts = _texts(*bounds.values())
    assert [text for text in texts if vocab.accepts(grammar, text)] == [text for text in texts if _obeys(schema, text)]


def test_bounds_written_with_exponents_are_read_as_their_decimals(vocab: _Vocab) -> None:
    """1e-3 and 2.5E0 are the decimals 0.001 and 2.5: held as such, the answer's own exponent still never written."""
    grammar = _grammar('{"type": "number", "exclusiveMinimum": 1e-3, "maximum": 2.5E0}')
    texts = ["0.001", "0.0011", "0.002", "0.0009", "1", "2.5", "2.50", "2.51", "1e-3", "2e0", "0"]
    assert [text for text in texts if vocab.accepts(grammar, text)] == ["0.0011", "0.002", "1", "2.5"]


@pytest.mark.parametrize(("bounds", "texts", "allowed"), [
    ({"minimum": 1, "maximum": 1}, ["1", "1.0", "1.00", "1.0000000000000000"], ["1", "1.0"]),
    ({"maximum": 0.5}, ["0.5", "0.50", "0.5000000000000000", "0.4000000000000000"], ["0.5", "0.4000000000000000"]),
    ({"minimum": -2.75}, ["-2.75", "-2.750", "-2.7500", "2.7500"], ["-2.75", "2.7500"]),
    ({"exclusiveMinimum": 1}, ["1.0000000000000001", "1.00000000000000001", "1.0000000000000001111111"],
     ["1.0000000000000001"]),
], ids=["at-one", "at-a-half", "at-a-negative-minimum", "above-one"])
def test_a_bound_s_number_is_not_padded_with_zeros(vocab: _Vocab, bounds: dict[str, object], texts: list[str],
                                                   allowed: list[str]) -> None:
    """At a maximum (a negative number's minimum) only zeros could follow, and a model that wanted a larger digit
    wrote them to the end ("1.0000000000000000"); above an exclusive bound the fraction ran to 31 digits."""
    grammar = _grammar(json.dumps({"type": "number", **bounds}))
    assert [text for text in texts if vocab.accepts(grammar, text)] == allowed


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "number", "minimum": 0.5}, None),
    ({"type": "number", "exclusiveMaximum": -0.125, "minimum": -3.5}, None),
    ({"type": ["number", "null"], "maximum": 0.5}, None),
    ({"type": "number", "maximum": 1e-150}, "maximum"),
], ids=["minimum", "both", "type-list", "too-long"])
def test_bounds_off_integers_are_warned_of_only_past_100_decimals(schema: dict[str, object],
                                                                  warned: str | None) -> None:
    bounds = [line for line in _warnings(schema) if "cannot be enforced" in line]
    assert bounds == ([f"the JSON schema's {warned} cannot be enforced (llama-cpp-python's converter ignores it): "
                       "check the answer"] if warned else [])


def test_a_number_whose_decimal_bounds_hold_none_is_one_usage_error() -> None:
    schema = {"type": "number", "exclusiveMinimum": 0.5, "maximum": 0.5}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema's number of exclusiveMinimum 0.5, maximum 0.5 can be no number (hint: make "
        "its bounds hold a number)\n"), result.err


def test_a_one_of_of_decimal_ranges_apart_is_not_warned_of() -> None:
    """Bounds off integers were not read, so two ranges apart were said to maybe share a value."""
    schema = {"type": "number", "oneOf": [{"maximum": 0.5}, {"exclusiveMinimum": 0.5}]}
    assert _warnings(schema) == []


_RUN_SCHEMA = {"type": "object", "required": ["chance", "change"], "properties": {
    "chance": {"type": "number", "minimum": 0, "maximum": 0.5},
    "change": {"type": "number", "minimum": -2.75, "exclusiveMaximum": -0.1}}}


def test_a_run_answers_numbers_within_decimal_bounds() -> None:
    """A real run on the bundled model: each answer parses, and jsonschema finds every number within its bounds."""
    from jsonschema import validate

    for seed in ("1", "2", "3"):
        result = run_localgen("run", "--json-schema", json.dumps(_RUN_SCHEMA), "-n", "120", "--seed", seed,
                              "Give the chance of rain tomorrow and the change in temperature.")
        assert result.returncode == 0 and result.err == "", result.err
        validate(json.loads(result.out), _RUN_SCHEMA)


def test_a_greedy_run_at_a_bound_ends_its_number() -> None:
    """A greedy run on the bundled model wrote 1.0000000000000000 for a number from 1 to 1."""
    schema = {"type": "number", "minimum": 1, "maximum": 1}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "--temperature", "0", "-n", "40",
                          "Pick a number.")
    assert result.returncode == 0 and result.out.strip() in ("1", "1.0"), result.out


def test_alternatives_nested_deep_without_all_of_are_not_said_to_be_all_of_parts() -> None:
    """Each anyOf or oneOf level took a frame more as it was prepared than its subschemas did: 215 levels of a property
    holding a oneOf were refused as "allOf parts and $refs" nesting too deep to merge, where the schema has neither."""
    schema: object = {"type": "integer"}
    for _ in range(215):
        schema = {"type": "object", "properties": {"a": {"oneOf": [schema, False, {"type": "null"}]}}}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema nests too deep to convert (hint: flatten it, or use $defs)\n"), result.err


@pytest.mark.parametrize(("schema", "texts", "allowed"), [
    ('{"type": "number", "multipleOf": 0.01}', ["1", "1.5", "1.25", "1.250", "1.255", "-0.07", "-0.001", "1e-2"],
     ["1", "1.5", "1.25", "-0.07"]),
    ('{"type": "number", "multipleOf": 1e-1, "minimum": 0, "maximum": 1}', ["0", "0.1", "0.15", "1", "1.0", "1.1"],
     ["0", "0.1", "1", "1.0"]),
    ('{"type": "number", "multipleOf": 0.001, "exclusiveMinimum": 0.0005, "maximum": 0.5}',
     ["0", "0.0005", "0.001", "0.25", "0.499", "0.4995", "0.5", "0.501"], ["0.001", "0.25", "0.499", "0.5"]),
    ('{"type": "number", "multipleOf": 1}', ["3", "3.5", "-3", "3e0"], ["3", "-3"]),
], ids=["hundredths", "tenths-bounded", "thousandths-bounded", "ones"])
def test_a_number_s_multiple_of_a_power_of_ten_holds_its_decimals(vocab: _Vocab, schema: str, texts: list[str],
                                                                  allowed: list[str]) -> None:
    """A number's multipleOf was warned of and not held: 1.255 passed a multipleOf of 0.01."""
    grammar = _grammar(schema)
    assert [text for text in texts if vocab.accepts(grammar, text)] == allowed


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "number", "multipleOf": 0.25}, False),
    ({"type": "number", "multipleOf": 0.5, "minimum": 0}, False),
    ({"type": "number", "multipleOf": 3}, False),
    ({"type": "number", "multipleOf": 0.1234}, True),
    ({"type": "number", "multipleOf": 0.01, "maximum": 1}, False),
    ({"type": ["number", "null"], "multipleOf": 0.1}, False),
], ids=["quarter", "half", "three", "hundredths", "type-list", "four-digit-step"])
def test_a_multiple_of_is_warned_of_only_where_digits_cannot_hold_it(schema: dict[str, object], warned: bool) -> None:
    assert ("the JSON schema's multipleOf cannot be enforced (llama-cpp-python's converter ignores it): check the "
            "answer" in _warnings(schema)) is warned


def test_a_number_whose_multiple_of_its_bounds_leave_none_is_one_usage_error() -> None:
    schema = {"type": "number", "minimum": 0.001, "maximum": 0.009, "multipleOf": 0.01}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema's number of minimum 0.001, maximum 0.009, multipleOf 0.01 can be no number "
        "(hint: make its bounds hold a number (a multiple of its multipleOf))\n"), result.err


def test_a_run_answers_prices_of_at_most_two_decimals() -> None:
    """A real run on the bundled model: each price has at most two decimals, and jsonschema finds it within its bounds
    (it divides floats, 69.79 / 0.01 = 6978.999..., so the decimals are counted here)."""
    from jsonschema import validate

    schema = {"type": "array", "minItems": 3, "maxItems": 3,
              "items": {"type": "number", "multipleOf": 0.01, "exclusiveMinimum": 0, "maximum": 99.99}}
    for seed in ("1", "2", "3"):
        result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "60", "--seed", seed,
                              "Give the prices of three fruits in dollars.")
        assert result.returncode == 0 and result.err == "", result.err
        bounds = {key: value for key, value in schema["items"].items() if key != "multipleOf"}  # type: ignore[union-attr]
        validate(json.loads(result.out), {**schema, "items": bounds})
        assert all(len(text.partition(".")[2]) <= 2 for text in re.findall(r"[0-9.]+", result.out)), result.out


@pytest.mark.parametrize(("schema", "texts", "allowed"), [
    ('{"type": "number", "multipleOf": 1, "minimum": 0, "maximum": 5}', ["4", "4.0", "5", "5.0", "0", "0.0"],
     ["4", "5", "0"]),
    ('{"type": "number", "multipleOf": 1.0, "minimum": -26}', ["-26", "-26.0", "-25", "-25.0", "3"],
     ["-26", "-25", "3"]),
], ids=["top-bound", "bottom-bound"])
def test_a_multiple_of_one_lets_no_number_end_in_point_zero(vocab: _Vocab, schema: str, texts: list[str],
                                                           allowed: list[str]) -> None:
    """A number's multipleOf of 1 let only its bound away from zero take ".0": 5.0 passed, 4.0 did not."""
    grammar = _grammar(schema)
    assert [text for text in texts if vocab.accepts(grammar, text)] == allowed


@pytest.mark.parametrize(("schema", "given", "hint"), [
    ({"type": "integer", "minimum": 0.1, "maximum": 0.9}, "minimum 0.1, maximum 0.9", "an integer"),
    ({"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5}, "minimum 1, maximum 4, multipleOf 5",
     "an integer (a multiple of its multipleOf)"),
], ids=["no-multiple-of", "multiple-of"])
def test_an_integer_whose_bounds_hold_none_is_hinted_of_a_multiple_of_only_where_it_has_one(
        schema: dict[str, object], given: str, hint: str) -> None:
    """An integer with no multipleOf was hinted to make its bounds hold "a multiple of its multipleOf"."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        f"localgen: error: the JSON schema's integer of {given} can be no integer (hint: make its bounds hold "
        f"{hint})\n"), result.err


def test_an_alternative_kept_without_its_check_fails_loudly() -> None:
    """Leaving out schema(item) passed a false alternative on as if it allowed values."""
    from localgen.json_schema_allof import KeptAlternatives

    kept = KeptAlternatives("anyOf", [])
    with pytest.raises(RuntimeError, match="unchecked"), kept.trying(False):
        kept.add(False)
    with kept.trying({"type": "null"}):
        kept.add(kept.schema({"type": "null"}))
    assert kept.result() == [{"type": "null"}]
