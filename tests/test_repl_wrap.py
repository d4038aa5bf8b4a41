"""The chat's word wrap turned off and on (chat --no-wrap, /wrap, Ollama's /set nowordwrap): the answer's lines on a
real terminal, on the real bundled model, and Markdown paragraphs as the answer view lays them out."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tests.chat_terminal import ESCAPE, end_chat
from tests.test_console import _terminal_lines
from tests.test_repl import Chat

QUESTION = "Describe the sea in great detail."
WIDTH = 40


def _shown(chat: Chat, since: int) -> str:
    """What the terminal got after the transcript's first since characters, as written (no escapes, plain newlines)."""
    return ESCAPE.sub("", chat.transcript.getvalue()[since:]).replace("\r\n", "\n")


def test_wrap_off_shows_the_answer_s_lines_whole_and_on_breaks_them_between_words(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--no-markdown", "--no-wrap", "--temperature", "0", "-n", "40", columns=WIDTH)
    try:
        assert "answers' lines are kept whole" in " ".join(chat.command_words("/wrap", "between words)").split())
        since = len(chat.transcript.getvalue())
        answer = chat.ask(QUESTION)["turns"][-1]["answer"].strip()
        assert max(map(len, answer.splitlines())) > WIDTH, "an answer with a line wider than the terminal"
        assert answer in _shown(chat, since), "the terminal breaks the lines, not the chat"
        said = " ".join(chat.command_words("/set wordwrap", "window's edge").split())  # Ollama's spelling
        assert "answers' lines break between words at the window's edge" in said, said
        since = len(chat.transcript.getvalue())
        again = chat.ask(QUESTION)["turns"][-1]["answer"].strip()
        assert max(map(len, again.splitlines())) > WIDTH
        shown = _shown(chat, since)
        assert again not in shown and again.split()[-1] in shown, "broken between words"
        assert all(len(line) <= WIDTH for line in shown.split(">>>")[0].splitlines()), shown
        said = " ".join(chat.command_words("/set nowordwrap", "at its edge").split())
        assert "answers' lines are kept whole, the terminal breaking them at its edge" in said, said
        said = " ".join(chat.command_words("/wrap sideways", "say which)").split())
        assert "error: /wrap takes on or off, not 'sideways' (hint: /wrap [on|off]: break answers' lines" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def _markdown_on_a_terminal(document: str, *, wrap: bool) -> str:
    """What a WIDTH-column terminal gets when document streams through the answer view as Markdown."""
    from rich.console import Console

    from localgen.answer_view import AnswerView

    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, wrap=wrap, stream=stream)
    view._console = Console(file=stream, force_terminal=True, width=WIDTH, height=20, highlight=False)
    for start in range(0, len(document), 9):
        view.answer(document[start:start + 9])
    view.close()
    return stream.getvalue()


PARAGRAPH = " ".join(f"word{n}" for n in range(20))
ITEM = " ".join(f"item{n}" for n in range(12))


@pytest.mark.parametrize("wrap", [True, False], ids=["wrap", "no-wrap"])
def test_a_markdown_paragraph_s_lines_are_whole_without_wrap(wrap: bool) -> None:
    """Without wrap, a top-level paragraph's line goes to the terminal whole, its rows joined, so that it copies as
    one line, as a code line does; with wrap, a list item's breaks between words under its indent."""
    raw = _markdown_on_a_terminal(f"Intro line.\n{PARAGRAPH}\n\n- {ITEM}\n", wrap=wrap)
    written = ESCAPE.sub("", raw)
    assert (PARAGRAPH in written) is not wrap, written
    assert "Intro line.\n" in written, "the paragraph's own line break stays"
    screen = _terminal_lines(raw, WIDTH, 20)
    assert any(line.endswith(PARAGRAPH[WIDTH - 10:WIDTH]) for line in screen) is not wrap, screen  # cut at the edge
    item_rows = [line for line in screen if "item" in line]
    if wrap:  # (without wrap, test_chat_gaps.py)
        assert len(item_rows) == 2 and item_rows[1].startswith("  "), item_rows
        assert all(re.fullmatch(r" *(?:• )?(?:item\d+ ?)+", row) for row in item_rows), "whole words"
