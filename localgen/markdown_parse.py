"""An answer's Markdown parsed so that showing it loses nothing the model wrote: each line keeps its indentation,
and a bare fence that no fence closes, at the end of an answer, is text (the closing fence of code whose opening fence
the model left out) unless a line of code follows it at once (code whose closing fence never came); and where a
streamed answer's finished blocks end, never inside a code fence, and which list items hold the next one."""

from __future__ import annotations

import re
from typing import Any

_NEWLINES = re.compile(r"\r\n?")  # markdown-it reads each as one newline
_FENCE = re.compile(r"( *)(`{3,}|~{3,})(.*)")  # a line that may open a code fence: indentation, fence, info string
_ITEM = re.compile(r" {0,40}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")  # a line that opens a list item
_INDENT = "    "  # the indentation that makes an indented code block, which markdown-it takes off its lines


def markdown_parser() -> Any:
    """A markdown-it parser (CommonMark, tables, strikethrough, no HTML) whose line breaks keep the next line's
    indentation, where CommonMark drops it from a paragraph's lines."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
    parser.inline.ruler.at("newline", _newline_keeping_indentation)
    parser.inline.ruler.at("escape", _escape_keeping_indentation)
    return parser


def _newline_keeping_indentation(state: Any, silent: bool) -> bool:
    """markdown-it's line break, without its skipping of the spaces that start the next line."""
    from markdown_it.rules_inline.newline import newline

    start = state.pos
    if not newline(state, silent):
        return False
    state.pos = start + 1  # the spaces are the next text's
    return True


def _escape_keeping_indentation(state: Any, silent: bool) -> bool:
    """markdown-it's backslash escape, whose line break (a backslash ending a line) keeps the next line's
    indentation, as a newline's does."""
    from markdown_it.rules_inline.escape import escape

    start = state.pos
    if not escape(state, silent):
        return False
    if state.src[start + 1] == "\n":
        state.pos = start + 2  # the spaces are the next text's
    return True


def block_boundary(text: str) -> int:
    """End of the last complete Markdown block in text (a blank line outside a code fence), or 0."""
    boundary, fence, position = 0, None, 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        opening = _FENCE.match(line)
        if fence:
            fence = None if _closes_fence(line, fence.group(2), len(fence.group(1))) else fence
        elif opening and not (opening.group(2)[0] == "`" and "`" in opening.group(3)):  # ```ls``` is inline code
            fence = opening
        elif not line.strip() and position < len(text):
            boundary = position
    return boundary


def _closes_fence(line: str, fence: str, indent: int = 0) -> bool:
    """True for a line that closes the code fence opened by fence (its ``` or ~~~) indented indent spaces:
    CommonMark's rule, the same character at least as many times, nothing after it but spaces, and indented less
    than a code block would be (4 more spaces than the opening fence, in whatever holds it)."""
    closing = line.strip()
    return (bool(closing) and set(closing) == {fence[0]} and len(closing) >= len(fence)
            and len(line) - len(line.lstrip(" ")) < indent + len(_INDENT))


def items_holding(text: str, block: str) -> str:
    """The opening lines of the list items in text that hold block, the one that follows text (each line then a blank
    one): enough of text to place block where a list item goes on, without the rest of it."""
    below, openers = _indentation(block.lstrip("\n")), []
    for line in reversed(text.split("\n")):
        if not below:
            break  # at the top level: no item holds it
        if not line.strip() or _indentation(line) >= below:
            continue
        if not _ITEM.match(line):
            break  # text at this indentation ended any list item above it
        openers.insert(0, line + "\n\n")
        below = _indentation(line)
    return "".join(openers)


def _indentation(text: str) -> int:
    """The columns of blank space that start text's first line (a tab to the next multiple of 4)."""
    line = text.split("\n", 1)[0].expandtabs(4)
    return len(line) - len(line.lstrip(" "))


def parsed_as_written(parser: Any, text: str, *, ended: bool) -> list[Any]:
    """text's tokens, indented code keeping its indentation; ended (the whole answer): a bare fence never closed at
    the top level, with nothing on the line right after it, is parsed as text (it closed code never opened)."""
    text = _NEWLINES.sub("\n", text)
    tokens = parser.parse(text)
    lines = text.split("\n")
    stray = next((token for token in tokens if _unclosed_bare_fence(token, lines)), None) if ended else None
    if stray is not None:
        lines[stray.map[0]] = re.sub(r"([`~])", r"\\\1", lines[stray.map[0]])  # each fence character escaped
        tokens = parser.parse("\n".join(lines))
    for token in tokens:
        if token.type == "code_block":
            token.content = _as_indented(token, lines)
    return tokens


def _unclosed_bare_fence(token: Any, lines: list[str]) -> bool:
    """True for a top-level fence with no info string that runs to the end of the text, no fence closing it, nothing
    on the line right after it (something there is code whose closing fence never came)."""
    if token.type != "fence" or token.level != 0 or token.info.strip() or _opens_code(token, lines):
        return False
    last = token.map[1] - 1
    return not (last > token.map[0] and _closes_fence(lines[last], token.markup))


def _opens_code(token: Any, lines: list[str]) -> bool:
    """True for a fence whose next line holds something, as code that follows its opening fence does."""
    following = lines[token.map[0] + 1:token.map[0] + 2]
    return bool(following) and bool(following[0].strip())


def _as_indented(token: Any, lines: list[str]) -> str:
    """An indented code block's text with its indentation: its lines as written at the top level; else each line
    given back the indentation markdown-it took off."""
    if token.level == 0:
        return "\n".join(lines[token.map[0]:token.map[1]]) + "\n"
    return "".join(_INDENT + line if line.strip() else line for line in token.content.splitlines(keepends=True))
