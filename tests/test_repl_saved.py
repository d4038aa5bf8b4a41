"""A chat's saved conversation as a user of other tools looks for it: /save NAME renaming a new chat's, in a real
pseudo-terminal on the bundled model."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_repl import Chat


def _saved_names(home: Path) -> list[str]:
    return sorted(path.stem for path in (home / "data" / "conversations").glob("*.json"))


def test_save_name_renames_a_new_chat_s_conversation_and_copies_one_the_user_named(tmp_path: Path) -> None:
    """/save NAME left the automatic chat-YYYYMMDD-HHMMSS beside NAME, both listed."""
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "2")
    try:
        chat.ask("Say hi.")
        [automatic] = _saved_names(home)
        chat.command_words("/save mytalk", f"renamed {automatic} to mytalk: saved to")
        assert _saved_names(home) == ["mytalk"]
        listed = chat.command("/list", "(this chat)")
        assert "1 saved conversation," in listed and automatic not in listed, listed
        copied = " ".join(chat.command_words("/save other", "stays saved as it was").split())
        assert re.search(r"saved a copy as other \(\S+/other\.json\), which this chat goes on in; mytalk stays "
                         "saved as it was", copied), copied
        assert _saved_names(home) == ["mytalk", "other"]
        helped = " ".join(re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chat.command("/help save", "going on in the copy"))
                          .split())
        assert "NAME renames one still under its automatic name (chat-...), and saves a copy of one you named" \
            in helped, helped
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
