"""The chat's answers, conversations and attachments where they used to fall short: code cut off in a bare fence,
Markdown as written, empty conversations, the system prompt the model gets, and a file too big for the context."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pexpect

from tests.chat_terminal import ESCAPE, end_chat
from tests.test_console import _terminal_lines
from tests.test_repl import Chat


def _view_raw(document: str, *, cut_off: bool = False, wrap: bool = True, width: int = 60) -> str:
    """What a terminal gets when document streams through an AnswerView, closed as an answer that ended or was cut
    off."""
    from rich.console import Console

    from localgen.answer_view import AnswerView

    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, wrap=wrap, stream=stream)
    view._console = Console(file=stream, force_terminal=True, width=width, height=40, highlight=False)
    for start in range(0, len(document), 4):
        view.answer(document[start:start + 4])
    view.close(cut_off=cut_off)
    return stream.getvalue()


def _view_lines(document: str, *, cut_off: bool = False) -> list[str]:
    """The lines of a 60-column terminal when document streams through an AnswerView (see _view_raw)."""
    return _terminal_lines(_view_raw(document, cut_off=cut_off), 60, 40)


def test_code_cut_off_in_a_bare_fence_is_code_and_an_unopened_closing_fence_is_text() -> None:
    cut = _view_lines("Here:\n\n```\nprint(1)\n", cut_off=True)
    assert cut[:3] == ["Here:", "", "print(1)"] and "```" not in "\n".join(cut), cut
    ended = _view_lines("print(1)\n```\n\nDone.")
    assert "```" in ended, "a whole answer's closing fence with no opening one stays text"


# Two exchanges whose answers are bare fences, so that the model answers the next question so too.
BARE_FENCES = [{"user": "Show the command to list files.", "answer": "```\nls -la\n```"},
               {"user": "Show the command to see the disk usage.", "answer": "```\ndf -h\n```"}]


def _saved(home: Path, name: str, turns: list[dict], **fields: object) -> Path:
    """Write a saved conversation of the bundled model under a localgen home."""
    path = home / "data" / "conversations" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "name": name, "system": None, "turns": turns, "model": "smollm2-135m",
                                "settings": {}, **fields}))
    return path


def test_an_answer_cut_off_by_the_token_limit_inside_a_bare_fence_shows_its_code_as_code(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _saved(home, "fences", BARE_FENCES)
    chat = Chat(home, "--resume", "fences", "--temperature", "0", "-n", "6")
    try:
        since = len(chat.transcript.getvalue())
        answer = chat.ask("Show the command to print the date.")["turns"][-1]["answer"]
        assert answer.startswith("```\n") and answer.count("```") == 1, answer
        shown = ESCAPE.sub("", chat.transcript.getvalue()[since:])
        assert answer.split("\n", 1)[1].strip() in shown and "```" not in shown, shown
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_a_line_after_a_backslash_line_break_keeps_its_indentation() -> None:
    lines = _view_lines("Usage: run\\\n    --fast  quicker\\\n\tand tabbed\nthen    spaced\n")
    assert lines[:4] == ["Usage: run", "    --fast  quicker", "        and tabbed", "then    spaced"], lines


def test_chat_f_of_a_file_too_long_for_the_context_by_its_tokens_ends_as_one_too_long_by_its_size_does(
        tmp_path: Path) -> None:
    """A -f file whose size allows it but whose tokens the context cannot hold ends the chat with the error, exit 1,
    nothing started, as a file too long by its size alone does (the hint names -f, the chat's /file none not yet
    there to type)."""
    from tests.test_repl import spawn_chat

    (tmp_path / "note.txt").write_text("A short note.\n")
    (tmp_path / "big.txt").write_text("Numbers: " + " ".join(str(i) for i in range(600)) + "\n")  # some 2,300 tokens
    child = spawn_chat(tmp_path / "home", "-n", "4", "--ctx-size", "256", "-f", "note.txt", "-f", "big.txt",
                       cwd=tmp_path)
    started = child.expect([pexpect.EOF, ">>>"]) == 1
    said = " ".join(child.before.split())
    child.close(force=True)
    assert re.search(r"localgen: error: big\.txt is too long to attach: with it the next message needs [\d,]+ "
                     r"tokens but only [\d,]+ are free in the context \(hint: split it and attach a part at a time; "
                     r"attach fewer files with -f; --ctx-size \d+ or more", said), said
    assert not started and child.exitstatus == 1, (child.exitstatus, said)
    assert not (tmp_path / "home" / "data" / "conversations").exists() or \
        not list((tmp_path / "home" / "data" / "conversations").iterdir())


SMOLLM_SYSTEM = "the chat template's own system prompt 'You are a helpful AI assistant named SmolLM, trained by Hugging"


def test_resume_and_load_name_the_system_prompt_the_chat_template_adds_where_none_is_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _saved(home, "plain", [{"user": "Hi.", "answer": "Hello."}])
    _saved(home, "blank", [{"user": "Hi.", "answer": "Hello."}], system="")
    chat = Chat(home, "--resume", "plain", "-n", "2")
    try:
        said = " ".join(chat.transcript.getvalue().split())
        assert f"resumed plain: 1 exchange, {SMOLLM_SYSTEM}" in said, said
        said = " ".join(chat.command_words("/load blank", "; settings:").split())
        assert "loaded blank: 1 exchange, an empty system prompt (the template's default is left out)" in said, said
        said = " ".join(chat.command_words("/load plain", "; settings:").split())
        assert f"loaded plain: 1 exchange, {SMOLLM_SYSTEM}" in said, said
        assert "no system prompt" not in " ".join(chat.transcript.getvalue().split())
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_a_conversation_with_no_exchange_is_listed_as_empty_and_save_writes_none(tmp_path: Path) -> None:
    """An emptied saved conversation is "(empty)" in `localgen conversations` and /list alike, and /save of a chat with
    nothing in it (no exchange, nothing chosen) writes nothing, saying so (a copy of an emptied one as well), where
    one with a system prompt of its own is kept, as a preset to /load."""
    from tests.conftest import run_localgen

    home = tmp_path / "home"
    _saved(home, "emptied", [])
    _saved(home, "full", [{"user": "Hi there", "answer": "Hello."}])
    listed = run_localgen("conversations", env={"LOCALGEN_HOME": str(home)})
    assert listed.returncode == 0 and "\t0\tsmollm2-135m\t(empty)\n" in listed.out, listed.out
    chat = Chat(home)
    try:
        said = " ".join(chat.command_words("/save first", "first exchange)").split())
        assert "nothing to save yet: this chat has no exchange, and no system prompt, setting or stop strings of its " \
            "own (it is saved with its first exchange)" in said, said
        said = " ".join(chat.command_words("/list", "(empty)").split())
        assert "emptied 20" in said and "0 exchanges (empty)" in said, said
        chat.command("/system Be brief.", "system prompt set")
        chat.command("/save preset", "saved to")
        said = " ".join(chat.command_words("/load emptied", "; settings:").split())
        assert "loaded emptied: 0 exchanges, the chat template's own system prompt" in said, said
        said = " ".join(chat.command_words("/save copy", "saved as it is)").split())
        assert "nothing to save: emptied has no exchange, and no system prompt" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)
    saved = sorted(p.name for p in (home / "data" / "conversations").glob("*.json"))
    assert saved == ["emptied.json", "full.json", "preset.json"], saved


LONG = " ".join(f"w{n}" for n in range(25))  # 89 columns: wider than the 40-column terminal
BLOCKS = (f"# Heading {LONG}\n\n- item {LONG}\n  - nested {LONG}\n- short\n\n1. number {LONG}\n\n"
          f"> quote {LONG}\n> more\n\n"
          f"| a | b |\n|---|---|\n| {LONG} | x |\n\n- code:\n\n  ```\n  code {LONG}\n  ```\n")
# Each line of BLOCKS as a terminal gets it without wrap: whole, after its bullet, number or bar
WHOLE_LINES = (f"Heading {LONG}", f" • item {LONG}", f"    • nested {LONG}", f" 1. number {LONG}", f"▌ quote {LONG}",
               f" {LONG}  x", f"   code {LONG}")


def test_without_wrap_every_markdown_block_s_lines_are_whole_and_with_wrap_they_break_between_words() -> None:
    """Headings, list items (nested too), quotes, a table's rows and code in a list go to the terminal whole, its rows
    joined, for the terminal to break (continued rows not indented), where they broke between words; a table wider
    than the window is laid out at its natural width, each row a line."""
    raw = _view_raw(BLOCKS, wrap=False, width=40)
    written = re.split(r"[\r\n]+", ESCAPE.sub("", raw))
    assert all(any(line.startswith(whole) for line in written) for whole in WHOLE_LINES), written
    screen = _terminal_lines(raw, 40, 60)
    assert screen[screen.index(" • item w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w1") + 1].startswith("0 w11"), screen
    assert " • short" in screen and "▌ more" in screen, screen
    wrapped = re.split(r"[\r\n]+", ESCAPE.sub("", _view_raw(BLOCKS, wrap=True, width=40)))
    assert not any(line.startswith(whole) for line in wrapped for whole in WHOLE_LINES[:-1]), wrapped
    screen = _terminal_lines(_view_raw(BLOCKS, wrap=True, width=40), 40, 60)
    assert "   w10 w11 w12 w13 w14 w15 w16 w17 w18" in screen, "an item's lines indented under it"


def test_chat_no_wrap_shows_a_list_item_s_line_whole(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--no-wrap", "--temperature", "0", "-n", "60", columns=40)
    try:
        since = len(chat.transcript.getvalue())
        answer = chat.ask("List three benefits of exercise.")["turns"][-1]["answer"]
        item = next(line for line in answer.splitlines() if line.startswith("1. ") and len(line) > 80)
        assert f" {item}" in ESCAPE.sub("", chat.transcript.getvalue()[since:]), "the item's line whole"
        assert chat.quit() == 0
    finally:
        end_chat(chat)
