"""run's errors name what was typed, and say what is true of it: -sysf as -sysf, an inline grammar given with
--grammar-file as --grammar-file, whitespace piped in to -f - as piped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_localgen


def test_a_missing_system_file_given_with_sysf_is_hinted_with_sysf(tmp_path: Path) -> None:
    """`localgen run -sysf missing.txt hi` (llama-cli's spelling, which run takes): the hint names -sysf, as typed,
    where it named --system-file; --system-file typed is still named so."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    result = run_localgen("run", "-sysf", "missing.txt", "hi", env=env)
    assert (result.returncode, result.err) == (
        2, "localgen: error: no such file: missing.txt (hint: check the path given to -sysf)\n"), result.err
    result = run_localgen("run", "-s", "terse", "-sysf", "rules.txt", "hi", env=env)
    assert "-s/--system and -sysf both give the system prompt (hint: give one of them: -s TEXT or -sysf FILE)" \
        in result.err, result.err
    result = run_localgen("run", "--system-file", "missing.txt", "hi", env=env)
    assert "check the path given to --system-file)" in result.err, result.err


def test_a_missing_system_file_given_to_chat_with_sysf_is_hinted_with_sysf(tmp_path: Path) -> None:
    """`localgen chat -sysf missing.txt` names -sysf in its hint, as run does, where it named --system-file."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    for option in ("-sysf", "--system-file"):
        result = run_localgen("chat", option, "missing.txt", env=env)
        assert (result.returncode, result.err) == (
            2, f"localgen: error: no such file: missing.txt (hint: check the path given to {option})\n"), result.err


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


def test_whitespace_piped_to_f_dash_is_hinted_as_piped(tmp_path: Path) -> None:
    """`printf ' ' | localgen run -f -`: text was piped in, all whitespace, so the hint says to check what feeds
    stdin, where it said to pipe text in; with stdin from /dev/null it still says to pipe text in."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    for args in (["-f", "-"], ["-f", "/dev/stdin", ""]):
        result = run_localgen("run", *args, stdin=b" \n\t", env=env)
        assert result.returncode == 2, result.err
        assert "holds only whitespace (hint: check what feeds stdin, or give a prompt, e.g. " in result.err, result.err
        assert "pipe text in" not in result.err, result.err
    result = run_localgen("run", "-f", "-", env=env)  # stdin: /dev/null
    assert "is empty (hint: give a prompt, e.g. " in result.err and "or pipe text in" in result.err, result.err


def test_a_short_option_given_an_option_s_name_after_equals_is_hinted_with_a_command_that_runs(tmp_path: Path) -> None:
    """`localgen run -s=--grammar-file --grammar missing.gbnf hi`: the command hinted keeps the value joined
    (-s--grammar-file), which runs as written, where it hinted -s --grammar-file, which is refused in turn (-s needs
    a value, and the word after it is the option --grammar-file); a plain value is still written after a space."""
    import shlex

    env = {"LOCALGEN_HOME": str(tmp_path)}
    result = run_localgen("run", "-s=--grammar-file", "--grammar", "missing.gbnf", "hi", env=env)
    assert result.err.endswith("(hint: use `localgen run -s--grammar-file --grammar missing.gbnf hi`)\n"), result.err
    hinted = shlex.split(result.err.rsplit("`", 2)[1])[1:]
    again = run_localgen(*hinted, env=env)
    assert again.err == "localgen: error: no such file: missing.gbnf (hint: check the path given to --grammar)\n", \
        again.err
    result = run_localgen("run", "-s=terse", "hi", env=env)
    assert result.err.endswith("(hint: use `localgen run -s terse hi`)\n"), result.err


def test_a_grammar_or_schema_that_names_no_file_is_hinted_with_how_its_text_is_given(tmp_path: Path) -> None:
    """`--json-schema 'type: object'` and `--grammar 'yes|no'`, text taken for a file's name, were hinted only to
    check the path; a path with a folder or an extension in it still is."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    schema_hint = "give a JSON schema as text or a file, e.g. --json-schema '{\"type\": \"object\"}'"
    grammar_hint = ("give a GBNF grammar, as text or a file, with a root rule, e.g. --grammar 'root ::= \"yes\" | "
                    "\"no\"'")
    for option, value, hint in (("--json-schema", "type: object", f"check the path given to --json-schema; or "
                                                                  f"{schema_hint}"),
                                ("--grammar", "yes|no", f"check the path given to --grammar; or {grammar_hint}"),
                                ("--grammar", "rules/yes.gbnf", "check the path given to --grammar"),
                                ("--json-schema", "schema.json", "check the path given to --json-schema")):
        result = run_localgen("run", option, value, "hi", env=env)
        assert (result.returncode, result.err) == (2, f"localgen: error: no such file: {value} (hint: {hint})\n"), \
            result.err


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--grammar", "$HOME", "$HOME is a directory (hint: pass a file to --grammar)"),
    ("--chat-template", "$HOME", "$HOME is a directory (hint: pass a file to --chat-template)"),
    ("--grammar", "~nouser-x", "cannot expand '~nouser-x' in ~nouser-x: no such user or home directory (hint: write "
                               "the full path)"),
])
def test_a_value_that_reads_as_a_path_once_expanded_is_not_hinted_as_text_or_a_template_name(
        tmp_path: Path, option: str, value: str, said: str) -> None:
    """A $VAR or ~ in the value is expanded before it is read as a path: `--grammar '$HOME'` names a folder."""
    result = run_localgen("run", option, value, "hi", env={"LOCALGEN_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert (result.returncode, result.err) == (2, f"localgen: error: {said}\n"), result.err
