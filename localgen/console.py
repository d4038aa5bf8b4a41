"""Terminal output: model text on stdout (raw bytes on a pipe), everything else on stderr."""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, TextIO

from localgen.errors import LocalgenError
from localgen.events import Event, Finished, PrefillProgress
from localgen.units import counted
from localgen.wordwrap import WordWrap, terminal_width

FINISH_NOTES = {
    "length": ("stopped at the --max-tokens limit", "stopped at the max_tokens limit (/set max_tokens)"),
    "context": ("stopped at the end of the context window (raise --ctx-size for longer output)",
                "stopped at the end of the context window (start the chat with a larger --ctx-size)"),
    "interrupted": ("interrupted", "interrupted"),
}  # (for run, for chat)


class TextOutput:
    """Streams model text to stdout, flushed per piece, ending with exactly one newline; word-wrapped on a
    terminal, byte for byte on a pipe or a file."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._wrap = _word_wrap_for(self._stream)
        self._pending_newlines = ""
        self._wrote_any = False

    def write(self, text: str) -> None:
        """Write a piece of text, holding back trailing newlines until more text comes."""
        if self._wrap:
            text = terminal_safe(text)
        body = text.rstrip("\n")
        if not body:
            self._pending_newlines += text
            return
        piece = self._pending_newlines + body
        self._write(self._wrap.feed(piece) if self._wrap else piece)
        self._pending_newlines = text[len(body):]
        self._wrote_any = True

    def finish(self) -> None:
        """End the output with one newline (none when nothing was written)."""
        if self._wrote_any:
            self._write((self._wrap.flush() if self._wrap else "") + "\n")
        self._pending_newlines = ""

    def _write(self, text: str) -> None:
        """Write and flush this piece."""
        write_out(self._stream, text)


_TERMINAL_SAFE = {code: f"^{chr(code + 64)}" for code in range(32) if chr(code) not in "\n\t\r"} | {
    0x0D: "", 0x7F: "^?"} | {code: "\ufffd" for code in range(0x80, 0xA0)}


def terminal_safe(text: str) -> str:
    """Model text a terminal shows rather than obeys: control characters (escape sequences, C1 codes) become
    visible ^X (or U+FFFD), and carriage returns are dropped."""
    return text.translate(_TERMINAL_SAFE)


def _is_terminal(stream: TextIO) -> bool:
    """True when stream is an open terminal."""
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False


def _word_wrap_for(stream: TextIO) -> WordWrap | None:
    """A word wrapper when stream is a terminal; None for pipes and files, which get the text as it is."""
    return WordWrap(terminal_width(stream)) if _is_terminal(stream) else None


class PrefillStatus:
    """A transient line on a terminal while a long prompt is read ("reading the prompt: 1,024/2,676 tokens").

    It appears only once a first chunk is done and more remain (short prompts show nothing), and is erased
    before the answer's first text. Pipes and files get nothing.
    """

    def __init__(self, stream: TextIO) -> None:
        # a terminal that cannot erase a line (TERM=dumb) gets nothing; NO_COLOR drops the dim style
        redraws = _is_terminal(stream) and os.environ.get("TERM") != "dumb"
        self._stream: TextIO | None = stream if redraws else None
        self._style = ("", "") if os.environ.get("NO_COLOR") else ("\x1b[2m", "\x1b[0m")
        self._width = terminal_width(stream)
        self._shown = False

    def update(self, progress: PrefillProgress) -> None:
        """Show how far prefill has come (or erase the line once it is done)."""
        if self._stream is None or progress.done >= progress.total:
            self.clear()
            return
        percent = 100 * progress.done // max(1, progress.total)
        counts = f"{progress.done:,}/{progress.total:,}"
        width = self._width() or 80
        # one row at most: a wrapped line could not be erased, so narrower terminals get shorter forms
        text = next((t for t in (f"reading the prompt: {counts} tokens ({percent}%)", f"reading: {counts} ({percent}%)",
                                 f"{percent}%") if len(t) < width), "")
        dim, plain = self._style
        self._write(f"\r\x1b[2K{dim}{text}{plain}")
        self._shown = True

    def clear(self) -> None:
        """Erase the line if it is shown."""
        if self._shown:
            self._write("\r\x1b[2K")
            self._shown = False

    def _write(self, text: str) -> None:
        """Write to the terminal; a status line that cannot be written is not worth an error."""
        assert self._stream is not None
        try:
            self._stream.write(text)
            self._stream.flush()
        except OSError:
            self._stream = None


def without_prefill_progress(events: Iterable[Event], stream: TextIO) -> Iterator[Event]:
    """The events less the prefill progress, which meanwhile shows as a PrefillStatus line on stream."""
    status = PrefillStatus(stream)
    try:
        for event in events:
            if isinstance(event, PrefillProgress):
                status.update(event)
            else:
                status.clear()
                yield event
    finally:
        status.clear()


def write_out(stream: TextIO, text: str) -> None:
    """Write model output and flush: a closed pipe stays a BrokenPipeError, any other failure a LocalgenError."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise stdout_error(exc) from exc


def stdout_error(exc: OSError) -> LocalgenError:
    """The error for output that cannot be written (a full disk, an I/O error)."""
    return LocalgenError(f"cannot write to stdout: {exc.strerror or exc}",
                         hint="free some space or send the output elsewhere")


def without_surrogates(text: str) -> str:
    """Text with U+FFFD for lone surrogates, Python's stand-ins for bytes that were not UTF-8 (in file names)."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(data: object, *, indent: int | None = None) -> str:
    """JSON for stdout: UTF-8 text as it is, and U+FFFD for a file name's undecodable bytes."""
    import json

    return without_surrogates(json.dumps(data, indent=indent, ensure_ascii=False))


def say(message: str) -> None:
    """A status line on stderr (best effort: a stderr that cannot be written must not fail the command)."""
    try:
        sys.stderr.write(without_surrogates(message) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # full, closed or missing stderr
        pass


def warn(message: str) -> None:
    """A warning on stderr, on one line."""
    say(one_line(f"localgen: warning: {message}"))


def one_line(text: str) -> str:
    """Text made safe for one terminal line: control characters (newlines, escapes) become spaces or '?', and
    bytes that were not UTF-8 (in file names and arguments) U+FFFD."""
    return "".join(" " if c in "\n\r\t" else _SAFE.get(unicodedata.category(c), c) for c in text)


_SAFE = {"Cc": "?", "Cs": "\ufffd"}  # control characters; lone surrogates, Python's stand-ins for undecodable bytes


def error(message: str, hint: str | None = None) -> None:
    """A one-line error with its hint on stderr."""
    say(one_line(f"localgen: error: {message}" + (f" (hint: {hint})" if hint else "")))


def format_stats(completion: Finished, *, context: tuple[int, int] | None = None) -> str:
    """A generation's figures (run --stats, chat /stats): one line, plus one for the prompt cache and drafts.

    context, when given, is (tokens in the KV cache, context size).
    """
    usage, t = completion.usage, completion.timings
    cached = f" ({usage.cached_tokens} cached)" if usage.cached_tokens else ""
    used = f", context {context[0]:,}/{context[1]:,}" if context else ""
    ttft = "-" if t.ttft_s is None else f"{t.ttft_s * 1000:.0f} ms"
    line = (f"prompt {usage.prompt_tokens} tok{cached}, TTFT {ttft}, "
            f"prefill {t.prefill_tokens_per_s:.1f} tok/s, generated {usage.completion_tokens} tok, "
            f"decode {t.decode_tokens_per_s:.1f} tok/s{used}, finish {completion.finish_reason}")
    extras = []
    if completion.restored_tokens:
        extras.append(f"prompt cache: {completion.restored_tokens} tokens restored from disk")
    if completion.draft is not None:
        d = completion.draft
        extras.append(f"draft lookup: {d.accepted}/{d.drafted} drafted tokens accepted ({d.acceptance:.0%}) "
                      f"in {counted(d.batches, 'batch', 'batches')}")
    return "\n".join([line, "; ".join(extras)] if extras else [line])


def finish_note(completion: Finished, *, chat: bool = False) -> str | None:
    """A note about why output stopped early, or None when it ended normally."""
    notes = FINISH_NOTES.get(completion.finish_reason)
    return notes[1 if chat else 0] if notes else None


def _block_boundary(text: str) -> int:
    """End of the last complete Markdown block (a blank line outside a code fence), or 0."""
    boundary = 0
    in_fence = False
    position = 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and not line.strip() and position < len(text):
            boundary = position
    return boundary


MAX_CONTEXT_CHARS = 4096  # a longer construct restarts its context: each block re-renders it
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

    def __init__(self, *, markdown: bool, show_thinking: bool, stream: TextIO | None = None) -> None:
        from rich.console import Console

        self._console = Console(file=stream or sys.stdout, highlight=False, soft_wrap=False)
        self._wrap = _word_wrap_for(self._console.file)  # plain answers on a terminal
        self._markdown = markdown
        self._show_thinking = show_thinking
        self._previous = ""  # the finished blocks of the last construct (the context that places the next one)
        self._pending = ""  # the unfinished block
        self._live = None
        self._thinking_open = False

    def thinking(self, text: str) -> None:
        """Reasoning text: dimmed, or hidden."""
        if not self._show_thinking or not text:
            return
        text = terminal_safe(text) if self._console.is_terminal else text
        self._thinking_open = True
        self._console.print(text, style="dim italic", end="", markup=False, highlight=False)
        self._console.file.flush()

    def answer(self, text: str) -> None:
        """Answer text: rendered as Markdown block by block, or printed as it comes."""
        if not text:
            return
        text = terminal_safe(text) if self._console.is_terminal else text
        if self._thinking_open:
            self._console.print()
            self._thinking_open = False
        if not self._markdown:
            self._console.file.write(self._wrap.feed(text) if self._wrap else text)
            self._console.file.flush()
            return
        self._pending += text
        cut = _block_boundary(self._pending)
        if cut:
            done, self._pending = self._pending[:cut], self._pending[cut:]
            self._stop_live()
            self._print_block(done)
        self._show_live()

    def _print_block(self, block: str) -> None:
        """Print a finished block once, permanently."""
        if not block.strip():
            return
        self._console.print(_Continued(self._previous, block))
        continues = _may_continue(block) and len(self._previous) < MAX_CONTEXT_CHARS
        self._previous = self._previous + block if continues else block

    def _show_live(self) -> None:
        """Redraw only the unfinished block, at most a few times a second."""
        from rich.live import Live

        if not self._pending.strip():
            return
        if self._live is None:
            self._live = Live(console=self._console, refresh_per_second=10, transient=True,
                              vertical_overflow="visible")
            self._live.start()
        self._live.update(_Tail(_Continued(self._previous, self._pending)))

    def _stop_live(self) -> None:
        """Remove the live region (its text is printed permanently next)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def close(self, note: str | None = None) -> None:
        """Finish the answer: print the last block, then an optional dim note."""
        self._stop_live()
        if self._markdown:
            self._print_block(self._pending)
        else:
            if self._wrap:
                self._console.file.write(self._wrap.flush())
            if not self._thinking_open:
                self._console.print()
        if self._thinking_open:
            self._console.print()
        self._previous, self._pending = "", ""
        self._thinking_open = False
        if note:
            self._console.print(f"[{note}]", style="dim", markup=False)


def _markdown(text: str) -> Any:
    """text as a rich Markdown renderable that shows every character of the answer."""
    return _markdown_class()(text)


_MARKDOWN_CLASS: Any = None


def _markdown_class() -> Any:
    """rich's Markdown, made faithful to the text (built once, on first use: rich.markdown is slow to import).

    - HTML is text: rich drops HTML tags and blocks, so `<td>` or `std::vector<int>` would vanish from an answer.
    - Links show their address after the text, instead of an escape sequence many terminals do not display.
    - Code blocks have no padding or background fill, so code copied from the terminal has no extra indent
      or trailing spaces.
    - Ordered lists keep the period after the number ("1." rather than rich's "1").
    """
    global _MARKDOWN_CLASS
    if _MARKDOWN_CLASS is not None:
        return _MARKDOWN_CLASS
    from markdown_it import MarkdownIt
    from rich.markdown import CodeBlock, ListItem, Markdown
    from rich.segment import Segment
    from rich.syntax import Syntax

    parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")

    class PlainCodeBlock(CodeBlock):
        """A highlighted code block without padding or a background."""

        def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
            yield Syntax(str(self.text).rstrip(), self.lexer_name, theme=self.theme, word_wrap=True, padding=0,
                         background_color="default")

    class NumberedItem(ListItem):
        """A list item whose number is followed by a period."""

        def render_number(self, console: Any, options: Any, number: int, last_number: int) -> Iterator[Any]:
            width = len(str(last_number)) + 3
            lines = console.render_lines(self.elements, options.update(width=options.max_width - width),
                                         style=self.style)
            style = console.get_style("markdown.item.number", default="none")
            for index, line in enumerate(lines):
                yield Segment(f"{number}.".rjust(width - 1) + " " if index == 0 else " " * width, style)
                yield from line
                yield Segment("\n")

    class FaithfulMarkdown(Markdown):
        """Markdown that shows HTML as text and links with their address."""

        elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "fence": PlainCodeBlock,
                                              "code_block": PlainCodeBlock, "list_item_open": NumberedItem}

        def __init__(self, markup: str) -> None:
            super().__init__("", code_theme="monokai", hyperlinks=False)
            self.markup = markup
            self.parsed = parser.parse(markup)

    _MARKDOWN_CLASS = FaithfulMarkdown
    return _MARKDOWN_CLASS


class _Continued:
    """A block of Markdown rendered after the one before it, less that one's own lines, so it is spaced right.

    Both are rendered at the width of the moment, so a resized terminal still gets the right lines.
    """

    def __init__(self, previous: str, block: str) -> None:
        self.previous, self.block = previous, block

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        skip = len(console.render_lines(_markdown(self.previous), options, pad=False)) if self.previous else 0
        for line in console.render_lines(_markdown(self.previous + self.block), options, pad=False)[skip:]:
            yield from line
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


SHORT_COLUMN = 12  # a column no wider than this (sizes, dates, quants) stays on one line while the table fits


def print_table(headers: list[str], rows: list[list[str]], *, title: str | None = None,
                squeeze: tuple[str, ...] = ()) -> None:
    """A table on stdout: rich on a terminal, tab-separated columns on a pipe; cells are one line of plain text
    (file headers are untrusted).

    A table wider than the terminal folds its squeeze columns that hold free text (descriptions, plans) at spaces
    while the others fit whole; when that is not enough, each row becomes a block of 'name: value' lines, so no
    path or name is ever broken across lines.
    """
    rows = [[one_line(cell) for cell in row] for row in rows]
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console(highlight=False)
        unbroken = _unbroken_columns(headers, rows, console.width, squeeze)
        if unbroken is None:
            _print_records(console, headers, rows, title=title)
        else:
            console.print(_rich_table(headers, rows, title=title, unbroken=unbroken))
        return
    for row in [headers, *rows]:
        sys.stdout.write("\t".join(row) + "\n")
    sys.stdout.flush()


def _rich_table(headers: list[str], rows: list[list[str]], *, title: str | None, unbroken: list[bool]) -> Any:
    """The rich Table for print_table: one line a row, but for the free-text columns that may fold."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for header, no_wrap in zip(headers, unbroken, strict=True):
        table.add_column(header, overflow="fold", no_wrap=no_wrap)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row), style="bold" if row and row[0].startswith("*") else None)
    return table


def _unbroken_columns(headers: list[str], rows: list[list[str]], width: int,
                      squeeze: tuple[str, ...]) -> list[bool] | None:
    """Which columns keep their cells on one line (all, or all but the free-text squeeze columns, which keep
    SHORT_COLUMN cells each); None when the table does not fit the width even so."""
    from rich.cells import cell_len

    columns = list(zip(headers, *rows, strict=True))
    widths = [max(cell_len(cell) for cell in column) for column in columns]
    folding = [h in squeeze and any(" " in cell for cell in column[1:]) for h, column in zip(headers, columns,
                                                                                              strict=True)]
    needed = sum(min(w, SHORT_COLUMN) if f else w for w, f in zip(widths, folding, strict=True))
    return [not f for f in folding] if needed + 2 * (len(widths) - 1) <= width else None


def _print_records(console: Any, headers: list[str], rows: list[list[str]], *, title: str | None) -> None:
    """Each row as its first cell, then its other cells as aligned 'name: value' lines: free text wraps between
    words, and a value without spaces (a path) is one line however long (the terminal wraps it; it copies whole)."""
    from rich.text import Text

    names = [f"{header.lower()}:" for header in headers[1:]]
    width = max(map(len, names), default=0)
    if title:
        console.print(Text(title), soft_wrap=True)
    for index, row in enumerate(rows):
        if index or title:
            console.print()
        console.print(Text(row[0], style="bold"), soft_wrap=True)
        for name, cell in zip(names, row[1:], strict=True):  # free text wraps at spaces; a path stays one line
            console.print(Text(f"  {name:<{width}} {cell}"), soft_wrap=" " not in cell)


def print_fields(fields: list[tuple[str, str]]) -> None:
    """Aligned 'name: value' lines on stdout, each value one line of plain text (file headers are untrusted)."""
    width = max((len(name) for name, _ in fields), default=0)
    for name, value in fields:
        sys.stdout.write(f"{name + ':':<{width + 1}} {one_line(value)}\n")
    sys.stdout.flush()


def confirm(question: str) -> bool:
    """Ask a yes/no question on the terminal (no means no)."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


