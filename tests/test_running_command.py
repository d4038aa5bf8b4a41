"""The command a process runs is known to the Hub's error hints only while it runs."""

from __future__ import annotations

from localgen import hub_errors
from localgen.cli import app
from localgen.cli_exit import run_app


def test_the_running_command_is_forgotten_once_the_command_ends() -> None:
    """A command run in-process (a script's, a test's) left its name set, so the next one's offline hints were
    worded for it (`run the command again` where `run localgen pull NAME` was meant)."""
    assert run_app(app, ["fit", "-c", "abc"]) == 2
    assert hub_errors._running_command is None
