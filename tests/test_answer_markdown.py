"""Markdown in the chat shows what the model wrote: indented lines keep their indentation, and a closing fence with no
opening one is text, so that what follows it is not taken for code."""

from __future__ import annotations

import io
import re

import pytest

from tests.test_console import _rendered_at_once, _streamed, _streamed_raw

# An answer whose code lost its opening fence, as a small model wrote it.
UNOPENED = ("def add_numbers(a, b):\n    return a + b\n\n...\n```\n\n"
            "This function uses Python's built-in `sum` on *all* of them.\n")


@pytest.mark.parametrize("step", [1, 7, 500])
def test_code_whose_opening_fence_is_missing_keeps_its_indent_and_its_closing_fence_is_text(step: int) -> None:
    screen = _streamed(UNOPENED, step)
    assert screen[:5] == ["def add_numbers(a, b):", "    return a + b", "", "...", "```"], screen[:6]
    assert "This function uses Python's built-in sum on all of them." in screen, "what follows is not code"
    assert screen == _rendered_at_once(UNOPENED)


INDENTED = ("A paragraph line\n      indented by six\n\n- an item\n  its line\n    two more\n\n"
            "def f():\n    a = 1\n\n    return a\n\n\tx = 1\n\nDone.")


@pytest.mark.parametrize("step", [1, 50])
def test_indented_lines_keep_their_indentation(step: int) -> None:
    screen = _streamed(INDENTED, step)
    assert "      indented by six" in screen
    assert " • an item" in screen and "   its line" in screen and "     two more" in screen, "as under the item"
    assert screen[screen.index("    a = 1") + 1:][:2] == ["", "    return a"], "indented code is shown as written"
    assert "\n\tx = 1\n" in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", _streamed_raw(INDENTED, step)), "tabs stay tabs"
    assert screen == _rendered_at_once(INDENTED)


def test_an_opened_fence_is_code_while_it_streams_and_when_cut_off() -> None:
    screen = _streamed("Here:\n\n```\nprint(1)\n```\n\nDone.", 3)
    assert screen[:5] == ["Here:", "", "print(1)", "", "Done."], "a closed bare fence is code"
    assert "```python" not in _streamed("Here:\n\n```python\nprint(1)\n", 3), "cut off in a named fence: code"
    from rich.console import Console

    from localgen.answer_view import _Continued

    console = Console(width=60, force_terminal=False)
    with console.capture() as capture:
        console.print(_Continued("", "Here:\n\n```\nprint(1)\n"))  # the answer goes on: the fence is open
    assert "```" not in capture.get()


# An answer that ended (the model's end of answer) inside the code block it opened.
UNCLOSED = "Here is the script:\n\n```\n#!/bin/sh\n# back up the folder\ncp -r src dst  # *all* files\n__init__.py\n"


@pytest.mark.parametrize("step", [1, 9, 500])
def test_code_whose_closing_fence_never_came_stays_code_as_written(step: int) -> None:
    """The open fence was taken for a stray closing one: # made a heading, *all* lost its asterisks, __init__ its
    underscores."""
    screen = _streamed(UNCLOSED, step)
    assert screen[:7] == ["Here is the script:", "", "#!/bin/sh", "# back up the folder",
                          "cp -r src dst  # *all* files", "__init__.py", ""], screen[:7]
    assert screen == _rendered_at_once(UNCLOSED)


@pytest.mark.parametrize("step", [1, 4, 500])
@pytest.mark.parametrize(("answer", "shown"), [
    ("```\nline1\n~~~\n\nline2\n\nline3\n```\n\nAfter.",  # ~~~ closes no ```
     ["line1", "~~~", "", "line2", "", "line3", "", "After."]),
    ("```ls``` lists.\n\n```\nmkdir demo\n\ncd demo\n\nls\n```\n\nThat is *all*.",  # ```ls``` opens no fence
     ["ls lists.", "", "mkdir demo", "", "cd demo", "", "ls", "", "That is all."]),
    ("   ```\n\n      ```\n\nmore\n```\n\nAfter.", ["", "   ```", "", "more", "", "After."]),  # no closing fence
], ids=["tilde-in-backticks", "inline-code-first", "indented-six"])
def test_a_code_block_shows_every_line_where_a_line_in_it_looks_like_a_fence(
        answer: str, shown: list[str], step: int) -> None:
    """A line of ~~~ in ``` code, or ```ls``` opening a line, was taken for a fence, so a blank line in the code ended a
    block there, and the code's closing fence showed as text; the block after a fence indented six spaces (no closing
    fence) lost a blank line, its context rendered as the whole answer's, where it had been printed as unfinished."""
    screen = _streamed(answer, step)
    assert screen[:len(shown) + 1] == [*shown, ""], screen[:len(shown) + 1]
    assert screen == _rendered_at_once(answer)


class _Terminal(io.StringIO):
    """A terminal's stream, as AnswerView sees it."""

    def isatty(self) -> bool:
        return True


def test_reasoning_and_notes_show_colon_words_as_written_not_as_emoji() -> None:
    """Shown reasoning made x:o:x into x⭕x and 100:100: into 100💯 (rich's emoji codes)."""
    from localgen.answer_view import AnswerView

    terminal = _Terminal()
    view = AnswerView(markdown=True, show_thinking=True, stream=terminal)
    view.thinking("Row 1 is x:o:x, 100:100: :smile:")
    view.answer("Done :cat:.")
    view.close("stopped at :x:")
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())
    assert "Row 1 is x:o:x, 100:100: :smile:" in shown and "Done :cat:." in shown and "[stopped at :x:]" in shown, shown


def _long_list(lead: str, count: int, *, paragraphs: int = 3, nested: bool = False) -> str:
    """A list of count items (lead: "- ", or "N. " numbered), each a title and paragraphs under it (nested: under a
    sub-item of it)."""
    items = []
    for number in range(1, count + 1):
        marker = lead.replace("N", str(number))
        sub, indent = ("- sub\n\n", len(marker) + 2) if nested else ("", len(marker))
        under = "".join(" " * indent + f"Paragraph {k} of item {number} " + "lorem ipsum " * 20 + "\n\n"
                        for k in range(1, paragraphs + 1))
        items.append(f"{marker}Item {number} title\n\n{' ' * len(marker) + sub if sub else ''}{under}")
    return "".join(items) + "The end."


@pytest.mark.parametrize("answer", [
    _long_list("- ", 8), _long_list("N. ", 8), _long_list("- ", 1, paragraphs=30, nested=True),
], ids=["bullets", "numbers", "nested"])
def test_a_list_longer_than_the_context_keeps_its_paragraphs_under_their_items(answer: str) -> None:
    """Past 4,096 characters of list, the block after a paragraph was placed after that paragraph alone: the next
    paragraphs of the item showed flush left, outside it."""
    screen = _streamed(answer, 20)
    assert len(answer) > 6000 and screen == _rendered_at_once(answer)
    paragraphs = [line for line in screen if "Paragraph" in line]
    assert len(paragraphs) == answer.count("Paragraph") and all(line.startswith("  ") for line in paragraphs)
