"""/save of a chat with no exchange yet, in a real pseudo-terminal on the bundled model: where settings were chosen
(flags, /set, /system), it says it saved only those, which /load starts from; a chat left with none saves nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_repl import Chat


def test_save_with_no_exchange_says_it_keeps_only_what_was_chosen(tmp_path: Path) -> None:
    """/save of a chat started with -n and given a /system says it saved no exchange, only those, and /exit saves
    nothing more."""
    home = tmp_path / "home"
    chat = Chat(home, "--no-markdown", "-n", "5")
    chat.command("/system Be brief.", "system prompt set")
    said = " ".join(chat.command_words("/save", "starts from").split())
    assert " with no exchange yet: only its system prompt and its setting (max_tokens), which /load chat-" in said, said
    assert chat.quit() == 0
    saved = list((home / "data" / "conversations").glob("*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["turns"] == [], saved
