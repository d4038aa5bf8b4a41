"""A streamed answer on a terminal: Markdown rendered block by block as it arrives, or plain text."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from localgen.console import word_wrap_for
from localgen.control_chars import TerminalSafePieces
from localgen.dim_style import dim_style, rich_theme
from localgen.markdown_parse import block_boundary, items_holding
from localgen.markdown_rows import is_mark, without_padding
from localgen.wordwrap import WordWrap

if TYPE_CHECKING:
    from localgen.markdown_render import FaithfulMarkdown

MAX_CONTEXT_CHARS = 4096  # a longer construct restarts its context (each block re-renders it) from its list items
REDRAW_INTERVAL_S = 0.1  # the unfinished block is drawn again at most this often, and only when it grew
_CONTINUATION = re.compile(r"[ \t>]|[-+*][ \t\n]|\d{1,9}[.)][ \t\n]")  # indented, a quote or a list item


def _may_continue(block: str) -> bool:
    """True when a block may belong to the construct before it (a list item's next paragraph, the next item)."""
    return bool(_CONTINUATION.match(block.lstrip("\n")))


class AnswerView:
    """Shows a streamed answer on a terminal: Markdown (finished blocks printed once) or plain text.

    Each block is rendered after the blocks of the construct it may belong to (at least the block before it)
    and only its own lines are shown, so blocks are spaced and indented as rich does when the whole answer is
    rendered at once, a list whose items go on after blank lines included.
    """

    def __init__(self, *, markdown: bool, show_thinking: bool, wrap: bool = True, stream: TextIO | None = None
                 ) -> None:
        from rich.console import Console

        file = stream or sys.stdout
        self._console = Console(file=file, highlight=False, soft_wrap=False, emoji=False,  # :x: is the model's text
                                theme=rich_theme(), _environ=_sized_by_the_terminal(file))
        self._wrap = word_wrap_for(self._console.file) if wrap else None  # plain answers on a terminal
        self._breaks_words = wrap  # Markdown's lines break between words (else: whole, as code lines are)
        self._markdown = markdown
        self._show_thinking = show_thinking
        self._note_style, self._thinking_style = dim_style("dim"), dim_style("dim italic")  # NO_COLOR: italic
        self._previous = ""  # the finished blocks of the last construct (the context that places the next one)
        self._pending = ""  # the unfinished block
        self._live = None
        self._drawn_at = 0.0  # when the live region was last drawn
        self._thinking_open = False
        self._reasoning_hidden = False  # reasoning came, and was hidden
        self._answered = False  # answer text came (more than whitespace)
        self._safe = TerminalSafePieces()  # the answer's, a carriage return at a piece's end held
        self._thinking_safe = TerminalSafePieces()  # the reasoning's, the same

    @property
    def shows_nothing_but_hidden_reasoning(self) -> bool:
        """True when all the model said so far is reasoning that was hidden: the screen shows nothing of it."""
        return self._reasoning_hidden and not self._answered

    def thinking(self, text: str) -> None:
        """Reasoning text: dimmed, or hidden."""
        if not self._show_thinking:
            self._reasoning_hidden = self._reasoning_hidden or bool(text.strip())
            return
        if not text:
            return
        text = self._thinking_safe.feed(text) if self._console.is_terminal else text
        self._thinking_open = True
        self._console.print(text, style=self._thinking_style, end="", markup=False, highlight=False)
        self._console.file.flush()

    def _end_thinking(self) -> None:
        """End the reasoning shown: what it holds (a carriage return nothing came after, ^M), then its line."""
        if held := self._thinking_safe.flush():
            self._console.print(held, style=self._thinking_style, end="", markup=False, highlight=False)
        self._console.print()
        self._thinking_open = False

    def answer(self, text: str) -> None:
        """Answer text: rendered as Markdown block by block, or printed as it comes."""
        if not text:
            return
        self._answered = self._answered or bool(text.strip())
        text = self._safe.feed(text) if self._console.is_terminal else text
        if self._thinking_open:
            self._end_thinking()
        if not self._markdown:
            self._console.file.write(self._wrap.feed(text) if self._wrap else text)
            self._console.file.flush()
            return
        self._pending += text
        cut = block_boundary(self._pending)
        if cut:
            done, self._pending = self._pending[:cut], self._pending[cut:]
            self._stop_live()
            self._print_block(done)
        self._show_live()

    def _print_block(self, block: str, *, ended: bool = False) -> None:
        """Print a finished block once, permanently (ended: the answer's last)."""
        if not block.strip():
            return
        self._console.print(_Continued(self._previous, block, soft_wrap=True, wrap=self._breaks_words, ended=ended),
                            crop=False)  # rows it joins go on
        if not _may_continue(block):
            self._previous = block
        elif len(self._previous) < MAX_CONTEXT_CHARS:
            self._previous += block
        else:  # the construct goes on: the list items that hold the block place the next one as they place it
            self._previous = items_holding(self._previous, block) + block

    def _show_live(self) -> None:
        """Redraw only the unfinished block, when text came and REDRAW_INTERVAL_S has passed since the last time
        (its latest words wait for the next text, or the block's end, within that interval)."""
        from rich.live import Live

        if not self._pending.strip():
            return
        if self._live is None:
            self._live = Live(console=self._console, auto_refresh=False, transient=True, vertical_overflow="visible")
            self._live.start()
            self._drawn_at = 0.0
        now = time.monotonic()
        due = now - self._drawn_at >= REDRAW_INTERVAL_S
        self._live.update(_Tail(_Continued(self._previous, self._pending, wrap=self._breaks_words)), refresh=due)
        if due:
            self._drawn_at = now

    def _stop_live(self) -> None:
        """Remove the live region (its text is printed permanently next)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def pause(self) -> None:
        """Erase what is drawn live (the unfinished block); the next text draws it again where the cursor is."""
        self._stop_live()
        self._console.file.flush()

    def close(self, note: str | None = None, *, cut_off: bool = False) -> None:
        """Finish the answer: print the last block, then an optional dim note (cut_off: the answer stopped before its
        end, so a bare fence left open opens code, as it did while it streamed, rather than closing code unopened)."""
        if held := self._safe.flush():  # a carriage return that ended the answer
            self.answer(held)
        self._stop_live()
        if self._markdown:
            self._print_block(self._pending, ended=not cut_off)
        else:
            if self._wrap:
                self._console.file.write(self._wrap.flush())
            if not self._thinking_open:
                self._console.print()
        if self._thinking_open:
            self._end_thinking()
        self._previous, self._pending = "", ""
        if note:  # broken between words as console.say breaks its lines (rich keeps the space at each break), never
            wrap = WordWrap(lambda: self._console.width, wide_breaks=False, keep_whole=True)  # inside a command
            self._console.print(wrap.feed(f"[{note}]") + wrap.flush(), style=self._note_style, markup=False,
                                soft_wrap=True)


def _sized_by_the_terminal(stream: TextIO) -> dict[str, str] | None:
    """The environment rich sizes its console by: for a terminal, without COLUMNS and LINES (which a shell may export
    as the size at its start), so that rich asks the terminal, as WordWrap and the status lines do, and an answer
    follows a resize; None (the environment as it is) for a pipe or a file."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")} if terminal else None


def _markdown(text: str, *, wrap: bool = True, ended: bool = True) -> FaithfulMarkdown:
    """text as a rich Markdown renderable that shows every character of the answer (wrap: its lines broken between
    words; else whole, as code lines are; ended: text is the whole answer, see parsed_as_written)."""
    from localgen.markdown_render import FaithfulMarkdown  # on first use: rich.markdown is slow to import

    return FaithfulMarkdown(text, wrap=wrap, ended=ended)


class _Continued:
    """A block of Markdown rendered after the one before it, less that one's own lines, so it is spaced right.

    Both are rendered at the width of the moment, so a resized terminal still gets the right lines. soft_wrap
    joins the pieces of a long code line (each a full row) so that the terminal wraps it and it copies whole.
    """

    def __init__(self, previous: str, block: str, *, soft_wrap: bool = False, wrap: bool = True,
                 ended: bool = False) -> None:
        self.previous, self.block, self.soft_wrap, self.wrap, self.ended = previous, block, soft_wrap, wrap, ended

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        skip = len(console.render_lines(_markdown(self.previous, wrap=self.wrap, ended=False), options,
                                        pad=False)) if self.previous else 0  # its lines as they were printed
        for line in console.render_lines(_markdown(self.previous + self.block, wrap=self.wrap, ended=self.ended),
                                         options, pad=False)[skip:]:
            if self.soft_wrap and line and is_mark(line[-1]):
                yield from line  # a full row that the next one continues
            else:
                yield from without_padding(line)
                yield Segment.line()


class _Tail:
    """The bottom lines of a renderable, fewer than the terminal's rows: a live region taller than the screen
    cannot be erased, so every redraw would leave a copy of its top in the scrollback."""

    def __init__(self, renderable: object) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        lines = console.render_lines(self.renderable, options, pad=False)
        shown = lines[-max(1, console.size.height - 1):]
        for index, line in enumerate(shown):
            yield from line
            if index < len(shown) - 1:
                yield Segment.line()
