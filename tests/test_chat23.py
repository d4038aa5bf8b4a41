"""The chat's refusal of a message or a file that no context of the model holds: in run's words, with its own help."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect

from tests.chat_terminal import ESCAPE
from tests.test_repl import Chat


def _said(chat: Chat) -> str:
    """What the chat wrote, less escape sequences, each run of spaces and line breaks one space."""
    chat.child.sendcontrol("d")
    chat.child.expect(pexpect.EOF)
    return re.sub(r"\s+", " ", ESCAPE.sub("", chat.transcript.getvalue()))


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
    notes, said = file_and_paste_said(tmp_path, answer=64, attached_words=5000, pasted_words=3200)
    assert re.search(r"localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes "
                     rf"8,2\d\d tokens with /file {re.escape(str(notes))} \(hint: shorten the message; /file none "
                     r"drops the attached files, which stay for the next message\) >>>", said)


def file_and_paste_said(tmp_path: Path, *, answer: int, attached_words: int, pasted_words: int) -> tuple[Path, str]:
    """A chat of answers of `answer` tokens given /file of attached_words words, then a message of pasted_words words
    pasted: the file and what the chat wrote (as _said gives it)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("word " * attached_words)
    chat = Chat(tmp_path / "home", "-n", str(answer), columns=250)
    chat.child.sendline(f"/file {notes}")
    chat.sync()
    chat.child.send("\x1b[200~" + "word " * pasted_words + "\x1b[201~\r")  # pasted: typed, it would take seconds
    chat.sync()
    return notes, _said(chat)
