"""Ctrl-X Ctrl-E in `localgen chat`: the message being typed edited in $VISUAL or $EDITOR, in a real pseudo-terminal
on the real bundled model, with a shell script for the editor."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from localgen.errors import LocalgenError
from localgen.repl_editor import edited_text, editor_command
from tests.test_repl import Chat

EDIT = "\x18\x05"  # Ctrl-X Ctrl-E
EDITOR_SCRIPT = r"""#!/bin/sh
dir=$(dirname "$0")
stty -a > "$dir/modes"
printf '%s' "$1" > "$dir/path"
cat "$1" > "$dir/before"
case $(cat "$dir/mode") in
  rewrite) printf 'Say the word banana.\nOnly that.\n' > "$1" ;;
  fail) printf 'lost' > "$1"; exit 3 ;;
  latin1) printf 'caf\351\n' > "$1" ;;
  interrupted) trap 'echo' INT; kill -INT 0; printf 'Say pear.\n' > "$1" ;;
  backslash) printf 'path C:\\temp\\\n' > "$1" ;;
  quotes) printf '\042\042\042Say hi.\042\042\042\nprint(1)\n' > "$1" ;;
  slow) exec sleep 60 ;;
  command) printf '/system Answer in French.\nAlways.\n' > "$1" ;;
esac
"""


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The editor script's folder (its mode file says what it does); EDITOR names it, VISUAL is unset."""
    folder = tmp_path / "editor"
    folder.mkdir()
    script = folder / "edit.sh"
    script.write_text(EDITOR_SCRIPT)
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    monkeypatch.delenv("VISUAL", raising=False)
    return folder


def _edit(chat: Chat, editor: Path, mode: str, typed: str) -> None:
    """Type a message, then open it in the editor script run in that mode."""
    (editor / "mode").write_text(mode)
    chat.child.send(typed)
    chat.child.send(EDIT)


def _sent(chat: Chat, turns: int) -> str:
    """Press Enter; the message the chat sent as its turns-th."""
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == turns and s["turns"][-1]["answer"] is not None)
    chat.sync()
    return state["turns"][-1]["user"]


def test_ctrl_x_ctrl_e_edits_the_message_in_the_editor_and_enter_sends_it(tmp_path: Path, editor: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "4")
    try:
        _edit(chat, editor, "rewrite", "draft")
        chat.wait_for_screen(lambda screen: "Only that." in screen)
        assert chat.conversation()["turns"] == [], "the edited message waits for Enter"
        assert (editor / "before").read_text() == "draft\n"
        modes = (editor / "modes").read_text().split()
        assert {"icanon", "echo", "isig"} <= set(modes), modes  # the editor gets a terminal in line mode
        opened = Path((editor / "path").read_text())
        assert opened.name == "message.txt" and not opened.parent.exists(), "the temporary folder is removed"
        assert _sent(chat, 1) == "Say the word banana.\nOnly that."

        _edit(chat, editor, "fail", "kept one")
        chat.expect_words("exited with status 3; the message is kept as it was (hint:")
        assert _sent(chat, 2) == "kept one"

        _edit(chat, editor, "latin1", "kept two")
        chat.expect_words("the editor saved text that is not UTF-8 (byte 3); the message is kept as it was")
        assert _sent(chat, 3) == "kept two"

        _edit(chat, editor, "interrupted", "x")  # Ctrl-C in an editor the terminal sends SIGINT for
        chat.wait_for_screen(lambda screen: "Say pear." in screen)
        assert _sent(chat, 4) == "Say pear."
        assert "Traceback" not in chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_the_editor_is_visual_then_editor_then_the_first_fallback_on_path(tmp_path: Path) -> None:
    for name in ("nano", "vi"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    path = str(tmp_path)
    assert editor_command({"VISUAL": "vi -n", "EDITOR": "nano", "PATH": path}) == ["vi", "-n"]
    assert editor_command({"VISUAL": " ", "EDITOR": "nano", "PATH": path}) == ["nano"]
    assert editor_command({"PATH": path}) == [str(tmp_path / "nano")]
    for environ, said in (({"EDITOR": "emacs", "PATH": path}, "cannot run the editor 'emacs' ($EDITOR): not found"),
                          ({"VISUAL": "vi '", "PATH": path}, "cannot read $VISUAL (\"vi '\"): a quote is left open"),
                          ({"PATH": str(tmp_path / "none")}, "no editor to open")):
        with pytest.raises(LocalgenError, match="the message is kept as it was") as raised:
            editor_command(environ)
        assert raised.value.message.startswith(said) and raised.value.hint, raised.value.message


def test_edited_text_drops_the_editor_s_last_newlines_its_bom_and_crs(tmp_path: Path) -> None:
    script = tmp_path / "edit.sh"
    script.write_text("#!/bin/sh\nprintf '\\357\\273\\277a\\r\\nb\\n\\n' > \"$1\"\n")
    script.chmod(0o755)
    assert edited_text("draft", [str(script)]) == "a\nb"


def test_the_edited_text_is_sent_as_saved_with_a_backslash_or_a_triple_quote_in_it(tmp_path: Path,
                                                                                   editor: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "2")
    try:
        _edit(chat, editor, "backslash", "draft")
        chat.wait_for_screen(lambda screen: "C:\\temp\\" in screen)
        assert _sent(chat, 1) == "path C:\\temp\\"
        _edit(chat, editor, "quotes", "draft")
        chat.wait_for_screen(lambda screen: "print(1)" in screen)
        assert _sent(chat, 2) == '"""Say hi."""\nprint(1)'
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_command_the_editor_saved_runs_as_typed(tmp_path: Path, editor: Path) -> None:
    """A /system prompt written at length in the editor sets the system prompt, where it was sent to the model as
    a message, as a paste is."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "2")
    try:
        _edit(chat, editor, "command", "/system draft")
        chat.wait_for_screen(lambda screen: "Always." in screen)
        chat.child.send("\r")
        chat.expect_words("system prompt set")
        chat.sync()
        chat.command_words("/system", "system prompt: Answer in French. Always.")
        assert chat.conversation()["turns"] == []
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_sigterm_while_the_editor_is_open_ends_it_and_the_chat_at_once(tmp_path: Path, editor: Path) -> None:
    """kill PID while the editor was open waited for whoever sat at the editor to quit it: the editor gets the
    signal too, and the chat ends with 143, its terminal echoing again, saying nothing of the editor it ended."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "2")
    try:
        _edit(chat, editor, "slow", "draft")
        chat.wait_for_screen(lambda _screen: (editor / "path").exists())
        started = time.monotonic()
        assert chat.killed(signal.SIGTERM) == (143, True)
        assert time.monotonic() - started < 20, "the chat waited for the editor"
        said = chat.transcript.getvalue()
        assert "Traceback" not in said and "the editor" not in said, said
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_message_the_temporary_folder_cannot_hold_is_kept_with_a_line_saying_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setattr("tempfile.mkdtemp", _no_usable_folder)
        with pytest.raises(LocalgenError, match=r"cannot make a temporary folder for the message: No usable .*kept as"):
            edited_text("draft", ["true"])
    full = tmp_path / "full"
    full.mkdir()
    monkeypatch.setenv("TMPDIR", str(full))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    monkeypatch.setattr("pathlib.Path.write_bytes", _no_space)
    with pytest.raises(LocalgenError, match=r"cannot write the message to .*No space left on device; the message is"):
        edited_text("draft", ["true"])
    assert list(full.iterdir()) == [], "the temporary folder is removed"


def _no_space(_path: Path, _data: bytes) -> int:
    """Path.write_bytes on a full disk."""
    raise OSError(28, "No space left on device")


def _no_usable_folder(**_options: str) -> str:
    """tempfile.mkdtemp where no temporary folder can be written."""
    raise FileNotFoundError(2, "No usable temporary directory found in ['/tmp']")
