"""run's errors name what was typed, and say what is true of it: -sysf as -sysf, an inline grammar given with
--grammar-file as --grammar-file, whitespace piped in to -f - as piped."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_localgen


def test_an_inline_grammar_given_with_grammar_file_is_labelled_grammar_file(tmp_path: Path) -> None:
    """`localgen run --grammar-file 'root ::= "\\x00"' hi`: the grammar's error is labelled --grammar-file, the
    option typed, where it was labelled --grammar."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    for option in ("--grammar-file", "--grammar"):
        result = run_localgen("run", option, 'root ::= "\\x00"', "hi", env=env)
        assert result.returncode == 2, result.err
        assert result.err.startswith(f"localgen: error: {option}: the grammar asks for a NUL character"), result.err


def test_grammar_file_without_its_value_is_hinted_with_grammar_file_equals(tmp_path: Path) -> None:
    """`localgen run --grammar-file --grammar missing.gbnf hi`: for the value --grammar itself the hint writes
    --grammar-file=--grammar, the option typed, where it wrote --grammar=--grammar (the grammar's text's own name)."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    result = run_localgen("run", "--grammar-file", "--grammar", "missing.gbnf", "hi", env=env)
    assert result.returncode == 2, result.err
    assert result.err.endswith("for the value --grammar itself, write --grammar-file=--grammar)\n"), result.err
