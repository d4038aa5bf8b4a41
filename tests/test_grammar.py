"""Constrained answers: --json-schema and --grammar on the real engine, and their bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localgen.params import CHAT_SETTINGS, SamplingParams
from tests.conftest import run_localgen

GREEDY = ("--temperature", "0", "--seed", "1")
PERSON = {"type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}}}


@pytest.mark.parametrize(("prompt", "extra"), [
    ("Invent a person.", GREEDY),
    # a prompt to copy from, so that lookup has drafts to offer and the grammar-bound sampler accepts some
    ('Copy this JSON: {"name": "Margaret Thompson", "age": 42}',
     ("--temperature", "0.9", "--seed", "7", "--draft", "lookup", "--json")),
], ids=["greedy", "sampled-with-drafts"])
def test_a_json_schema_gives_json_that_follows_it(prompt: str, extra: tuple[str, ...]) -> None:
    result = run_localgen("run", "--json-schema", json.dumps(PERSON), prompt, "-n", "80", *extra)
    assert result.returncode == 0, result.err
    answer = json.loads(result.out)
    person = json.loads(answer["text"]) if "--json" in extra else answer
    assert set(person) == {"name", "age"} and isinstance(person["age"], int) and len(person["name"]) <= 20
    assert result.err == "", "no llama.cpp log lines, no notes"
    if "--draft" in extra:
        assert "draft" in answer and answer["draft"]["accepted"] > 0, answer


def test_a_finished_json_answer_always_parses() -> None:
    """The converter's strings allowed raw newlines: this answer ran on over several lines inside a string."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"]}
    # flash attention on: its greedy answer is the one that ran on over several lines and then stopped
    result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "400", "--json", *GREEDY,
                          "--flash-attn", "on", "Where is the Eiffel Tower? city Paris country France")
    assert result.returncode == 0, result.err
    answer = json.loads(result.out)
    assert answer["finish_reason"] == "stop"
    assert set(json.loads(answer["text"])) == {"city", "country"}


def test_an_array_of_any_items_is_converted() -> None:
    """The converter reads `"items": {}` as missing and failed, blaming a $ref the schema does not have."""
    result = run_localgen("run", "--json-schema", '{"type": "array", "items": {}, "minItems": 2}', "-n", "60",
                          *GREEDY, "List two things as a JSON array.")
    assert result.returncode == 0, result.err
    answer = json.loads(result.out)
    assert isinstance(answer, list) and len(answer) >= 2


def test_a_json_schema_from_a_file(tmp_path: Path) -> None:
    schema = tmp_path / "list.json"
    schema.write_text(json.dumps({"type": "array", "items": {"type": "integer"}, "maxItems": 3}))
    result = run_localgen("run", "--json-schema", str(schema), "Three numbers.", "-n", "40", *GREEDY)
    assert result.returncode == 0, result.err
    numbers = json.loads(result.out)
    assert isinstance(numbers, list) and len(numbers) <= 3 and all(isinstance(n, int) for n in numbers)


def test_a_grammar_file_limits_the_answer_to_its_language(tmp_path: Path) -> None:
    grammar = tmp_path / "yes-no.gbnf"
    grammar.write_text('root ::= "yes" | "no"\n')
    for question in ("Is the sky blue?", "Is fire cold?"):
        result = run_localgen("run", "--grammar", str(grammar), question, *GREEDY)
        assert result.returncode == 0 and result.out.strip() in ("yes", "no"), result.err


def test_a_grammar_given_as_text_works_like_its_file(tmp_path: Path) -> None:
    text = 'root ::= "yes" | "no"'
    inline = run_localgen("run", "--grammar", text, "Is the sky blue?", *GREEDY)
    assert inline.returncode == 0 and inline.out.strip() in ("yes", "no"), inline.err
    (tmp_path / "g.gbnf").write_text(text + "\n")
    as_file = run_localgen("run", "--grammar-file", str(tmp_path / "g.gbnf"), "Is the sky blue?", *GREEDY)
    assert as_file.returncode == 0 and as_file.out == inline.out, as_file.err
    bad = run_localgen("run", "--grammar", 'answer ::= "x"', "hi")
    assert bad.returncode == 2 and "the --grammar text has no root rule" in bad.err, bad.err
    unparsed = run_localgen("run", "--grammar", "root ::= (", "hi")
    assert unparsed.returncode == 2 and "--grammar: the grammar does not parse" in unparsed.err, unparsed.err
    assert len(unparsed.err.strip().splitlines()) == 1


THINKS_THEN_ANSWERS = 'root ::= "<think>" [a-z ]{3,20} "</think>" "\\n\\nParis."'


def test_hide_thinking_leaves_the_reasoning_out_of_stdout_and_keeps_it_in_json() -> None:
    shown = run_localgen("run", "--grammar", THINKS_THEN_ANSWERS, "Capital of France?", *GREEDY)
    assert shown.returncode == 0 and shown.out.startswith("<think>") and shown.out.endswith("Paris.\n"), shown.out
    hidden = run_localgen("run", "--hide-thinking", "--grammar", THINKS_THEN_ANSWERS, "Capital of France?", *GREEDY)
    assert hidden.returncode == 0 and hidden.out == "Paris.\n", hidden.out
    record = json.loads(run_localgen("run", "--hide-thinking", "--json", "--grammar", THINKS_THEN_ANSWERS,
                                     "Capital of France?", *GREEDY).out)
    reasoning = shown.out.removeprefix("<think>").partition("</think>")[0]
    assert record["text"] == "Paris." and record["thinking"] == reasoning.strip()
    cut = run_localgen("run", "--hide-thinking", "-n", "6", "--grammar", THINKS_THEN_ANSWERS, "Capital of France?",
                       *GREEDY)
    assert cut.returncode == 0 and cut.out == ""
    assert "the answer ended inside its <think> reasoning, which --hide-thinking left out" in cut.err



def test_hide_thinking_in_a_new_conversation_checks_the_prompt_being_answered(tmp_path: Path) -> None:
    template = tmp_path / "first.jinja"  # reads messages[0], as Qwen3's does: an empty conversation fails it
    template.write_text("{{ messages[0].role }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                        "<|im_end|>\n{% endfor %}<|im_start|>assistant\n<think>\n")
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    grammar = 'root ::= [a-z ]{3,20} "</think>" "\\n\\nParis."'  # the template opened the block
    result = run_localgen("run", "--conversation", "new", "--hide-thinking", "--chat-template", str(template),
                          "--grammar", grammar, "Capital of France?", *GREEDY, env=env)
    assert result.returncode == 0 and result.out == "Paris.\n", result.err


@pytest.mark.parametrize(("grammar", "message"), [
    ("root ::= undefined-rule\n", "the grammar does not parse: Undefined rule identifier 'undefined-rule'"),
    ('root ::= "x\n', "the grammar does not parse: unexpected end of input"),
    ('answer ::= "x"\n', "has no root rule"),
    ("", "is not a grammar (it is empty)"),
    ('root ::= root "a" | "a"\n', "the grammar does not parse: unsupported grammar, left recursion detected"),
    ("root ::= [\\x00]\n", "the grammar asks for a NUL character, which no token can give"),  # llama.cpp aborted
    ("root ::= " + "(" * 20_000 + '"a"' + ")" * 20_000 + "\n", "nests parentheses 20,000 deep"),  # a segfault
])
def test_a_bad_grammar_is_one_usage_error(tmp_path: Path, grammar: str, message: str) -> None:
    path = tmp_path / "bad.gbnf"
    path.write_text(grammar)
    result = run_localgen("run", "--grammar", str(path), "hi")
    assert result.returncode == 2 and message in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, "llama.cpp's own parse report is not shown"


@pytest.mark.parametrize(("args", "message"), [
    (("--json-schema", '{"type":'), "the JSON schema is not valid JSON (Expecting value at line 1, column 9)"),
    (("--json-schema", '{"type": "foo"}'), "cannot turn the JSON schema into a grammar: Unrecognized schema"),
    (("--json-schema", "no-such-schema.json"), "no such file: no-such-schema.json"),
    (("--json-schema", '{"type": "string", "pattern": "^a{1,2,3}$"}'),
     "cannot turn the JSON schema into a grammar: AssertionError"),  # the converter's bare assert
    (("--json-schema", '{"enum": ["\\u0000"]}'), "--json-schema: the grammar asks for a NUL character"),
    (("--json-schema", '{"enum": ["a\\"b"]}'), "the grammar made from the JSON schema does not parse"),
    (("--json-schema", "[" * 50_000 + "]" * 50_000), "the JSON schema nests too deep to read"),
    (("--json-schema", "true"), "a JSON schema is an object, not true or false"),
    (("--json-schema", '{"$ref": "https://example.com/s.json"}'), "a $ref to a remote schema"),
    (("--json-schema", '{"$ref": "#/defs/none"}'), "a $ref that does not resolve: #/defs/none ("),  # not "stdin#"
    (("--json-schema", '{"type": "array", "items": []}'), "grammar: the converter looked for 'prefixItems' and found"),
    (("--json-schema", "-"), "--json-schema does not read stdin"),
    (("--grammar", "-"), "--grammar does not read stdin"),
    (("--json-schema", '{"const": "caf\udce9"}'), "the --json-schema text is not UTF-8"),  # a Latin-1 byte
    (("--grammar", 'root ::= "caf\udce9"'), "the --grammar text is not UTF-8"),
    (("--json-schema", " "), "--json-schema is empty"),
    (("--grammar", ""), "--grammar is empty"),
    (("--json-schema", "{}", "--grammar", "g.gbnf"), "--grammar and --json-schema contradict each other"),
])
def test_a_bad_json_schema_is_one_usage_error(args: tuple[str, ...], message: str) -> None:
    result = run_localgen("run", *args, "hi")
    assert result.returncode == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_schema_keywords_the_converter_ignores_are_named_in_a_warning() -> None:
    result = run_localgen("run", "--json-schema", '{"type": "integer", "minimum": 5, "maximum": 7}', "A number.",
                          "-n", "12", *GREEDY)
    assert result.returncode == 0 and isinstance(json.loads(result.out), int)
    assert result.err.startswith("localgen: warning: the JSON schema's maximum, minimum cannot be enforced")


def test_nesting_depth_skips_literals_classes_and_comments() -> None:
    from localgen.grammar import nesting_depth

    assert nesting_depth('root ::= ("(" [(\\]] # ((((\n  ("a"))') == 2


@pytest.mark.parametrize(("grammar", "refused"), [
    ('root ::= "a\\x00b"', True),  # llama.cpp aborted on each refused one
    ("root ::= [\\x00]", True),
    ("root ::= [\\x00-\\x00]+", True),
    ('root ::= "hi" [\\u0000]', True),
    ('root ::= "\\U00000000"+', True),
    ('root ::= "a\x00"', True),  # a raw NUL would end llama.cpp's C string
    ("root ::= [^\\x00]+", False),  # each accepted one was answered
    ("root ::= [\\x00-\\x7f]+", False),
    ("root ::= [a\\x00]+", False),
    ('root ::= [^"\\\\\\x7F\\x00-\\x1F]+', False),  # llama.cpp's json.gbnf string characters
    ('root ::= "\\\\x00" # "\\x00"', False),  # an escaped backslash, then a comment
    ("root ::= [\\]\\x00]", False),
])
def test_only_a_grammar_that_leaves_nothing_but_a_nul_is_refused(grammar: str, refused: bool) -> None:
    from localgen.grammar import asks_for_nul

    assert asks_for_nul(grammar) is refused


def test_llama_cpp_s_own_json_grammar_is_accepted(tmp_path: Path) -> None:
    from llama_cpp.llama_grammar import JSON_GBNF

    path = tmp_path / "json.gbnf"
    path.write_text(JSON_GBNF)
    result = run_localgen("run", "--grammar", str(path), "-n", "200", "--json", *GREEDY,
                          "Describe a cat as a JSON object with name and age.")
    assert result.returncode == 0, result.err
    answer = json.loads(result.out)
    if answer["finish_reason"] == "stop":
        json.loads(answer["text"])
    assert answer["text"].lstrip().startswith(("{", "["))


def test_a_json_schema_is_an_object(tmp_path: Path) -> None:
    schema = tmp_path / "list.json"
    schema.write_text("[1]")
    result = run_localgen("run", "--json-schema", str(schema), "hi")
    assert result.returncode == 2 and "a JSON schema is an object, not an array" in result.err, result.err


def test_a_grammar_is_no_chat_setting() -> None:
    assert "grammar" not in CHAT_SETTINGS and SamplingParams().grammar is None
