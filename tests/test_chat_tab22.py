"""Tab on an empty chat prompt, in a real terminal: it writes the slash and lists the commands, but for a dumb
terminal's plain prompt, which shows no menu; a line of spaces and a \"\"\" block still take a tab."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.conftest import bundled_model_file, spawn_localgen
from tests.test_repl import TIMEOUT, Chat, _env


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Chat]:
    """A chat on the bundled model, offline, its answers short."""
    session = Chat(tmp_path / "home", "-m", str(bundled_model_file()), "--offline", "--temperature", "0", "-n", "4")
    yield session
    if session.child.isalive():
        session.child.terminate(force=True)


def test_tab_on_an_empty_line_writes_the_slash_and_lists_the_commands_the_next_tab_picking_one(chat: Chat) -> None:
    """Tab on an empty prompt writes the slash and opens the command menu; the next Tab picks its first command, and
    typing on then Tab narrows it, as after a typed slash (it did nothing: no command completes an empty line)."""
    chat.child.send("\t")
    chat.child.expect_exact(">>> /")
    for command in ("/help", "/system", "/set"):  # the menu, in /help's order
        chat.child.expect_exact(command)
    chat.child.send("\t")  # picks /help
    chat.child.send("\r")
    chat.expect_words("Tab completes a command (on an empty line, writes the / and lists the commands; in a message, "
                      "a tab)")
    chat.sync()
    chat.child.send("\t")
    chat.child.expect_exact("/system")
    chat.child.send("st")
    chat.child.send("\t")  # only /stats starts so
    chat.child.expect_exact("ats")
    chat.child.send("\r")
    chat.expect_words("no answer yet")
    chat.sync()
    assert chat.quit() == 0


def test_a_line_of_spaces_and_a_triple_quoted_block_still_take_a_tab(chat: Chat) -> None:
    """Tab after spaces, or on an empty line of a \"\"\" block, is a tab in the message, not the command menu."""
    chat.child.send(" \tx\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    chat.sync()
    chat.child.send('"""\r')
    chat.child.send("\ty\r")
    chat.child.send('"""\r')
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert [turn["user"] for turn in state["turns"]] == [" \tx", "\ty"], state["turns"]
    chat.sync()
    assert chat.quit() == 0


@pytest.mark.parametrize("term", ["dumb", "unknown"])
def test_tab_on_an_empty_line_of_a_dumb_terminal_writes_nothing(term: str, tmp_path: Path) -> None:
    """prompt_toolkit's plain prompt (TERM=dumb, and TERM=unknown, which it takes for dumb) shows no menu: Tab on an
    empty line writes no slash there, and Ctrl-D then ends the chat."""
    env = {**_env(tmp_path / "home"), "TERM": term}
    child = spawn_localgen("chat", "-m", str(bundled_model_file()), "--offline", "-n", "3", env=env,
                           encoding="utf-8", timeout=TIMEOUT)
    child.logfile_read = transcript = io.StringIO()
    try:
        child.expect_exact(">>> ")
        child.send("\t")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        child.close()
        screen = transcript.getvalue()
        assert child.exitstatus == 0, screen
        assert "/" not in screen.partition(">>> ")[2], screen
    finally:
        if child.isalive():
            child.terminate(force=True)
