"""Word wrapping of streamed text on a terminal: breaks at spaces, never inside a word."""

from __future__ import annotations

import io
import os

import pexpect
import pytest

from localgen.console import TextOutput
from localgen.wordwrap import COMMANDS, WordWrap, display_width, whole_spans
from tests.conftest import spawn_localgen

TEXT = ("The quick brown fox jumps over the lazy dog while the band plays a long and winding tune.\n\n"
        "    indented code stays indented\nSupercalifragilisticexpialidocious-is-one-very-long-word-indeed ok")


def _fits(line: str, width: int) -> bool:
    """A shown line fits, or starts with a word wider than the terminal (which the terminal folds)."""
    return display_width(line) <= width or display_width(line.split()[0]) > width


def _wrapped(text: str, width: int, step: int) -> str:
    wrap = WordWrap(lambda: width)
    return "".join(wrap.feed(text[i:i + step]) for i in range(0, len(text), step)) + wrap.flush()


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_lines_break_between_words_and_keep_every_word(step: int) -> None:
    out = _wrapped(TEXT, 24, step)
    assert all(_fits(line, 24) for line in out.splitlines()), out
    assert out.split() == TEXT.split()
    assert "\n    indented code stays indented\n" in _wrapped(TEXT, 80, step)
    assert out == _wrapped(TEXT, 24, 1), "the result does not depend on how the text was streamed"


def test_wide_characters_count_two_columns() -> None:
    assert display_width("日本") == 4 and display_width("e\u0301") == 1
    out = _wrapped("日本語 日本語 日本語", 13, 2)
    assert out.splitlines() == ["日本語 日本語", "日本語"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no descriptor")  # the width falls back to no wrapping


def test_text_output_wraps_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    out = TextOutput(pipe)
    for i in range(0, len(TEXT), 5):
        out.write(TEXT[i:i + 5])
    out.finish()
    assert pipe.getvalue() == TEXT + "\n", "a pipe gets the text byte for byte"
    monkeypatch.setattr("localgen.console.terminal_width", lambda _stream: lambda: 30)  # it has no descriptor
    terminal = _Terminal()
    out = TextOutput(terminal)
    for i in range(0, len(TEXT), 5):
        out.write(TEXT[i:i + 5])
    out.finish()
    shown = terminal.getvalue()
    assert shown.endswith("\n") and shown.split() == TEXT.split()
    assert all(_fits(line, 30) for line in shown.splitlines()), shown
    assert shown != TEXT + "\n", "the terminal got wrapped lines"


def test_east_asian_text_streams_as_it_comes_and_breaks_between_characters() -> None:
    wrap = WordWrap(lambda: 10)
    assert wrap.feed("日本") == "日本", "no space needed: each wide character is placed as it comes"
    assert wrap.feed("語のテ") == "語のテ"
    assert wrap.feed("キスト") == "\nキスト", "the line is full after five wide characters"
    assert wrap.feed(" ok") == "" and wrap.flush() == " ok"


def test_a_word_wider_than_the_line_streams_once_it_is_wider() -> None:
    wrap = WordWrap(lambda: 12)
    assert wrap.feed("see https://exa") == "see", "a word is held back while it may still fit a line"
    assert wrap.feed("mple.com/x") == "\nhttps://example.com/x", "wider than the line: placed on a line of its own"
    assert wrap.feed("yz") == "yz", "and the rest of it streams, for the terminal to fold"
    assert wrap.feed(" and") == "" and wrap.flush() == "\nand", "the folded word ended at column 11 of 12"


def test_no_break_comes_before_a_character_that_joins_the_previous_one() -> None:
    assert _wrapped("abcdefgh\U0001f44d\U0001f3fd", 10, 1) == "abcdefgh\U0001f44d\U0001f3fd", "a skin tone stays"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert _wrapped(f"abcdefgh{family} x", 10, 1) == f"abcdefgh{family}\nx", "a joined emoji stays one"
    assert _wrapped("cafe\u0301 au lait", 5, 1) == "cafe\u0301\nau\nlait"


def test_a_message_shown_at_once_keeps_east_asian_words_whole() -> None:
    message = "no such file: /home/user/ドキュメント/報告書.txt"
    wrap = WordWrap(lambda: 30, wide_breaks=False)
    assert wrap.feed(message) + wrap.flush() == "no such file:\n/home/user/ドキュメント/報告書.txt"  # whole


HINTS = [
    ("localgen: error: no such command 'why is the sky blue' (hint: to ask the model, use "
     "`localgen run 'why is the sky blue'`)", "`localgen run 'why is the sky blue'`"),
    ('localgen: error: nothing to send: the prompt is empty, and so is stdin (hint: check what feeds stdin, or give '
     'a prompt, e.g. localgen run "Why is the sky blue?")', 'localgen run "Why is the sky blue?")'),
    ("localgen: error: the model is busy (hint: remove the whole model: localgen models rm smollm2-135m, then pull "
     "it again)", "localgen models rm smollm2-135m,"),
]


@pytest.mark.parametrize("width", range(40, 131, 5))
@pytest.mark.parametrize(("message", "command"), HINTS)
def test_a_message_never_breaks_inside_a_command_it_names(message: str, command: str, width: int) -> None:
    """A hint's command moves whole to the next line, so it copies whole (prose around it still breaks)."""
    wrap = WordWrap(lambda: width, wide_breaks=False, keep_whole=True)
    lines = (wrap.feed(message) + wrap.flush()).splitlines()
    assert " ".join(lines) == message and all(display_width(line) <= width for line in lines), lines
    assert any(command in line for line in lines), lines


def test_the_spans_kept_whole_are_backticked_or_a_localgen_command() -> None:
    text = ("the user's file 'my notes.txt' and `cache clear --yes`; e.g. localgen run -n 4 'a, b (c)' \"d, e\", "
            "or localgen chat or run (pid 4); localgen runs GGUF models")
    assert [text[a:b] for a, b in whole_spans(text)] == [
        "`cache clear --yes`", "localgen run -n 4 'a, b (c)' \"d, e\"", "localgen chat"], "quoted prose may break"
    assert whole_spans("it's `unclosed and don't") == [], "a backtick alone opens nothing"
    welcome = "localgen chat with smollm2-135m: /help for commands"
    assert [welcome[a:b] for a, b in whole_spans(welcome)] == ["localgen chat with smollm2-135m"], "': ' ends it"
    for width in (35, 40, 45):  # the chat's welcome line breaks between words at the terminal's width
        wrap = WordWrap(lambda width=width: width, wide_breaks=False, keep_whole=True)
        lines = (wrap.feed(welcome + ", Ctrl-D to quit, Alt-Enter for a newline") + wrap.flush()).splitlines()
        assert all(display_width(line) <= width for line in lines), lines


@pytest.mark.parametrize("columns", [100, 110])
def test_an_error_on_a_terminal_keeps_its_hints_command_on_one_line(columns: int) -> None:
    child = spawn_localgen("why is the sky blue", env={**os.environ}, encoding="utf-8", timeout=60,
                           dimensions=(24, columns))
    child.expect(pexpect.EOF)
    child.close()
    lines = child.before.replace("\r\n", "\n").splitlines()
    assert child.exitstatus == 2 and any("`localgen run 'why is the sky blue'`" in line for line in lines), lines
    assert all(len(line) <= columns for line in lines), lines


def test_the_commands_a_message_keeps_whole_are_localgen_s_own() -> None:
    """wordwrap names localgen's commands without importing the CLI (it wraps every message): the same ones."""
    from localgen.cli import app
    from localgen.cli_args import command_names

    assert set(COMMANDS) == command_names(app)
