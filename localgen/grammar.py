"""Constrained output: a GBNF grammar, its text or file (--grammar), or a JSON schema (--json-schema) as a Grammar."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localgen.errors import UsageError
from localgen.input_text import argument_utf8
from localgen.inputs import STDIN_NAME, InputFile, Waiting
from localgen.json_schema import SCHEMA_HINT, schema_grammar
from localgen.json_schema_words import MAX_COUNT
from localgen.params import SCHEMA_SOURCE, Grammar
from localgen.stdin_names import names_stdin
from localgen.thinking import CLOSE_TAG
from localgen.typed_paths import reads_as_no_path
from localgen.units import times
from localgen.whole_inputs import whole_text, whole_text_cap

GRAMMAR_HINT = 'give a GBNF grammar, as text or a file, with a root rule, e.g. --grammar \'root ::= "yes" | "no"\''
_KINDS = {"--grammar": ("a grammar", GRAMMAR_HINT), "--json-schema": ("a JSON schema", SCHEMA_HINT)}  # as named
MAX_NESTING = 1000  # llama.cpp's recursive-descent grammar parser overflows the C stack near 20,000
_ROOT_RULE = re.compile(r"^\s*root\s*::=", re.MULTILINE)
_RULE_NAME = re.compile(r"([A-Za-z0-9-]+)\s*::=")  # where a rule is defined (in GBNF text outside its literals)
_REPETITION = re.compile(r"\{\s*(\d+)\s*(?:(,)\s*(\d*)\s*)?\}")  # {m}, {m,} or {m,n}, outside literals
MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)  # UTF-16's halves of a pair: no character of their own
_TOKEN_ID = re.compile(r"\[[0-9]+\]")  # a token named by its id, <[5]>, which llama.cpp parses without a vocabulary
AFTER_REASONING_ROOT = "answer-after-reasoning"  # the root of a grammar that applies from the reasoning's end on


@dataclass(frozen=True)
class ConstraintSource:
    """--grammar or --json-schema as given: its text, or its file (checked, and read by grammar_for)."""

    option: str  # "--grammar" or "--json-schema"
    given: str | InputFile
    typed: str = ""  # the name the option was given by where it is another (--grammar-file for --grammar)

    @property
    def file(self) -> InputFile | None:
        """Its file (None for a text given whole)."""
        return self.given if isinstance(self.given, InputFile) else None

    def text(self, waiting: Waiting | None) -> str:
        """The grammar's or schema's text, read from its file (a binary, non-UTF-8 or empty one is refused)."""
        if isinstance(self.given, str):
            return self.given
        what, hint = _KINDS[self.option]
        return whole_text(self.given, what, hint, waiting=waiting)


def after_reasoning(text: str) -> str:
    """GBNF text whose AFTER_REASONING_ROOT rule is the reasoning's </think>, blank space, then the grammar's root: a
    lazy grammar sampler that starts at the </think> lets the reasoning a prompt opened run free, then applies."""
    return f'{text}\n{AFTER_REASONING_ROOT} ::= "{CLOSE_TAG}" [ \\t\\n]* root\n'


def constraint_source(grammar: str | None, json_schema: str | None, *,
                      grammar_option: str = "--grammar") -> ConstraintSource | None:
    """What the answer must follow, from --grammar TEXT|FILE or --json-schema TEXT|FILE (None: free text), checked
    as far as it can be before a file is read: a text as a whole, a file's path (check_file_path); grammar_option:
    the name --grammar was given by (--grammar-file), as its errors name it."""
    if grammar is not None and json_schema is not None:
        raise UsageError(f"{grammar_option} and --json-schema contradict each other", hint="give one of them")
    for option, value, hint in ((grammar_option, grammar, GRAMMAR_HINT), ("--json-schema", json_schema, SCHEMA_HINT)):
        if value is not None and not value.strip():
            raise UsageError(f"{option} is empty", hint=hint)
    if grammar is not None and _is_inline(grammar):
        grammar = _utf8_text(grammar, grammar_option, GRAMMAR_HINT)
        if not _ROOT_RULE.search(grammar):
            raise UsageError(f"the {grammar_option} text has no root rule: the answer starts at `root ::= ...`",
                             hint=GRAMMAR_HINT)
        return ConstraintSource("--grammar", grammar, typed=grammar_option)
    if json_schema is not None and _is_inline_schema(json_schema):
        return ConstraintSource("--json-schema", _utf8_text(json_schema, "--json-schema", SCHEMA_HINT))
    given = (("--grammar", grammar_option, grammar), ("--json-schema", "--json-schema", json_schema))
    for kind, option, value in given:
        if value is not None:
            _refuse_stdin(value, option, _KINDS[kind][1])
            if kind == "--grammar":
                _refuse_misspelled_rule(value, option)
            try:
                file = InputFile.checked(value, option, binary_hint=_KINDS[kind][1],
                                         cap=whole_text_cap(option, _KINDS[kind][0]))
            except UsageError as refused:
                raise _or_as_text(refused, value, _KINDS[kind][1]) from None
            return ConstraintSource(kind, file)
    return None


def _or_as_text(refused: UsageError, value: str, hint: str) -> UsageError:
    """refused, the error for a value taken as a file's name, with hint (how the text itself is given) added where
    no file has that name and it reads as no path (typed_paths.reads_as_no_path: `--json-schema 'type: object'`,
    `--grammar 'yes|no'`; not `schema.json`)."""
    return refused.with_hint(f"{refused.hint}; or {hint}") if reads_as_no_path(value) else refused


def grammar_for(source: ConstraintSource | None, warn: list[str], *, waiting: Waiting | None = None) -> Grammar | None:
    """The grammar the answer must follow (None: free text), its file read now (waiting is told of a quiet pipe).

    warn gets what the answer may still get wrong (schema keywords the converter ignores).
    """
    if source is None:
        return None
    text = source.text(waiting)
    if source.option == "--grammar":
        file = source.file
        if file is not None and not _ROOT_RULE.search(text):
            raise UsageError(f"{file.name} has no root rule: the answer starts at `root ::= ...`", hint=GRAMMAR_HINT)
        return _checked(Grammar(text, source=source.typed or "--grammar" if file is None else
                                f"{file.option} {file.name}"))
    return _checked(Grammar(schema_grammar(text, warn), source=SCHEMA_SOURCE, is_json_schema=True))


def _checked(grammar: Grammar) -> Grammar:
    """Refuse what llama.cpp would crash on (or exhaust memory on, or take minutes a token on) rather than report: a
    NUL character, parentheses nested too deep, a repetition it cannot count, a character class that matches no
    character, a long run of optional items that can each take the same character."""
    if asks_for_nul(grammar.text):
        raise UsageError(f"{grammar.source}: the grammar asks for a NUL character, which no token can give",
                         hint="remove the NUL (\\x00) from the grammar or schema")
    depth = nesting_depth(grammar.text)
    if depth > MAX_NESTING:
        raise UsageError(f"{grammar.source}: the grammar nests parentheses {depth:,} deep, beyond {MAX_NESTING:,}",
                         hint="split the nesting into named rules")
    checks = (unclosed_problem, repetition_problem, class_problem, code_point_problem, excluded_token_problem,
              optional_run_problem, repeated_rule_problem)
    problem = next((found for check in checks if (found := check(grammar.text))), None)
    if problem:
        raise UsageError(f"{grammar.source}: {problem[0]}", hint=problem[1])
    _refuse_unparsed(grammar)
    return grammar


def _refuse_unparsed(grammar: Grammar) -> None:
    """Refuse a grammar llama.cpp's parser rejects now, before piped stdin is waited for and a model loaded: its
    parser, given no vocabulary, parses as with one save a token named by its text (<|im_end|>), which it cannot
    look up; such a grammar is left to the model's own check."""
    if any(token_id(body) is None for body in token_references(grammar.text)):
        return
    from localgen.engine.native import lc
    from localgen.engine.sampling import grammar_sampler

    lc.llama_sampler_free(grammar_sampler(None, grammar))


def excluded_token_problem(text: str) -> tuple[str, str] | None:
    """A token excluded by name (!<|im_end|>), and a hint (None: none is): llama.cpp's sampler lets a token that
    begins with the text before it through such a rule, then aborts the process when it takes that token."""
    excluded = next((body for kind, body in gbnf_pieces(text) if kind == "!<"), None)
    if excluded is None:
        return None
    return (f"the grammar excludes the token <{excluded}> by name (!<...>), which llama.cpp's sampler cannot "
            "follow: it ends the process", "leave characters out with a class instead, e.g. [^\\n]")


def optional_run_problem(text: str) -> tuple[str, str] | None:
    """Too many optional items in a row that can each take the same character, and a hint (None: few enough):
    llama.cpp's sampler tries every way of spreading each token over them, minutes a token for ("a"?){200}."""
    from localgen.grammar_cost import MAX_RUN, RUN_HINT, longest_optional_run

    run = longest_optional_run(text)
    if run is None or run.size <= MAX_RUN:
        return None
    return (f"rule {run.rule} has {run.size:,} optional items in a row that can each begin with {run.char!r}, "
            f"beyond {MAX_RUN}: llama.cpp would try every way of spreading each token over them, which can take "
            "minutes a token", RUN_HINT)


def repeated_rule_problem(text: str) -> tuple[str, str] | None:
    """A rule defined twice, and a hint (None: each once): llama.cpp's parser keeps the last definition alone, so
    `root ::= "a"` then `root ::= "b"` allowed "b" only."""
    names = _RULE_NAME.findall(_outside_literals(text))
    repeated = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if repeated is None:
        return None
    return (f"rule {repeated} is defined {times(names.count(repeated))}, and llama.cpp would keep the "
            "last definition alone",
            f"define it once, its alternatives joined with |: {repeated} ::= ... | ...")


def unclosed_problem(text: str) -> tuple[str, str] | None:
    """A parenthesis left open at the end of GBNF text, and a hint (None: all closed): llama.cpp's parser reports
    it as "expecting ')' at", naming no place."""
    opened = sum(1 if body == "(" else -1 if body == ")" else 0 for kind, body in gbnf_pieces(text) if not kind)
    if opened <= 0:
        return None
    return (f"the grammar does not parse: {opened:,} parenthes{'es' if opened > 1 else 'is'} still open at its end",
            "close each ( with a )")


def repetition_problem(text: str) -> tuple[str, str] | None:
    """What is wrong with a {m,n} repetition in GBNF text, and a hint (None: nothing): a minimum above its maximum
    (llama.cpp's parser then allocates until memory runs out), or a count over MAX_COUNT (refused, or as a maximum
    silently dropped)."""
    for match in _REPETITION.finditer(_outside_literals(text)):
        low, comma, high = match.groups()
        if not comma:
            high = low
        if high and int(low) > int(high):
            return (f"the repetition {match.group(0)} has its minimum above its maximum",
                    "give the smaller count first, e.g. {1,2}")
        if max(int(low), int(high or 0)) > MAX_COUNT:
            return (f"the repetition {match.group(0)} counts beyond {MAX_COUNT:,}, llama.cpp's limit",
                    f"use counts up to {MAX_COUNT:,}, or * and + for no limit")
    return None


def code_point_problem(text: str) -> tuple[str, str] | None:
    """A character beyond Unicode's last (U+10FFFF) in a literal or class, or a UTF-16 surrogate (U+D800-U+DFFF) a
    literal or a class asks for (a JSON habit: \\uD83D\\uDE00 for one emoji), and a hint (None: none is): no text
    holds one, and llama.cpp's sampler lets broken UTF-8 through in its place."""
    for kind, body in gbnf_pieces(text):
        if kind in ('"', "["):
            beyond = next((value for value, _ in gbnf_characters(body) if value > MAX_CODE_POINT), None)
            if beyond is not None:
                return (f"the grammar asks for U+{beyond:X}, beyond Unicode's last character U+10FFFF, which no "
                        "text holds", "write characters up to \\U0010FFFF")
            surrogate = _asked_surrogate(kind, body)
            if surrogate is not None:
                return (f"the grammar asks for U+{surrogate:X}, a UTF-16 surrogate, which no UTF-8 text holds",
                        "write a character beyond U+FFFF as itself or as one \\U escape, e.g. \\U0001F600, not as a "
                        "surrogate pair (\\uD83D\\uDE00)")
    return None


def _asked_surrogate(kind: str, body: str) -> int | None:
    """The first UTF-16 surrogate a literal holds, or a class matches with nothing else in its range (a negated class
    leaves it out, and a range that runs past the surrogates, [\\u0000-\\uFFFF], matches real characters too)."""
    if kind == '"':
        return next((value for value, _ in gbnf_characters(body) if SURROGATES[0] <= value <= SURROGATES[1]), None)
    if body.startswith("^"):
        return None
    return next((low for low, high in class_ranges(gbnf_characters(body))
                 if SURROGATES[0] <= low <= high <= SURROGATES[1]), None)


def class_problem(text: str) -> tuple[str, str] | None:
    """What makes a character class in GBNF text match no character, and a hint (None: nothing): a reversed range
    ([z-a]), which llama.cpp aborts on once the answer gets there, or a negated class that leaves out every
    character."""
    for kind, body in gbnf_pieces(text):
        if kind != "[":
            continue
        ranges = class_ranges(gbnf_characters(body.removeprefix("^")))
        reversed_range = next(((low, high) for low, high in ranges if low > high), None)
        if reversed_range:
            low, high = reversed_range
            return (f"the character class [{body}] has a range from U+{low:04X} down to U+{high:04X}, which "
                    "matches no character", "write each range low to high, e.g. [a-z]")
        if body.startswith("^") and _covers_every_character(ranges):
            return (f"the character class [{body}] leaves out every character, so the answer cannot go on",
                    "leave some characters out of the [^...]")
    return None


def _covers_every_character(ranges: list[tuple[int, int]]) -> bool:
    """Whether (low, high) ranges hold every character a token can give (U+0001 to U+10FFFF)."""
    reached = 0  # every code point up to here is covered (NUL needs no cover: no token gives it)
    for low, high in sorted(ranges):
        if low > reached + 1:
            return False
        reached = max(reached, high)
    return reached >= MAX_CODE_POINT


def _outside_literals(text: str) -> str:
    """GBNF text with its literals, classes and comments left out (each literal or class a space)."""
    return "".join(body if not kind else " " for kind, body in gbnf_pieces(text))


def worded_parse_error(reason: str) -> str:
    """llama.cpp's parse error in full words: "expecting ')' at" with nothing after ends the grammar."""
    if reason.rstrip().endswith(" at"):
        return reason.rstrip() + " the end of the grammar"
    return reason


def token_references(text: str) -> list[str]:
    """The bodies of the tokens GBNF text names, as llama.cpp reads them: '|im_end|' for <|im_end|>, '[5]' for
    <[5]>."""
    return [body for kind, body in gbnf_pieces(text) if kind == "<"]


def token_id(body: str) -> int | None:
    """The id a token reference's body names by number ('[5]' for <[5]>); None for a token named by its text."""
    return int(body[1:-1]) if _TOKEN_ID.fullmatch(body) else None


def nesting_depth(text: str) -> int:
    """The deepest nesting of parentheses in GBNF text, outside string literals, character classes and comments."""
    depth = deepest = 0
    for kind, body in gbnf_pieces(text):
        if not kind and body == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif not kind and body == ")":
            depth -= 1
    return deepest


def asks_for_nul(text: str) -> bool:
    """Whether GBNF text can require a NUL character where nothing else would do (llama.cpp then aborts).

    That is a NUL in a string literal, or a character class of NUL alone; a class that also allows other
    characters ([\\x00-\\x7f]) or excludes NUL ([^\\x00]) is fine. A raw NUL byte anywhere would cut llama.cpp's
    C string short.
    """
    if "\x00" in text:
        return True
    for kind, body in gbnf_pieces(text):
        if kind == '"' and any(value == 0 for value, _ in gbnf_characters(body)):
            return True
        if kind == "[" and not body.startswith("^"):
            ranges = class_ranges(gbnf_characters(body))
            if ranges and all(high == 0 for _, high in ranges):
                return True
    return False


def gbnf_pieces(text: str) -> Iterator[tuple[str, str]]:
    """GBNF text as pieces: ('"', a string literal's body), ('[', a character class's body), ('<' or '!<', a token
    reference's body, as in <|im_end|> or !<[5]>) or ('', any other character); comments are left out."""
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
        elif char == "<" or text.startswith("!<", i):
            start = i + (1 if char == "<" else 2)
            closing = text.find(">", start)
            j = end if closing < 0 else closing
            yield text[i:start], text[start:j]
            i = j + 1
        elif char in "\"[":
            closing, j = '"' if char == '"' else "]", i + 1
            while j < end and text[j] != closing:
                j += 2 if text[j] == "\\" else 1
            yield char, text[i + 1:j]
            i = j + 1
        else:
            yield "", char
            i += 1


_ESCAPED = {"t": 9, "n": 10, "r": 13}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def gbnf_characters(body: str) -> list[tuple[int, bool]]:
    """The code points of a literal's or class's body, escapes decoded; True marks an unescaped '-'."""
    found, i = [], 0
    while i < len(body):
        if body[i] != "\\" or i + 1 == len(body):
            found.append((ord(body[i]), body[i] == "-"))
            i += 1
            continue
        escape, width = body[i + 1], _HEX_DIGITS.get(body[i + 1], 0)
        digits = body[i + 2:i + 2 + width]
        if width and len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
            found.append((int(digits, 16), False))
            i += 2 + width
        else:  # \t, \", \] and the like (a bad escape is llama.cpp's parser's to report)
            found.append((_ESCAPED.get(escape, ord(escape)), False))
            i += 2
    return found


def class_ranges(characters: list[tuple[int, bool]]) -> list[tuple[int, int]]:
    """A character class's (low, high) ranges from its decoded characters: a-z is one range, x is (x, x)."""
    ranges, i = [], 0
    while i < len(characters):
        low = characters[i][0]
        if i + 2 < len(characters) and characters[i + 1][1]:
            ranges.append((low, characters[i + 2][0]))
            i += 3
        else:
            ranges.append((low, low))
            i += 1
    return ranges


def _is_inline(value: str) -> bool:
    """Whether --grammar's value is GBNF text (a rule, as llama-cli's --grammar takes) rather than a file name."""
    if "::=" not in value:
        return False
    if _holds_lines(value):
        return True
    try:
        return not Path(value).is_file()
    except (OSError, ValueError):  # a name too long or with a NUL is no file
        return True


def _refuse_misspelled_rule(value: str, option: str) -> None:
    """Refuse --grammar text (given to option: --grammar-file too) that names no file and defines its rules with
    something other than ::= (root := "a", root = "a"), where it was looked for as a file and refused as `no such
    file`; a path (a folder before its =, or .gbnf at its end) is left to the file's own check, but text of several
    lines is never a path."""
    if _holds_lines(value):
        raise UsageError(f"the {option} text defines no rule with ::=", hint=GRAMMAR_HINT)
    if "=" not in value or not ('"' in value or "[" in value or " " in value):
        return
    head = value.split("=", 1)[0]  # a rule's name, or a path's folders: root = "a/b" is no path, out/a="b" one
    if value.lower().endswith(".gbnf") or "/" in head or os.sep in head:
        return  # a path: its own error says check it
    with contextlib.suppress(OSError, ValueError):
        if Path(value).exists():
            return
    raise UsageError(f"the {option} text defines no rule with ::=, and no file has that name", hint=GRAMMAR_HINT)


def _holds_lines(value: str) -> bool:
    """Whether --grammar's value holds a line break within it: grammar text (a comment, then rules), never a path."""
    return "\n" in value.strip() or "\r" in value.strip()


def _refuse_stdin(value: str, option: str, hint: str) -> None:
    """Refuse '-' as the option's value, or /dev/stdin and its like (stdin_names.names_stdin): stdin may carry the
    prompt."""
    if value.strip() == STDIN_NAME or names_stdin(value):
        raise UsageError(f"{option} does not read stdin (stdin may carry the prompt)", hint=hint)


def _utf8_text(text: str, option: str, hint: str) -> str:
    """Option text read as UTF-8, as a prompt is (input_text.argument_utf8: in any locale); text given with bytes that
    are not UTF-8 is refused: a grammar or schema made of U+FFFD would force them into the answer (a file of them is
    refused alike)."""
    decoded = argument_utf8(text)
    if decoded is None:
        raise UsageError(f"the {option} text is not UTF-8", hint=hint)
    return decoded


def _is_inline_schema(value: str) -> bool:
    """Whether --json-schema's value is JSON text rather than a file name."""
    return value.lstrip().startswith(("{", "[", '"')) or value.strip() in ("true", "false", "null")
