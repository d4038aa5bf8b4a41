"""JSON schemas whose keywords the converter read apart from each other, or wrongly, and --grammar paths: what the
answer may be, checked with llama.cpp's grammar sampler on the bundled model's vocabulary and by real runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.test_gen_hunt import GREEDY, _allowed, _Vocab


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": ["string", "integer"], "anyOf": [{"maxLength": 3}, {"minimum": 0}]},
     ["ab", 1, "abcd", None, True], ["ab", 1, "abcd"]),
    ({"type": ["string", "integer"], "anyOf": [{"type": "string"}, {"type": "null"}]}, ["ab", 1, None], ["ab"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "additionalProperties": False},
     [{"a": 1}, {"b": 2}, {}, {"a": "x"}, {"c": 1}, 5], [{"a": 1}, {"b": 2}]),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}], "oneOf": [{"type": "integer"}, {"type": "null"}]},
     [1, "a", None], [1]),
    ({"type": "string", "oneOf": [{"maxLength": 2}, {"const": "hello"}]}, ["ab", "hello", "abc", 5], ["ab", "hello"]),
], ids=["type-list", "type-list-drops-null", "required-names", "any-of-and-one-of", "one-of"])
def test_an_any_of_or_one_of_holds_the_keywords_beside_it(vocab: _Vocab, schema: dict[str, object],
                                                          values: list[object], allowed: list[object]) -> None:
    """The converter followed the alternatives alone: a type list beside them let null and true through, an object's
    anyOf of required names allowed any value, and beside a oneOf an anyOf was dropped."""
    assert _allowed(vocab, schema, values) == allowed


def test_an_any_of_none_of_whose_alternatives_fits_the_keywords_beside_it_is_one_usage_error() -> None:
    result = run_localgen("run", "--json-schema", json.dumps({"type": "string", "anyOf": [{"type": "integer"}]}), "hi")
    assert result.returncode == 2 and result.err.strip().splitlines() == [
        "localgen: error: the JSON schema's anyOf with the keywords beside it asks for a value of type \"string\" and "
        "of type \"integer\", which no value is (hint: make the keywords beside the anyOf fit one of its schemas, or "
        "drop them)"], result.err


@pytest.mark.parametrize("kind", ["type-list", "required-names"])
def test_nested_alternatives_beside_keywords_convert_at_once(kind: str) -> None:
    """Each alternative carried the keywords beside it, nested schemas with them, and was converted apart: 12 nested
    nullable anyOfs took a second and a 7 MB grammar, 20 never ended."""
    from localgen.json_schema import schema_grammar

    schema: dict[str, object] = {"type": "string"}
    for _ in range(20):
        schema = {"type": ["object", "null"], "anyOf": [{"properties": {"c": schema}, "required": ["c"]},
                                                        {"type": "null"}]} if kind == "type-list" else {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": schema},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    start = time.monotonic()
    grammar = schema_grammar(json.dumps(schema), [])
    assert time.monotonic() - start < 0.5 and len(grammar) < 100_000


def test_an_integer_s_enum_value_with_a_zero_fraction_is_written_as_an_integer() -> None:
    """{"type": "integer", "enum": [1.0]} allowed the text 1.0 alone, which a reader of integers takes for a float."""
    result = run_localgen("run", "--json-schema", '{"type": "integer", "enum": [1.0]}', "-n", "8", *GREEDY,
                          "Pick a number.")
    assert result.returncode == 0 and result.out == "1\n", (result.out, result.err)


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": "integer", "const": 2.0}, ["2", "2.0"], ["2"]),
    ({"type": ["integer", "string"], "enum": [3.0, "a"]}, ["3", "3.0", '"a"'], ["3", '"a"']),
    ({"type": "number", "enum": [1.0]}, ["1.0", "1"], ["1.0"]),
    ({"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
      "const": {"n": 3.0, "x": 2.0}}, ['{"n": 3, "x": 2.0}', '{"n": 3.0, "x": 2.0}'], ['{"n": 3, "x": 2.0}']),
    ({"type": "array", "items": {"type": "integer"}, "enum": [[1.0, 2.0]]}, ["[1, 2]", "[1.0, 2.0]"], ["[1, 2]"]),
], ids=["const", "type-list", "number-kept", "property", "items"])
def test_an_integer_s_value_with_a_zero_fraction_is_allowed_as_an_integer(vocab: _Vocab, schema: dict[str, object],
                                                                          values: list[str],
                                                                          allowed: list[str]) -> None:
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    assert [text for text in values if vocab.accepts(grammar, text)] == allowed


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"properties": {"a": {"type": "integer"}}, "minLength": 2},
     [{"a": 1}, "ab", 5, None, [1], {"a": "x"}, "a"], [{"a": 1}, "ab", 5, None, [1]]),
    ({"items": {"type": "string"}, "maxLength": 1, "required": ["a"]},
     [["x"], "x", {"a": 1}, True, [1], "xy"], [["x"], "x", {"a": 1}, True]),
    ({"properties": {"a": {"type": "integer"}}}, [{"a": 1}, "ab"], [{"a": 1}]),
], ids=["properties-and-min-length", "items-max-length-required", "one-type-s-keywords-alone"])
def test_a_schema_of_no_type_with_keywords_of_several_types_allows_any_value_each_held_to_its_own(
        vocab: _Vocab, schema: dict[str, object], values: list[object], allowed: list[object]) -> None:
    """Such a schema was read as an object (or array) alone, where JSON Schema allows a value of any type, each kept
    to its own type's keywords (a schema of one type's keywords alone still gives that type, as the converter has
    it)."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize("name", ['out/yes="no".txt', "out/a=[1].txt", "out/root = [a-z]+", "out/x = y"])
def test_a_missing_grammar_file_in_a_folder_is_named_as_no_such_file(tmp_path: Path, name: str) -> None:
    """A path whose name held = and a quote or [ was taken for grammar text and told it defines no rule with ::=."""
    path = f"{tmp_path}/{name}"
    result = run_localgen("run", "--grammar", path, "hi")
    assert result.returncode == 2 and f"no such file: {path}" in result.err, result.err


DRAFT_7 = "http://json-schema.org/draft-07/schema#"


def test_a_ref_beside_keywords_under_a_declared_draft_7_is_read_alone() -> None:
    """Draft 7 ignores the keywords beside a $ref: they were held beside it as 2019-09 has it, and a type beside it
    that its target is not refused the schema as allowing no value."""
    schema = {"$schema": DRAFT_7, "definitions": {"N": {"type": "integer"}}, "$ref": "#/definitions/N",
              "type": "string"}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "8", *GREEDY, "Pick a number.")
    assert result.returncode == 0 and isinstance(json.loads(result.out), int), (result.out, result.err)
    assert result.err == ("localgen: warning: the JSON schema declares draft 7, which reads a $ref alone: the type "
                          "beside a $ref cannot hold (leave out its $schema, or put both in an allOf, to hold them)\n")


@pytest.mark.parametrize(("declared", "allowed"), [
    ("http://json-schema.org/draft-04/schema#", [{"a": "abc"}, {"a": "a"}]),
    ("https://json-schema.org/draft-06/schema", [{"a": "abc"}, {"a": "a"}]),
    ("https://json-schema.org/draft/2020-12/schema", [{"a": "a"}]),
    (None, [{"a": "a"}]),
])
def test_a_ref_s_neighbours_hold_as_the_declared_draft_has_it(vocab: _Vocab, declared: str | None,
                                                             allowed: list[object]) -> None:
    schema: dict[str, object] = {"definitions": {"S": {"type": "string"}}, "type": "object", "required": ["a"],
                                 "properties": {"a": {"$ref": "#/definitions/S", "maxLength": 2}}}
    if declared:
        schema["$schema"] = declared
    assert _allowed(vocab, schema, [{"a": "abc"}, {"a": "a"}]) == allowed


def test_an_enum_keeps_only_the_multiples_of_its_multiple_of() -> None:
    """The converter ignores multipleOf, and an enum beside it kept every value: this answer was 4."""
    schema = {"type": "integer", "enum": [4, 7], "multipleOf": 7}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "8", *GREEDY, "-q", "Pick a number.")
    assert result.returncode == 0 and result.out == "7\n", (result.out, result.err)


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"enum": [0.3, 0.25, 1, "a"], "multipleOf": 0.1}, [0.3, 0.25, 1, "a"], [0.3, 1, "a"]),
    ({"type": "array", "items": {"type": "integer", "multipleOf": 2}, "enum": [[2, 4], [2, 3]]},
     [[2, 4], [2, 3]], [[2, 4]]),
], ids=["decimals", "items"])
def test_an_enum_s_numbers_are_kept_to_its_multiple_of(vocab: _Vocab, schema: dict[str, object],
                                                       values: list[object], allowed: list[object]) -> None:
    assert _allowed(vocab, schema, values) == allowed


def test_an_enum_none_of_whose_numbers_is_a_multiple_of_its_multiple_of_is_one_usage_error() -> None:
    result = run_localgen("run", "--json-schema", '{"enum": [3, 5], "multipleOf": 2}', "hi")
    assert result.returncode == 2 and result.err.startswith(
        "localgen: error: the JSON schema's enum [3, 5] holds no value its other keywords allow"), result.err


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"allOf": [{"const": {"a": 1}}, {"anyOf": [{"type": "object"}, {"type": "null"}]}]},
     [{"a": 1}, None, {}], [{"a": 1}]),
    ({"enum": ["a", 1], "anyOf": [{"type": "string"}, {"type": "boolean"}]}, ["a", 1, True], ["a"]),
], ids=["all-of", "beside-any-of"])
def test_an_alternative_none_of_whose_enum_values_it_allows_is_dropped(vocab: _Vocab, schema: dict[str, object],
                                                                       values: list[object],
                                                                       allowed: list[object]) -> None:
    """The null alternative left the const no value, and the whole schema was refused as a const that holds none."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "integer", "enum": [2, 4], "multipleOf": 2, "minimum": 1, "exclusiveMaximum": 9}, []),
    ({"type": "object", "const": {"a": 1}, "maxProperties": 1}, []),
    ({"type": "number", "multipleOf": 2, "minimum": 1e-150}, ["minimum", "multipleOf"]),
], ids=["enum", "const", "no-enum"])
def test_keywords_an_enum_beside_them_holds_are_not_said_to_be_ignored(schema: dict[str, object],
                                                                       warned: list[str]) -> None:
    """The warning named every numeric bound and multipleOf as ignored, beside an enum whose values keep to them."""
    from tests.test_gen_hunt import _warnings

    expected = [f"the JSON schema's {', '.join(warned)} cannot be enforced (llama-cpp-python's converter ignores "
                "them): check the answer"] if warned else []
    assert _warnings(schema) == expected


def test_a_long_enum_s_values_are_one_tree_of_their_shared_beginnings(vocab: _Vocab) -> None:
    """Each value was an alternative of its own, which llama.cpp's sampler follows at each token: 256 of them halved
    the decoding speed. The tree allows the same values."""
    from localgen.grammar import gbnf_pieces
    from localgen.json_schema import schema_grammar

    values = [*range(256), "red", "green", "grey", 'a"b', None, {"a": 1}]
    grammar = schema_grammar(json.dumps({"enum": values}), [])
    root = next(line for line in grammar.splitlines() if line.startswith("root ::= "))
    depth, first_choices = 0, 1  # the alternatives outside parentheses: those the sampler starts from
    for kind, body in gbnf_pieces(root):
        depth += (body == "(") - (body == ")") if not kind else 0
        first_choices += not kind and body == "|" and depth == 0
    assert first_choices == 13, root  # ten digits, a quote, null, {
    texts = [*map(json.dumps, values), "256", "01", '"gre"', '"greenish"', "nul"]
    assert [text for text in texts if vocab.accepts(grammar, text)] == [*map(json.dumps, values)]


def test_an_integer_between_bounds_is_one_of_the_integers_they_hold() -> None:
    """The converter ignores minimum and maximum: this answer was 1, and a warning said the bounds may be broken."""
    schema = {"type": "object", "required": ["rating"],
              "properties": {"rating": {"type": "integer", "minimum": 7, "maximum": 9}}}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "16", *GREEDY, "Rate this film.")
    assert result.returncode == 0 and result.err == "", result.err
    assert json.loads(result.out)["rating"] in (7, 8, 9), result.out


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": "integer", "minimum": 1, "maximum": 5, "multipleOf": 2}, [0, 1, 2, 4, 6], [2, 4]),
    ({"type": ["integer", "null"], "exclusiveMinimum": 0.5, "exclusiveMaximum": 3}, [0, 1, 2, 3, None], [1, 2, None]),
    ({"allOf": [{"type": "integer", "minimum": 5}, {"anyOf": [{"maximum": 3}, {"maximum": 7}]}]}, [4, 5, 7, 8], [5, 7]),
    ({"type": "integer", "minimum": 0, "maximum": 1000}, [0, 1000, 1001], [0, 1000]),
], ids=["multiple-of", "type-list-exclusive", "empty-alternative-dropped", "too-many-to-list"])
def test_a_bounded_integer_holds_its_bounds(vocab: _Vocab, schema: dict[str, object], values: list[object],
                                            allowed: list[object]) -> None:
    assert _allowed(vocab, schema, values) == allowed


def test_an_integer_whose_bounds_hold_none_is_one_usage_error() -> None:
    result = run_localgen("run", "--json-schema", '{"type": "integer", "minimum": 3, "maximum": 2}', "hi")
    assert result.returncode == 2 and result.err.strip().splitlines() == [
        "localgen: error: the JSON schema's integer of minimum 3, maximum 2 can be no integer (hint: make its bounds "
        "hold an integer)"], result.err


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": ["integer", "null"], "minimum": 1, "maximum": 5}, False),
    ({"type": "integer", "minimum": 0, "maximum": 1000}, False),
    ({"type": "number", "minimum": 1e-150, "maximum": 5}, True),
], ids=["listed", "too-many-to-list", "number"])
def test_bounds_an_integer_s_listing_holds_are_not_said_to_be_ignored(schema: dict[str, object],
                                                                      warned: bool) -> None:
    from tests.test_gen_hunt import _warnings

    assert bool(_warnings(schema)) is warned


@pytest.mark.parametrize(("schema", "hint"), [
    ({"type": "integer", "format": "int32"}, "check the answer"),
    ({"type": ["number", "null"], "format": "double"}, "check the answer"),
    ({"type": "string", "format": "email"}, "check the answer, or give a pattern"),
    ({"format": "email"}, "check the answer, or give a pattern"),
], ids=["integer", "number-or-null", "string", "no-type"])
def test_a_number_s_format_is_not_hinted_to_be_given_as_a_pattern(schema: dict[str, object], hint: str) -> None:
    """OpenAPI's int32 on an integer was hinted to be given as a pattern, which holds strings alone."""
    from tests.test_gen_hunt import _warnings

    assert _warnings(schema)[-1].endswith(f"and ignores it): {hint}")


def test_an_enum_whose_values_each_begin_the_next_is_converted(vocab: _Vocab) -> None:
    """The tree of 1,499 values, each the one before and one character more, nested 1,499 deep: the schema was refused
    as nesting too deep to convert."""
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps({"enum": ["a" * size for size in range(1, 1500)]}), [])
    texts = [json.dumps("a" * size) for size in (1, 64, 65, 1499, 1500)]
    assert [text for text in texts if vocab.accepts(grammar, text)] == texts[:4]


def test_a_long_enum_converts_at_once() -> None:
    """Each value was looked for among all the others as it was checked: 2,000 values took a second, 5,000 six."""
    from localgen.json_schema import schema_grammar

    start = time.monotonic()
    schema_grammar(json.dumps({"type": "string", "enum": [f"value-{i:05d}" for i in range(5000)]}), [])
    assert time.monotonic() - start < 1


@pytest.mark.parametrize(("schema", "given"), [
    ({"type": "string", "anyOf": [{"enum": 5}]}, "5"),
    ({"type": ["string", "null"], "oneOf": [{"const": 1, "enum": None}]}, "null"),
    ({"allOf": [{"enum": [1]}, {"enum": 5}]}, "5"),
], ids=["any-of", "one-of-beside-a-type-list", "all-of"])
def test_a_malformed_enum_in_an_alternative_beside_keywords_is_named(schema: dict[str, object], given: str) -> None:
    """The alternative's enum was read before its kind was checked: an internal error (TypeError: 'int' object is not
    iterable), or in an allOf an enum said to be one that no value meets beside the other."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err.strip().splitlines() == [
        f"localgen: error: the JSON schema's enum is {given}, not a list of values (hint: e.g. \"enum\": [\"red\", "
        "\"green\"])"], result.err


HUGE = 10**400  # beyond what a float holds


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": "integer", "minimum": HUGE, "maximum": HUGE}, [HUGE, HUGE + 1, 1], [HUGE]),
    ({"enum": [3, 6, HUGE * 3], "multipleOf": HUGE}, [3, 6, HUGE * 3], [HUGE * 3]),
    ({"enum": [0.5, 3, HUGE], "multipleOf": 1.5}, [0.5, 3, HUGE], [3]),
    ({"type": "integer", "minimum": 1, "maximum": HUGE}, [1, HUGE], [1]),  # the converter's integers: 16 digits
], ids=["listed", "multiple-of", "float-multiple-of", "too-many-to-list"])
def test_integers_too_big_for_a_float_are_reckoned_as_integers(vocab: _Vocab, schema: dict[str, object],
                                                                 values: list[object], allowed: list[object]) -> None:
    """Each was an internal error: OverflowError: int too large to convert to float."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize("text", ['# from https://example.com/g\nroot = "a"', '# a/b\nroot := "yes" | "no"',
                                  "# a grammar\r\nroot : [a-z]+"], ids=["url-comment", "slash-comment", "crlf"])
def test_grammar_text_of_several_lines_without_the_rule_sign_is_told_so(text: str) -> None:
    """A slash in a comment line made the text a path: it was refused as `no such file`."""
    result = run_localgen("run", "--grammar", text, "hi")
    assert result.returncode == 2 and result.err.startswith(
        "localgen: error: the --grammar text defines no rule with ::= (hint:"), result.err


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"anyOf": [{"type": "integer", "minimum": 0.1, "maximum": 0.9}, {"type": "null"}]}, [0, 1, None], [None]),
    ({"anyOf": [False, {"type": "integer"}]}, [1, None], [1]),
    ({"oneOf": [{"enum": [1, 2], "minimum": 5}, {"type": "string"}]}, [1, "a"], ["a"]),
    ({"anyOf": [{"allOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "boolean"}]}, [1, "a", True], [True]),
    ({"anyOf": [{"anyOf": [{"const": 1, "maximum": 0}]}, {"type": "null"}]}, [1, None], [None]),
    ({"type": "string", "anyOf": [False, {"maxLength": 2}]}, ["ab", "abc"], ["ab"]),
], ids=["bounded-integer", "false", "one-of-enum", "all-of", "nested-any-of", "false-beside-keywords"])
def test_an_alternative_that_allows_no_value_is_dropped(vocab: _Vocab, schema: dict[str, object],
                                                        values: list[object], allowed: list[object]) -> None:
    """A plain anyOf or oneOf was refused whole where one alternative allowed no value ("can be no integer", "holds
    false"), while the same alternative was dropped within an allOf or beside other keywords."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize(("schema", "message"), [
    ({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0.1, "maximum": 0.9}}},
                {"type": "null"}]}, "the JSON schema's integer of minimum 0.1, maximum 0.9 can be no integer"),
    ({"anyOf": [{"enum": [1], "minimum": 2}, False]}, "the JSON schema's enum [1] holds no value its other keywords"),
], ids=["a-property-s", "all-of-them"])
def test_an_alternative_whose_property_allows_no_value_or_of_none_left_is_refused(schema: dict[str, object],
                                                                                   message: str) -> None:
    """An optional property that allows no value leaves its object others: it is refused, not dropped with it."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err.startswith(f"localgen: error: {message}"), result.err


@pytest.mark.parametrize(("schema", "warned"), [
    ({"allOf": [{"type": "integer"}, {"minimum": 1, "maximum": 5}]}, ""),
    ({"$defs": {"S": {"type": "integer"}}, "type": "object",
      "properties": {"a": {"$ref": "#/$defs/S", "minimum": 1, "maximum": 5}}}, ""),
    ({"type": "integer", "oneOf": [{"minimum": 0, "maximum": 5}, {"minimum": 3, "maximum": 8}]}, ""),
    ({"type": "integer", "enum": [1, 2, 3, 4, 5], "anyOf": [{"minimum": 4}, {"maximum": 1}]}, ""),
    ({"anyOf": [{"type": "integer", "minimum": 0.1, "maximum": 0.9}, {"type": "null"}]}, ""),
    ({"type": "integer", "enum": [1, 2], "minimum": 1, "exclusiveMinimum": True}, "exclusiveMinimum"),
    ({"allOf": [{"type": "number"}, {"minimum": 1e-150, "maximum": 5000.5}]}, "maximum, minimum"),
], ids=["all-of", "ref-beside", "one-of", "enum-beside-any-of", "dropped-alternative", "draft-4-exclusive",
        "too-many-to-list"])
def test_bounds_are_said_to_be_ignored_exactly_where_the_grammar_does_not_hold_them(schema: dict[str, object],
                                                                                    warned: str) -> None:
    """The warning read the schema as written: bounds an allOf, a $ref or an alternative gave an integer, which its
    listing holds, were said to be ignored, and draft 4's true exclusiveMinimum beside an enum, which its values are
    not kept to, was not."""
    from tests.test_gen_hunt import _warnings

    them = "them" if "," in warned else "it"
    bounds = [line for line in _warnings(schema) if "cannot be enforced" in line]  # a dropped alternative's, a
    # oneOf's, said apart
    assert bounds == ([f"the JSON schema's {warned} cannot be enforced (llama-cpp-python's converter "
                       f"ignores {them}): check the answer"] if warned else [])


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "string", "anyOf": [{"$ref": "https://example.com/s"}]},
     "the JSON schema's anyOf refers to https://example.com/s, a remote schema, which localgen does not fetch (hint: "
     "copy that schema into $defs and refer to it there)"),
    ({"$defs": {"S": {"allOf": [{"type": "integer"}, {"type": "string"}]}}, "type": "string",
      "anyOf": [{"$ref": "#/$defs/S"}]},
     "the JSON schema's allOf asks for a value of type \"integer\" and of type \"string\", which no value is (hint: "
     "write the combined schema out in one object, or drop the allOf)"),
    ({"$defs": {"S": {"type": "object"}}, "type": "object",
      "properties": {"a": {"$ref": "#/$defs/S", "anyOf": [{"$ref": "#/$defs/none"}]}}},
     "the JSON schema's anyOf refers to #/$defs/none, which does not resolve to a schema (hint: point the $ref at a "
     "schema in $defs)"),
    ({"type": "string", "oneOf": [{"allOf": [{"format": "date"}, {"format": "time"}]}]},
     "the JSON schema's allOf gives format two values, \"date\" and \"time\", which localgen cannot combine (hint: "
     "write the combined schema out in one object, or drop the allOf)"),
], ids=["remote-ref-in-any-of", "all-of-in-an-alternative", "ref-in-an-any-of-beside-a-ref", "one-of-s-all-of"])
def test_a_refused_merge_names_the_keyword_the_user_wrote(schema: dict[str, object], message: str) -> None:
    """The messages of an allOf were reworded as those of the $ref or anyOf whose neighbours were merged with it, an
    allOf or $ref within it named as the outer keyword ("the JSON schema refers to #/$defs/none", the $ref beside
    the anyOf taken for it)."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == f"localgen: error: {message}\n", result.err


@pytest.mark.parametrize(("schema", "warned"), [
    ({"anyOf": [{"type": "integer", "minimum": 10, "maximum": 1}, {"type": "null"}]},
     "the JSON schema's anyOf alternative {\"type\": \"integer\", \"minimum\": 10, \"maximum\": 1} (the JSON "
     "schema's integer of minimum 10, maximum 1 can be no integer) allows no value, so the answer is never it: fix "
     "it, or drop it"),
    ({"oneOf": [{"enum": [1], "minimum": 3}, {"type": "integer", "minimum": 0.1, "maximum": 0.9}, {"type": "null"}]},
     "the JSON schema's oneOf alternative {\"enum\": [1], \"minimum\": 3} (the JSON schema's enum [1] holds no "
     "value its other keywords allow); oneOf alternative {\"type\": \"integer\", \"minimum\": 0.1, \"maximum\": "
     "0.9} (the JSON schema's integer of minimum 0.1, maximum 0.9 can be no integer) allow no value, so the answer is "
     "never one of them: fix them, or drop them"),
    ({"anyOf": [False, {"type": "null"}]}, None),
], ids=["one", "two", "false"])
def test_a_dropped_alternative_is_named_in_one_warning(schema: dict[str, object], warned: str | None) -> None:
    """Alternatives that allow no value were dropped unsaid, every answer null where swapped bounds were refused; a
    false, written to allow nothing, is dropped without a word."""
    from tests.test_gen_hunt import _warnings

    assert _warnings(schema) == ([warned] if warned else [])


def test_a_run_warns_of_a_dropped_alternative() -> None:
    """The warning reaches the user on stderr, one line, and the run still answers."""
    schema = {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 1}, {"type": "null"}]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "8", "--temperature", "0", "Say null")
    assert result.returncode == 0 and result.out.strip() == "null", result.err
    assert "allows no value, so the answer is never it" in result.err, result.err


_FORBIDS_REQUIRED = {"allOf": [{"properties": {"a": {}}, "additionalProperties": False},
                               {"properties": {"b": {}}, "required": ["b"]}]}


@pytest.mark.parametrize(("schema", "allowed"), [
    ({"anyOf": [_FORBIDS_REQUIRED, {"type": "null"}]}, ["abc", 5, None, [1]]),
    (_FORBIDS_REQUIRED, ["abc", 5, None, [1]]),
    ({**_FORBIDS_REQUIRED, "type": ["object", "string"]}, ["abc"]),
], ids=["alternative", "top-level", "type-list"])
def test_an_all_of_no_object_meets_allows_its_other_types(vocab: _Vocab, schema: dict[str, object],
                                                          allowed: list[object]) -> None:
    """A part's additionalProperties false forbidding a property another part requires was taken to allow no value
    where the merged schema allows other types than object: the alternative was dropped unsaid (only null), and the
    same schema at the top level refused."""
    values: list[object] = ["abc", 5, None, [1], {"b": 1}, {"a": 1}, {}]
    assert _allowed(vocab, schema, values) == allowed


def test_an_all_of_of_objects_alone_none_meets_is_still_refused() -> None:
    """Where object is the only type the merged schema allows, no value meets it: refused, naming the property."""
    result = run_localgen("run", "--json-schema", json.dumps({**_FORBIDS_REQUIRED, "type": "object"}), "hi")
    assert result.returncode == 2 and result.err.startswith(
        "localgen: error: the JSON schema's allOf requires b, which a part's additionalProperties false forbids"), \
        result.err


_ONE_OF_WARNING = ("the JSON schema's oneOf cannot be held to exactly one of its alternatives (llama-cpp-python's "
                   "converter reads it as an anyOf, and a value may meet several of them): check the answer")
_PETS = {"$defs": {"Cat": {"type": "object", "properties": {"pet_type": {"const": "cat", "type": "string"}},
                           "required": ["pet_type"]},
                   "Dog": {"type": "object", "properties": {"pet_type": {"const": "dog", "type": "string"}},
                           "required": ["pet_type"]}},
         "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "discriminator": {"propertyName": "pet_type"}}


@pytest.mark.parametrize(("schema", "warned"), [
    ({"type": "integer", "oneOf": [{"minimum": 0, "maximum": 5}, {"minimum": 3, "maximum": 8}]}, True),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, True),
    ({"oneOf": [{"const": "a"}, {"enum": ["a", "b"]}]}, True),
    ({"oneOf": [{"type": "object", "properties": {"a": {}}}, {"type": "object", "properties": {"b": {}}}]}, True),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, False),
    ({"oneOf": [{"const": "a"}, {"enum": ["b", "c"]}]}, False),
    (_PETS, False),
    ({"oneOf": [{"type": "integer", "minimum": 5, "maximum": 3}, {"type": "integer"}]}, False),
    ({"anyOf": [{"type": "integer"}, {"type": "number"}]}, False),
], ids=["bounds", "integer-is-a-number", "shared-const", "objects", "types", "consts", "discriminated",
        "one-left", "any-of"])
def test_a_one_of_whose_alternatives_may_overlap_is_warned_of(schema: dict[str, object], warned: bool) -> None:
    """A oneOf was read as an anyOf unsaid, a value meeting two alternatives allowed ({"minimum": 0, "maximum": 5}
    and {"minimum": 3, "maximum": 8} let 4 through); alternatives apart by type or listed values, as a discriminated
    union's, are not warned of."""
    from tests.test_gen_hunt import _warnings

    assert (_ONE_OF_WARNING in _warnings(schema)) is warned


@pytest.mark.parametrize(("schema", "warned"), [
    ({"$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 100000}},
      "allOf": [{"$ref": "#/$defs/n"}, {"maximum": 10}]}, ""),
    ({"$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 100000}}, "type": "string"}, ""),
    ({"$defs": {"n": {"type": "number", "minimum": 1e-150, "maximum": 100000.5}, "m": {"$ref": "#/$defs/n"}},
      "type": "object", "properties": {"a": {"$ref": "#/$defs/m"}}}, "maximum, minimum"),
], ids=["merged-by-all-of", "never-referred-to", "reached-through-a-ref"])
def test_bounds_are_said_to_be_ignored_only_in_definitions_a_ref_reaches(schema: dict[str, object],
                                                                         warned: str) -> None:
    """A definition an allOf merged where it stood, left unread in $defs, had its bounds said to be ignored though
    the listing of 0 to 10 held them."""
    from tests.test_gen_hunt import _warnings

    assert _warnings(schema) == ([f"the JSON schema's {warned} cannot be enforced (llama-cpp-python's converter "
                                  "ignores them): check the answer"] if warned else [])


def test_a_type_list_s_type_that_allows_no_value_is_named_as_the_type_list_s() -> None:
    """A type of a type list beside keywords that leave it no value was named as an anyOf alternative, an anyOf the
    schema does not have."""
    from tests.test_gen_hunt import _warnings

    warned = _warnings({"type": ["integer", "string"], "minimum": 5, "maximum": 3})
    assert [line for line in warned if "no value" in line] == [
        "the JSON schema's type list alternative {\"type\": \"integer\", \"minimum\": 5, \"maximum\": 3} (the JSON "
        "schema's integer of minimum 5, maximum 3 can be no integer) allows no value, so the answer is never it: fix "
        "it, or drop it"], warned
