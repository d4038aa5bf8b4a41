"""NO_COLOR as no-color.org has it: set and not empty, it turns the dim style off on a terminal; set empty, it is as
if unset. One rule (console.writes_dim) for the prompt's reading line, `conversations show` and the chat's
exchanges."""

from __future__ import annotations

import os

import pexpect
import pytest

from localgen import config
from localgen.console import writes_dim
from localgen.conversation import AnswerDetails, Conversation, Turn
from localgen.conversation_store import let_go, save_conversation
from tests.conftest import spawn_localgen


@pytest.mark.parametrize(("env", "dim"), [
    ({}, True), ({"NO_COLOR": ""}, True),  # empty: as if unset
    ({"NO_COLOR": "1"}, False), ({"NO_COLOR": "0"}, False),  # any text at all turns it off
    ({"TERM": "dumb"}, False),  # a terminal that shows escape sequences as text
])
def test_a_terminal_is_written_dim_text_unless_no_color_is_set_and_not_empty(monkeypatch: pytest.MonkeyPatch,
                                                                           env: dict[str, str], dim: bool) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(config, "_settings", None)
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as terminal:
            assert writes_dim(terminal) is dim
        read, write = os.pipe()
        with open(write, "w") as pipe:
            assert not writes_dim(pipe), "a pipe gets no escape sequences"
        os.close(read)
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.usefixtures("home")
def test_show_with_no_color_set_empty_dims_an_answer_s_details_as_unset() -> None:
    details = AnswerDetails(finish_reason="stop", model="smollm2-135m", completion_tokens=3, duration_s=0.2,
                            decode_tokens_per_s=70.0)
    conversation = Conversation(name="dim", turns=[Turn("Say hi.", "Hi!", details=details)], model="smollm2-135m")
    save_conversation(conversation)
    let_go(conversation)
    for value, line in (("", "\x1b[2msmollm2-135m · 3 tokens · 0.2 s · 70 tok/s\x1b[0m"),
                        ("yes", "*smollm2-135m · 3 tokens · 0.2 s · 70 tok/s*")):
        child = spawn_localgen("conversations", "show", "dim", env={**os.environ, "NO_COLOR": value, "TERM": "xterm"},
                               encoding="utf-8", timeout=60)
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0 and f"Hi!\r\n\r\n{line}\r\n" in child.before, repr(child.before)
