"""A streamed answer on a terminal: Markdown rendered block by block as it arrives, or plain text."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any, ClassVar, TextIO

from localgen.console import word_wrap_for
from localgen.control_chars import TerminalSafePieces
from localgen.markdown_parse import block_boundary, items_holding, markdown_parser, parsed_as_written
from localgen.markdown_rows import cut_rows, folded, is_mark, soft_wrap, under_prefix, without_padding

NATURAL_WIDTH = 10_000  # cells a table's natural width is measured within (without wrap: its rows whole)
CODE_THEME = "ansi_dark"  # the terminal's own palette, so code reads on light and dark backgrounds alike
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
                                _environ=_sized_by_the_terminal(file))
        self._wrap = word_wrap_for(self._console.file) if wrap else None  # plain answers on a terminal
        self._breaks_words = wrap  # Markdown's lines break between words (else: whole, as code lines are)
        self._markdown = markdown
        self._show_thinking = show_thinking
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
        self._console.print(text, style="dim italic", end="", markup=False, highlight=False)
        self._console.file.flush()

    def _end_thinking(self) -> None:
        """End the reasoning shown: what it holds (a carriage return nothing came after, ^M), then its line."""
        if held := self._thinking_safe.flush():
            self._console.print(held, style="dim italic", end="", markup=False, highlight=False)
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
        if note:
            self._console.print(f"[{note}]", style="dim", markup=False)


def _sized_by_the_terminal(stream: TextIO) -> dict[str, str] | None:
    """The environment rich sizes its console by: for a terminal, without COLUMNS and LINES (which a shell may export
    as the size at its start), so that rich asks the terminal, as WordWrap and the status lines do, and an answer
    follows a resize; None (the environment as it is) for a pipe or a file."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")} if terminal else None


def _markdown(text: str, *, wrap: bool = True, ended: bool = True) -> Any:
    """text as a rich Markdown renderable that shows every character of the answer (wrap: its lines broken between
    words; else whole, as code lines are; ended: text is the whole answer, see parsed_as_written)."""
    return _markdown_class()(text, wrap=wrap, ended=ended)


_MARKDOWN_CLASS: Any = None


def _markdown_class() -> Any:
    """rich's Markdown, made faithful to the text (built once, on first use: rich.markdown is slow to import).

    - HTML is text: rich drops HTML tags and blocks, so `<td>` or `std::vector<int>` would vanish from an answer.
    - Links show their address after the text, instead of an escape sequence many terminals do not display.
    - Code blocks are the code as written, in the terminal's own colours: no padding, background or trailing
      fill, tabs kept, and a long line is never broken between words. At the top level its pieces are marked to be
      joined when printed (_Continued), so the terminal wraps it softly and it copies as one line. Without wrap
      (/wrap off), every line is shown so (markdown_rows): a paragraph's, a heading's, a list item's or a quote's
      with its bullet or bar, and a table's rows, the table laid out at its natural width where the window is
      narrower, rather than its cells folded.
    - Table cells fold instead of ending in "…".
    - Ordered lists keep the period after the number ("1." rather than rich's "1").
    - A single newline breaks the line, as in chat UIs (a poem keeps its lines), where CommonMark joins the lines.
    - An answer that opens with a list starts on its first line (rich puts a blank line before it).
    - Each line keeps its indentation, and a closing fence with no opening one is text (markdown_parse).
    """
    global _MARKDOWN_CLASS
    if _MARKDOWN_CLASS is not None:
        return _MARKDOWN_CLASS
    from rich.markdown import BlockQuote, CodeBlock, Heading, ListItem, Markdown, Paragraph, TableElement
    from rich.measure import Measurement
    from rich.segment import Segment
    from rich.syntax import Syntax
    from rich.text import Text

    parser = markdown_parser()

    def unbroken(text: Any, console: Any, options: Any, *, whole: bool = False) -> Iterator[Any]:
        """Each line of text whole: cut every width cells, as a terminal wraps it, its pieces marked to be joined
        when printed at the top level (nothing to the left of it) or, whole (without wrap), by what holds it."""
        soft = whole or options.max_width >= console.width
        for line in text.split("\n", allow_blank=True):
            pieces = folded(line, options.max_width)
            for index, piece in enumerate(pieces):
                yield from piece.render(console)
                if soft and index < len(pieces) - 1:
                    yield Segment("", soft_wrap())
                yield Segment.line()

    class WholeWithoutWrap:
        """An element whose lines are whole for the terminal to break in a Markdown made without wrap (whole)."""

        whole = False

        @classmethod
        def create(cls, markdown: Any, token: Any) -> Any:
            element = super().create(markdown, token)  # type: ignore[misc]
            element.whole = not markdown.wrap
            return element

    class PlainCodeBlock(WholeWithoutWrap, CodeBlock):
        """A code block as written, highlighted in the terminal's palette (ANSI colours) unless it holds tabs; without
        wrap, in a list or a quote too, its lines are whole for the terminal to break."""

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            code = str(self.text).rstrip()
            text = Text(code) if "\t" in code else Syntax(code, self.lexer_name, theme=CODE_THEME).highlight(code)
            text.rstrip()  # highlight() ends the text with a newline
            yield from unbroken(text, console, options, whole=self.whole)

    class ParagraphAsWritten(Paragraph):
        """A paragraph of a Markdown made without wrap: its lines are whole, as code lines are."""

        @classmethod
        def create(cls, markdown: Any, token: Any) -> Any:
            return (Paragraph if markdown.wrap else cls)(justify=markdown.justify or "left")

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            yield from unbroken(self.text, console, options, whole=True)

    class HeadingAsWritten(Heading):
        """A heading of a Markdown made without wrap: placed as rich places it where it fits, else whole."""

        @classmethod
        def create(cls, markdown: Any, token: Any) -> Any:
            return (Heading if markdown.wrap else cls)(token.tag)

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            if all(line.cell_len <= options.max_width for line in self.text.split("\n")):
                yield from super().__rich_console__(console, options)
                return
            yield from unbroken(self.text, console, options, whole=True)

    class FoldingTable(WholeWithoutWrap, TableElement):
        """A table whose cells fold long words instead of cutting them off; without wrap, one wider than the
        window is laid out at its natural width, each row a whole line."""

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            for table in super().__rich_console__(console, options):
                for column in table.columns:
                    column.overflow = "fold"
                natural = Measurement.get(console, options.update(width=NATURAL_WIDTH), table).maximum \
                    if self.whole else 0
                if natural <= options.max_width:
                    yield table
                    continue
                for line in console.render_lines(table, options.update(width=natural), pad=False):
                    yield from cut_rows(line, options.max_width)

    class NumberedItem(WholeWithoutWrap, ListItem):
        """A list item whose number is followed by a period; without wrap, its lines are whole (the terminal breaks
        them with no indent)."""

        def render_bullet(self, console: Any, options: Any) -> Iterator[Any]:
            if not self.whole:
                yield from super().render_bullet(console, options)
                return
            style = console.get_style("markdown.item.bullet", default="none")
            yield from under_prefix(console, options, self.elements, first=Segment(" • ", style),
                                    rest=Segment("   ", style), style=self.style)

        def render_number(self, console: Any, options: Any, number: int, last_number: int) -> Iterator[Any]:
            width = len(str(last_number)) + 3
            style = console.get_style("markdown.item.number", default="none")
            first, rest = Segment(f"{number}.".rjust(width - 1) + " ", style), Segment(" " * width, style)
            if self.whole:
                yield from under_prefix(console, options, self.elements, first=first, rest=rest, style=self.style)
                return
            lines = console.render_lines(self.elements, options.update(width=options.max_width - width),
                                         style=self.style)
            for index, line in enumerate(lines):
                yield first if index == 0 else rest
                yield from line
                yield Segment("\n")

    class QuoteAsWritten(BlockQuote):
        """A block quote of a Markdown made without wrap: its lines whole after its bar."""

        @classmethod
        def create(cls, markdown: Any, token: Any) -> Any:
            return (BlockQuote if markdown.wrap else cls)()

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            bar = Segment("▌ ", self.style)
            yield from under_prefix(console, options, self.elements, first=bar, rest=bar, style=self.style)

    class FaithfulMarkdown(Markdown):
        """Markdown that shows HTML as text and links with their address."""

        elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "fence": PlainCodeBlock,
                                              "code_block": PlainCodeBlock, "list_item_open": NumberedItem,
                                              "table_open": FoldingTable, "paragraph_open": ParagraphAsWritten,
                                              "heading_open": HeadingAsWritten, "blockquote_open": QuoteAsWritten}

        def __init__(self, markup: str, *, wrap: bool = True, ended: bool = True) -> None:
            super().__init__("", code_theme=CODE_THEME, hyperlinks=False)
            self.markup, self.wrap = markup, wrap
            self.parsed = _with_line_breaks(parsed_as_written(parser, markup, ended=ended))

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            """rich's rendering without the blank line it puts before a list that opens the text."""
            pieces = super().__rich_console__(console, options)
            opens_with_a_list = bool(self.parsed) and self.parsed[0].type in ("bullet_list_open", "ordered_list_open")
            first = next(pieces, None)
            if first is not None and not (opens_with_a_list and isinstance(first, Segment) and first.text == "\n"):
                yield first
            yield from pieces

    _MARKDOWN_CLASS = FaithfulMarkdown
    return _MARKDOWN_CLASS


def _with_line_breaks(tokens: list[Any]) -> list[Any]:
    """The parsed tokens with each soft line break (a single newline in a paragraph, list item, quote or heading)
    made a hard one, as chat UIs show an answer's lines; code and tables have none, so they keep theirs."""
    for token in tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type, child.tag = "hardbreak", "br"
    return tokens


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
