"""Text shortened to a terminal's width, the cut marked with an ellipsis: a row's last column, a name's or a path's
middle."""

from __future__ import annotations

from collections.abc import Iterable

from localgen.wordwrap import display_width

ELLIPSIS = "…"


def shorten_end(text: str, width: int) -> str:
    """text in at most width columns: as it is when it fits, else its start and an ellipsis ('' below 1 column)."""
    if display_width(text) <= width:
        return text
    if width < 1:
        return ""
    return "".join(_fitting(text, width - 1)).rstrip() + ELLIPSIS


def shorten_middle(text: str, width: int) -> str:
    """text in at most width columns: as it is when it fits, else its start, an ellipsis and its end, the end given
    the larger half (names alike but for their ends stay told apart; '' below 1 column)."""
    if display_width(text) <= width:
        return text
    if width < 1:
        return ""
    end = _fitting(reversed(text), width // 2)
    return "".join(_fitting(text, width - 1 - sum(map(display_width, end)))) + ELLIPSIS + "".join(reversed(end))


def shorten_path(path: str, width: int) -> str:
    """A path in at most width columns: folders in its middle become an ellipsis, keeping its first and last
    folders and its file name as far as they fit (a file name that alone is too wide keeps its end)."""
    if display_width(path) <= width:
        return path
    parts = path.split("/")
    name = parts.pop()
    head: list[str] = [parts.pop(0)] if parts and parts[0] == "" else []  # an absolute path keeps its root
    tail = [name]
    if display_width("/".join([*head, ELLIPSIS, name])) > width:
        return _shorten_start(name, width)
    take_last = True  # the folder a file is in says most about it: the tail grows first, then each in turn
    while parts:
        for last in (take_last, not take_last):
            grown = (head, [parts[-1], *tail]) if last else ([*head, parts[0]], tail)
            if display_width("/".join([*grown[0], ELLIPSIS, *grown[1]])) <= width:
                head, tail = grown
                parts.pop(-1 if last else 0)
                take_last = not last
                break
        else:
            break
    return "/".join([*head, ELLIPSIS, *tail])


def _shorten_start(text: str, width: int) -> str:
    """text in at most width columns: an ellipsis and its end ('' below 1 column)."""
    if width < 1:
        return ""
    return ELLIPSIS + "".join(reversed(_fitting(reversed(text), width - 1)))


def _fitting(chars: Iterable[str], room: int) -> list[str]:
    """The leading chars that fit in room columns."""
    kept, used = [], 0
    for char in chars:
        used += display_width(char)
        if used > room:
            break
        kept.append(char)
    return kept
