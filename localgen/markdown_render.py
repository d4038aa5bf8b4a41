"""rich's Markdown made faithful to an answer's text (imported on first use: rich.markdown is slow to import).

- HTML is text: rich drops HTML tags and blocks, so `<td>` or `std::vector<int>` would vanish from an answer.
- Links show their address after the text, instead of an escape sequence many terminals do not display.
- Code blocks are the code as written, in the terminal's own colours: no padding, background or trailing fill, tabs
  kept, and a long line is never broken between words. At the top level its pieces are marked to be joined when
  printed (answer_view's _Continued), so the terminal wraps it softly and it copies as one line. Without wrap
  (/wrap off), every line is shown so (markdown_rows): a paragraph's, a heading's, a list item's or a quote's with its
  bullet or bar, and a table's rows, the table laid out at its natural width where the window is narrower, rather
  than its cells folded.
- Table cells fold instead of ending in "…".
- Ordered lists keep the period after the number ("1." rather than rich's "1").
- A single newline breaks the line, as in chat UIs (a poem keeps its lines), where CommonMark joins the lines.
- An answer that opens with a list starts on its first line (rich puts a blank line before it).
- Each line keeps its indentation, and a closing fence with no opening one is text (markdown_parse).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from markdown_it.token import Token
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markdown import (
    BlockQuote,
    CodeBlock,
    Heading,
    ListItem,
    Markdown,
    MarkdownElement,
    Paragraph,
    TableElement,
)
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax, SyntaxTheme
from rich.table import Table
from rich.text import Text

from localgen.dim_style import shows_dim, undimmed
from localgen.markdown_parse import markdown_parser, parsed_as_written
from localgen.markdown_rows import cut_rows, folded, soft_wrap, under_prefix

NATURAL_WIDTH = 10_000  # cells a table's natural width is measured within (without wrap: its rows whole)
CODE_THEME = "ansi_dark"  # the terminal's own palette, so code reads on light and dark backgrounds alike


class _UndimmedTheme(SyntaxTheme):
    """A syntax theme, its dim styles (comments) undimmed (dim_style.undimmed)."""

    def __init__(self, theme: SyntaxTheme) -> None:
        self._theme = theme

    def get_style_for_token(self, token_type: Any) -> Style:
        """The theme's style for the token, undimmed."""
        return undimmed(self._theme.get_style_for_token(token_type))

    def get_background_style(self) -> Style:
        """The theme's background."""
        return self._theme.get_background_style()


def code_theme() -> str | SyntaxTheme:
    """The theme code blocks are shown in: the terminal's palette, its dim comments undimmed with NO_COLOR."""
    return CODE_THEME if shows_dim() else _UndimmedTheme(Syntax.get_theme(CODE_THEME))

_PARSER = markdown_parser()


def _unbroken(text: Text, console: Console, options: ConsoleOptions, *, whole: bool = False) -> Iterator[Segment]:
    """Each line of text whole: cut every width cells, as a terminal wraps it, its pieces marked to be joined when
    printed at the top level (nothing to the left of it) or, whole (without wrap), by what holds it."""
    soft = whole or options.max_width >= console.width
    for line in text.split("\n", allow_blank=True):
        pieces = folded(line, options.max_width)
        for index, piece in enumerate(pieces):
            yield from piece.render(console)
            if soft and index < len(pieces) - 1:
                yield Segment("", soft_wrap())
            yield Segment.line()


class WholeWithoutWrap(MarkdownElement):
    """An element whose lines are whole for the terminal to break in a Markdown made without wrap (whole)."""

    whole = False

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> MarkdownElement:
        """The element, whole where markdown is made without wrap."""
        element = super().create(markdown, token)
        if isinstance(element, WholeWithoutWrap):
            element.whole = not _wraps(markdown)
        return element


def _wraps(markdown: Markdown) -> bool:
    """Whether a Markdown breaks its lines between words (FaithfulMarkdown's wrap; rich's own always does)."""
    return not isinstance(markdown, FaithfulMarkdown) or markdown.wrap


class PlainCodeBlock(WholeWithoutWrap, CodeBlock):
    """A code block as written, highlighted in the terminal's palette (ANSI colours) unless it holds tabs; without
    wrap, in a list or a quote too, its lines are whole for the terminal to break."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        code = str(self.text).rstrip()
        text = Text(code) if "\t" in code else Syntax(code, self.lexer_name, theme=code_theme()).highlight(code)
        text.rstrip()  # highlight() ends the text with a newline
        yield from _unbroken(text, console, options, whole=self.whole)


class ParagraphAsWritten(Paragraph):
    """A paragraph of a Markdown made without wrap: its lines are whole, as code lines are."""

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> Paragraph:
        """rich's paragraph where markdown wraps, else this one."""
        return (Paragraph if _wraps(markdown) else cls)(justify=markdown.justify or "left")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from _unbroken(self.text, console, options, whole=True)


class HeadingAsWritten(Heading):
    """A heading of a Markdown made without wrap: placed as rich places it where it fits, else whole."""

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> Heading:
        """rich's heading where markdown wraps, else this one."""
        return (Heading if _wraps(markdown) else cls)(token.tag)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if all(line.cell_len <= options.max_width for line in self.text.split("\n")):
            yield from super().__rich_console__(console, options)
            return
        yield from _unbroken(self.text, console, options, whole=True)


class FoldingTable(WholeWithoutWrap, TableElement):
    """A table whose cells fold long words instead of cutting them off; without wrap, one wider than the window is
    laid out at its natural width, each row a whole line."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for table in super().__rich_console__(console, options):
            if not isinstance(table, Table):  # rich's element yields its Table alone
                yield table
                continue
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
    """A list item whose number is followed by a period; without wrap, its lines are whole (the terminal breaks them
    with no indent)."""

    def render_bullet(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.whole:
            yield from super().render_bullet(console, options)
            return
        style = console.get_style("markdown.item.bullet", default="none")
        yield from under_prefix(console, options, self.elements, first=Segment(" • ", style),
                                rest=Segment("   ", style), style=self.style)

    def render_number(self, console: Console, options: ConsoleOptions, number: int, last_number: int
                      ) -> RenderResult:
        width = len(str(last_number)) + 3
        style = console.get_style("markdown.item.number", default="none")
        first, rest = Segment(f"{number}.".rjust(width - 1) + " ", style), Segment(" " * width, style)
        if self.whole:
            yield from under_prefix(console, options, self.elements, first=first, rest=rest, style=self.style)
            return
        lines = console.render_lines(self.elements, options.update(width=options.max_width - width), style=self.style)
        for index, line in enumerate(lines):
            yield first if index == 0 else rest
            yield from line
            yield Segment("\n")


class QuoteAsWritten(BlockQuote):
    """A block quote of a Markdown made without wrap: its lines whole after its bar."""

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> BlockQuote:
        """rich's quote where markdown wraps, else this one."""
        return (BlockQuote if _wraps(markdown) else cls)()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        bar = Segment("▌ ", self.style)
        yield from under_prefix(console, options, self.elements, first=bar, rest=bar, style=self.style)


class FaithfulMarkdown(Markdown):
    """Markdown that shows every character of an answer (wrap: its lines broken between words; else whole, as code
    lines are; ended: markup is the whole answer, see parsed_as_written)."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements, "fence": PlainCodeBlock, "code_block": PlainCodeBlock, "list_item_open": NumberedItem,
        "table_open": FoldingTable, "paragraph_open": ParagraphAsWritten, "heading_open": HeadingAsWritten,
        "blockquote_open": QuoteAsWritten}

    def __init__(self, markup: str, *, wrap: bool = True, ended: bool = True) -> None:
        super().__init__("", code_theme=CODE_THEME, hyperlinks=False)
        self.markup, self.wrap = markup, wrap
        self.parsed = _with_line_breaks(parsed_as_written(_PARSER, markup, ended=ended))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """rich's rendering without the blank line it puts before a list that opens the text."""
        pieces: Iterator[RenderableType | Segment] = iter(super().__rich_console__(console, options))
        opens_with_a_list = bool(self.parsed) and self.parsed[0].type in ("bullet_list_open", "ordered_list_open")
        first = next(pieces, None)
        if first is not None and not (opens_with_a_list and isinstance(first, Segment) and first.text == "\n"):
            yield first
        yield from pieces


def _with_line_breaks(tokens: list[Token]) -> list[Token]:
    """The parsed tokens with each soft line break (a single newline in a paragraph, list item, quote or heading)
    made a hard one, as chat UIs show an answer's lines; code and tables have none, so they keep theirs."""
    for token in tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type, child.tag = "hardbreak", "br"
    return tokens
