"""What the chat prompt reads, in a real pseudo-terminal on the real bundled model: bytes that are not UTF-8."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localgen.repl_input import typed_text
from tests.conftest import bundled_model_file
from tests.test_repl import Chat


def test_a_file_whose_name_is_not_utf8_is_attached_and_loaded_as_tab_completes_it_or_as_typed(
        tmp_path: Path) -> None:
    """Tab's completion of /file and /model writes a name's byte that is not UTF-8 as Python read it, and the command
    reaches the file by it, as a typed byte does, as -f and -m do, where the line's bytes became U+FFFD (with a
    warning that the input was not UTF-8) and the command said: no such file: bad\ufffd.txt."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / os.fsdecode(b"bad\xff.txt")).write_text("Quokkas live on Rottnest Island.\n")
    (folder / os.fsdecode(b"model\xff.gguf")).symlink_to(bundled_model_file())
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "3", cwd=folder)
    chat.tab_completed("/file ./ba", [".txt"], "attached ./bad\ufffd.txt (33 characters) to the next message")
    os.write(chat.child.child_fd, b"/file none\r/file 'bad\xff.txt'\r")  # a byte a terminal that is not UTF-8 sends
    chat.expect_words("attached bad\ufffd.txt (33 characters) to the next message")
    chat.sync()
    chat.tab_completed("/model ./mo", [".gguf"], "now using ./model\ufffd.gguf")
    state = chat.ask("Where do they live?")
    assert state["turns"][0]["user"] == "Quokkas live on Rottnest Island.\n\nWhere do they live?"
    screen = chat.transcript.getvalue()
    assert "not valid UTF-8" not in screen and "no such" not in screen
    assert chat.quit() == 0


@pytest.mark.parametrize(("line", "text", "warned"), [
    ("/file bad\udcff.txt", "/file bad\udcff.txt", False),  # a path keeps its bytes, as os.fsdecode gives them
    ("/model ./m\udcff.gguf", "/model ./m\udcff.gguf", False),
    ("/system caf\udce9", "/system caf\ufffd", True),  # text for the model is UTF-8
    ("caf\udce9 /file", "caf\ufffd /file", True),
])
def test_typed_text_keeps_bytes_that_are_not_utf8_in_a_path_command_alone(line: str, text: str, warned: bool) -> None:
    warnings: list[str] = []
    assert typed_text(line, warnings, pasted=False) == text
    assert bool(warnings) is warned


def test_a_line_sent_as_a_message_that_reads_as_a_path_command_is_utf8_text(tmp_path: Path) -> None:
    """A line that begins with a paste is a message, /file at its start too, and so is one that reads as /file only
    with a control character it drops: its bytes that are not UTF-8 become U+FFFD, with the warning, as any
    message's do, where they were kept as a path command's are and the message failed with an internal error
    (UnicodeEncodeError: surrogates not allowed)."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "3")
    os.write(chat.child.child_fd, b"\x1b[200~/file x\xff y\x1b[201~\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "/file x\ufffd y"
    chat.sync()
    os.write(chat.child.child_fd, b"/file\x11\x0b/x\xff\r")  # Ctrl-Q Ctrl-K: a quoted ^K, split() a space
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "/file/x\ufffd", "read as a message, as the line without its ^K is"
    chat.sync()
    screen = chat.transcript.getvalue()
    assert screen.count("the input is not valid UTF-8") == 2 and "internal error" not in screen
    assert chat.quit() == 0


def test_typed_text_reads_a_pasted_path_command_as_a_message() -> None:
    warnings: list[str] = []
    assert typed_text("/file bad\udcff.txt", warnings, pasted=True) == "/file bad\ufffd.txt"
    assert warnings == ["the input is not valid UTF-8; undecodable bytes were replaced with U+FFFD"]
