"""/save of a chat with no exchange yet, in a real pseudo-terminal on the bundled model: where settings were chosen
(flags, /set, /system), it says it saved only those, which /load starts from; a chat left with none saves nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_chat_gaps import _saved
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


def test_save_of_a_resumed_conversation_that_undo_emptied_says_it_saved_it_so(tmp_path: Path) -> None:
    """A conversation of one exchange, resumed, its exchange taken back with /undo: /save writes it with none, and
    says so (it failed with an internal error once the file was written)."""
    home = tmp_path / "home"
    path = _saved(home, "one", [{"user": "Hi there", "answer": "Hello."}])
    chat = Chat(home, "--no-markdown", "--resume", "one")
    chat.command_words("/undo", "Hi there")
    said = " ".join(chat.command_words("/save", "of its own").split())
    assert "saved to " in said, said
    assert "one.json with no exchange, and no system prompt, setting or stop strings of its own" in said, said
    assert "error" not in said, said
    assert chat.quit() == 0
    assert json.loads(path.read_text())["turns"] == []
