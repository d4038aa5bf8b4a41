"""A plain run's files and piped text, named in the exchange it keeps for `run --continue` as a chat's turn names
them: listings show `[doc.txt] Summarize` for the conversation it becomes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localgen.last_run import last_run_path
from tests.conftest import run_localgen

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)
DOCUMENT = "The quarterly report says revenue grew by ten percent.\n" * 4  # 44 tokens: a prefill of milliseconds
FILE_RECORD = {"characters": len(DOCUMENT), "sent": len(DOCUMENT.strip())}  # its size, and its part of the message
SHORT = ("-n", "2", "--temperature", "0", "--seed", "1")


def _kept_turn(*args: str, stdin: bytes | None = None) -> dict:
    """Run `localgen run ARGS` (short and greedy) and give the exchange it kept as the last run."""
    ran = run_localgen("run", *args, *SHORT, stdin=stdin)
    assert ran.returncode == 0, ran.err
    return json.loads(last_run_path().read_text())["turns"][0]


def _document(folder: Path) -> Path:
    """A file holding DOCUMENT, in folder."""
    document = folder / "doc.txt"
    document.write_text(DOCUMENT)
    return document


def _first_message_once_continued() -> str:
    """The listing's first message of the conversation run --continue makes of the last run."""
    continued = run_localgen("run", "--continue", "And costs?", *SHORT)
    assert continued.returncode == 0, continued.err
    listed = json.loads(run_localgen("conversations", "list", "--json").out)
    assert len(listed) == 1, listed
    return listed[0]["first_message"]


def test_a_plain_run_with_a_file_names_it_in_the_exchange_it_keeps(tmp_path: Path) -> None:
    """run -f doc.txt "Summarize", then --continue: the listing showed the document's first words, where a chat's or
    run --conversation's turn names the file."""
    document = _document(tmp_path)
    turn = _kept_turn("-f", str(document), "Summarize")
    assert turn["user"] == f"{DOCUMENT.strip()}\n\nSummarize", "the model saw the file, then the prompt"
    assert turn["attached"] == [FILE_RECORD | {"name": str(document)}], turn
    assert turn["typed"] == "Summarize"
    assert _first_message_once_continued() == "[doc.txt] Summarize"


def test_a_plain_run_with_piped_text_names_it_as_run_conversation_does() -> None:
    """Text piped to a plain run is named (text) in its exchange, as in run --conversation's."""
    turn = _kept_turn("Summarize", stdin=DOCUMENT.encode())
    assert turn["attached"] == [FILE_RECORD | {"name": "(text)"}] and turn["typed"] == "Summarize"
    assert _first_message_once_continued() == "[(text)] Summarize"


def test_a_plain_run_without_files_keeps_its_exchange_as_before() -> None:
    """A run with nothing attached records no attached files (its file reads as files saved before did)."""
    turn = _kept_turn("Hi there")
    assert turn["user"] == "Hi there" and "attached" not in turn and "typed" not in turn
    assert _first_message_once_continued() == "Hi there"


def test_a_prompt_read_from_stdin_is_kept_as_typed_not_attached() -> None:
    """`echo Summarize | run -`: stdin is the prompt, kept as the message itself, where it was attached as (text)
    with nothing typed, and listed as [(text)]."""
    turn = _kept_turn("-", stdin=b"Summarize\n")
    assert turn["user"] == "Summarize" and "attached" not in turn and "typed" not in turn, turn
    assert _first_message_once_continued() == "Summarize"


def test_a_prompt_read_from_stdin_after_a_file_is_what_was_typed(tmp_path: Path) -> None:
    """`run -f doc.txt -`: the file is attached, stdin's prompt typed, where both were attached and nothing typed."""
    document = _document(tmp_path)
    turn = _kept_turn("-f", str(document), "-", stdin=b"Summarize\n")
    assert turn["user"] == f"{DOCUMENT.strip()}\n\nSummarize", "the model saw the file, then the prompt"
    assert turn["attached"] == [FILE_RECORD | {"name": str(document)}], turn
    assert turn["typed"] == "Summarize"
    assert _first_message_once_continued() == "[doc.txt] Summarize"


@pytest.mark.parametrize("file", [False, True], ids=["stdin-alone", "after-a-file"])
def test_run_conversation_keeps_a_prompt_read_from_stdin_as_typed(tmp_path: Path, home: Path, file: bool) -> None:
    """`run --conversation notes -` keeps stdin's prompt as typed, as a plain run does, where it was attached."""
    document = _document(tmp_path)
    files = ("-f", str(document)) if file else ()
    ran = run_localgen("run", "--conversation", "notes", *files, "-", *SHORT, stdin=b"Summarize\n")
    assert ran.returncode == 0, ran.err
    turn = json.loads((home / "data" / "conversations" / "notes.json").read_text())["turns"][0]
    if file:
        assert turn["attached"] == [FILE_RECORD | {"name": str(document)}], turn
        assert turn["typed"] == "Summarize"
    else:
        assert turn["user"] == "Summarize" and "attached" not in turn and "typed" not in turn, turn


@pytest.mark.parametrize("conversation", [False, True], ids=["plain-run", "run-conversation"])
def test_text_piped_with_no_prompt_is_the_question_kept(home: Path, conversation: bool) -> None:
    """`echo "What is 2+2?" | run`: the piped text is the message, kept as typed as `run -` keeps it, where it was
    attached as (text) with nothing typed, and listed and shown as [(text)]."""
    named = ("--conversation", "pipetest") if conversation else ()
    ran = run_localgen("run", *named, *SHORT, stdin=b"What is 2+2?\n")
    assert ran.returncode == 0, ran.err
    saved = home / "data" / "conversations" / "pipetest.json" if conversation else last_run_path()
    turn = json.loads(saved.read_text())["turns"][0]
    assert turn["user"] == "What is 2+2?" and "attached" not in turn and "typed" not in turn, turn
    if conversation:
        shown = run_localgen("conversations", "show", "pipetest")
        assert "What is 2+2?" in shown.out and "(text)" not in shown.out, shown.out
        continued = run_localgen("run", "--continue", "And 3+3?", *SHORT)
        assert continued.returncode == 0, continued.err
        assert [turn["user"] for turn in json.loads(saved.read_text())["turns"]] == ["What is 2+2?", "And 3+3?"]
    else:
        assert _first_message_once_continued() == "What is 2+2?"


def test_text_piped_beside_a_file_and_no_prompt_is_the_question_and_the_file_attached(tmp_path: Path) -> None:
    """`echo "What grew?" | run -f doc.txt`: the piped text is what was asked, kept as typed, and the file is
    attached, named in the listing as `[doc.txt] What grew?`."""
    document = _document(tmp_path)
    turn = _kept_turn("-f", str(document), stdin=b"What grew?\n")
    assert turn["user"] == f"{DOCUMENT.strip()}\n\nWhat grew?", "the model saw the file, then the question"
    assert turn["attached"] == [FILE_RECORD | {"name": str(document)}], turn
    assert turn["typed"] == "What grew?", turn
    assert _first_message_once_continued() == "[doc.txt] What grew?"
