"""The chat's refusal of a message or a file that no context of the model holds: in run's words, with its own help."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect

from tests.test_repl import Chat

_ESCAPE = re.compile(r"\x1b\[[\d;?]*[A-Za-z]")


def _said(chat: Chat) -> str:
    """What the chat wrote, less escape sequences, each run of spaces and line breaks one space."""
    chat.child.sendcontrol("d")
    chat.child.expect(pexpect.EOF)
    return re.sub(r"\s+", " ", _ESCAPE.sub("", chat.transcript.getvalue()))


def test_a_file_beyond_the_model_is_refused_in_run_s_words_with_the_chat_s_help(tmp_path: Path) -> None:
    """It was told that with it the next message needed 12,031 tokens but only 8,128 were free in the context."""
    big = tmp_path / "big.txt"
    big.write_text("word " * 12000)
    chat = Chat(tmp_path / "home", "-n", "64", columns=250)
    chat.child.sendline(f"/file {big}")
    chat.sync()
    assert (f"localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes 12,031 "
            f"tokens with {big} (hint: split it and attach a part at a time) >>>") in _said(chat)


def test_a_message_beyond_the_model_is_refused_in_run_s_words_with_the_chat_s_help(tmp_path: Path) -> None:
    """It was told that the message needed 8,2xx tokens but only 8,128 were free for it in the context."""
    notes = tmp_path / "notes.txt"
    notes.write_text("word " * 5000)
    chat = Chat(tmp_path / "home", "-n", "64", columns=250)
    chat.child.sendline(f"/file {notes}")
    chat.sync()
    chat.child.send("\x1b[200~" + "word " * 3200 + "\x1b[201~\r")  # pasted: typed, it would take seconds
    chat.sync()
    assert re.search(r"localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes "
                     rf"8,2\d\d tokens with /file {re.escape(str(notes))} \(hint: shorten the message; /file none "
                     r"drops the attached files, which stay for the next message\) >>>", _said(chat))


def test_a_message_that_leaves_the_answer_too_little_of_the_model_s_context_says_how_much_is_kept(
        tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("word " * 5000)
    chat = Chat(tmp_path / "home", "-n", "512", columns=250)
    chat.child.sendline(f"/file {notes}")
    chat.sync()
    chat.child.send("\x1b[200~" + "word " * 2800 + "\x1b[201~\r")
    chat.sync()
    assert re.search(r"localgen: error: the prompt and the 512 tokens kept for the answer pass the model's maximum of "
                     r"8,192 tokens: the prompt takes 7,[89]\d\d tokens with /file \S+ \(hint:", _said(chat))
