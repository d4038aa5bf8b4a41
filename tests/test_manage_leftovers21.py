"""The management commands' smaller answers: a Hub repo shown before it is downloaded, an empty prompt cache on a
terminal, a conversation named by the start of its name, and bench's --json laid out as the other reports."""

from __future__ import annotations

import pytest

from localgen.conversation import Conversation
from localgen.conversation_store import let_go, save_conversation
from tests.conftest import run_localgen


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
