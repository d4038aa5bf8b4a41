"""`localgen run`'s generation controls as a demanding user tries them: JSON schemas and their keywords."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_localgen

GREEDY = ("--temperature", "0", "--seed", "1")
# pydantic v1's schema of a model with an enum field that has a description: the $ref sits alone in an allOf
PYDANTIC_V1_CAR = {
    "title": "Car", "type": "object", "required": ["name", "color"],
    "properties": {"name": {"title": "Name", "type": "string", "maxLength": 20},
                   "color": {"description": "The paint", "allOf": [{"$ref": "#/definitions/Color"}]}},
    "definitions": {"Color": {"title": "Color", "description": "An enumeration.", "enum": ["red", "green", "blue"],
                              "type": "string"}},
}


def test_an_all_of_that_refers_to_an_enum_gives_one_of_its_values(vocab: _Vocab) -> None:
    """The converter read any allOf as objects to merge: pydantic v1's field of an enum came out as {}."""
    values = [{"name": "Zoom", "color": "red"}, {"name": "Zoom", "color": {}}, {"name": "Zoom", "color": "pink"}]
    assert _allowed(vocab, PYDANTIC_V1_CAR, values) == values[:1]


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"allOf": [{"type": "integer"}]}, [1, {}], [1]),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, ["abc", "abcd"], ["abc"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}},
      "allOf": [{"properties": {"b": {"enum": ["x", "y"]}}, "required": ["b"]}]},
     [{"b": "x"}, {"b": "x", "a": 1}, {"a": 1}, {"b": "z"}], [{"b": "x"}, {"b": "x", "a": 1}]),
], ids=["type", "type-and-bound", "beside-properties"])
def test_an_all_of_holds_each_of_its_parts(vocab: _Vocab, schema: dict[str, object], values: list[object],
                                           allowed: list[object]) -> None:
    """An allOf of anything but objects' properties gave a grammar of objects, and one beside properties was left
    out."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize(("schema", "message"), [
    ({"allOf": [{"type": "string"}, {"type": "integer"}]},
     "the JSON schema's allOf asks for a value of type \"string\" and of type \"integer\", which no value is"),
    ({"allOf": [{"enum": ["a", "b"]}, {"enum": ["c"]}]}, "allOf gives enum two values, [\"a\", \"b\"] and [\"c\"]"),
])
def test_an_all_of_no_value_can_follow_is_one_usage_error(schema: dict[str, object], message: str) -> None:
    """Such a schema gave a grammar of objects, and an answer that could never follow it."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_a_string_format_the_converter_does_not_know_is_named_in_a_warning() -> None:
    """The converter ignores a format it has no grammar for (email, uri), and the answer was any string, unsaid."""
    schema = {"type": "object", "required": ["contact", "day"],
              "properties": {"contact": {"type": "string", "format": "email", "maxLength": 40},
                             "day": {"type": "string", "format": "date"}, "format": {"type": "string"}}}
    assert _warnings(schema) == ["the JSON schema's format \"email\" cannot be enforced (llama-cpp-python's converter "
                                 "knows date, time, date-time and uuid, and ignores it): check the answer, or give a "
                                 "pattern"]


@pytest.mark.parametrize(("schema", "values"), [
    ({"type": "object", "required": ["name", "data"],  # pydantic's model with a field of type Any
      "properties": {"name": {"type": "string", "maxLength": 20}, "data": {"title": "Data"}}},
     [{"name": "Zoom", "data": 5}, {"name": "Zoom", "data": [None, {"a": "b"}]}]),
    ({"description": "Anything at all."}, [5, "x", None, {"a": [1]}]),
], ids=["pydantic-any-field", "notes-alone"])
def test_a_schema_of_notes_alone_allows_any_value(vocab: _Vocab, schema: dict[str, object],
                                                  values: list[object]) -> None:
    """A schema with a title or description and nothing that limits the value was refused as the converter's
    "Unrecognized schema"."""
    assert _warnings(schema) == [] and _allowed(vocab, schema, values) == values


@pytest.mark.parametrize(("schema", "message"), [
    ({"enum": []}, "the JSON schema's enum is an empty list, which allows no value (hint: list at least one value in "
                   "enum, or leave it out)"),
    ({"type": "object", "properties": {"a": {"anyOf": []}}}, "the JSON schema's anyOf is an empty list"),
    ({"oneOf": []}, "the JSON schema's oneOf is an empty list"),
    ({"type": []}, "the JSON schema's type is an empty list, which allows no value (hint: list at least one type"),
])
def test_an_empty_list_of_choices_is_named_as_allowing_no_value(schema: dict[str, object], message: str) -> None:
    """Such a schema was refused as llama.cpp's parse error of the grammar written for it, `expecting newline or end
    at ::= " "?`, with a hint to simplify the schema."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_a_ref_to_the_whole_schema_describes_a_tree(vocab: _Vocab) -> None:
    """A $ref of "#", a recursive schema's, was refused as the converter's "Unsupported ref #"."""
    person = {"type": "object", "required": ["name", "parent"],
              "properties": {"name": {"type": "string", "maxLength": 10},
                             "parent": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}}
    values = [{"name": "Ann", "parent": {"name": "Bob", "parent": None}}, {"name": "Ann", "parent": None},
              {"name": "Ann", "parent": {"name": "Bob"}}]
    assert _allowed(vocab, person, values) == values[:2]


def test_a_ref_to_the_whole_schema_alone_is_said_to_be_a_cycle() -> None:
    result = run_localgen("run", "--json-schema", '{"$ref": "#"}', "hi")
    assert result.returncode == 2 and result.err.startswith(
        "localgen: error: the JSON schema's $ref # is a cycle: # -> # (hint:"), result.err


@pytest.mark.parametrize(("schema", "warning"), [
    ({"type": "string", "pattern": "^[a-z]+[0-9]*$", "maxLength": 3},
     "the JSON schema's maxLength beside a pattern cannot be enforced (llama-cpp-python's converter follows the "
     "pattern alone): check the answer, or count the characters in the pattern, e.g. ^[a-z]{1,20}$"),
    ({"type": "string", "format": "date", "minLength": 1, "maxLength": 3},
     "the JSON schema's minLength, maxLength beside a format cannot be enforced"),
    ({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
     "the JSON schema's prefixItems beside items cannot be enforced (llama-cpp-python's converter follows the items "
     "alone): check the answer, or give prefixItems with items false"),
], ids=["length-and-pattern", "lengths-and-format", "prefix-items-and-items"])
def test_a_keyword_the_converter_drops_beside_another_is_named_in_a_warning(schema: dict[str, object],
                                                                            warning: str) -> None:
    """The converter follows a pattern or format alone, and items alone: the length or the first items given beside
    them were dropped, unsaid."""
    warnings = _warnings(schema)
    assert len(warnings) == 1 and warnings[0].startswith(warning), warnings


def test_a_rule_defined_twice_is_refused(tmp_path: Path) -> None:
    """llama.cpp's parser keeps a rule's last definition alone: `root ::= "a"` then `root ::= "b"` allowed "b" only,
    unsaid."""
    grammar = tmp_path / "twice.gbnf"
    grammar.write_text('root ::= "a" | more\nmore ::= "c"\nroot ::= "b"  # root ::= in a comment\n')
    result = run_localgen("run", "--grammar", str(grammar), "hi", "-n", "3", *GREEDY)
    assert result.returncode == 2 and result.err == (
        f"localgen: error: --grammar {grammar}: rule root is defined twice, and llama.cpp would keep the last "
        "definition alone (hint: define it once, its alternatives joined with |: root ::= ... | ...)\n"), result.err
    literal = run_localgen("run", "--grammar", 'root ::= "root ::= x"', "hi", *GREEDY)
    assert literal.returncode == 0 and literal.out == "root ::= x\n", literal.err


def test_an_object_of_thousands_of_optional_properties_is_named_as_such() -> None:
    """The converter chains optional properties one call deeper each: 3,000 of them in one flat object were refused
    as a schema that "nests too deep to convert", with a hint to flatten it."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(3000)},
              "required": ["p0"]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema has an object of 2,999 optional properties, more than the converter can "
        "chain (hint: require some of them, or group them in nested objects)\n"), result.err


@pytest.mark.parametrize(("required", "shown"), [([{"x": 1}], '[{"x": 1}]'), (["a", 5], '["a", 5]'), ("a", '"a"')])
def test_a_required_that_is_no_list_of_names_is_one_usage_error(required: object, shown: str) -> None:
    """A required list holding a dict ended the run with an internal error (unhashable type: 'dict'); a required
    string was ignored, unsaid."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": required}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi", "-n", "10", *GREEDY)
    assert result.returncode == 2 and result.err == (
        f"localgen: error: the JSON schema's required is {shown}, not a list of property names (hint: list the names "
        "in the object's required, e.g. \"required\": [\"name\"])\n"), result.err


@pytest.mark.parametrize(("schema", "message"), [
    ({"enum": "abc"}, 'enum is "abc", not a list of values (hint: e.g. "enum": ["red", "green"])'),
    ({"type": "string", "maxLength": True}, "maxLength is true, not a whole number"),
    ({"type": "string", "maxLength": 2.5}, "maxLength is 2.5, not a whole number (hint: e.g. \"maxLength\": 3)"),
    ({"allOf": {}}, "allOf is {}, not a list of schemas"),
    ({"prefixItems": {}}, "prefixItems is {}, not a list of schemas"),
    ({"type": "object", "additionalProperties": 5}, "additionalProperties is 5, not a schema (an object, or true or "
                                                   "false)"),
    ({"type": "object", "properties": {"a": 5}}, 'properties is {"a": 5}, not an object of names and their schemas'),
    ({"$ref": 5}, "$ref is 5, not a string"),
])
def test_a_keyword_holding_the_wrong_kind_of_value_is_one_usage_error(schema: dict[str, object], message: str) -> None:
    """An enum string's characters were its values ("b" for "abc"), a maxLength of true one, an allOf or prefixItems
    of {} allowed an object or [{}]; others were refused in Python's words ('int' object has no attribute 'get')."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi", "-n", "8", *GREEDY)
    assert result.returncode == 2 and result.err.startswith(f"localgen: error: the JSON schema's {message}"), result.err
    assert len(result.err.splitlines()) == 1, result.err


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": "object", "properties": {"a": True, "b": False}, "required": ["a"]},
     [{"a": 1}, {"a": [None]}, {"a": 1, "b": 1}], [{"a": 1}, {"a": [None]}]),
    ({"anyOf": [True, {"type": "integer"}]}, [1, "x", None], [1, "x", None]),
    ({"type": "array", "items": [True, {"type": "integer"}]}, [["x", 1], [None, 2], ["x", "y"]], [["x", 1], [None, 2]]),
], ids=["properties", "any-of", "tuple"])
def test_a_schema_of_true_among_others_allows_any_value(vocab: _Vocab, schema: dict[str, object],
                                                        values: list[object], allowed: list[object]) -> None:
    """true, the schema any value follows, was refused in Python's words ('bool' object has no attribute 'get')."""
    assert _allowed(vocab, schema, values) == allowed


def test_a_schema_of_false_alone_among_alternatives_is_one_usage_error() -> None:
    result = run_localgen("run", "--json-schema", '{"anyOf": [false]}', "hi")
    assert result.returncode == 2 and result.err == (
        "localgen: error: the JSON schema's anyOf holds false, which allows no value (hint: give the anyOf a schema "
        "some value meets)\n"), result.err


@pytest.mark.parametrize("grammar", ['root := "yes" | "no"', "root = [a-z]+"])
def test_grammar_text_that_misspells_the_rule_sign_is_told_so(grammar: str) -> None:
    """Text without ::= was looked for as a file and refused as `no such file: root := "yes" | "no"`, with a hint to
    check the path."""
    result = run_localgen("run", "--grammar", grammar, "hi")
    assert result.returncode == 2 and result.err.startswith(
        "localgen: error: the --grammar text defines no rule with ::=, and no file has that name (hint: give a GBNF "
        "grammar"), result.err


def test_an_all_of_whose_part_offers_alternatives_by_ref_gives_one_of_them(vocab: _Vocab) -> None:
    """llama.cpp's own example of an allOf: an anyOf part's $refs were merged unresolved, and the schema refused as a
    $ref that does not resolve."""
    schema = {"type": "object", "allOf": [
        {"$ref": "#/definitions/foo"}, {"$ref": "#/definitions/bar"},
        {"anyOf": [{"$ref": "#/definitions/baz"}, {"$ref": "#/definitions/bam"}]}],
        "definitions": {name: {"properties": {key: {"type": "number"}}}
                        for name, key in (("foo", "a"), ("bar", "b"), ("bam", "c"), ("baz", "d"))}}
    values = [{"a": 1, "b": 2, "d": 3}, {"a": 1, "b": 2, "c": 3}, {"a": "x"}]
    assert _warnings(schema) == [] and _allowed(vocab, schema, values) == values[:2]


def test_an_all_of_that_refers_to_its_own_definition_is_followed_as_a_ref(vocab: _Vocab) -> None:
    """A recursive definition reached through an allOf was merged into itself without end (a RecursionError)."""
    node = {"type": "object", "required": ["v", "next"], "properties": {
        "v": {"type": "integer"}, "next": {"anyOf": [{"allOf": [{"$ref": "#/$defs/n"}]}, {"type": "null"}]}}}
    schema = {"allOf": [{"$ref": "#/$defs/n"}], "$defs": {"n": node}}
    values = [{"v": 1, "next": {"v": 2, "next": None}}, {"v": 1, "next": {"v": 2}}]
    assert _warnings(schema) == [] and _allowed(vocab, schema, values) == values[:1]


class _Vocab:
    """The bundled model's vocabulary alone, to check what a grammar lets llama.cpp's sampler write."""

    def __init__(self, path: Path) -> None:
        """Load the vocabulary of the GGUF at path (no weights)."""
        import llama_cpp

        self.lib = llama_cpp
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)

    def tokens(self, text: str) -> list[int]:
        """text's tokens."""
        data = text.encode()
        out = (self.lib.llama_token * 16)()
        count = self.lib.llama_tokenize(self.vocab, data, len(data), out, 16, False, True)
        return list(out[:count])

    def allows(self, sampler: object, token: int) -> bool:
        """Whether the grammar sampler lets token come next."""
        import ctypes

        data = (self.lib.llama_token_data * 1)(self.lib.llama_token_data(token, 1.0, 0.0))
        candidates = self.lib.llama_token_data_array(data, 1, -1, False)
        self.lib.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return bool(data[0].logit > -1e30)

    def accepts(self, grammar: str, text: str) -> bool:
        """Whether the grammar lets the sampler write text whole, one character's tokens at a time, then stop."""
        sampler = self.lib.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler, grammar
        try:
            for char in text:
                for token in self.tokens(char):
                    if not self.allows(sampler, token):
                        return False
                    self.lib.llama_sampler_accept(sampler, token)
            return self.allows(sampler, self.lib.llama_vocab_eos(self.vocab))
        finally:
            self.lib.llama_sampler_free(sampler)


def _warnings(schema: dict[str, object]) -> list[str]:
    """The warnings schema_grammar gives for schema."""
    from localgen.json_schema import schema_grammar

    warn: list[str] = []
    schema_grammar(json.dumps(schema), warn)
    return warn


def _allowed(vocab: _Vocab, schema: dict[str, object], values: list[object]) -> list[object]:
    """Those of values the grammar of schema lets an answer be."""
    from localgen.json_schema import schema_grammar

    grammar = schema_grammar(json.dumps(schema), [])
    return [value for value in values if vocab.accepts(grammar, json.dumps(value))]


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"allOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "string", "maxLength": 3}]},
     ["ab", None, "abcd"], ["ab"]),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}], "allOf": [{"type": "integer"}]}, [1, "a"], [1]),
    ({"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "string"}]}, [1, "a"], ["a"]),
])
def test_an_all_of_keeps_the_alternatives_its_other_parts_allow(vocab: _Vocab, schema: dict[str, object],
                                                                  values: list[object], allowed: list[object]) -> None:
    """An alternative of another type than a part asks for was refused as the whole allOf allowing no value."""
    assert _allowed(vocab, schema, values) == allowed


def test_an_all_of_none_of_whose_alternatives_fits_is_one_usage_error() -> None:
    """Dropping the alternatives that clash leaves none: the schema allows no value."""
    schema = {"allOf": [{"anyOf": [{"type": "integer"}, {"type": "null"}]}, {"type": "string"}]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and "which no value is" in result.err, result.err


@pytest.mark.parametrize("schema", [
    {"allOf": [{"anyOf": [{"$ref": "#"}, {"type": "null"}]}]},
    {"$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
               "Node": {"allOf": [{"$ref": "#/$defs/Base"}, {"anyOf": [{"$ref": "#/$defs/Node"}, {
                   "type": "object", "properties": {"leaf": {"const": True}}, "required": ["leaf"]}]}]}},
     "$ref": "#/$defs/Node"},
], ids=["whole", "definition"])
def test_an_all_of_whose_alternative_refers_round_to_it_is_one_usage_error(schema: dict[str, object]) -> None:
    """The alternative's $ref, left alone a level down, was followed again a level up, without end (a RecursionError);
    now its grammar, a rule that begins with itself, is refused as llama.cpp's parser refuses it."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and "left recursion" in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, result.err


def test_a_ref_to_the_whole_schema_deep_down_is_named_as_nesting_too_deep() -> None:
    """Its rewriting to a $defs entry recursed two frames a level, and ended in a RecursionError."""
    deep = '{"type":"object","properties":{"a":' * 300 + '{"anyOf":[{"$ref":"#"},{"type":"null"}]}' + "}}" * 300
    result = run_localgen("run", "--json-schema", deep, "hi")
    assert result.returncode == 2 and "nests too deep" in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, result.err


def test_a_definition_an_all_of_follows_twice_on_one_path_keeps_both_parts(vocab: _Vocab) -> None:
    """A $ref an allOf above had followed was left to the converter below it, even where nothing led round: the
    child's required id was dropped, and said to be missing from properties."""
    base = {"type": "object", "properties": {"id": {"type": "integer"}, "child": {"type": "object"}}}
    schema = {"$defs": {"Base": base}, "allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"child": {
        "allOf": [{"$ref": "#/$defs/Base"}, {"required": ["id"]}]}}}]}
    warn: list[str] = []
    from localgen.json_schema import schema_grammar

    schema_grammar(json.dumps(schema), warn)
    assert warn == []
    assert _allowed(vocab, schema, [{"child": {}}, {"child": {"id": 1}}, {}]) == [{"child": {"id": 1}}, {}]


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": ["string", "null"], "enum": ["celsius", "fahrenheit", None]}, ["celsius", None, "kelvin"],
     ["celsius", None]),
    ({"type": ["object", "null"], "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     [{"a": 1}, None, {"b": 1}], [{"a": 1}, None]),
    ({"type": ["string", "null"], "maxLength": 3}, ["ab", None, "abcd"], ["ab", None]),
    ({"type": "object", "properties": {"n": {"minLength": 2}}}, [{"n": "ab"}, {"n": 1}, {"n": "a"}],
     [{"n": "ab"}, {"n": 1}]),
    ({"maxItems": 1}, [[1], [1, 2], "x"], [[1], "x"]),
], ids=["enum", "object", "length", "length-alone", "count-alone"])
def test_a_type_list_or_no_type_keeps_the_keywords_beside_it(vocab: _Vocab, schema: dict[str, object],
                                                             values: list[object], allowed: list[object]) -> None:
    """The converter read a type list as the types alone (OpenAI's strict nullable enum allowed any string), and a
    schema of constraints alone was taken for notes that allow any value."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"allOf": [{"type": "string"}, {"enum": [1, "a"]}]}, [1, "a"], ["a"]),
    ({"allOf": [{"enum": ["a", "abc"]}, {"minLength": 2}]}, ["a", "abc"], ["abc"]),
    ({"allOf": [{"enum": [True, "x"]}, {"enum": [1, "x"]}]}, [True, 1, "x"], ["x"]),
    ({"allOf": [{"type": "integer"}, {"enum": [1, 2, 30]}, {"maximum": 10}]}, [1, 2, 30], [1, 2]),
    ({"type": "string", "pattern": "^a", "enum": ["ab", "b"]}, ["ab", "b"], ["ab"]),
    ({"allOf": [{"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
                {"enum": [{"k": 1}, {"k": "x"}, {}]}]}, [{"k": 1}, {"k": "x"}, {}], [{"k": "x"}]),
], ids=["type", "length", "true-is-not-1", "bound", "pattern", "properties"])
def test_an_enum_keeps_only_the_values_its_other_keywords_allow(vocab: _Vocab, schema: dict[str, object],
                                                                values: list[object], allowed: list[object]) -> None:
    """The converter read an enum alone, whatever type or bounds stood beside it, and Python's 1 == True made true
    a value both [true] and [1] allow."""
    assert _allowed(vocab, schema, values) == allowed


@pytest.mark.parametrize(("schema", "message"), [
    ({"allOf": [{"type": "string"}, {"const": 5}]}, "the JSON schema's const 5 holds no value its other keywords"),
    ({"allOf": [{"enum": ["a", "b"]}, {"const": "c"}]}, "const \"c\" holds no value its other keywords allow"),
    ({"allOf": [{"const": True}, {"const": 1}]}, "allOf gives const two values, true and 1, that no value can meet"),
], ids=["type", "enum", "true-is-not-1"])
def test_a_const_no_other_keyword_allows_is_one_usage_error(schema: dict[str, object], message: str) -> None:
    """The converter read a const alone: {"type": "string"} with {"const": 5} allowed 5."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_a_default_or_example_value_is_not_read_as_a_schema() -> None:
    """pydantic's default of {"format": "csv"} was warned of as a format that cannot be enforced."""
    from localgen.json_schema import schema_grammar

    schema = {"$defs": {"Export": {"type": "object", "properties": {"format": {"enum": ["csv", "json"]}}}},
              "type": "object", "properties": {"export": {"$ref": "#/$defs/Export", "default": {"format": "csv"}}},
              "examples": [{"export": {"format": "json", "not": 1}}]}
    warn: list[str] = []
    schema_grammar(json.dumps(schema), warn)
    assert warn == []


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                {"type": "object", "properties": {"b": {"type": "integer"}}}]},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 1}], [{}, {"a": 1}]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                {"type": "object", "additionalProperties": {"type": "integer"}}]}, [{}, {"a": 1}, {"c": 1}],
     [{}, {"a": 1}]),
    ({"allOf": [{"type": "number", "minimum": 0, "exclusiveMinimum": True}, {"minimum": 0, "exclusiveMinimum": False}]},
     [1], [1]),
    ({"allOf": [{"type": "integer", "not": {"const": 1}}, {"not": {"const": 2}}]}, [3], [3]),
], ids=["false-beside-properties", "false-beside-schema", "draft-4-exclusive", "two-nots"])
def test_an_all_of_holds_each_parts_additional_properties_and_combines_ignored_keywords(
        vocab: _Vocab, schema: dict[str, object], values: list[object], allowed: list[object]) -> None:
    """A part's additionalProperties false let the other part's properties through, and two of them, two nots or
    draft 4's true and false exclusiveMinimum were refused as values localgen cannot combine."""
    assert _allowed(vocab, schema, values) == allowed


def test_an_all_of_requiring_a_property_another_part_forbids_is_one_usage_error() -> None:
    """additionalProperties false in one part and b required in the other: no object has both."""
    schema = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                        {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and "requires b, which a part's additionalProperties false forbids" in result.err


def test_a_ref_to_the_whole_schema_keeps_a_definition_of_the_name_its_copy_would_take(vocab: _Vocab) -> None:
    """The whole schema's copy was stored as $defs/whole-schema over the schema's own definition of that name."""
    schema = {"$defs": {"whole-schema": {"type": "integer"}}, "type": "object", "required": ["x"],
              "properties": {"x": {"$ref": "#/$defs/whole-schema"},
                             "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}}
    assert _allowed(vocab, schema, [{"x": 1}, {"x": 1, "next": {"x": 2}}, {"x": {"x": 1}}]) == [
        {"x": 1}, {"x": 1, "next": {"x": 2}}]


@pytest.mark.parametrize("path", ["my grammars/yes=no.gbnf", "yes = no.gbnf"])
def test_a_missing_grammar_file_whose_name_holds_an_equals_sign_is_named_as_no_such_file(path: str) -> None:
    """A path with = and a space was taken for grammar text and told it defines no rule with ::=."""
    result = run_localgen("run", "--grammar", path, "hi")
    assert result.returncode == 2 and f"no such file: {path}" in result.err, result.err


def test_a_count_written_with_a_zero_fraction_is_a_whole_number(vocab: _Vocab) -> None:
    """{"maxLength": 3.0} was refused as not a whole number: JSON Schema counts 3.0 as an integer."""
    assert _allowed(vocab, {"type": "string", "maxLength": 3.0}, ["abc", "abcd"]) == ["abc"]


def test_a_required_property_whose_schema_is_false_is_one_usage_error() -> None:
    """The property of false was left out and the answer told it may leave it out: no object follows the schema."""
    schema = {"type": "object", "properties": {"a": False, "b": {"type": "integer"}}, "required": ["a"]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and "requires a, whose schema is false, so no object follows it" in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err


@pytest.mark.parametrize("keyword", ["dependencies", "unevaluatedProperties", "minContains"])
def test_a_keyword_of_other_drafts_the_converter_ignores_is_named_in_a_warning(keyword: str) -> None:
    """dependencies, unevaluatedProperties and minContains were dropped unsaid."""
    value = {"dependencies": {"a": ["b"]}, "unevaluatedProperties": False, "minContains": 2}[keyword]
    warnings = _warnings({"type": "object", "properties": {"a": {"type": "integer"}}, keyword: value})
    assert len(warnings) == 1 and warnings[0].startswith(f"the JSON schema's {keyword} cannot be enforced"), warnings


def test_a_long_chain_of_all_of_refs_is_named_as_nesting_too_deep() -> None:
    """Merging 500 definitions, each an allOf that refers to the next, ended in a RecursionError."""
    definitions: dict[str, object] = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]} for i in range(500)}
    schema = {"$defs": {**definitions, "d500": {"type": "integer"}}, "$ref": "#/$defs/d0"}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and "allOf parts and $refs nest too deep to merge" in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, result.err


def test_a_const_that_holds_a_ref_to_the_whole_schema_is_that_value(vocab: _Vocab) -> None:
    """{"const": {"$ref": "#"}} was rewritten as a $ref to the whole schema's copy, then refused as "Unsupported ref
    #" by the converter, which looked for refs inside the value."""
    schema = {"type": "object", "required": ["k", "me"], "properties": {
        "k": {"const": {"$ref": "#"}}, "me": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}}
    values = [{"k": {"$ref": "#"}, "me": None}, {"k": {"$ref": "#/$defs/whole-schema"}, "me": None}]
    assert _allowed(vocab, schema, values) == values[:1]


def test_a_ref_beside_keywords_that_limit_the_value_holds_both(vocab: _Vocab) -> None:
    """The converter followed a $ref alone: its required beside it was dropped, and said to be missing."""
    schema = {"$defs": {"A": {"type": "object", "properties": {"a": {"type": "integer"}}}}, "type": "object",
              "properties": {"p": {"$ref": "#/$defs/A", "required": ["a"], "description": "A's"}}, "required": ["p"]}
    assert _warnings(schema) == []
    assert _allowed(vocab, schema, [{"p": {"a": 1}}, {"p": {}}]) == [{"p": {"a": 1}}]


@pytest.mark.parametrize("kind", ["object", "array"])
def test_nested_nullable_objects_and_arrays_convert_at_once(kind: str) -> None:
    """Each type's alternative carried every keyword beside a type list, the null one too: 18 nested nullable
    objects took a minute, 200 nested nullable arrays never ended."""
    import time

    from localgen.errors import UsageError
    from localgen.json_schema import schema_grammar

    schema: dict[str, object] = {"type": "string"}
    for _ in range(200 if kind == "array" else 18):
        schema = {"type": ["array", "null"], "items": schema} if kind == "array" else {
            "type": ["object", "null"], "properties": {"c": schema, "n": {"type": ["string", "null"]}},
            "required": ["c", "n"], "additionalProperties": False}
    start = time.monotonic()
    try:
        schema_grammar(json.dumps(schema), [])
    except UsageError as exc:
        assert kind == "array" and exc.message == "the JSON schema nests too deep to convert", exc.message
    assert time.monotonic() - start < 0.5


A_OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"$defs": {"A": A_OBJECT}, "$ref": "#/$defs/A", "type": ["object", "null"]}, [{"a": 1}, None, {}], [{"a": 1}]),
    ({"$defs": {"A": A_OBJECT}, "type": "object", "required": ["x"],
      "properties": {"x": {"$ref": "#/$defs/A", "type": ["object", "null"]}}}, [{"x": {"a": 1}}, {"x": None}],
     [{"x": {"a": 1}}]),
    ({"$defs": {"A": A_OBJECT}, "type": ["object", "null"], "allOf": [{"$ref": "#/$defs/A"}]}, [{"a": 1}, None, {}],
     [{"a": 1}]),
], ids=["ref", "ref-in-property", "all-of"])
def test_a_type_list_beside_a_ref_or_all_of_keeps_the_types_it_allows(vocab: _Vocab, schema: dict[str, object],
                                                                     values: list[object],
                                                                     allowed: list[object]) -> None:
    """The null alternative of a type list beside a $ref or allOf was refused as one no value is, and the whole
    schema with it, where that alternative is dropped."""
    assert _allowed(vocab, schema, values) == allowed


def test_a_ref_beside_a_type_it_cannot_be_is_refused_naming_the_ref() -> None:
    """A $ref beside keywords no value of its target meets was refused naming an allOf the schema does not have."""
    schema = {"$defs": {"A": A_OBJECT}, "$ref": "#/$defs/A", "type": "null"}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and "the JSON schema's $ref #/$defs/A with the keywords beside it asks for a value" \
        " of type" in result.err and "allOf" not in result.err, result.err


def test_refs_beside_keywords_that_do_not_limit_the_value_stay_refs() -> None:
    """A $ref beside OpenAPI's nullable or an x- extension was written out at each use: a chain of 16 definitions,
    each referring twice to the next, made a 28 MB grammar in 10 s."""
    from localgen.json_schema import schema_grammar

    definitions: dict[str, object] = {f"D{i}": {"type": "object", "properties": {
        "a": {"$ref": f"#/$defs/D{i + 1}", "nullable": True}, "b": {"$ref": f"#/$defs/D{i + 1}", "x-order": 2}}}
        for i in range(16)}
    grammar = schema_grammar(json.dumps({"$defs": {**definitions, "D16": {"type": "string"}}, "$ref": "#/$defs/D0"}),
                             [])
    assert len(grammar) < 20_000


def test_refs_beside_a_type_list_their_targets_are_of_stay_refs() -> None:
    """A $ref beside a type list its target's type is in ({"$ref": D, "type": ["object", "null"]}) was written out at
    each use: a chain of 15 such definitions made a 20 MB grammar in 4.5 s."""
    from localgen.json_schema import schema_grammar

    nullable = ["object", "null"]
    definitions: dict[str, object] = {f"D{i}": {"type": "object", "properties": {
        "a": {"$ref": f"#/$defs/D{i + 1}", "type": nullable}, "b": {"$ref": f"#/$defs/D{i + 1}", "type": nullable}}}
        for i in range(15)}
    grammar = schema_grammar(json.dumps({"$defs": {**definitions, "D15": {"type": "object"}}, "$ref": "#/$defs/D0"}),
                             [])
    assert len(grammar) < 20_000


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "object", "properties": {"k": {"type": "string", "maxLength": "3"}}, "const": {"k": "a"}},
     "the JSON schema's maxLength is \"3\", not a whole number"),
    ({"type": "array", "items": {"maxLength": None}, "enum": [["a"]]}, "the JSON schema's maxLength is null, not a"),
    ({"type": "object", "properties": {"k": {"type": "object", "required": 5}}, "const": {"k": {"a": 1}}},
     "the JSON schema's required is 5, not a list of property names"),
], ids=["text", "null", "required"])
def test_a_bad_keyword_in_a_schema_a_const_is_checked_against_names_the_keyword(schema: dict[str, object],
                                                                               message: str) -> None:
    """A bad count in a property or items schema, read as the const or enum was checked, was an internal error."""
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi")
    assert result.returncode == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result.err


@pytest.mark.parametrize("text", ['root = "a/b"', "root = [0-9/]+"])
def test_grammar_text_with_a_slash_that_misspells_the_rule_sign_is_told_so(text: str) -> None:
    """A rule whose literal or character class holds a slash was taken for a path and refused as no such file."""
    result = run_localgen("run", "--grammar", text, "hi")
    assert result.returncode == 2 and "the --grammar text defines no rule with ::=" in result.err, result.err


@pytest.mark.parametrize(("schema", "values", "allowed"), [
    ({"type": "array", "maxItems": 1, "enum": [[1, 2], [1]]}, [[1, 2], [1]], [[1]]),
    ({"type": "array", "minItems": 2, "enum": [[1], [1, 2]]}, [[1], [1, 2]], [[1, 2]]),
    ({"type": "object", "maxProperties": 1, "enum": [{"a": 1, "b": 2}, {"a": 1}]}, [{"a": 1, "b": 2}, {"a": 1}],
     [{"a": 1}]),
    ({"type": "array", "prefixItems": [{"type": "string"}], "enum": [[1], ["a"]]}, [[1], ["a"]], [["a"]]),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": False, "enum": [["a", "b"], ["a"]]},
     [["a", "b"], ["a"]], [["a"]]),
    ({"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False,
      "enum": [{"x1": 1}, {"x1": "a"}, {"y": 1}]}, [{"x1": 1}, {"x1": "a"}, {"y": 1}], [{"x1": 1}]),
], ids=["max-items", "min-items", "max-properties", "prefix-items", "draft-7-tuple", "pattern-properties"])
def test_an_enum_keeps_only_the_arrays_and_objects_their_counts_and_tuples_allow(
        vocab: _Vocab, schema: dict[str, object], values: list[object], allowed: list[object]) -> None:
    """An enum's arrays and objects were checked against items and properties alone: maxItems, minProperties and a
    tuple's prefixItems let others through, and a property patternProperties allows was refused."""
    assert _allowed(vocab, schema, values) == allowed


def test_a_ref_to_the_whole_schema_keeps_a_draft_7_definition_of_the_name_its_copy_would_take(vocab: _Vocab) -> None:
    """The whole schema's copy in $defs took the name of a definitions entry, and the converter, which names a
    rule by the name alone, gave both refs one rule."""
    schema = {"definitions": {"whole-schema": {"type": "integer"}}, "type": "object",
              "properties": {"n": {"$ref": "#"}, "w": {"$ref": "#/definitions/whole-schema"}}}
    assert _allowed(vocab, schema, [{"w": 1}, {"n": {"w": 2}}, {"w": "a"}]) == [{"w": 1}, {"n": {"w": 2}}]


@pytest.mark.parametrize(("ref", "message", "hint"), [
    ("#/$defs/Missing", "the JSON schema refers to #/$defs/Missing, which does not resolve", "point the $ref at"),
    ("http://x/y", "the JSON schema refers to http://x/y, a remote schema", "copy that schema into $defs"),
], ids=["missing", "remote"])
def test_a_ref_beside_keywords_that_does_not_resolve_is_refused_as_such(ref: str, message: str, hint: str) -> None:
    """Such a $ref was said to be one with the keywords beside it, and hinted to make them fit it."""
    result = run_localgen("run", "--json-schema", json.dumps({"$ref": ref, "type": "object"}), "hi")
    assert result.returncode == 2 and message in result.err and f"hint: {hint}" in result.err, result.err


def test_an_enum_beside_a_property_pattern_python_cannot_read_is_not_judged_by_it(vocab: _Vocab) -> None:
    """A patternProperties pattern Python's re cannot read (\\p{Lu}) was taken to match every property name, so an
    enum value whose property its schema does not fit was dropped, and an enum of such values refused."""
    schema = {"type": "object", "patternProperties": {"^\\p{Lu}": {"type": "integer"}}, "enum": [{"a": "x"}]}
    assert _allowed(vocab, schema, [{"a": "x"}, {"a": "y"}]) == [{"a": "x"}]
