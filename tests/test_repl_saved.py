"""A chat's conversation as a user of other tools looks for it: /save NAME renaming a new chat's, /history and the
last exchange a resumed chat shows, and /regen saying when it gives the same answer again, in a real pseudo-terminal
on the bundled model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from localgen.conversation_transcript import shortened
from localgen.params import SamplingParams
from tests.test_repl import Chat


def _saved_names(home: Path) -> list[str]:
    return sorted(path.stem for path in (home / "data" / "conversations").glob("*.json"))


def test_save_name_renames_a_new_chat_s_conversation_and_copies_one_the_user_named(tmp_path: Path) -> None:
    """/save NAME left the automatic chat-YYYYMMDD-HHMMSS beside NAME, both listed."""
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "2")
    try:
        chat.ask("Say hi.")
        [automatic] = _saved_names(home)
        chat.command_words("/save mytalk", f"renamed {automatic} to mytalk: saved to")
        assert _saved_names(home) == ["mytalk"]
        listed = chat.command("/list", "(this chat)")
        assert "1 saved conversation," in listed and automatic not in listed, listed
        copied = " ".join(chat.command_words("/save other", "stays saved as it was").split())
        assert re.search(r"saved a copy as other \(\S+/other\.json\), which this chat goes on in; mytalk stays "
                         "saved as it was", copied), copied
        assert _saved_names(home) == ["mytalk", "other"]
        helped = " ".join(re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chat.command("/help save", "going on in the copy"))
                          .split())
        assert "NAME renames one still under its automatic name (chat-...), and saves a copy of one you named" \
            in helped, helped
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def _words(text: str) -> str:
    """Text as the screen shows it, its runs of whitespace (the terminal's line breaks too) as one space."""
    return " ".join(re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", text).split())


def _said(chat: Chat, command: str, expect: str) -> str:
    """What the chat wrote from a command on to its next prompt, as _words shows it."""
    mark = len(chat.transcript.getvalue())
    chat.command(command, expect)
    return _words(chat.transcript.getvalue()[mark:])


def test_history_prints_the_last_exchanges_as_conversations_show_writes_them(tmp_path: Path) -> None:
    """/history was an unknown command (did you mean /list?), and nothing in a chat showed its transcript."""
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "3")
    try:
        chat.command("/history", "no exchange yet in this conversation")
        first = chat.ask("Say hi.")["turns"][-1]["answer"]
        second = chat.ask("Say bye.")["turns"][-1]["answer"]
        mark = len(chat.transcript.getvalue())
        both = _said(chat, "/history", "## user")
        raw = chat.transcript.getvalue()[mark:]  # each answer's details dim, as conversations show writes them
        assert re.search(r"\x1b\[2m[^*\x1b]*stopped at the token limit", raw) and "*smollm2" not in raw, raw
        assert f"## user Say hi. ## assistant {_words(first)}" in both, both
        assert "## user Say bye." in both and "stopped at the token limit" in both, both
        last = _said(chat, "/history 1", "## user")
        assert "[the last 1 exchange of 2; /history alone shows every one]" in last, last
        assert "Say bye." in last and "Say hi." not in last and _words(second) in last, last
        refused = _said(chat, "/history none", "/history [N]")
        assert "/history takes a number of exchanges (at least 1), not 'none'" in refused, refused
        superscript = _said(chat, "/history ²", "/history [N]")  # a digit to str.isdigit, no number to int()
        assert "not '²'" in superscript and "internal error" not in superscript, superscript
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_resumed_chat_shows_its_last_exchange_a_long_answer_shortened(tmp_path: Path) -> None:
    """chat --resume said how many exchanges there were, and none of their text."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    long_answer = "\n".join(f"Line {n} of a long answer." for n in range(1, 41))
    (folder / "notes.json").write_text(json.dumps({"format": 1, "name": "notes", "turns": [
        {"user": "First question?", "answer": "First answer."},
        {"user": "Second question?", "answer": long_answer}]}))
    chat = Chat(home, "--resume", "notes", "-n", "2", wait_for_prompt=False)
    try:
        chat.expect_words("more characters: /history shows it whole]")
        chat.sync()
        shown = _words(chat.transcript.getvalue())
        assert "last exchange (/history shows all 2): ## user Second question? ## assistant Line 1 of a long " \
            "answer." in shown, shown
        assert "Line 8 of a long answer. […" in shown and "Line 9 of" not in shown and "First question" not in shown
        chat.command_words("/history", "Line 40 of a long answer.")  # whole there
        chat.command("/reset", "new conversation")
        chat.command_words("/load notes", "last exchange (/history shows all 2):")  # as /load goes back to it
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize(("text", "shown"), [
    ("".join(f"{n}\n" for n in range(1, 9)), "".join(f"{n}\n" for n in range(1, 9))),  # 8 lines: nothing cut
    ("\n" * 13, "\n" * 13), ("word   \n\n", "word   \n\n"),  # whitespace alone is no text cut
    ("a" * 601, f"{'a' * 600} […1 more character: /history shows it whole]"),
    ("a" * 598 + "\x1b[31mred", f"{'a' * 598} […8 more characters: /history shows it whole]"),  # ESC [ 3 of it
    ("a" * 590 + "\x1b]8;;https://x.org\x07", f"{'a' * 590} […19 more characters: /history shows it whole]"),
    ("a" * 590 + "\x1b[1mbold text", f"{'a' * 590}\x1b[1mbold t […3 more characters: /history shows it whole]"),
])
def test_a_resumed_chat_s_message_is_shortened_only_where_text_is_cut_and_never_in_an_escape(text: str,
                                                                                                shown: str) -> None:
    """Eight lines and a newline were said cut by '1 more characters', a message of newlines alone by 13, and a cut
    inside an escape sequence left it open for a pipe's reader."""
    assert shortened(text) == shown


def test_regen_says_when_its_settings_give_the_same_answer_and_how_to_vary_it(tmp_path: Path) -> None:
    """/regen with a fixed seed (or at temperature 0) repeated its answer token for token without a word why."""
    chat = Chat(tmp_path / "home", "--seed", "42", "--temperature", "0.8", "--no-markdown", "-n", "4")
    try:
        chat.ask("Say hi.")
        seeded = _said(chat, "/regen", "varies it]")
        assert "[seed 42 is fixed, so /regen gives this answer again while it is; /set seed none (or another seed) " \
            "varies it]" in seeded, seeded
        chat.command("/set seed none", "seed")
        mark = len(chat.transcript.getvalue())
        chat.child.sendline("/regen")
        chat.sync()
        assert "varies it" not in chat.transcript.getvalue()[mark:], "a random seed: each answer is drawn afresh"
        chat.command("/set seed 5", "seed")  # the last answer came of a random seed: this one repeats it no more
        reseeded = _said(chat, "/regen", "varies it]")
        assert "[seed 5 is fixed, so /regen gives this answer again while it is;" in reseeded, reseeded
        assert "same settings give the same answer" not in reseeded, reseeded
        chat.command("/set temperature 0", "temperature")
        greedy = _said(chat, "/regen", "varies it]")
        assert "[temperature 0 always takes the likeliest token, so /regen gives this answer again while it is set; " \
            "/set temperature 0.7 varies it]" in greedy, greedy
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize(("settings", "said"), [
    ({"seed": 42}, "seed 42 is fixed"), ({"seed": 7, "temperature": 0.0}, "temperature 0"),
    ({"seed": -1}, None), ({}, None)])
def test_the_same_answer_note_is_said_for_a_fixed_seed_or_temperature_0(settings: dict, said: str | None) -> None:
    from localgen.repl_text import same_answer_note  # here: the module's other tests load without it

    note = same_answer_note(SamplingParams(**settings))
    assert note is None if said is None else said in note


def test_a_message_with_a_file_attached_is_saved_and_listed_with_the_file_named(tmp_path: Path) -> None:
    """After /file doc.txt and Summarize, the conversation was listed by the document's first words."""
    (tmp_path / "doc.txt").write_text("The quarterly report says revenue grew by ten percent.\n" * 5)
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "3", cwd=tmp_path)
    try:
        chat.command("/file doc.txt", "to the next message")
        turn = chat.ask("Summarize")["turns"][-1]
        assert turn["attached"] == [{"name": "doc.txt", "characters": 275, "sent": 274}], turn
        assert turn["typed"] == "Summarize", turn
        saved = chat.saved_at()
        chat.child.sendline("/regen")
        chat.wait_for(lambda _: chat.saved_at() > saved)
        chat.sync()
        assert chat.conversation()["turns"][-1]["attached"] == turn["attached"], "/regen asks it with its files"
        listed = _said(chat, "/list", "(this chat)")
        assert "1 exchange [doc.txt] Summarize (this chat)" in listed, listed
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
