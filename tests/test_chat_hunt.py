"""The chat as a demanding user drives it, in a real pseudo-terminal on the bundled model: what its commands say about
the conversation they change."""

from __future__ import annotations

import io
import json
import os
import re
import resource
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from localgen.signals import SignalExit
from tests.chat_terminal import end_chat
from tests.test_repl import Chat


def test_undo_of_a_message_with_a_file_attached_names_the_file_as_the_listings_do(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("The secret word is banana.\n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "4", cwd=tmp_path)
    try:
        chat.command("/file note.txt", "attached")
        chat.ask("What is the secret word?")
        since = len(chat.transcript.getvalue())
        chat.command("/undo", "dropped:")
        said = " ".join(chat.transcript.getvalue()[since:].split())
        assert "dropped: '[note.txt] What is the secret word?'" in said, said
        assert "banana" not in said, "the file's text is not quoted as the message"
        assert chat.quit() == 0
    finally:
        end_chat(chat)


@pytest.mark.parametrize(("given", "saved"), [("You are a cat.", "You are a cat."), ("none", None)])
def test_a_system_prompt_given_to_a_resumed_chat_stays_with_the_conversation_left_before_any_message(
        tmp_path: Path, given: str, saved: str | None) -> None:
    home = tmp_path / "home"
    path = home / "data" / "conversations" / "pets.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "name": "pets", "system": "You are a pirate.", "model": "smollm2-135m",
                                "settings": {}, "turns": [{"user": "Hi.", "answer": "Ahoy."}]}))
    chat = Chat(home, "--resume", "pets", "-s", given)
    try:
        said = " ".join(chat.transcript.getvalue().split())
        assert "conversation 'pets' now has" in said and "instead of 'You are a pirate.'" in said, said
        assert chat.quit() == 0
        assert json.loads(path.read_text())["system"] == saved
    finally:
        end_chat(chat)


def _pets(home: Path, answer: str = "Ahoy.") -> Path:
    """A saved conversation 'pets' with a pirate's system prompt and one exchange."""
    path = home / "data" / "conversations" / "pets.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "name": "pets", "system": "You are a pirate.", "model": "smollm2-135m",
                                "settings": {}, "turns": [{"user": "Hi.", "answer": answer}]}))
    return path


def _start_said(chat: Chat) -> str:
    """What the chat said up to its first prompt, on one line."""
    return " ".join(chat.transcript.getvalue().replace("\r", "").split())


def test_a_conversation_changed_while_the_chat_starts_is_kept_and_the_start_says_why_it_goes_on_as_name_2(
        tmp_path: Path) -> None:
    """Edited by hand while the chat waits for its -f pipe: -s's save keeps the edit, and says so before anything is
    typed, after the banner that names the conversation resumed."""
    path, fifo = _pets(tmp_path / "home"), tmp_path / "fifo"
    os.mkfifo(fifo)
    chat = Chat(tmp_path / "home", "--resume", "pets", "-s", "You are a cat.", "-n", "2", "-f", str(fifo),
                wait_for_prompt=False)
    try:
        chat.child.expect_exact("waiting for")
        edited = json.loads(path.read_text())
        edited["turns"].append({"user": "edited", "answer": "by hand"})
        path.write_text(json.dumps(edited))
        fifo.write_text("fifo text\n")
        chat.sync()
        said = _start_said(chat)
        assert re.search(r"resumed pets: .*now has system prompt 'You are a cat.'.*changed since localgen last read "
                         r"or saved it.*saved as 'pets-2'", said), said
        assert chat.quit() == 0
        assert json.loads(path.read_text()) == edited, "the edit kept"
        assert json.loads(path.with_name("pets-2.json").read_text())["system"] == "You are a cat."
    finally:
        end_chat(chat)


def test_a_system_prompt_given_to_a_resumed_chat_that_cannot_be_saved_says_why_after_the_banner(
        tmp_path: Path) -> None:
    """The save of -s's system prompt fails (the file grows past the size limit): the error follows the banner and
    the note on the new system prompt, the chat keeps the change, and the file stays as it was."""
    path = _pets(tmp_path / "home", answer="Ahoy! " * 1000)
    before = path.read_text()
    chat = Chat(tmp_path / "home", "--resume", "pets", "-s", "You are a cat.", "-n", "2", wait_for_prompt=False)
    try:
        resource.prlimit(chat.child.pid, resource.RLIMIT_FSIZE, (len(before), len(before)))  # as the model loads
        chat.sync()
        said = _start_said(chat)
        assert re.search(r"localgen chat with .*resumed pets: .*now has system prompt 'You are a cat.'.*"
                         r"localgen: error: could not write .*this chat keeps the change", said), said
        chat.child.sendline("/exit")
        chat.child.expect_exact("are not saved;")
        assert chat.quit() == 0
        assert path.read_text() == before
    finally:
        end_chat(chat)


@pytest.mark.parametrize("system", [(), ("-s", "You are a cat.")])
def test_options_given_to_a_resumed_chat_left_before_any_change_are_not_saved_with_or_without_a_system_prompt(
        tmp_path: Path, system: tuple[str, ...]) -> None:
    """-s's system prompt is saved as the chat starts, the conversation's settings as they were saved: --temperature
    and -n given with --resume are saved with the next change, with -s as without it."""
    path = _pets(tmp_path / "home")
    chat = Chat(tmp_path / "home", "--resume", "pets", "--temperature", "1.7", "-n", "2", *system)
    try:
        assert chat.quit() == 0
        saved = json.loads(path.read_text())
        assert saved["settings"] == {}, saved
        assert saved["system"] == (system[1] if system else "You are a pirate.")
    finally:
        end_chat(chat)


DIM = "\x1b[2m"


def test_no_color_shows_an_answer_s_note_undimmed_in_the_chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    chat = Chat(tmp_path / "home", "--temperature", "0", "-n", "3")
    try:
        since = len(chat.transcript.getvalue())
        chat.ask("Hi")
        shown = chat.transcript.getvalue()[since:]
        assert "[stopped at the limit of 3 tokens" in shown and DIM not in shown, repr(shown)
        assert chat.quit() == 0
    finally:
        end_chat(chat)


class _Terminal(io.StringIO):
    """A terminal's stream, as AnswerView sees it."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("no_color", ["", "1"])
def test_no_color_shows_in_italics_what_an_answer_would_show_dim(monkeypatch: pytest.MonkeyPatch,
                                                                 no_color: str) -> None:
    """NO_COLOR (set, not empty) means no dim text on a terminal: the reasoning, a code comment, the note after the
    answer, and what rich's own styles dim (a Markdown rule, a level-6 heading) are in italics; set empty, it is as if
    unset (all dim)."""
    from localgen import config
    from localgen.answer_view import AnswerView

    monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(config, "_settings", None)
    stream = _Terminal()
    view = AnswerView(markdown=True, show_thinking=True, stream=stream)
    view.thinking("Let me think.")
    view.answer("Here:\n\n```python\n# a comment\nx = 1\n```\n\n---\n\n###### Small heading\n\nDone.\n")
    view.close("stopped at the limit of 9 tokens")
    shown = stream.getvalue()
    styled = [(text.strip(" ─-"), code.split(";")) for code, text in re.findall(r"\x1b\[([\d;]*)m([^\x1b]+)", shown)]
    would_be_dim = {"Let me think.", "# a comment", "[stopped at the limit of 9 tokens]", "Small heading", ""}
    dimmed = {text for text, codes in styled if "2" in codes}
    assert dimmed == (set() if no_color else would_be_dim), repr(shown)
    italic = {text for text, codes in styled if "3" in codes}
    assert italic == (would_be_dim if no_color else {"Let me think."}), repr(shown)


def test_help_shortcuts_names_the_keys_readme_gives_for_a_newline_and_for_quitting(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "-n", "3")
    try:
        shown = " ".join(chat.command("/help shortcuts", "work too").split())
        assert "Shift-Enter where the terminal tells it apart" in shown, shown
        assert "Ctrl-D on an empty line quits" in shown, shown
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def _long_conversation_chat(tmp_path: Path) -> Chat:
    """A chat resuming a saved conversation of 1,000 long exchanges, whose /history takes a while to write."""
    home = tmp_path / "home"
    path = home / "data" / "conversations" / "long.json"
    path.parent.mkdir(parents=True)
    turns = [{"user": f"Question {i}", "answer": f"Answer {i}: " + "word " * 200} for i in range(1000)]
    path.write_text(json.dumps({"format": 1, "name": "long", "system": None, "model": "smollm2-135m", "settings": {},
                                "turns": turns}))
    return Chat(home, "--resume", "long", "-c", "1024", "-n", "3")


def test_ctrl_c_during_a_long_history_says_interrupted_on_a_line_of_its_own(tmp_path: Path) -> None:
    """/history of a long conversation is still being written when Ctrl-C stops it: [interrupted] starts a line,
    where it went on from the word the write was cut in (word word wo[interrupted])."""
    chat = _long_conversation_chat(tmp_path)
    try:
        since = len(chat.transcript.getvalue())  # (the chat's start showed the last exchange)
        chat.child.sendline("/history")
        chat.child.expect_exact("Answer 20:")  # well before its end (some 1.2 MB)
        chat.child.sendintr()
        chat.child.expect_exact("[interrupted]")
        chat.sync()
        shown = chat.transcript.getvalue()[since:].replace("\r", "")
        assert "Answer 999:" not in shown, "the Ctrl-C stopped it"
        assert re.search(r"\n(\x1b\[[\d;]*m)*\[interrupted\]", shown), repr(shown[-300:])
        assert chat.quit() == 0
    finally:
        end_chat(chat)


@pytest.mark.parametrize(("size", "cut_in", "put"), [
    (10_000, 1, 1.0),  # written whole, the Ctrl-C raised as that write returns (stderr a file: chat 2>log)
    (80, 1, 0.5),  # a short one cut part way (a slow terminal)
    (80, 2, 1.0),  # written whole, the Ctrl-C raised as its line end's write returns
])
def test_a_status_message_a_ctrl_c_cuts_short_is_ended_once_however_long(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, size: int, cut_in: int, put: float) -> None:
    """The Ctrl-C lands in the message's cut_in'th write, which puts that part of what it was given before Python
    raises it (as it does, the write's count lost): the message's line is ended exactly once, never left open and
    never followed by a blank line, where a rule on the message's size decided."""
    from localgen import console

    real_write, calls = os.write, []
    with (tmp_path / "stderr").open("w") as stderr:
        def cut_write(fd: int, data: bytes) -> int:
            if fd != stderr.fileno():
                return real_write(fd, data)
            calls.append(data)
            if len(calls) != cut_in:
                return real_write(fd, data)
            real_write(fd, bytes(data[:int(len(data) * put)]))
            raise KeyboardInterrupt

        monkeypatch.setattr(sys, "stderr", stderr)
        monkeypatch.setattr(os, "write", cut_write)
        with pytest.raises(KeyboardInterrupt):
            console.say("x" * (size - 1))
        monkeypatch.undo()
    shown = (tmp_path / "stderr").read_text()
    expected = "x" * (size - 1) if put == 1.0 else "x" * int((size - 1) * put)
    assert shown == expected + "\n", (len(shown), shown[-5:])


@pytest.mark.parametrize("stop", [KeyboardInterrupt, lambda: SignalExit(signal.SIGTERM),
                                  lambda: SignalExit(signal.SIGQUIT)], ids=["ctrl_c", "sigterm", "ctrl_backslash"])
def test_a_status_message_any_signal_cuts_short_on_a_terminal_is_ended_once_its_style_reset(
        monkeypatch: pytest.MonkeyPatch, stop: Callable[[], BaseException]) -> None:
    """Ctrl-C, Ctrl-\\ or SIGTERM cut a dim note part way: its line is ended, the dim style reset, and the ^C's own
    line end (end_interrupted_line, as a run that ends on it adds) is not added again."""
    from localgen import console, line_ends, signals

    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(signals, "_interrupt_line_ended", False)
    real_write, cut = os.write, []
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as stderr:
            def cut_write(fd: int, data: bytes) -> int:
                if fd != slave or cut:
                    return real_write(fd, data)
                cut.append(real_write(fd, bytes(data[:10])))
                raise stop()

            monkeypatch.setattr(sys, "stderr", stderr)
            monkeypatch.setattr(os, "write", cut_write)
            with pytest.raises((KeyboardInterrupt, SignalExit)):
                console.say("\x1b[2mdetails of the answer\x1b[22m", made_safe=True)
            monkeypatch.setattr(os, "write", real_write)
            line_ends.end_interrupted_line()
        shown = b""
        while not shown.endswith(b"\r\n"):
            shown += os.read(master, 100)
        real_write(slave, b"end")
        while not shown.endswith(b"end"):
            shown += os.read(master, 100)
        assert shown == b"\x1b[2mdetail\x1b[0m\r\nend", shown
    finally:
        os.close(master)
        os.close(slave)


def test_sigterm_during_a_long_history_ends_its_line_with_its_style_reset(tmp_path: Path) -> None:
    """/history of a long conversation is being written when SIGTERM ends the chat: the line it was cut in is ended
    and its style reset, where the shell's prompt went on from the word it was cut in."""
    chat = _long_conversation_chat(tmp_path)
    try:
        chat.child.sendline("/history")
        chat.child.expect_exact("Answer 20:")
        chat.child.kill(signal.SIGTERM)
        chat.child.expect(pexpect.EOF)
        chat.child.close()
        assert chat.child.exitstatus == 143 or chat.child.signalstatus == signal.SIGTERM
        shown = chat.transcript.getvalue()
        after = shown[shown.rfind("Answer "):]
        assert re.fullmatch(r"Answer \d+:[ word\r\n]*\x1b\[0m\r\n.*", after, re.S), repr(after[-300:])
    finally:
        end_chat(chat)
