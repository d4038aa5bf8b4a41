"""What a user of `localgen help`, shell completion, `bench`, `fit` and `conversations` met that was wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.test_cli_completion import _env, _zsh_or_fish_lines


@pytest.mark.parametrize("option", ["--resume", "--continue"])
def test_help_with_chat_s_resume_after_it_names_the_option_as_typed(option: str) -> None:
    """`localgen help chat --resume` named '--resume=?', the value chat's --resume gets alone, which nobody typed."""
    result = run_localgen("help", "chat", option)
    assert (result.returncode, result.out) == (2, "")
    assert result.err == (f"localgen: error: no such command '{option}': localgen chat has no subcommands (hint: "
                          "see `localgen help chat`)\n"), result.err


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_keeps_the_word_typed_where_the_names_it_matches_differ_in_case_within_it(tmp_path: Path) -> None:
    """zsh put the names' common start in place of the word typed, so `conversations show no` Tab, beside notes and
    NOTES, emptied the word: the no typed was gone."""
    for name in ("notes", "NOTES"):
        saved = run_localgen("run", "--conversation", name, "-n", "1", "hi", env=_env(tmp_path))
        assert saved.returncode == 0, saved.err
    assert _zsh_or_fish_lines("zsh", tmp_path, "localgen conversations show no",
                              "localgen run --conversation NOTE") == [
        "localgen conversations show no", "localgen run --conversation NOTE"]
