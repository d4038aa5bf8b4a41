"""What a user of `localgen help`, shell completion, `bench`, `fit` and `conversations` met that was wrong."""

from __future__ import annotations

import pytest

from tests.conftest import run_localgen


@pytest.mark.parametrize("option", ["--resume", "--continue"])
def test_help_with_chat_s_resume_after_it_names_the_option_as_typed(option: str) -> None:
    """`localgen help chat --resume` named '--resume=?', the value chat's --resume gets alone, which nobody typed."""
    result = run_localgen("help", "chat", option)
    assert (result.returncode, result.out) == (2, "")
    assert result.err == (f"localgen: error: no such command '{option}': localgen chat has no subcommands (hint: "
                          "see `localgen help chat`)\n"), result.err
