"""A pasted message taller than the chat's window, in a real pseudo-terminal on the real bundled model: once sent, the
terminal's scrollback holds every row of it, once, as it holds a message that fits; and the rows the prompt shows."""

from __future__ import annotations

import collections
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyte
import pytest
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory

import localgen.repl as repl_module
from localgen.repl import Repl, UnsentLine
from localgen.repl_echo import echo_rows
from localgen.repl_terminal import TypedAhead
from tests.test_repl import Chat


def _rows_seen(transcript: str, rows: int, columns: int) -> list[str]:
    """Every row the terminal shows or has scrolled away, top to bottom, as a terminal with scrollback keeps them."""
    screen = pyte.HistoryScreen(columns, rows, history=100_000)
    pyte.Stream(screen).feed(transcript)
    kept = ["".join(line[x].data for x in range(columns)).rstrip() for line in screen.history.top]
    return kept + [row.rstrip() for row in screen.display]


def _shown(line: str, first: bool, columns: int) -> list[str]:
    """The rows the prompt shows one line of a message in: after '>>> ' or '... ', a long one's rest after spaces."""
    room = columns - 4
    pieces = [line[start:start + room] for start in range(0, len(line), room)]
    return [(">>> " if first else "... ") + pieces[0], *("    " + piece for piece in pieces[1:])]


# A word as wide as "of the pasted text" in one token (that phrase takes four): a tall paste's prefill, most of its
# test's time, is 209 to 409 tokens rather than 389 to 689
BLANK = "_" * 18


@pytest.mark.parametrize(("rows", "columns", "lines", "words"), [
    (30, 100, 70, 1),  # 40 rows above the window's 30 were never drawn
    (12, 40, 40, 1),
    (12, 40, 12, 1),  # the window's height: it fitted, and still does
    (30, 100, 20, 6),  # long lines, which wrap: 40 rows
    (30, 100, 5, 1),  # one that fits
])
def test_a_pasted_message_taller_than_the_window_is_in_the_scrollback_whole_once_sent(
        tmp_path: Path, rows: int, columns: int, lines: int, words: int) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "1", cpr=True, columns=columns,
                rows=rows)
    try:
        text = "\n".join(f"row {i} " + " ".join([BLANK] * words) for i in range(lines))
        chat.child.send("\x1b[200~" + text + "\x1b[201~")
        chat.child.send("\r")
        state = chat.wait_for(lambda s: bool(s["turns"]) and s["turns"][-1]["answer"] is not None)
        chat.sync()
        assert state["turns"][-1]["user"] == text, "sent whole"
        seen = _rows_seen(chat.transcript.getvalue(), rows, columns)
        expected = [row.rstrip() for number, line in enumerate(text.split("\n"))
                    for row in _shown(line, number == 0, columns)]  # (the terminal keeps no trailing spaces)
        start = max((k for k, row in enumerate(seen) if row == expected[0]), default=None)
        assert start is not None, seen
        assert seen[start:start + len(expected)] == expected, seen
        counts = collections.Counter(row for row in seen if row.startswith((">>> row ", "... row ")))
        assert set(counts.values()) == {1}, [row for row, count in counts.items() if count > 1][:3]
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_the_rows_of_a_message_are_those_the_prompt_shows() -> None:
    assert echo_rows("ab\ncdefgh\n", ">>> ", 8) == [">>> ab", "... cdef", "    gh", "... "]
    assert echo_rows("a\tb", ">>> ", 20) == [">>> a       b"], "a tab to the next stop"
    assert echo_rows("abc你", ">>> ", 8) == [">>> abc", "    你"], "a wide character that does not fit moves on"


def test_a_message_s_control_characters_are_echoed_as_the_prompt_shows_them_not_obeyed() -> None:
    assert echo_rows("a\x1b]52;c;aGk=\x07b\x1b[2Jc", ">>> ", 40) == [">>> a^[]52;c;aGk=^Gb^[[2Jc"]
    assert echo_rows("\x1b" * 6, ">>> ", 10) == [">>> ^[^[^[", "    ^[^[^["], "each shown control takes two cells"


def _reading_repl(prompt: Any, *, echo: Any = None, paste_clear: Any = None) -> Repl:
    """A Repl with just what _read_line uses: no prefill ahead, an in-memory history, this prompt and echo."""
    repl = object.__new__(Repl)
    repl._paste = SimpleNamespace(clear=paste_clear or (lambda: None), began=lambda line: False)
    repl._editor = SimpleNamespace(new_prompt=lambda: None)
    repl._escapes, repl._ahead, repl._echo = True, None, echo
    repl._history, repl._history_warning = InMemoryHistory(), None
    repl._prompt = prompt
    repl._ctrl_c_typed_ahead = lambda: False
    repl._typed_ahead = TypedAhead()
    return repl


def test_a_ctrl_c_as_a_tall_message_is_echoed_leaves_it_unsent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repl_module, "cursor_requests_given_up_once_unanswered", lambda app: None)
    sent = "\n".join(f"row {i}" for i in range(200))

    class SlowTerminal:
        def write(self, line: str) -> None:
            raise KeyboardInterrupt  # Ctrl-C while the 200 rows go out

    buffer = Buffer()
    prompt = SimpleNamespace(default_buffer=buffer, app=None, prompt=lambda _: (buffer.set_document(Document(sent)),
                                                                                  sent)[1])
    with pytest.raises(UnsentLine) as unsent:
        _reading_repl(prompt, echo=SlowTerminal())._read_line()
    assert unsent.value.line == sent


def test_a_ctrl_c_before_the_next_prompt_is_drawn_is_one_at_an_empty_prompt(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(repl_module, "cursor_requests_given_up_once_unanswered", lambda app: None)
    sent = "first line\nsecond line\nthird line"
    buffer = Buffer()
    buffer.set_document(Document(sent))  # as prompt-toolkit leaves the line it returned

    def ctrl_c() -> None:
        raise KeyboardInterrupt

    repl = _reading_repl(SimpleNamespace(default_buffer=buffer, app=None), paste_clear=ctrl_c)
    repl._history.append_string(sent)
    assert repl._read_line() is None
    said = capsys.readouterr().err
    assert "cleared" not in said and "Ctrl-D or /exit" in said, said
