"""Terminal output: model text on stdout (raw bytes on a pipe), everything else on stderr."""

from __future__ import annotations

import os
import re
import stat
import sys
from typing import Any, TextIO

from localgen.control_chars import TerminalSafePieces, json_escaped, shown_on_one_line, terminal_safe
from localgen.dim_style import shows_dim
from localgen.events import Finished
from localgen.line_ends import write_status_line
from localgen.output_writes import write_out, write_record
from localgen.units import counted, milliseconds, token_rate
from localgen.wordwrap import WordWrap, terminal_width

FINISH_NOTES = {
    "length": ("stopped at the limit of {tokens} ({limit_source})",) * 2,
    "context": ("stopped at the end of the context window ({context_help})",) * 2,
    "interrupted": ("interrupted", "interrupted"),
}  # (for run, for chat)


class TextOutput:
    """Streams model text to stdout, flushed per piece, ending with exactly one newline; word-wrapped on a
    terminal (unless wrap is False), byte for byte on a pipe or a file."""

    def __init__(self, stream: TextIO | None = None, *, wrap: bool = True) -> None:
        self._stream = stream or sys.stdout
        self._terminal = is_terminal(self._stream)
        self._wrap = word_wrap_for(self._stream) if wrap else None
        self._pending_newlines = ""
        self._wrote_any = False
        self._safe = TerminalSafePieces()

    def write(self, text: str) -> None:
        """Write a piece of text, holding back trailing newlines until more text comes."""
        if self._terminal:
            text = self._safe.feed(text)
        body = text.rstrip("\n")
        if not body:
            self._pending_newlines += text
            return
        piece = self._pending_newlines + body
        self._write(self._wrap.feed(piece) if self._wrap else piece)
        self._pending_newlines = text[len(body):]
        self._wrote_any = True

    @property
    def ends_a_terminal_line(self) -> bool:
        """Whether finish() ends a line on a terminal: text was shown there (a ^C echoed after it is followed by
        the newline)."""
        return self._terminal and self._wrote_any

    @property
    def ends_a_line(self) -> bool:
        """Whether finish() writes a newline: text was written (a pipe's reader may show it on a terminal)."""
        return self._wrote_any

    def finish(self) -> None:
        """End the output with one newline (none when nothing was written)."""
        if self._terminal and (held := self._safe.flush()):
            self.write(held)
        if self._wrote_any:
            self._write((self._wrap.flush() if self._wrap else "") + "\n")
        self._pending_newlines = ""

    def _write(self, text: str) -> None:
        """Write and flush this piece."""
        write_out(self._stream, text)


def is_terminal(stream: TextIO) -> bool:
    """True when stream is an open terminal."""
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False


def pipe_or_socket(mode: int) -> bool:
    """Whether a file of this mode (st_mode) is a pipe or a socket, whose other end (a writer, a reader) can keep it
    waiting, or go."""
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def takes_escapes(stream: TextIO) -> bool:
    """True when stream is a terminal that obeys escape sequences (TERM=dumb ones, like Emacs' shell, show them)."""
    return is_terminal(stream) and os.environ.get("TERM") != "dumb"


def writes_dim(stream: TextIO) -> bool:
    """True when stream takes the dim style: a terminal that obeys escape sequences, and NO_COLOR unset (or empty)."""
    return takes_escapes(stream) and shows_dim()


def shows_escapes_as_text(stream: TextIO) -> bool:
    """True when stream is a terminal that shows escape sequences as text (TERM=dumb: Emacs' shell)."""
    return is_terminal(stream) and os.environ.get("TERM") == "dumb"


def word_wrap_for(stream: TextIO) -> WordWrap | None:
    """A word wrapper when stream is a terminal; None for pipes and files, which get the text as it is."""
    return WordWrap(terminal_width(stream)) if is_terminal(stream) else None


def without_surrogates(text: str) -> str:
    """Text with U+FFFD for lone surrogates, Python's stand-ins for bytes that were not UTF-8 (in file names)."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(data: object, *, indent: int | None = None) -> str:
    """JSON for stdout: UTF-8 text as it is, but DEL, C1 and bidi controls escaped (\\u009b), as json escapes ESC, and a
    file name's byte that is not UTF-8 as surrogateescape's \\udcXX."""
    import json  # its lone surrogates, only ever inside strings: os.fsencode of json.loads's gives the bytes back

    return json_escaped(json.dumps(data, indent=indent, ensure_ascii=False))


def print_json(data: object, *, indent: int | None = None) -> None:
    """Print data as one JSON document on stdout (json_text), whole or, where a file fills up, not at all
    (write_record)."""
    write_record(sys.stdout, json_text(data, indent=indent) + "\n")


def status_width() -> int:
    """Columns of the terminal that status lines go to (stderr); 0 when it is not a terminal."""
    return terminal_width(sys.stderr)()


def say(message: str, *, made_safe: bool = False, wrapped: bool = True) -> None:
    """A status line on stderr, its lines broken between words on a terminal, never inside a command it names, and
    the control characters of what it quotes (a model file's text, a system prompt) shown there, not obeyed
    (made_safe: the caller showed them, and its escapes are its own style; wrapped False: no line broken, the
    terminal folding at its edge what does not fit, as a path to be copied after its label; best effort: a stderr
    that cannot be written must not fail the command)."""
    try:
        text = without_surrogates(message)
        text = terminal_safe(text) if is_terminal(sys.stderr) and not made_safe else text  # a pipe gets it as it is
        wrap = WordWrap(terminal_width(sys.stderr) if wrapped else lambda: 0, wide_breaks=False, keep_whole=True)
        write_status_line(wrap.feed(text) + wrap.flush() + "\n")  # kept whole: a path, a command
    except (OSError, ValueError, AttributeError):  # closed or missing stderr, or a full disk
        pass


def warn(message: str) -> None:
    """A warning on stderr, on one line."""
    say(one_line(f"localgen: warning: {message}"))


def warn_each(warnings: list[str]) -> None:
    """Say each warning gathered so far, and empty the list (each is said once)."""
    for message in warnings:
        warn(message)
    warnings.clear()


one_line = shown_on_one_line  # warnings, errors, table cells and fields: each on one line, its controls shown


def error(message: str, hint: str | None = None) -> None:
    """A one-line error with its hint on stderr."""
    say(one_line(f"localgen: error: {message}" + (f" (hint: {hint})" if hint else "")))


def format_stats(completion: Finished, *, context: tuple[int, int] | None = None) -> str:
    """A generation's figures (run --stats, chat /stats): one line, plus one for the prompt cache and drafts.

    context, when given, is (tokens in the KV cache, context size).
    """
    usage, t = completion.usage, completion.timings
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    used = f", context {context[0]:,}/{context[1]:,}" if context else ""
    ttft = "-" if t.ttft_s is None else milliseconds(t.ttft_s)
    prefill = token_rate(t.prefill_tokens_per_s) if t.prefill_tokens_per_s else "-"  # all of it cached
    decode = token_rate(t.decode_tokens_per_s) if t.decode_tokens_per_s else "-"  # the first token is prefill's
    line = (f"prompt {usage.prompt_tokens:,} tok{cached}, TTFT {ttft}, "
            f"prefill {prefill}, generated {usage.completion_tokens:,} tok, "
            f"decode {decode}{used}, finish {completion.finish_reason}"
            + (f", seed {completion.seed}" if completion.seed is not None else ""))
    extras = []
    if completion.ahead_tokens:
        extras.append(f"{completion.ahead_tokens:,} prompt tokens computed while you typed")
    if completion.restored_tokens:
        extras.append(f"prompt cache: {completion.restored_tokens:,} tokens restored from disk")
    if completion.decode_threads < completion.threads and usage.completion_tokens > 1:  # none decoded: nothing to say
        extras.append(f"decoded with {completion.decode_threads} of {completion.threads} threads: other processes "
                      "kept the CPUs busy")
    if completion.draft is not None:
        d = completion.draft
        rate = "" if d.acceptance is None else f" ({d.acceptance:.0%})"
        extras.append(f"draft lookup: {d.accepted:,}/{d.drafted:,} drafted tokens accepted{rate} "
                      f"in {counted(d.batches, 'batch', 'batches')}")
    return "\n".join([line, "; ".join(extras)] if extras else [line])


def finish_note(completion: Finished, *, context_help: str, chat: bool = False,
                limit_source: str = "-n/--max-tokens") -> str | None:
    """A note about why output stopped early, or None when it ended normally (limit_source: where the token limit
    came from; context_help: how a larger context is had, as run's or the chat's context_end_help says it)."""
    notes = FINISH_NOTES.get(completion.finish_reason)
    tokens = counted(completion.usage.completion_tokens, "token")  # where the limit came from, it is the count
    return notes[1 if chat else 0].format(tokens=tokens, limit_source=limit_source,
                                          context_help=context_help) if notes else None


SHORT_COLUMN = 12  # a column no wider than this (sizes, dates, quants) stays on one line while the table fits
MIN_WRAP_WIDTH = 20  # free text in a block wraps at the terminal's edge, but never narrower than this
PATH_COLUMNS = ("PATH",)  # a file's path, spaces in it or not: never wrapped in a block, so that it copies whole


def print_table(headers: list[str], rows: list[list[str]], *, title: str | None = None,
                squeeze: tuple[str, ...] = (), marked: int | None = None, heading: int = 0) -> None:
    """A table on stdout: rich on a terminal, its cells one line of plain text (file headers are untrusted);
    tab-separated columns on a pipe, each cell escaped as tab_separated.py does.

    A table wider than the terminal folds its squeeze columns that hold free text (descriptions, plans) at spaces
    while the others fit whole; when that is not enough, each row becomes a block of 'name: value' lines under its
    heading column's cell (the first, or the one that names the row), so no path or name is ever broken across lines.
    The row at index marked is starred and bold on a terminal; a pipe gets the cells alone.
    """
    if sys.stdout.isatty():
        rows = [[terminal_safe(one_line(cell)) for cell in row] for row in rows]
        if marked is not None:
            rows = [[("*" if index == marked else " ") + row[0], *row[1:]] for index, row in enumerate(rows)]
        from rich.console import Console

        console = Console(highlight=False)
        unbroken = _unbroken_columns(headers, rows, console.width, squeeze)
        if unbroken is None:
            _print_records(console, headers, rows, title=title, heading=heading)
        else:
            console.print(_rich_table(headers, rows, title=title, unbroken=unbroken))
        return
    from localgen.tab_separated import write_rows

    write_rows(sys.stdout, [headers, *rows])


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


def _print_records(console: Any, headers: list[str], rows: list[list[str]], *, title: str | None,
                   heading: int = 0) -> None:
    """Each row as its heading cell, then its other cells as aligned 'name: value' lines: free text wraps between
    words, and a path or a value without spaces is one line however long (the terminal wraps it; it copies whole)."""
    from rich.text import Text

    fields = [index for index in range(len(headers)) if index != heading]
    names = [f"{headers[index].lower()}:" for index in fields]
    whole = [headers[index] in PATH_COLUMNS for index in fields]
    width = max(map(len, names), default=0)
    if title:
        console.print(Text(title), soft_wrap=True)
    for index, row in enumerate(rows):
        if index or title:
            console.print()
        console.print(Text(row[heading], style="bold"), soft_wrap=True)
        for name, cell, path in zip(names, [row[field] for field in fields], whole, strict=True):  # one line a path
            lead = f"  {name:<{width}} "
            if " " not in cell or path:
                console.print(Text(lead + cell), soft_wrap=True)
                continue
            lines = Text(cell).wrap(console, max(console.width - len(lead), MIN_WRAP_WIDTH))
            for number, line in enumerate(lines):  # wrapped lines line up under the value's start
                console.print(Text((lead if number == 0 else " " * len(lead)) + line.plain.rstrip()), soft_wrap=True)


def print_fields(fields: list[tuple[str, str]]) -> None:
    """Aligned 'name: value' lines on stdout, each value one line of plain text (file headers are untrusted)."""
    width = max((len(name) for name, _ in fields), default=0)
    shown = terminal_safe if is_terminal(sys.stdout) else str  # bidi controls too, which one_line keeps for a pipe
    for name, value in fields:
        sys.stdout.write(f"{name + ':':<{width + 1}} {shown(one_line(value))}\n")
    sys.stdout.flush()


def print_lines(text: str) -> None:
    """localgen's own lines on stdout that quote names it was given (a model file's path): their control characters
    shown on a terminal, not obeyed; a pipe gets them as they are."""
    print(terminal_safe(text) if is_terminal(sys.stdout) else text, flush=True)


def confirm(question: str) -> bool:
    """Ask a yes/no question on the terminal (no means no), the control characters of what it names (a name copied in
    with an escape in it) shown there, not obeyed."""
    line = ""
    try:  # a Ctrl-C typed as soon as the question shows may land before the read starts
        sys.stderr.write(f"{terminal_safe(question) if is_terminal(sys.stderr) else question} [y/N] ")
        sys.stderr.flush()
        line = sys.stdin.readline()
    finally:
        if not line.endswith("\n"):  # Ctrl-D or Ctrl-C: what comes next starts on a line of its own
            sys.stderr.write("\n")
            sys.stderr.flush()
    return line.strip().lower() in ("y", "yes")


