"""stdout text output (raw text, flushed per piece, ending with exactly one newline), the terminal answer view
and tables."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import time

import pytest

from localgen import config
from localgen.console import TextOutput


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["Hello", " world"], "Hello world\n"),
        (["Hello\n\n", "\n"], "Hello\n"),
        (["a\n", "b\n\n"], "a\nb\n"),
        (["\n", "x"], "\nx\n"),
        ([], ""),
        (["\n\n"], ""),
    ],
)
def test_output_ends_with_one_newline(pieces: list[str], expected: str) -> None:
    stream = io.StringIO()
    out = TextOutput(stream)
    for piece in pieces:
        out.write(piece)
    out.finish()
    assert stream.getvalue() == expected


def _terminal_lines(raw: str, width: int, height: int) -> list[str]:
    """Scrollback plus screen of a VT100 terminal that received raw (the tty turns \\n into \\r\\n)."""
    import pyte

    screen = pyte.HistoryScreen(width, height, history=10_000)
    pyte.Stream(screen).feed(raw.replace("\n", "\r\n"))
    history = ["".join(char.data for char in line.values()) for line in screen.history.top]
    return [line.rstrip() for line in history + screen.display]


@pytest.mark.parametrize("interrupted", [False, True], ids=["finished", "interrupted"])
def test_a_markdown_block_taller_than_the_terminal_is_shown_once(interrupted: bool) -> None:
    from rich.console import Console

    from localgen.answer_view import AnswerView

    width, height = 60, 10
    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, stream=stream)
    view._console = Console(file=stream, force_terminal=True, width=width, height=height, highlight=False)
    code = "".join(f"print('line {i:02d}')\n" for i in range(3 * height))
    text = f"Here is the code:\n\n```python\n{code}```\n\nDone.\n"
    if interrupted:
        text = text[:text.index("line 25")]
    for start in range(0, len(text), 7):
        view.answer(text[start:start + 7])
        if view._live is not None:
            view._live.refresh()  # draw every frame, as a slow terminal would see them
    view.close("interrupted" if interrupted else None)
    lines = [line.strip() for line in _terminal_lines(stream.getvalue(), width, height) if "line " in line]
    shown = 25 if interrupted else 3 * height
    assert lines == [f"print('line {i:02d}')" for i in range(shown)]


def test_the_unfinished_block_is_drawn_again_only_when_text_came() -> None:
    """A long paragraph redrawn ten times a second whether or not it grew floods a slow link (and a terminal
    that is not read fills up); it is drawn when text comes, at most every REDRAW_INTERVAL_S."""
    from rich.console import Console

    from localgen.answer_view import REDRAW_INTERVAL_S, AnswerView

    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, stream=stream)
    view._console = Console(file=stream, force_terminal=True, width=60, height=40, highlight=False)
    view.answer("A paragraph that goes on " * 20)
    drawn = len(stream.getvalue())
    assert "A paragraph" in stream.getvalue(), "the first text is drawn at once"
    time.sleep(4 * REDRAW_INTERVAL_S)
    assert len(stream.getvalue()) == drawn, "nothing new came, nothing was drawn"
    view.answer("and on")
    assert len(stream.getvalue()) > drawn, "new text after the interval is drawn at once"
    view.close()
    shown = [line.rstrip() for line in _terminal_lines(stream.getvalue(), 60, 40) if line.strip()]
    assert shown[-1].endswith("and on"), "the whole paragraph stays once the answer ends"


DOCUMENT = ("# Rome\n\nRome was founded.\n\nIt grew into an empire.\n\n- roads\n- law\n\n"
            "1. first\n\n2. second\n\n> a quote\n\n```python\nprint('hi')\n```\n\nThe end.")


def _streamed_raw(document: str, step: int) -> str:
    """What a 60x40 terminal receives when document streams through an AnswerView in pieces of step characters."""
    from rich.console import Console

    from localgen.answer_view import AnswerView

    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, stream=stream)
    view._console = Console(file=stream, force_terminal=True, width=60, height=40, highlight=False)
    for start in range(0, len(document), step):
        view.answer(document[start:start + step])
    view.close()
    return stream.getvalue()


def _streamed(document: str, step: int) -> list[str]:
    """The terminal lines of document streamed through an AnswerView in pieces of step characters."""
    return _terminal_lines(_streamed_raw(document, step), 60, 40)


def _rendered_at_once(document: str) -> list[str]:
    """The terminal lines of document rendered by rich in one go."""
    from rich.console import Console

    from localgen.answer_view import _markdown

    once = io.StringIO()
    Console(file=once, force_terminal=True, width=60, height=40, highlight=False).print(_markdown(document))
    return _terminal_lines(once.getvalue(), 60, 40)


@pytest.mark.parametrize("step", [1, 5, 50])
def test_streamed_markdown_ends_up_as_the_whole_answer_rendered_at_once(step: int) -> None:
    streamed = _streamed(DOCUMENT, step)
    assert "It grew into an empire." in streamed and streamed[streamed.index("It grew into an empire.") - 1] == ""
    assert streamed == _rendered_at_once(DOCUMENT)


@pytest.mark.parametrize("step", [1, 50])
def test_an_answer_that_opens_with_a_list_starts_on_its_first_line(step: int) -> None:
    for document in ("1. Banana\n2. Apple\n\nBoth are fruit.", "- red\n- green"):
        streamed = _streamed(document, step)
        assert streamed[0].strip() in ("1. Banana", "• red"), streamed[:3]  # no blank line before it
        assert streamed == _rendered_at_once(document)
    assert _streamed("Two:\n\n- red\n- green", step)[:3] == ["Two:", "", " • red"], "a list after text is spaced"
    assert _streamed("```\n\nfoo\n```", step)[:2] == ["", "foo"], "a code block's own blank first line stays"


FAITHFUL = ("Wrap the rows in a <table> element and each cell in <td>.\n\nDeclare std::vector<int> v; first.\n\n"
            '<div class="card">\n  <p>Hello</p>\n</div>\n\nSee [the docs](https://example.com/docs).\n\n'
            "1. first\n2. second\n\n```python\ndef f(x):\n    return x * 2\n```\n")


@pytest.mark.parametrize("step", [3, 50])
def test_markdown_shows_html_as_text_links_with_their_address_and_code_as_it_is(step: int) -> None:
    screen = _streamed(FAITHFUL, step)
    text = "\n".join(screen)
    assert "Wrap the rows in a <table> element and each cell in <td>." in text, "HTML tags are text, not dropped"
    assert "std::vector<int> v;" in text and '<div class="card">' in text and "<p>Hello</p>" in text
    assert "See the docs (https://example.com/docs)." in text, "a link's address shows"
    assert " 1. first" in screen and " 2. second" in screen
    assert "def f(x):" in screen and "    return x * 2" in screen, "code has no padding indent or trailing fill"


LONG_COMMAND = "export PATH=/opt/tools/bin:$PATH && make -j4 install PREFIX=/usr/local DESTDIR=/tmp/stage V=1"
HASH = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
COPIED = (f"Run:\n\n```sh\n{LONG_COMMAND}\n```\n\n1. a list item\n\n> a quote\n\n"
          "A makefile:\n\n```make\nall:\n\tgcc -o x x.c\n```\n\n"
          f"| id | sha256 |\n|---|---|\n| 1 | {HASH} |\n\nDone.\n")


@pytest.mark.parametrize("step", [4, 500])
def test_code_copies_as_written_and_table_cells_lose_no_characters(step: int) -> None:
    raw = _streamed_raw(COPIED, step)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert f"\n{LONG_COMMAND}\n" in plain, "a long code line is never broken by a newline: the terminal wraps it"
    assert "\n\tgcc -o x x.c\n" in plain, "tabs stay tabs"
    assert not re.search(r" +\n", plain), "no line is padded with spaces (a copied line has none at its end)"
    screen = _terminal_lines(raw, 60, 40)
    assert LONG_COMMAND[:60] in screen and LONG_COMMAND[60:] in screen, "wrapped by the terminal at its width"
    assert "\x1b[38;5;231" not in raw, "code keeps the terminal's palette"
    assert HASH in re.sub(r"\s", "", "".join(screen)), "a long cell folds over its rows instead of ending in …"
    assert "…" not in "".join(screen)


LIST_ITEMS_GOING_ON = ("Steps:\n\n1. Install it.\n\n   Then check the version.\n\n   And restart.\n\n"
                       "2. Run it.\n\n- a\n  - nested\n\n    nested more\n\n  back to a\n\n- b\n\nThe end.")


@pytest.mark.parametrize("step", [1, 5, 50])
def test_a_list_item_that_goes_on_after_a_blank_line_gains_no_blank_line(step: int) -> None:
    streamed = _streamed(LIST_ITEMS_GOING_ON, step)
    assert "    And restart." in streamed and "   back to a" in streamed
    assert streamed == _rendered_at_once(LIST_ITEMS_GOING_ON)


def test_a_narrower_terminal_does_not_reprint_the_block_before() -> None:
    from rich.console import Console

    from localgen.answer_view import AnswerView

    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, stream=stream)
    view._console = Console(file=stream, force_terminal=True, width=80, height=20, highlight=False)
    view.answer("word " * 40 + "end of the first block.\n\nThe second")
    printed = len(stream.getvalue())
    view._console.size = (40, 20)  # the terminal was made narrower
    view.answer(" block goes on.\n\nThird.")
    view.close()
    assert "end of the first block" not in stream.getvalue()[printed:]


HOSTILE = "ok \x1b]0;title\x07 \x1b[2J cleared\r\n\u009b31m done\tend"


def test_model_text_on_a_terminal_cannot_drive_the_terminal() -> None:
    from rich.console import Console

    from localgen.answer_view import AnswerView

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    run = Terminal()
    out = TextOutput(run)
    out.write(HOSTILE)
    out.finish()
    for markdown in (True, False):
        chat = io.StringIO()
        view = AnswerView(markdown=markdown, show_thinking=True, stream=chat)
        view._console = Console(file=chat, force_terminal=True, width=80, height=20, highlight=False)
        view.thinking(HOSTILE)
        view.answer(HOSTILE)
        view.close()
        shown = chat.getvalue().replace("\x1b[", "")  # rich's own styling (CSI) is fine; the model's is not
        assert "\x1b" not in shown and "\x07" not in shown and "\u009b" not in shown
        assert "^[]0;title^G" in shown and "^[[2J cleared" in shown
    assert run.getvalue() == "ok ^[]0;title^G ^[[2J cleared\n\ufffd31m done\tend\n"
    piped = io.StringIO()
    out = TextOutput(piped)
    out.write(HOSTILE)
    out.finish()
    assert piped.getvalue() == HOSTILE + "\n", "a pipe gets the bytes exactly"


def test_fields_and_tables_show_untrusted_header_text_as_one_plain_line(capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.console import print_fields, print_table

    license_text = "MIT\x1b[2J\x1b]0;PWNED\x07\nfake: line"
    print_fields([("name", "m"), ("license", license_text)])
    print_table(["NAME", "PATH"], [["[bold]x\tfake", "/p"]])
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["name:    m", "license: MIT^[[2J^[]0;PWNED^G fake: line", "NAME\tPATH", "[bold]x\\tfake\t/p"]


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "\r\x1b[2K\x1b[2mreading the prompt: 512/1,000 tokens (51%)\x1b[0m\r\x1b[2K"),
    ({"NO_COLOR": "1"}, "\r\x1b[2K\x1b[3mreading the prompt: 512/1,000 tokens (51%)\x1b[0m\r\x1b[2K"),
    ({"TERM": "dumb"}, "reading the prompt: 1,000 tokens\n"),  # once, kept: it cannot be erased there
])
def test_the_prefill_line_respects_dumb_terminals_and_no_color(monkeypatch: pytest.MonkeyPatch,
                                                               env: dict[str, str], expected: str) -> None:
    from localgen.events import PrefillProgress
    from localgen.prefill_status import PrefillStatus

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(config, "_settings", None)  # NO_COLOR is read with the settings
    stream = Terminal()
    status = PrefillStatus(stream)
    status.update(PrefillProgress(done=512, total=1000))
    status.update(PrefillProgress(done=1000, total=1000))
    assert stream.getvalue() == expected


def test_the_prefill_line_is_erased_by_a_pause_that_lands_while_it_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-Z's handler clears the line (Repl.pause_view) wherever the main thread is: landing as the line is
    written, it must still erase it, or the shell writes Stopped after it."""
    from localgen.events import PrefillProgress
    from localgen.prefill_status import PrefillStatus

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

        def flush(self) -> None:  # the handler runs just after the line reaches the terminal
            super().flush()
            if not self.getvalue().endswith("\r\x1b[2K"):
                status.clear()

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(config, "_settings", None)
    stream = Terminal()
    status = PrefillStatus(stream)
    status.update(PrefillProgress(done=0, total=1923))
    assert stream.getvalue() == "\r\x1b[2K\x1b[3mreading the prompt: 0/1,923 tokens (0%)\x1b[0m\r\x1b[2K"


@pytest.mark.parametrize(("columns", "text"), [
    (80, "reading the prompt: 1,024/1,235 tokens (82%)"), (40, "reading: 1,024/1,235 (82%)"), (20, "82%"), (3, ""),
])
def test_the_prefill_line_never_wraps(monkeypatch: pytest.MonkeyPatch, columns: int, text: str) -> None:
    """A wrapped status line could not be erased: narrower terminals get shorter forms, on one row."""
    import fcntl
    import struct
    import termios

    from localgen.events import PrefillProgress
    from localgen.prefill_status import PrefillStatus

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(config, "_settings", None)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    with open(slave, "w", closefd=True) as stream:
        PrefillStatus(stream).update(PrefillProgress(done=1024, total=1235))
    written = os.read(master, 1000).decode()
    os.close(master)
    styled = f"\x1b[3m{text}\x1b[0m" if text else ""  # NO_COLOR's italics for the dim style, around text alone
    assert written == f"\r\x1b[2K{styled}"


MODELS_LIST = (["NAME", "QUANT", "SIZE", "LAST USED", "SOURCE", "PATH"], [
    ["bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M", "Q4_K_M", "4.6 GB", "2025-01-01 10:30", "hub",
     "/home/user/.cache/localgen/hub/bartowski/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"],
    ["qwen2.5-0.5b", "Q8_0", "531 MB", "never", "bundled", "/opt/localgen/models/qwen2.5-0.5b-instruct-q8_0.gguf"]])
MODELS_ALL = (["NAME", "REPO", "QUANT", "CONTEXT", "DOWNLOADED", "DESCRIPTION"], [
    ["qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct-GGUF", "Q4_K_M", "32,768", "yes (bundled)",
     "Qwen 2.5 7B instruct: a strong general-purpose chat model, good at many languages and code"],
    ["llama3.1-8b", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "Q4_K_M", "131,072", "no",
     "Meta Llama 3.1 8B instruct"]])
FIT_TABLE = (["QUANT", "FILE", "WEIGHTS", "KV", "BUFFERS", "TOTAL", "FITS", "PLAN"], [
    ["*Q4_K_M", "4.9 GB", "4.6 GiB", "1.0 GiB", "512.0 MiB", "6.1 GiB", "VRAM+RAM",
     "context 8,192, KV f16, 21/33 layers on the GPU"],
    [" Q8_0", "8.5 GB", "7.9 GiB", "1.0 GiB", "512.0 MiB", "9.4 GiB", "RAM", "context 8,192, KV f16, CPU only"]])
TABLES = {"models list": MODELS_LIST, "models list --all": MODELS_ALL, "fit": FIT_TABLE}


class _Terminal(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _table_on_terminal(monkeypatch: pytest.MonkeyPatch, width: int, headers: list[str],
                       rows: list[list[str]], squeeze: tuple[str, ...] = (), marked: int | None = None) -> list[str]:
    """print_table's lines on a terminal this wide, less styling and trailing spaces."""
    from localgen.console import print_table

    stdout = _Terminal()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setenv("COLUMNS", str(width))
    print_table(headers, rows, squeeze=squeeze, marked=marked)
    return [line.rstrip() for line in re.sub(r"\x1b\[[0-9;]*m", "", stdout.getvalue()).splitlines()]


def _squashed(text: str) -> str:
    """text without whitespace (a folded or wrapped cell loses only line breaks and spaces)."""
    return re.sub(r"\s", "", text)


def _columns(lines: list[str]) -> list[str]:
    """Each column's text read top to bottom, whitespace removed: columns are parted by two or more positions blank
    on every line (the padding between them; no cell here has two spaces in a row)."""
    width = max(map(len, lines))
    mask = "".join("x" if any(line[i:i + 1].strip() for line in lines) else " " for i in range(width))
    return [_squashed("".join(line[start:end] for line in lines)) for start, end in
            (match.span() for match in re.finditer("x+(?: x+)*", mask))]


def test_a_table_wider_than_the_terminal_folds_only_free_text_at_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    headers, rows = FIT_TABLE  # at 80 columns everything but the PLAN fits on one line
    lines = _table_on_terminal(monkeypatch, 80, headers, rows, squeeze=("PLAN",))
    assert max(map(len, lines)) <= 80 and len(lines) > 1 + len(rows), "the plans fold"
    assert _columns(lines) == [_squashed("".join(column)) for column in zip(headers, *rows, strict=True)]
    assert all(any(cell in line for line in lines) for row in rows for cell in row[:-1]), "other cells stay whole"
    assert all(word in " ".join(lines).split() for row in rows for word in row[-1].split()), "plans fold at spaces"


@pytest.mark.parametrize(("table", "width"), [(MODELS_LIST, 80), (MODELS_ALL, 80), (FIT_TABLE, 60)],
                         ids=["models list", "models list --all", "fit"])
def test_a_table_too_wide_even_so_becomes_one_block_a_row(monkeypatch: pytest.MonkeyPatch, width: int,
                                                          table: tuple[list[str], list[list[str]]]) -> None:
    """A path or repo folded mid-word could not be copied in one piece: each row becomes name: value lines."""
    headers, rows = table
    lines = _table_on_terminal(monkeypatch, width, headers, rows, squeeze=("PATH", "REPO", "DESCRIPTION", "PLAN"))
    names = [f"{header.lower()}:" for header in headers[1:]]
    pad = max(map(len, names))
    expected: list[str] = []
    for row in rows:
        expected += ([""] if expected else []) + [row[0]]
        expected += [f"  {name:<{pad}} {cell}" for name, cell in zip(names, row[1:], strict=True)]
    whole = [line for line in expected if " " not in line.split(": ", 1)[-1].strip()]
    assert all(line in lines for line in whole), "names, paths and repos: whole, one line each"
    assert " ".join(lines).split() == " ".join(expected).split(), "free text only wraps between words"
    assert all(len(line) <= width for line in lines if line not in expected), "wrapped lines fit the terminal"
    wrapped = [line for line in lines if line and line not in expected and not line.startswith("  " + " " * pad)]
    assert not [line for line in wrapped if not any(line.startswith(f"  {name:<{pad}} ") for name in names)], \
        "a wrapped value's later lines start under its first"


@pytest.mark.parametrize("table", TABLES.values(), ids=TABLES.keys())
def test_a_table_that_fits_the_terminal_has_one_line_a_row(monkeypatch: pytest.MonkeyPatch,
                                                            table: tuple[list[str], list[list[str]]]) -> None:
    headers, rows = table
    lines = _table_on_terminal(monkeypatch, 200, headers, rows)
    assert [line.split() for line in lines] == [" ".join(row).split() for row in [headers, *rows]]


def test_a_very_narrow_terminal_gets_blocks_too(monkeypatch: pytest.MonkeyPatch) -> None:
    headers, rows = MODELS_LIST
    lines = _table_on_terminal(monkeypatch, 12, headers, rows)
    assert lines[0] == rows[0][0] and f"  path:      {rows[0][-1]}" in lines


def test_the_marked_row_is_starred_on_a_terminal_and_plain_on_a_pipe(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.console import print_table

    headers, rows = ["QUANT", "SIZE"], [["Q4_K_M", "4.9 GB"], ["Q8_0", "8.5 GB"]]
    lines = _table_on_terminal(monkeypatch, 80, headers, rows, marked=1)
    assert [line.split() for line in lines[1:]] == [["Q4_K_M", "4.9", "GB"], ["*Q8_0", "8.5", "GB"]]
    monkeypatch.undo()
    print_table(headers, rows, marked=1)
    assert capsys.readouterr().out == "QUANT\tSIZE\nQ4_K_M\t4.9 GB\nQ8_0\t8.5 GB\n"


def test_messages_break_between_words_on_a_terminal_and_stay_whole_on_a_pipe(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import fcntl
    import struct
    import termios

    from localgen.console import error

    message, hint = "conversation 'chat-1' is in use by another localgen chat or run (process 42)", "finish it"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
    with open(slave, "w", closefd=True) as stream:
        monkeypatch.setattr(sys, "stderr", stream)
        error(message, hint)
    lines = _said_on(master).replace("\r\n", "\n").splitlines()
    os.close(master)
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines)
    assert " ".join(lines) == f"localgen: error: {message} (hint: {hint})", "no word is cut, none is lost"
    monkeypatch.undo()
    error(message, hint)
    assert capsys.readouterr().err == f"localgen: error: {message} (hint: {hint})\n"


def _said_on(master: int) -> str:
    """What a status message wrote to the terminal of this pty, up to its last line end (written apart, it may come
    in a read of its own)."""
    shown = ""
    while not shown.endswith("\r\n"):
        shown += os.read(master, 1000).decode()
    return shown


def test_a_status_line_shows_the_control_characters_it_quotes_on_a_terminal_and_keeps_them_on_a_pipe(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.console import say

    message = "license: MIT\x1b]52;c;QUFB\x07 \x9b2J\tend\r\nnext\rover"
    master, slave = os.openpty()
    with open(slave, "w", closefd=True) as stream:
        monkeypatch.setattr(sys, "stderr", stream)
        say(message)
    shown = _said_on(master)
    os.close(master)
    assert shown == "license: MIT^[]52;c;QUFB^G \ufffd2J\tend\r\nnext^Mover\r\n", "the terminal's own CR LF line ends"
    monkeypatch.undo()
    say(message)
    assert capsys.readouterr().err == message + "\n"


def test_fields_tables_and_status_lines_show_bidi_controls_on_a_terminal_and_keep_them_on_a_pipe(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A model file's license or name holding U+202E cannot reorder the line it is shown on (MIT\u202egnp.exe)."""
    from localgen.console import print_fields, print_table, say

    value = "MIT \u202egnp.exe \u2066x\u2069"
    stdout = _Terminal()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setenv("COLUMNS", "80")
    print_fields([("license", value)])
    print_table(["NAME"], [[value]])
    shown = [line.rstrip() for line in re.sub(r"\x1b\[[0-9;]*m", "", stdout.getvalue()).splitlines()]
    assert shown == ["license: MIT \ufffdgnp.exe \ufffdx\ufffd", "NAME", "MIT \ufffdgnp.exe \ufffdx\ufffd"]
    master, slave = os.openpty()
    with open(slave, "w", closefd=True) as stream:
        monkeypatch.setattr(sys, "stderr", stream)
        say(value)
    assert _said_on(master) == "MIT \ufffdgnp.exe \ufffdx\ufffd\r\n"
    os.close(master)
    monkeypatch.undo()
    print_fields([("license", value)])
    print_table(["NAME"], [[value]])
    say(value)
    piped = capsys.readouterr()
    assert (piped.out, piped.err) == (f"license: {value}\nNAME\n{value}\n", f"{value}\n")


def test_stats_write_large_figures_with_thousands_separators() -> None:
    """A 16-second TTFT read `TTFT 15925 ms` beside `prompt 2,065 tok`, and a GPU's prefill `12345.6 tok/s`."""
    from localgen.console import format_stats
    from localgen.events import Finished, Timings, Usage

    timings = Timings(ttft_s=15.925, prefill_s=15.9, prefill_tokens_per_s=12345.6, decode_s=1.0,
                      decode_tokens_per_s=1234.5)
    line = format_stats(Finished(text="x", finish_reason="length", usage=Usage(2065, 0, 3), timings=timings))
    assert line.startswith("prompt 2,065 tok, TTFT 15,925 ms, prefill 12,345.6 tok/s, generated 3 tok, "
                           "decode 1,234.5 tok/s, finish length"), line


def test_an_error_part_way_through_an_answer_ends_its_text_before_the_error_line() -> None:
    """The held last word was lost, and the error went on the answer's last line, on a terminal."""
    from types import SimpleNamespace

    from localgen.cli_output import stream_to_stdout
    from localgen.errors import LocalgenError
    from localgen.events import TextChunk

    def answer():
        yield TextChunk("Rivers carry water to the sea")
        raise LocalgenError("llama.cpp failed to evaluate the batch")

    engine = SimpleNamespace(request_stop=lambda: None, clear_stop=lambda: None)
    for stream in (_Terminal(), io.StringIO()):
        with pytest.raises(LocalgenError):
            stream_to_stdout(SimpleNamespace(engine=engine), answer, TextOutput(stream))
        assert stream.getvalue() == "Rivers carry water to the sea\n"


def test_an_answer_cut_short_by_a_failed_write_runs_its_clean_up_before_the_error_leaves() -> None:
    """An error out of the answer's writing that is not localgen's (a signal's exit as a terminal closes): the answer's
    save (its generator's clean-up) ran only once the frames the error kept were freed, which the process's end
    (os._exit) may never let come."""
    import signal
    from types import SimpleNamespace

    from localgen.cli_output import stream_to_stdout
    from localgen.events import TextChunk
    from localgen.signals import SignalExit

    saved: list[str] = []

    def answer():
        try:
            yield TextChunk("Rivers carry water")
            yield TextChunk(" to the sea")
        finally:
            saved.append("saved")

    class Hungup(io.StringIO):
        def write(self, text: str) -> int:
            raise SignalExit(signal.SIGHUP)

    engine = SimpleNamespace(request_stop=lambda: None, clear_stop=lambda: None)
    try:
        stream_to_stdout(SimpleNamespace(engine=engine), answer, TextOutput(Hungup()))
    except SignalExit as held:  # its traceback keeps stream_to_stdout's frame, and the answer's generator, alive
        assert saved == ["saved"] and held.code == 129, "the clean-up waited for the error's frames to be freed"
    else:
        pytest.fail("the hangup was not raised")


def test_run_q_says_nothing_of_a_ctrl_c_but_keeps_an_error_raised_while_one_was_handled() -> None:
    """-q: a Ctrl-C, bare or wrapped as Python 3.11 wraps one in a class's making, ends with exit 130 alone; an error
    raised while a Ctrl-C was being handled is an error, said as one."""
    import typer

    from localgen.cli_output import stderr_quieted
    from localgen.errors import LocalgenError

    def wrapped() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__") from exc

    def error_meanwhile() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise LocalgenError("could not save the conversation") from None

    for body in (wrapped, lambda: (_ for _ in ()).throw(KeyboardInterrupt)):
        with pytest.raises(typer.Exit) as ended, stderr_quieted(True):
            body()
        assert ended.value.exit_code == 130
    with pytest.raises(LocalgenError, match="could not save"), stderr_quieted(True):
        error_meanwhile()


def test_a_path_column_folds_only_where_its_caller_lets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """print_table never folded a PATH column with spaces in it, even where its caller let it (squeeze=("PATH",)).
    Let fold, it folds at its spaces in the table; by default each path stays whole, in one block a row."""
    from localgen.console import _unbroken_columns

    headers = ["NAME", "PATH"]
    rows = [["mine", "/home/me/my models/" + "mine of the week " * 3 + "Q4_K_M.gguf"], ["plain", "/m/plain.gguf"]]
    assert _unbroken_columns(headers, rows, 40, ("PATH",)) == [True, False]
    assert _unbroken_columns(headers, rows, 40, ()) is None
    folded = _table_on_terminal(monkeypatch, 40, headers, rows, squeeze=("PATH",))
    assert max(map(len, folded)) <= 40 and len(folded) > 1 + len(rows), folded
    assert _columns(folded) == [_squashed("".join(column)) for column in zip(headers, *rows, strict=True)]
    whole = _table_on_terminal(monkeypatch, 40, headers, rows)
    assert all(f"  path: {row[1]}" in whole for row in rows), whole


def test_the_prefill_line_moves_between_batches_at_the_speed_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line moved only as each 512-token batch ended (0% for 8-12 s on a busy CPU, then 21%, 42%): between
    batches it moves at the speed measured so far, never past the batch's end, never back, and not once cleared."""
    from localgen import prefill_status
    from localgen.events import PrefillProgress
    from localgen.prefill_status import PrefillStatus

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(config, "_settings", None)
    monkeypatch.setattr(PrefillStatus, "tokens_per_s", None)
    monkeypatch.setattr(prefill_status, "REDRAW_S", 3600.0)  # its thread's redraws: this test makes them itself
    now = [0.0]
    stream = Terminal()
    status = PrefillStatus(stream, clock=lambda: now[0])

    def shown() -> list[int]:
        return [int(figure.replace(",", "")) for figure in re.findall(r"reading the prompt: ([\d,]+)/",
                                                                      stream.getvalue())]

    status.update(PrefillProgress(done=0, total=2000, until=500))
    now[0] = 0.5
    status.redraw()
    assert shown() == [0], "no speed measured yet: nothing to move it by"
    now[0] = 1.0  # the first batch took a second: 500 tokens/s
    status.update(PrefillProgress(done=500, total=2000, until=1000))
    now[0] = 1.5
    status.redraw()
    now[0] = 1.4  # a redraw that the thread's lock held back: its figure is older, and not shown
    status.redraw()
    now[0] = 60.0  # the batch takes longer than the speed says: the line waits short of its end
    status.redraw()
    status.update(PrefillProgress(done=1000, total=2000, until=1500))
    assert shown() == [0, 500, 750, 999, 1000], shown()
    status.clear()
    cleared = stream.getvalue()
    now[0] = 120.0
    status.redraw()
    assert stream.getvalue() == cleared and cleared.endswith("\r\x1b[2K"), "no redraw once cleared"
    monkeypatch.setattr(PrefillStatus, "tokens_per_s", 10.0**9)  # the last prompt's speed, far above this one's
    stream = Terminal()
    status = PrefillStatus(stream, clock=lambda: now[0])
    status.update(PrefillProgress(done=0, total=400, until=512))  # one batch past the prompt's end
    now[0] = 121.0
    status.redraw()
    assert shown() == [0, 399], "short of the prompt's end"


def test_the_prefill_line_is_not_drawn_from_the_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run sent to the background (Ctrl-Z, `bg`) as it reads its prompt left its line redrawn a few times a
    second over the shell's prompt: in the background nothing is drawn, and back in the foreground it is again."""
    from localgen import prefill_status
    from localgen.events import PrefillProgress
    from localgen.prefill_status import PrefillStatus

    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    def drawn() -> str:
        with contextlib.suppress(BlockingIOError):
            written.append(os.read(read_end, 65536).decode())
        return "".join(written)

    foreground = [os.getpgrp()]
    monkeypatch.setattr(os, "tcgetpgrp", lambda fd: foreground[0])  # the group the terminal has in its foreground
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(config, "_settings", None)
    monkeypatch.setattr(PrefillStatus, "tokens_per_s", 100.0)
    monkeypatch.setattr(prefill_status, "REDRAW_S", 3600.0)
    now = [0.0]
    written: list[str] = []
    stream = Terminal(os.fdopen(write_end, "wb"))
    status = PrefillStatus(stream, clock=lambda: now[0])
    try:
        status.update(PrefillProgress(done=0, total=2000, until=500))
        first = drawn()
        assert "reading the prompt: 0/2,000 tokens (0%)" in first, first
        foreground[0] = os.getpgrp() + 1  # the shell's, after Ctrl-Z and bg
        for second in range(1, 4):
            now[0] = second
            status.redraw()
        status.update(PrefillProgress(done=500, total=2000, until=1000))
        assert drawn() == first, "nothing drawn from the background"
        foreground[0] = os.getpgrp()  # fg; 500 tokens in 3 s: 167 tokens/s
        now[0] = 5.0
        status.redraw()
        assert drawn().removeprefix(first).count("reading") == 1, drawn()
        assert "reading the prompt: 833/2,000 tokens (41%)" in drawn(), drawn()
    finally:
        status.clear()
        stream.close()
        os.close(read_end)
