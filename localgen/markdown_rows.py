"""Rendered Markdown lines kept whole for the terminal to break: each line cut into rows as a terminal wraps it, the
rows it goes on in marked to be joined when printed, so it copies as one line (chat --no-wrap, /wrap off, and code)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

_SOFT_KEY = "localgen.soft_wrap"
_SOFT_WRAP: Any = None  # the style marking a row that goes on in the next one (made at first use: rich is slow to load)


def soft_wrap() -> Any:
    """The style of the empty segment that ends a row the next row goes on from."""
    global _SOFT_WRAP
    if _SOFT_WRAP is None:
        from rich.style import Style

        _SOFT_WRAP = Style(meta={_SOFT_KEY: True})
    return _SOFT_WRAP


def is_mark(segment: Any) -> bool:
    """Whether a segment is the empty one marking the end of a row that the next row goes on from."""
    return not segment.text and segment.style is not None and bool(segment.style.meta.get(_SOFT_KEY))


def goes_on(row: Iterable[Any]) -> bool:
    """Whether a rendered row is continued by the next one (its line was cut there)."""
    return any(is_mark(segment) for segment in row)


def whole_lines(rows: Iterable[list[Any]]) -> Iterator[list[Any]]:
    """Rendered rows joined back into the lines they were cut from, without their marks."""
    line: list[Any] = []
    for row in rows:
        line.extend(segment for segment in row if segment.text or not is_mark(segment))
        if not goes_on(row):
            yield line
            line = []
    if line:
        yield line


def cut_rows(line: list[Any], width: int) -> Iterator[Any]:
    """A rendered line's segments in rows of width cells, as a terminal wraps it, each row the next goes on from
    marked, every row ended by a newline."""
    from rich.segment import Segment

    rows: list[list[Any]] = [[]]
    used = 0
    for segment in line:
        if segment.control:
            rows[-1].append(segment)
            continue
        breaks, used = row_breaks(segment.text, width, used)
        for number, (start, end) in enumerate(zip([0, *breaks], [*breaks, len(segment.text)], strict=True)):
            if number:
                rows.append([])
            if end > start:
                rows[-1].append(Segment(segment.text[start:end], segment.style))
    for index, row in enumerate(rows):
        yield from row
        if index < len(rows) - 1:
            yield Segment("", soft_wrap())
        yield Segment.line()


def row_breaks(text: str, width: int, used: int = 0) -> tuple[list[int], int]:
    """Where text breaks into rows of width cells as a terminal wraps it, starting used cells into a row (a wide
    character that would cross the edge opens the next row): the offsets, and the cells used of the last row."""
    from rich.cells import cell_len

    breaks = []
    for index, char in enumerate(text):
        cells = cell_len(char)
        if used + cells > width and used:
            breaks.append(index)
            used = 0
        used += cells
    return breaks, used


def under_prefix(console: Any, options: Any, renderables: Any, *, first: Any, rest: Any, style: Any = None
                 ) -> Iterator[Any]:
    """renderables after a prefix (a list item's bullet, a quote's bar: first on the first line, rest on the others),
    each of their lines whole: the prefix and the line cut into rows of the width given, none indented after the
    first, as a terminal wraps a long line."""
    inner = options.update(width=max(1, options.max_width - first.cell_length))
    lines = console.render_lines(renderables, inner, style=style, pad=False)
    for index, line in enumerate(whole_lines(lines)):
        yield from cut_rows([first if index == 0 else rest, *line], options.max_width)


def folded(line: Any, width: int) -> list[Any]:
    """A rich Text line cut every width cells as a terminal wraps it (a wide character is never split; a tab is
    expanded to its 8-column stop when the line is cut)."""
    from rich.cells import cell_len

    if cell_len(line.plain.expandtabs(8)) <= width:
        return [line]
    line = line.copy()
    line.expand_tabs(8)
    return list(line.divide(row_breaks(line.plain, width)[0]))


def without_padding(line: list[Any]) -> list[Any]:
    """A rendered line less the plain spaces that pad it (rich pads list items and quotes to the width), so that a
    copied line has no trailing spaces; spaces with a background colour stay."""
    from rich.segment import Segment

    line = list(line)
    while line:
        last = line[-1]
        if last.control or (last.style is not None and last.style.bgcolor is not None):
            break
        text = last.text.rstrip(" ")
        if text:
            line[-1] = Segment(text, last.style, last.control)
            break
        line.pop()
    return line
