"""Text given on the command line and in files as the model gets it, shown by `run --print-prompt` on the real bundled
model: Windows line ends, byte-order marks, a locale that is not UTF-8."""

from __future__ import annotations

import json
from pathlib import Path

from localgen.input_text import argument_as_file_text, argument_utf8
from localgen.inputs import system_prompt_text
from tests.conftest import run_localgen
from tests.test_run_inputs import chatml, printed_prompt

NOT_UTF8_LOCALE = {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}  # Python reads argv as ASCII


def test_raw_keeps_the_line_ends_of_a_system_prompt_as_it_keeps_the_prompt_s(tmp_path: Path) -> None:
    """--raw sends -s and --system-file with their Windows line ends, as the prompt and -f files, where both had
    theirs made plain newlines (a --system-file less the line ends it ends with, as its blank line follows it)."""
    system = tmp_path / "system.txt"
    system.write_bytes(b"Be terse.\r\nAnswer in English.\r\n")
    assert printed_prompt("--raw", "-s", "sys\r\nline\r", "p\r\nq") == "sys\r\nline\r\n\np\r\nq"
    text = "Be terse.\r\nAnswer in English."
    assert printed_prompt("--raw", "--system-file", str(system), "p\r\nq") == f"{text}\n\np\r\nq"
    assert printed_prompt("--raw", "-f", str(system), "p\r\nq") == f"{text}\r\n\np\r\nq"


def test_system_prompt_text_drops_the_line_ends_a_file_ends_with_and_keeps_the_rest_where_exact() -> None:
    assert system_prompt_text("a\r\nb\r\n\r\n") == "a\nb"
    assert system_prompt_text("a\r\nb\r\n\r\n", exact=True) == "a\r\nb"
    assert system_prompt_text("a\r\nb\r", exact=True) == "a\r\nb\r"


def test_a_byte_order_mark_at_the_start_of_an_argument_is_dropped_as_a_file_s_is(tmp_path: Path) -> None:
    """`localgen run -s "$(cat FILE)" "$(cat FILE)"` of a file a Windows editor saved with a UTF-8 byte-order mark
    makes the prompt --system-file FILE -f FILE makes, where the model got U+FEFF at the start of both (22 prompt
    tokens, not 16); --raw keeps it, as it keeps the rest."""
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfhello\r\n")
    as_files = printed_prompt("--system-file", str(bom), "-f", str(bom))
    assert printed_prompt("-s", "\ufeffhello\r", "\ufeffhello\r") == as_files == chatml("hello", system="hello")
    assert printed_prompt("--raw", "-s", "\ufeffhello\r", "\ufeffhello\r") == "\ufeffhello\r\n\n\ufeffhello\r"


def test_argument_as_file_text_drops_a_leading_byte_order_mark_alone() -> None:
    assert argument_as_file_text("\ufeffa\ufeff\r\nb\r") == "a\ufeff\nb"


def test_grammar_and_schema_text_is_read_as_utf8_outside_a_utf8_locale() -> None:
    """In the POSIX locale, --grammar and --json-schema given as UTF-8 text constrain the answer to it, as the prompt
    is read as UTF-8 there, where they were refused as not UTF-8 (exit 2)."""
    run = ("run", "-n", "24", "--temperature", "0", "Say hello.")
    by_grammar = run_localgen(*run, "--grammar", 'root ::= "\u4f60\u597d"', env=NOT_UTF8_LOCALE)
    assert by_grammar.returncode == 0 and by_grammar.stdout.decode().strip() == "\u4f60\u597d", by_grammar.err
    by_schema = run_localgen(*run, "--json-schema", '{"const": "\u4f60\u597d"}', env=NOT_UTF8_LOCALE)
    assert by_schema.returncode == 0 and json.loads(by_schema.stdout) == "\u4f60\u597d", by_schema.err


def test_argument_utf8_reads_argv_bytes_as_utf8_and_refuses_others() -> None:
    assert argument_utf8("\udce4\udcbd\udca0") == "\u4f60"  # what the POSIX locale makes of UTF-8's bytes
    assert argument_utf8("caf\u00e9") == "caf\u00e9"
    assert argument_utf8("caf\udce9") is None  # a Latin-1 byte


def test_a_prompt_of_a_byte_order_mark_alone_is_empty_as_such_a_file_is(tmp_path: Path) -> None:
    """`localgen run "$(cat FILE)"` of an empty file Notepad saved is refused as an empty prompt is, as -f FILE and
    stdin are, where it sent an empty message and exited 0."""
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf")
    for args, stdin in ((["\ufeff"], None), (["", "-f", str(bom)], None), (["-"], b"\xef\xbb\xbf")):
        result = run_localgen("run", *args, stdin=stdin)
        assert result.returncode == 2, (args, result.err)
        assert "localgen: error: nothing to send: the prompt is empty" in result.err
