"""Constrained answers: --json-schema and --grammar on the real engine, and their bad input."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.params import CHAT_SETTINGS, SamplingParams
from tests.conftest import REPO_ROOT, run_localgen

GREEDY = ("--temperature", "0", "--seed", "1")
CAP = 4 * 2**20  # what README says a grammar or a JSON schema may be
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


def test_a_json_answer_s_strings_hold_no_raw_control_character() -> None:
    """The converter's strings allowed raw newlines, which no JSON parser accepts: this answer's greedy path wrote two
    at its 15th token, inside a string, and ran on over several lines. No string holds a raw control character now,
    so the answer, cut at 24 tokens, has none (whole, it runs on for 280 tokens inside the string, then stops)."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"]}
    # flash attention on: its greedy answer is the one that ran on over several lines. One thread: two spin beside
    # other tests' processes (27.7 s against 9.8 s on one, on a loaded machine); on one thread the answer is the
    # same, character for character.
    result = run_localgen("run", "--json-schema", json.dumps(schema), "-n", "24", "--json", *GREEDY, "-t", "1",
                          "--flash-attn", "on", "Where is the Eiffel Tower? city Paris country France")
    assert result.returncode == 1 and "not complete JSON" in result.err, result.err
    answer = json.loads(result.out)
    assert answer["finish_reason"] == "length" and answer["text"].startswith('{ "city": "Paris" , "country": "'), answer
    assert not re.search(r"[\x00-\x1f]", answer["text"]), answer["text"]


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


@pytest.mark.parametrize(("grammar", "answer"), [
    ("root ::= <|im_start|>", "<|im_start|>"),  # was an empty answer
    ('root ::= "Hi" <|im_start|> "user"', "Hi<|im_start|>user"),  # was "Hiuser"
])
def test_a_control_token_the_grammar_takes_is_written_as_its_text(grammar: str, answer: str) -> None:
    """llama.cpp's grammar sampler reads a control token as its text: the answer is the text the grammar allowed."""
    result = run_localgen("run", "--grammar", grammar, "--json", "hi", *GREEDY)
    assert result.returncode == 0, result.err
    assert json.loads(result.out)["text"] == answer


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
    assert cut.returncode == 1 and cut.out == ""
    assert "the answer ended inside its <think> reasoning, which --hide-thinking left out" in cut.err
    assert "before the grammar of --grammar could end" in cut.err


@pytest.mark.parametrize(("grammar", "note"), [
    ('root ::= "<think></think>"', "the answer after its <think> reasoning is empty (--hide-thinking left the "
     "reasoning out)"),  # was: the answer ended inside its <think> reasoning
    ('root ::= "<think>a b</think>\\n\\n"', "the answer after its <think> reasoning is empty"),
    ('root ::= " "', "the answer is blank (whitespace only): the model ended it before any text"),  # no reasoning
])
def test_hide_thinking_says_whether_an_empty_answer_ended_inside_its_reasoning(grammar: str, note: str) -> None:
    result = run_localgen("run", "--hide-thinking", "--grammar", grammar, "hi", *GREEDY)
    assert result.returncode == 0 and result.out.strip() == "", result.out
    assert result.err.startswith(f"localgen: {note}") and len(result.err.splitlines()) == 1, result.err


def test_with_hide_thinking_a_stop_string_is_matched_in_the_answer_only() -> None:
    grammar = 'root ::= "<think>\\nStep one.\\n\\nStep two.\\n</think>\\n\\nThe answer is 42.\\n\\nMore text."'
    hidden = run_localgen("run", "--hide-thinking", "--stop", "\n\n", "-n", "80", "--grammar", grammar, "q", *GREEDY)
    assert hidden.returncode == 0 and hidden.out == "The answer is 42.\n", (hidden.out, hidden.err)
    shown = run_localgen("run", "--stop", "\n\n", "-n", "80", "--grammar", grammar, "q", *GREEDY)
    assert shown.out == "<think>\nStep one.\n", "shown, the reasoning is part of the text a stop ends"


def test_with_hide_thinking_a_think_tag_later_in_the_answer_is_text() -> None:
    """A <think> after the answer's start (a tag quoted or explained) was taken for reasoning: the rest of the answer
    went to `thinking`, left out of stdout. It is text, and a stop string matches in it as in the rest."""
    grammar = 'root ::= "Use <think> tags.\\n\\nMore </think> here."'
    record = json.loads(run_localgen("run", "--hide-thinking", "--json", "-n", "40", "--grammar", grammar, "q",
                                     *GREEDY).out)
    assert (record["text"], record["thinking"]) == ("Use <think> tags.\n\nMore </think> here.", ""), record
    stopped = run_localgen("run", "--hide-thinking", "--stop", "\n\n", "-n", "40", "--grammar", grammar, "q",
                           *GREEDY)
    assert stopped.returncode == 0 and stopped.out == "Use <think> tags.\n", stopped.out


def test_with_hide_thinking_a_stop_string_spelling_a_think_tag_is_said_never_to_match() -> None:
    """--stop '<think>' silently never matched with --hide-thinking, which takes the reasoning's tags out of the
    answer."""
    grammar = 'root ::= "<think>A</think> Answer."'
    hidden = run_localgen("run", "--hide-thinking", "--stop", "<think>", "--stop", "</think> A", "--stop", "think",
                          "-n", "40", "--grammar", grammar, "q", *GREEDY)
    assert hidden.returncode == 0 and hidden.out == "Answer.\n", hidden.out
    warned = [line for line in hidden.err.splitlines() if "never matches the reasoning's tags with --hide" in line]
    assert [line.split("'")[1] for line in warned] == ["<think>", "</think> A"], hidden.err
    shown = run_localgen("run", "--stop", "<think>", "-n", "40", "--grammar", 'root ::= "Intro. <think>A</think>"',
                         "q", *GREEDY)
    assert shown.out == "Intro. \n" and shown.err == "", "shown, the tag is text a stop string ends"


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
    ('root ::= "a" [z-a]\n', "the character class [z-a] has a range from U+007A down to U+0061"),  # SIGABRT
    ('root ::= "a" [^\\x01-\\x7F\\x80-\\U0010FFFF]\n', "leaves out every character"),  # SIGABRT
    ('root ::= "a"{0,100000}\n', "the repetition {0,100000} counts beyond 2,000"),  # llama.cpp made it "a"*
    ('root ::= ("a"\n', "the grammar does not parse: 1 parenthesis still open at its end"),  # "expecting ')' at"
    ('root ::= "a"{2', "the grammar does not parse: expecting ',' at the end of the grammar"),  # llama.cpp: "at"
    ('root ::= "yes" <|im_end|>\n', "names the token <|im_end|>, which ends the answer"),  # SIGABRT, a backtrace
    ("root ::= <[0]>\n", "names the token <[0]>, which ends the answer"),  # <|endoftext|>: SIGABRT
    ("root ::= <[999999]>\n", "names the token <[999999]>, beyond the model's 49,152 tokens"),  # SIGABRT
    ('root ::= "a" !<[5]> "b"\n', "excludes the token <[5]> by name (!<...>)"),  # std::terminate on "al"
    ('root ::= "a" [\\U00110000]\n', "asks for U+110000, beyond Unicode's last character U+10FFFF"),  # broken UTF-8
    ('root ::= "\\U00110000"\n', "asks for U+110000, beyond Unicode's last character"),
    ('root ::= "\\uD83D\\uDE00"\n', "asks for U+D83D, a UTF-16 surrogate, which no UTF-8 text holds"),  # ���
])
def test_a_bad_grammar_is_one_usage_error(tmp_path: Path, grammar: str, message: str) -> None:
    path = tmp_path / "bad.gbnf"
    path.write_text(grammar)
    result = run_localgen("run", "--grammar", str(path), "hi")
    assert result.returncode == 2 and message in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, "llama.cpp's own parse report is not shown"


@pytest.mark.parametrize(("grammar", "message"), [
    ("root ::= <|im_end|>", "names the token <|im_end|>, which ends the answer"),
    ('root ::= "a" <[999999]>', "names the token <[999999]>, beyond the model's 49,152 tokens"),
    ("root ::= <|nosuch|>", "the grammar does not parse: invalid token '<|nosuch|>'"),  # no token of this model's
])
def test_print_prompt_refuses_a_grammar_the_answer_would_refuse(grammar: str, message: str) -> None:
    for json_output in ((), ("--json",)):
        result = run_localgen("run", "--print-prompt", *json_output, "--grammar", grammar, "hi")
        assert result.returncode == 2 and result.out == "" and message in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1, result.err


def test_print_prompt_shows_the_prompt_for_a_grammar_that_names_a_token_the_answer_can_give() -> None:
    shown = run_localgen("run", "--print-prompt", "--grammar", 'root ::= "yes" | <|im_start|>', "hi")
    assert shown.returncode == 0 and shown.out.endswith("<|im_start|>assistant\n"), shown.err


@pytest.mark.parametrize(("args", "message"), [
    (("--json-schema", '{"type":'), "the JSON schema is not valid JSON (Expecting value at line 1, column 9)"),
    (("--json-schema", '{"type": "foo"}'), "the JSON schema's type \"foo\" is not a JSON type (hint: use one of "
     "string, number, integer, boolean, object, array, null)"),  # was the converter's "Unrecognized schema: {...}"
    (("--json-schema", '{"type": "object", "properties": {"n": {"type": "int"}}}'),
     "the JSON schema's type \"int\" is not a JSON type (hint: use \"integer\")"),
    (("--json-schema", "no-such-schema.json"), "no such file: no-such-schema.json"),
    (("--json-schema", "[" * 50_000 + "]" * 50_000), "the JSON schema nests too deep to read"),
    (("--json-schema", "true"), "a JSON schema is an object, not true or false"),
    (("--json-schema", '{"$ref": "https://example.com/s.json"}'), "a $ref to a remote schema"),
    (("--json-schema", '{"$ref": "#/defs/none"}'), "a $ref that does not resolve: #/defs/none ("),  # not "stdin#"
    (("--json-schema", '{"type": "array", "items": []}'), "grammar: the converter looked for 'prefixItems' and found"),
    (("--json-schema", "-"), "--json-schema does not read stdin"),
    (("--json-schema", '{"type": "string", "pattern": "^[z-a]$"}'), "pattern ^[z-a]$ is not a valid regular"),
    (("--json-schema", '{"type": "string", "pattern": "^((((a$"}'), "pattern ^((((a$ is not a valid regular"),
    (("--json-schema", '{"type": "string", "pattern": "^a{3,1}$"}'), "(min repeat greater than max repeat)"),
    (("--json-schema", '{"type": "string", "pattern": "^a{0,100000}$"}'), "repeats {0,100000}, beyond 2,000"),
    (("--json-schema", '{"type": "string", "pattern": "^a\\\\s$"}'), "pattern ^a\\s$: its \\s is not supported"),
    (("--json-schema", '{"type": "string", "pattern": "^[\\"]$"}'), 'has " in a character class'),
    (("--json-schema", '{"type": "string", "pattern": "ab"}'), "pattern ab is not anchored: a grammar matches the "
     'whole string (hint: start it with ^ and end it with $, e.g. "^[a-z]+$")'),  # was the converter's assert
    (("--json-schema", '{"type": "string", "pattern": "^]\\\\$"}'), "pattern ^]\\$ is not anchored"),  # looped
    (("--json-schema", '{"type": "string", "pattern": 5}'), "the JSON schema's pattern 5 is not a string"),
    (("--json-schema", '{"$ref": "#/x", "x": {"type": "string", "maxLength": 100000000}}'),
     "maxLength 100,000,000 is beyond what"),  # a $ref outside $defs: the converter spelled out the count for ever
    (("--json-schema", '{"type": "string", "minLength": 5, "maxLength": 3}'), "minLength 5 is above its maxLength 3"),
    (("--json-schema", '{"type": "array", "minItems": 2, "maxItems": 1}'), "minItems 2 is above its maxItems 1"),
    (("--json-schema", '{"type": "string", "maxLength": 1000000000}'), "maxLength 1,000,000,000 is beyond what"),
    (("--json-schema", '{"type": "string", "maxLength": 1500}'), "maxLength 1,500 is more than 1,000, which"),
    (("--json-schema", '{"type": "string", "minLength": 0, "maxLength": 1500}'),
     "minLength 0 and maxLength 1,500 are more than"),
    (("--json-schema", '{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}'),
     "the JSON schema's $ref #/$defs/a is a cycle: #/$defs/a -> #/$defs/a"),
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
    result = run_localgen("run", "--json-schema", '{"type": "number", "minimum": 1e-150, "maximum": 7.5}', "A number.",
                          "-n", "12", *GREEDY)
    assert result.returncode == 0 and isinstance(json.loads(result.out), int | float)
    assert result.err.startswith("localgen: warning: the JSON schema's maximum, minimum cannot be enforced")


def test_token_references_are_read_outside_literals_classes_and_comments() -> None:
    from localgen.grammar import excluded_token_problem, token_references

    text = 'root ::= "<a>" [<>] <|im_start|> x # <b>\nx ::= <[5]> "!<c>" !<d>'
    assert token_references(text) == ["|im_start|", "[5]"]
    assert excluded_token_problem(text) is not None and "<d>" in excluded_token_problem(text)[0]
    assert excluded_token_problem('root ::= "!<d>" [!<] # !<e>') is None


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


def test_a_repetition_whose_minimum_is_above_its_maximum_is_refused_before_llama_cpp_allocates() -> None:
    """llama.cpp's parser allocated rules until the OOM killer came (23 GB): run here under a 4 GB cap."""
    import resource
    import subprocess
    import sys

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    proc = subprocess.run([sys.executable, "-m", "localgen", "run", "-n", "3", "--grammar", 'root ::= "a"{2,1}', "x"],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60, preexec_fn=capped)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "--grammar: the repetition {2,1} has its minimum above its maximum" in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("grammar", "problem"), [
    ('root ::= "a"{2,1}', "the repetition {2,1} has its minimum above its maximum"),
    ('root ::= [a-z]{ 3 , 2 }', "the repetition { 3 , 2 } has its minimum above its maximum"),
    ('root ::= "a"{2001}', "the repetition {2001} counts beyond 2,000"),
    ('root ::= "a"{0,2001}', "the repetition {0,2001} counts beyond 2,000"),
    ('root ::= "a"{2001,}', "the repetition {2001,} counts beyond 2,000"),
    ('root ::= "a"{2000} "b"{0,2000} "c"{5,} ("d"{1000}){1000}', None),  # each parsed in a second or less
    ('root ::= "{2,1}" [{] # {2,1}', None),  # in a literal, a class, a comment
])
def test_repetition_problems(grammar: str, problem: str | None) -> None:
    from localgen.grammar import repetition_problem

    found = repetition_problem(grammar)
    assert (found and found[0]) == problem if problem is None else found and found[0].startswith(problem), found


@pytest.mark.parametrize(("grammar", "problem"), [
    ("root ::= [z-a]", "has a range from U+007A down to U+0061"),
    ("root ::= [a-cz-a]", "has a range from U+007A down to U+0061"),
    ("root ::= [^\\x00-\\U0010FFFF]", "leaves out every character"),
    ("root ::= [^\\x01-\\x7F\\x80-\\U0010FFFF]", "leaves out every character"),  # NUL needs no cover
    ("root ::= [a-z]", None),
    ("root ::= [^\\x01-\\x7E\\x80-\\U0010FFFF]", None),  # \x7F is left
    ("root ::= [a-]", None),  # a - at the end is itself
    ('root ::= [\\]-a] "[z-a]"', None),  # ] (0x5D) to a (0x61); a literal is no class
])
def test_class_problems(grammar: str, problem: str | None) -> None:
    from localgen.grammar import class_problem

    found = class_problem(grammar)
    assert (found and problem in found[0]) if problem else found is None, found


@pytest.mark.parametrize(("grammar", "surrogate"), [
    ('root ::= "a\\uDE00"', 0xDE00),
    ("root ::= [\\uD800-\\uDBFF]", 0xD800),
    ("root ::= [a\\uDFFF]", 0xDFFF),
    ("root ::= [\\u0000-\\uFFFF]", None),  # any character of the BMP: real ones too
    ("root ::= [^\\uD800-\\uDFFF]", None),  # leaves them out
    ('root ::= "\\U0001F600"', None),
])
def test_a_utf16_surrogate_the_grammar_asks_for_is_a_code_point_problem(grammar: str, surrogate: int | None) -> None:
    from localgen.grammar import code_point_problem

    problem = code_point_problem(grammar)
    assert (problem is None) == (surrogate is None), problem
    if problem is not None:
        assert f"U+{surrogate:X}, a UTF-16 surrogate" in problem[0] and "\\U0001F600" in problem[1]


def test_a_parse_error_that_names_no_place_says_the_end() -> None:
    from localgen.grammar import worded_parse_error

    assert worded_parse_error("expecting ')' at") == "expecting ')' at the end of the grammar"
    assert worded_parse_error("expecting name at x") == "expecting name at x"


VALUES = {"x\\y": "x\\y", "path": "C:\\temp", "tab": "tab\there", "quote": 'say "hi"', "lines": "a\nb\r\n",
          "control": "bell\x07", "unicode": "café ✓ 😀", 'k"e\\y\t': 1}


def test_const_values_and_property_names_are_answered_as_their_exact_json() -> None:
    """Backslashes became escapes ("C:\\temp" a TAB), a TAB was written raw, a quote did not parse."""
    schema = {"type": "object", "properties": {name: {"const": value} for name, value in VALUES.items()},
              "required": list(VALUES)}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "Fill it in.", "-n", "200", *GREEDY)
    assert result.returncode == 0, result.err
    assert json.loads(result.out) == VALUES


def test_enum_values_are_answered_exactly() -> None:
    result = run_localgen("run", "--json-schema", json.dumps({"enum": ["a\\b", 'q"'], "type": "string"}),
                          "Pick one.", "-n", "20", *GREEDY)
    assert result.returncode == 0 and json.loads(result.out) in ("a\\b", 'q"'), result.out


@pytest.mark.parametrize(("question", "expected"), [("Is the sky blue? Answer code yes or no.", "yes"),
                                                    ("Say no.", "no")])
def test_a_pattern_s_top_level_alternation_stays_inside_the_string(question: str, expected: str) -> None:
    """^yes|no$ gave { "code" : no" }: the string's quotes bound to one side of the |."""
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^yes|no$"}},
              "required": ["code"]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), question, "-n", "20", *GREEDY)
    assert result.returncode == 0 and json.loads(result.out) == {"code": expected}, result.out


def test_max_items_without_items_is_enforced() -> None:
    result = run_localgen("run", "--json-schema", '{"type": "array", "maxItems": 3}', "List ten numbers.",
                          "-n", "80", *GREEDY)
    assert result.returncode == 0, result.err
    answer = json.loads(result.out)
    assert isinstance(answer, list) and len(answer) <= 3


def test_a_pattern_with_digit_escapes_works() -> None:
    """\\d was refused as "unknown escape at \\d"."""
    schema = {"type": "string", "pattern": "^\\d{3}-\\w\\.$"}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "A code.", "-n", "20", *GREEDY)
    assert result.returncode == 0, result.err
    assert re.fullmatch(r"\d{3}-\w\.", json.loads(result.out)), result.out


def test_required_names_missing_from_properties_are_warned_about() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b", "c"]}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "Numbers.", "-n", "30", *GREEDY)
    assert result.returncode == 0 and result.err.startswith(
        "localgen: warning: the JSON schema requires b, c but does not list them in properties"), result.err


@pytest.mark.parametrize(("pattern", "matching", "not_matching"), [
    ("^yes|no$", ["yes", "no"], ["yesno", "yes|no"]),
    ("^\\d+\\.\\d$", ["12.5"], ["a.5", "125"]),
    ("^[^a]$", ["b"], ["a", '"', "\\"]),  # a quote or backslash would need an escape in the JSON text
    ('^say "\\\\"$', ['say "\\"'], ["say \"\""]),
    # a ], { or } that is a character: the converter looped for ever on a bare ] or }, or read { as a count
    ("^a]$", ["a]"], ["a", "]"]),
    ("^a}{$", ["a}{"], ["a", "a}"]),
    ("^[]]$", ["]"], ["a", "[]"]),
    ("^[^]]$", ["a"], ["]", '"']),
    ("^[]a]+\\]$", ["a]a]"], ["a", "b]"]),
    ("^x{2}}|y{,}$", ["xx}", "", "yyy"], ["x{2}}", "xx"]),
    ("^a{x}$", ["a{x}"], ["a"]),
    ("^a{1,2,3}$", ["a{1,2,3}"], ["a"]),  # no count to Python's re: the converter's bare assert refused it
])
def test_converted_patterns_match_the_json_text_of_what_the_regex_matches(
        pattern: str, matching: list[str], not_matching: list[str]) -> None:
    from localgen.json_schema import schema_grammar

    with _failing_after(30):  # the converter looped for ever on a bare ] or }
        grammar = schema_grammar(json.dumps({"type": "string", "pattern": pattern}), [])
    for value in matching:
        assert _gbnf_accepts(grammar, json.dumps(value)), (value, grammar)
    for value in not_matching:
        assert not _gbnf_accepts(grammar, json.dumps(value)), (value, grammar)


def test_a_pattern_a_ref_finds_anywhere_is_translated_too() -> None:
    """A $ref outside $defs and properties reached a pattern untranslated: the converter looped for ever on its ]."""
    from localgen.json_schema import schema_grammar

    schema = {"$ref": "#/x/y", "x": {"y": {"type": "string", "pattern": "^a]$"}}}
    with _failing_after(30):
        grammar = schema_grammar(json.dumps(schema), [])
    assert _gbnf_accepts(grammar, '"a]"') and not _gbnf_accepts(grammar, '"a"'), grammar


@contextlib.contextmanager
def _failing_after(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the block if it runs for longer than seconds (it hangs)."""
    def hung(*_: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("pattern", ["^a]$", "^[]]$", "^a}$", "^[[:a:]]$"])
def test_a_pattern_with_a_bracket_or_brace_is_followed(pattern: str) -> None:
    """A ] or } that is a character made the converter loop for ever: run used a CPU for good, the model unloaded."""
    schema = {"type": "string", "pattern": pattern}
    result = run_localgen("run", "--json-schema", json.dumps(schema), "hi", "-n", "10", *GREEDY, timeout=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Python's FutureWarning for [[:a:]]
        assert result.returncode == 0 and re.fullmatch(pattern, json.loads(result.out)), (result.out, result.err)
    assert result.err == "", "no Python warning"


def _gbnf_accepts(grammar: str, text: str) -> bool:
    """Whether a converted grammar (rules of literals, classes, groups, | and quantifiers) matches text whole,
    checked by turning each rule into a Python regex."""
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())

    def regex(name: str, depth: int = 0) -> str:
        body = rules[name]
        out, i = [], 0
        while i < len(body):
            char = body[i]
            if char == '"':
                j = i + 1
                while body[j] != '"':
                    j += 2 if body[j] == "\\" else 1
                out.append(re.escape(_decoded(body[i + 1:j])))
                i = j + 1
            elif char == "[":
                j = i + 1
                while body[j] != "]":
                    j += 2 if body[j] == "\\" else 1
                out.append(body[i:j + 1])
                i = j + 1
            elif char.isalpha():
                j = i
                while j < len(body) and (body[j].isalnum() or body[j] == "-"):
                    j += 1
                out.append(f"(?:{regex(body[i:j], depth + 1)})")
                i = j
            else:
                out.append("" if char == " " else char)
                i += 1
        return "".join(out).replace("(", "(?:").replace("(?:?:", "(?:")

    return re.fullmatch(regex("root"), text + " ") is not None or re.fullmatch(regex("root"), text) is not None


def _decoded(body: str) -> str:
    """A GBNF literal's body as its text."""
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def test_a_long_run_of_optional_items_is_refused_before_llama_cpp_spends_minutes_a_token(tmp_path: Path) -> None:
    """llama.cpp took 37 s to sample the first token of ("a"?){200}, and more for each longer run."""
    path = tmp_path / "many.gbnf"
    path.write_text('root ::= ("a"?){200}\n')
    result = run_localgen("run", "--grammar", str(path), "-n", "3", "hi", timeout=20)
    assert result.returncode == 2, result.err
    assert result.err.startswith(f"localgen: error: --grammar {path}: rule root has 200 optional items in a row that "
                                 "can each begin with 'a', beyond 16") and len(result.err.strip().splitlines()) == 1
    assert '"a"{0,200} rather than ("a"?){200}' in result.err
    shorter = run_localgen("run", "--grammar", 'root ::= ("a"?){16} "."', "-n", "20", "--json", *GREEDY, "Say a.")
    assert shorter.returncode == 0, shorter.err
    assert re.fullmatch(r"a{0,16}\.?", json.loads(shorter.out)["text"]), shorter.out


def _optional_properties(count: int) -> str:
    """The grammar the converter writes for an object of count optional string properties."""
    from localgen.json_schema import schema_grammar

    return schema_grammar(json.dumps({"type": "object", "properties": {f"p{i}": {"type": "string"}
                                                                       for i in range(count)}}), [])


@pytest.mark.parametrize(("grammar", "run"), [
    ('root ::= ("a"?){17}', (17, "a")),
    ('root ::= ("a"?){0,200}', (200, "a")),  # llama.cpp nests each optional copy in the one before
    ('root ::= "x" ([a-z]?){40} "y"', (40, "a")),  # 49 s a token
    ('root ::= ("ab"?){30}', (30, "a")),
    ('root ::= ("a"? "b"?){20}', (20, "a")),
    ("root ::= o o o o o o o o o o o o o o o o o o\no ::= [^\"]?", (18, "!")),  # the first printable one
    ('root ::= "a"{0,200}', None),  # the same language, one item
    ('root ::= ("a"?){16}', None),
    ('root ::= [a-z ]{3,20} ([a-z]+ " "?){0,30} (" "? [a-z])*', None),
    ('root ::= "{2,1}" [(] # ("a"?){200}', None),  # a literal, a class, a comment
    (_optional_properties(150), None),  # 150 optional items begin with ',', but each goes on its own way
])
def test_optional_run_problems(grammar: str, run: tuple[int, str] | None) -> None:
    from localgen.grammar import optional_run_problem

    found = optional_run_problem(grammar)
    expected = run and f"rule root has {run[0]} optional items in a row that can each begin with {run[1]!r}"
    assert (found and found[0].startswith(expected)) if run else found is None, found


def test_llama_cpp_s_own_grammars_have_no_long_optional_run() -> None:
    import llama_cpp.llama_grammar as grammars

    from localgen.grammar import optional_run_problem

    texts = [getattr(grammars, name) for name in dir(grammars) if name.endswith("_GBNF")]
    assert len(texts) >= 5 and not any(map(optional_run_problem, texts))


def run_reading_an_endless_pipe(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run localgen with "{pipe}" in args standing for /dev/fd/N, a pipe this test writes lines to without end, and
    how many bytes the run took from it before it exited."""
    read_end, write_end = os.pipe()
    written = [0]

    def write_forever() -> None:
        """Write lines until the reader has gone."""
        chunk = b"y\n" * 32_768
        try:
            while True:
                written[0] += os.write(write_end, chunk)
        except BrokenPipeError:
            pass

    command = [sys.executable, "-m", "localgen", *(a.replace("{pipe}", f"/dev/fd/{read_end}") for a in args)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    writer = threading.Thread(target=write_forever, daemon=True)
    try:
        child = subprocess.Popen(command, pass_fds=(read_end,), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    finally:
        os.close(read_end)  # the run's copy is the only reader left: its exit ends the writing
    writer.start()
    try:
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
        writer.join(timeout=30)
        os.close(write_end)
    return subprocess.CompletedProcess(command, child.returncode, out, err), written[0]


@pytest.mark.parametrize(("option", "what"), [("--grammar", "a grammar"), ("--json-schema", "a JSON schema")])
def test_an_endless_pipe_given_as_a_grammar_or_schema_is_refused_at_its_cap(option: str, what: str) -> None:
    result, written = run_reading_an_endless_pipe("run", "-n", "3", option, "{pipe}", "hi")
    assert written < CAP + 2**20, f"{written:,} bytes read: the read went on past the cap"
    assert result.returncode == 2 and result.stdout == "", result.stderr
    pipe = result.args[result.args.index(option) + 1]
    assert result.stderr == (f"localgen: error: {option} {pipe} is larger than 4 MiB, the most {what} may be "
                             f"(hint: check the file given to {option})\n")


def _grammar_of_comments(size: int) -> str:
    """A grammar llama.cpp takes, of size bytes: one rule, then lines of comments."""
    rule = 'root ::= "a"\n'
    lines, rest = divmod(size - len(rule), 100)
    return rule + ("#" + "c" * 98 + "\n") * lines + ("#" * (rest - 1) + "\n" if rest else "")


def test_a_grammar_file_over_the_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    grammar = tmp_path / "big.gbnf"
    grammar.write_text(_grammar_of_comments(CAP + 1))
    result = run_localgen("run", "-n", "1", "--grammar", str(grammar), "hi")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == (f"localgen: error: --grammar {grammar} is larger than 4 MiB, the most a grammar may be "
                          "(hint: check the file given to --grammar)\n")


def test_a_grammar_file_of_exactly_the_cap_is_taken(tmp_path: Path) -> None:
    grammar = tmp_path / "full.gbnf"
    grammar.write_text(_grammar_of_comments(CAP))
    assert grammar.stat().st_size == CAP
    result = run_localgen("run", "-n", "1", *GREEDY, "--grammar", str(grammar), "hi")
    assert result.returncode == 0 and result.out == "a\n", result.err
