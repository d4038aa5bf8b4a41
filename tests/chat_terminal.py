"""What tests of the chat in a pseudo-terminal share: the escape sequences its output holds, and the end of a chat a
failed test left running."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.test_repl import Chat

ESCAPE = re.compile(r"\x1b\[[\d;?]*[A-Za-z]")  # a terminal's control sequence: a colour, a cursor move, a mode


def end_chat(chat: Chat) -> None:
    """End a chat a failed test left running."""
    if chat.child.isalive():
        chat.child.terminate(force=True)
