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
