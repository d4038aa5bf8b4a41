"""The management commands' smaller answers: a Hub repo shown before it is downloaded, an empty prompt cache on a
terminal, a conversation named by the start of its name, and bench's --json laid out as the other reports."""

from __future__ import annotations

import json
import os

import pexpect
import pytest

from localgen.conversation import Conversation
from localgen.conversation_store import let_go, save_conversation
from tests.conftest import bundled_model_file, run_localgen, spawn_localgen


@pytest.mark.usefixtures("home")
def test_an_empty_prompt_cache_says_how_entries_come_on_a_terminal_only() -> None:
    """`localgen cache` with no entries adds how a run makes one on a terminal, where it said only `0 entries`; on a
    pipe its lines stay as they were."""
    child = spawn_localgen("cache", env={**os.environ}, encoding="utf-8", timeout=60, dimensions=(24, 300))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert ('localgen: a run whose prompt prefills 256 new tokens or more saves an entry, e.g. `localgen run -f '
            'doc.txt "question"`; a later run over the same text restores it') in child.before, child.before
    piped = run_localgen("cache")
    assert piped.returncode == 0 and piped.out == ""
    assert [line.split(":", 1)[1].strip() for line in piped.err.splitlines()][1:] == ["0 entries, 0 B of 2.0 GiB"]


@pytest.mark.usefixtures("home")
def test_a_conversation_named_by_the_start_of_its_name_is_suggested() -> None:
    """`conversations show meet` of meeting-notes-2026 suggests it, where a name too short to be a slip of it got no
    suggestion."""
    for name in ("meeting-notes-2026", "shopping"):
        conversation = Conversation(name=name, system=None, turns=[], model="smollm2-135m")
        save_conversation(conversation)
        let_go(conversation)
    shown = run_localgen("conversations", "show", "meet")
    assert shown.returncode == 1 and shown.err == ("localgen: error: no saved conversation named 'meet' (hint: did you "
                                                   "mean meeting-notes-2026?)\n"), shown.err


@pytest.mark.serial
def test_bench_json_is_indented_as_the_other_reports() -> None:
    """`bench --json` prints its object indented, as fit, models and cache do, where it printed one line."""
    bench = run_localgen("bench", "-p", "16", "-n", "2", "-r", "1", "--json")
    fit = run_localgen("fit", str(bundled_model_file()), "--json")
    assert bench.returncode == 0 and fit.returncode == 0, bench.err + fit.err
    assert bench.out.startswith('{\n  "model": ') and fit.out.startswith('{\n  "model": '), bench.out
    assert json.loads(bench.out)["n_gen"] == 2
