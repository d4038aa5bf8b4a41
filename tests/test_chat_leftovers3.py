"""The chat's leftovers, mended: an empty system prompt in the restart command, the data limit's check counting
repacked weights, the history trim keeping its newest entry whatever follows it."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_command_that_starts_a_chat_again_gives_an_empty_system_prompt_as_an_empty_word(
        tmp_path: Path, bundled_model: Path) -> None:
    """The command a chat started with an empty system prompt (-s '') is given to start again writes it as '', so
    that the chat it starts has it (it wrote `-s -c 1024`, which localgen refused as -s with no value)."""
    from tests.gguf_builders import copy_with_metadata
    from tests.test_chat_leftovers import _said
    from tests.test_repl import Chat

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    chat = Chat(tmp_path / "home", "-c", "4096", "-s", "")
    try:
        shown = _said(chat, "/show system")
        said = _said(chat, f"/model {shlex.quote(str(small))}")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    typed = re.search(r"/exit, then start the chat again with `([^`]*)`, as", said)[1]  # type: ignore[index]
    command = subprocess.run(["bash", "-c", f"printf '%s\\0' {typed}"], capture_output=True, text=True,
                             check=True).stdout.split("\0")[:-1]  # as a shell reads it
    assert command == ["localgen", "chat", "-m", str(small), "-s", "", "-c", "1024"], command
    again = Chat(tmp_path / "home", *command[2:])
    try:
        assert _said(again, "/show system") == shown
        assert again.quit() == 0
    finally:
        if again.child.isalive():
            again.child.terminate(force=True)
