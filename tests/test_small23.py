"""Small leftovers of the command line: --version given a command, run's --system-file help, the closing line of
models rm that keeps a shared file, and models show's load plan for a split model with shards missing."""

from __future__ import annotations

import pytest

from tests.conftest import run_localgen


@pytest.mark.parametrize("args", [["run", "--version"], ["run", "hi", "--version"], ["models", "list", "--version"]])
def test_version_given_a_command_is_hinted_localgen_s_own(args: list[str]) -> None:
    """Was: see `localgen run --help`, which lists no --version."""
    result = run_localgen(*args)
    command = " ".join(word for word in args if word not in ("hi", "--version"))
    assert result.returncode == 2 and result.out == ""
    assert result.err == (f"localgen: error: no such option: --version (hint: `localgen {command}` has no --version: "
                          "use `localgen --version`)\n")
