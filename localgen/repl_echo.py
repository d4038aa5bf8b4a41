"""A sent message taller than the window, whose top the prompt never drew (it shows the rows around the cursor): its
last drawing erased as it is sent, and the message printed whole in its place, so that the terminal's scrollback
holds all of it, as it holds a message that fits."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from prompt_toolkit.application import Application
from prompt_toolkit.utils import get_cwidth

from localgen.control_chars import terminal_safe
from localgen.repl_input import continuation
from localgen.wordwrap import TAB_STOP


def echo_rows(text: str, prompt: str, columns: int) -> list[str]:
    """The rows the prompt shows text in on a terminal this wide: its first line after the prompt, each next after
    the continuation ('... '), and a long line's further rows after as many spaces; tabs as spaces to the next stop,
    control characters shown (^[), never obeyed, as the prompt shows them."""
    width = get_cwidth(prompt)
    room = max(columns - width, 1)
    rows: list[str] = []
    for number, line in enumerate(terminal_safe(text).split("\n")):
        head = prompt if number == 0 else continuation(width, number, False)
        for piece in _wrapped(line.expandtabs(TAB_STOP), room):
            rows.append(head + piece)
            head = continuation(width, number, True)
    return rows


def _wrapped(line: str, room: int) -> list[str]:
    """A line cut into rows of at most room cells, a wide character that does not fit moved to the next row."""
    rows, row, used = [], "", 0
    for char in line:
        cells = get_cwidth(char)
        if used + cells > room and row:
            rows.append(row)
            row, used = "", 0
        row, used = row + char, used + cells
    return [*rows, row]


class TallInputEcho:
    """Watches a prompt: where an accepted input takes more rows than the window has, its last drawing is erased as
    the prompt ends (erase_when_done), for write() to print the input whole."""

    def __init__(self, app: Application[Any], prompt: str, text: Callable[[], str]) -> None:
        self._app = app
        self._prompt = prompt
        self._text = text  # the input being read
        self.erased = False  # the last prompt's input was erased, not drawn as it ended
        app.before_render += self._before_render

    def _before_render(self, app: Application[Any]) -> None:
        """As the prompt ends (its last drawing), erase it where its input was accepted and is taller than the
        window."""
        future = app.future
        ended = future is not None and future.done()
        accepted = ended and not future.cancelled() and future.exception() is None
        size = app.output.get_size()
        tall = accepted and len(echo_rows(self._text(), self._prompt, size.columns)) >= size.rows
        app.erase_when_done = self.erased = tall

    def write(self, text: str, out: TextIO = sys.stdout) -> None:
        """Print the input the prompt erased as it ended, whole, as the prompt showed it."""
        if not self.erased:
            return
        self.erased = False
        out.write("\n".join(echo_rows(text, self._prompt, self._app.output.get_size().columns)) + "\n")
        out.flush()
