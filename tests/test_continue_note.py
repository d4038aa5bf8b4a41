"""The note of a run that goes on with the last plain run names that run's message, so a user sees which exchange
goes on (a --raw run keeps none: the one before it stays the last run)."""

from __future__ import annotations

from tests.conftest import run_localgen

GREEDY = ("--temperature", "0")


def test_the_note_of_a_continued_last_run_quotes_its_message_even_past_a_raw_run() -> None:
    asked = "Tell me about cats, their habits, their history and why people keep them."
    assert run_localgen("run", asked, "-n", "2", *GREEDY).returncode == 0
    assert run_localgen("run", "--raw", "def fib(n):", "-n", "2", *GREEDY).returncode == 0
    going_on = run_localgen("run", "--continue", "And dogs?", "-n", "2", *GREEDY)
    assert going_on.returncode == 0, going_on.err
    note = going_on.err.splitlines()[0]
    assert note.startswith('localgen: continuing the last run "Tell me about cats, their habits, their…", now '
                           "saved as conversation 'chat-"), note
