"""A pasted message taller than the chat's window, in a real pseudo-terminal on the real bundled model: once sent, the
terminal's scrollback holds every row of it, once, as it holds a message that fits; and the rows the prompt shows."""

from __future__ import annotations

import collections
from pathlib import Path

import pyte
import pytest

from localgen.repl_echo import echo_rows
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


@pytest.mark.parametrize(("rows", "columns", "lines", "words"), [
    (30, 100, 200, 1),  # 170 rows above the window's 30 were never drawn
    (12, 40, 200, 1),
    (12, 40, 12, 1),  # the window's height: it fitted, and still does
    (30, 100, 40, 12),  # long lines, which wrap: 120 rows
    (30, 100, 5, 1),  # one that fits
])
def test_a_pasted_message_taller_than_the_window_is_in_the_scrollback_whole_once_sent(
        tmp_path: Path, rows: int, columns: int, lines: int, words: int) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "1", cpr=True, columns=columns,
                rows=rows)
    try:
        text = "\n".join(f"row {i} " + " ".join(["of the pasted text"] * words) for i in range(lines))
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
