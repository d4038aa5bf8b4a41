"""`localgen models`, `models default` and `models rm` on rows a run would treat otherwise: an entry of another name at
the bundled model's repo and quant, a default whose file is gone, a default path too long for the file system, and a
models.toml whose table header is not closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliResult, run_localgen, user_registry


def localgen(home: Path, *args: str) -> CliResult:
    """Run localgen offline, its Hugging Face cache (empty) under home."""
    return run_localgen(*args, env={"LOCALGEN_OFFLINE": "1", "LOCALGEN_AMX": "0", "HF_HOME": str(home / "hf")})


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
