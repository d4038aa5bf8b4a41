"""Text counted and cut by the characters a reader sees, a letter and its combining accents one: the rule shared by the
conversations listing's preview, a system prompt in a summary line (brief) and a resumed chat's last exchange
(shortened), in a real pseudo-terminal on the bundled model."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from localgen import text_cut
from localgen.conversation_transcript import shortened
from localgen.repl_text import brief
from localgen.text_cut import character_count, cut_characters
from tests.test_repl import Chat

ACCENTED = "e\u0301"  # é as macOS writes it: e and a combining acute accent
KI = "\u0915\u093f"  # कि: ka and the vowel sign i (category Mc, combining class 0), drawn before it
KAN = "\u0e01\u0e31"  # กั: ko kai and the vowel mark mai han-akat (Mn, combining class 0), drawn above it
HEART = "\u2764\ufe0f"  # ❤️: a heart and the variation selector VS16 (Mn, combining class 0) that draws it as emoji


@pytest.mark.parametrize(("text", "count"), [
    ("", 0), ("plain", 5), (ACCENTED * 3, 3), ("cafe\u0301", 4), ("a\u0301\u0323b", 2),  # two accents on one letter
    ("\u0301a", 2),  # an accent with no letter before it is a character of its own
    (KI, 1), (KI * 3, 3), (KAN + "\u0e01", 2), (HEART * 2, 2), ("\ufe0f", 1),
])
def test_a_letter_and_its_accents_count_as_one_character(text: str, count: int) -> None:
    """Counting code points took e + U+0301 for two characters; counting combining classes took a mark of class 0
    (a vowel sign, a variation selector) for a character of its own."""
    assert character_count(text) == count


@pytest.mark.parametrize(("text", "count", "kept"), [
    (ACCENTED * 5, 2, ACCENTED * 2), ("cafe\u0301s", 4, "cafe\u0301"), ("a\u0301\u0323bc", 1, "a\u0301\u0323"),
    ("short", 9, "short"), (ACCENTED, 0, ""), (ACCENTED, -1, ""),
    (KI, 1, KI), (KI * 3, 2, KI * 2), (KAN * 2, 1, KAN), (HEART + "!", 1, HEART), ("\ufe0f\ufe0fa", 1, "\ufe0f\ufe0f"),
    (KI * 2, 3, KI * 2), ("\ufe0f", 1, "\ufe0f"),
])
def test_a_cut_never_parts_a_letter_from_its_accents(text: str, count: int, kept: str) -> None:
    """A cut by code points left e without its accent; one by combining classes parted कि, กั and ❤️."""
    assert cut_characters(text, count) == kept


class _CountedLookups:
    """unicodedata for text_cut, counting how many code points it looks up."""

    def __init__(self) -> None:
        self.lookups = 0

    def category(self, char: str) -> str:
        self.lookups += 1
        return unicodedata.category(char)


def test_a_long_text_is_cut_and_counted_without_looking_up_each_code_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut looked up every code point of the text, and the count each code point as often as it came: a resumed
    chat's answer of a million characters was looked up whole, twice, to show its first 600."""
    counted = _CountedLookups()
    monkeypatch.setattr(text_cut, "unicodedata", counted)
    text = (KI + ACCENTED + "a") * 200_000
    assert cut_characters(text, 4) == KI + ACCENTED + "a" + KI
    assert counted.lookups <= 8, counted.lookups  # the code points up to the fifth character
    counted.lookups = 0
    assert character_count(text) == 600_000
    assert counted.lookups <= 5 + 1, counted.lookups  # each of its five code points once, and the first again


def test_brief_counts_and_cuts_by_characters() -> None:
    """brief('e\u0301' * 100, 80) ended e… with the accent lost and said 200 characters of 100."""
    assert brief(ACCENTED * 100, 80) == ACCENTED * 79 + "… (100 characters)"
    assert brief(ACCENTED * 80, 80) == ACCENTED * 80  # 80 characters fit in 80


def test_a_resumed_message_is_cut_and_counted_by_characters() -> None:
    """shortened cut 600 code points, 300 accented letters, and counted the rest by code points."""
    assert shortened(ACCENTED * 601) == f"{ACCENTED * 600} […1 more character: /history shows it whole]"
    assert shortened(ACCENTED * 600) == ACCENTED * 600


def _words(text: str) -> str:
    """Text as the screen shows it, its runs of whitespace (the terminal's line breaks too) as one space."""
    return " ".join(re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", text).split())


def test_a_resumed_chat_cuts_its_last_answer_and_show_its_system_prompt_by_characters(tmp_path: Path) -> None:
    """A resumed chat's last answer and /show's system prompt were cut by code points: an accent parted from its
    letter, and letters with accents counted twice."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    word = "cafe\u0301 "  # five characters, six code points
    (folder / "accents.json").write_text(json.dumps({"format": 1, "name": "accents", "system": word * 30, "turns": [
        {"user": "Where?", "answer": "xy" + word * 130}]}))  # 652 characters, 651 without the last space
    chat = Chat(home, "--resume", "accents", "--no-markdown", "-n", "2", wait_for_prompt=False)
    try:
        chat.expect_words("more characters: /history shows it whole]")
        chat.sync()
        resumed = _words(chat.transcript.getvalue())
        assert f"{word * 119}caf […51 more characters: /history shows it whole]" in resumed, ascii(resumed[-160:])
        mark = len(chat.transcript.getvalue())
        chat.command("/show", "conversation:")
        shown = _words(chat.transcript.getvalue()[mark:])
        assert f"system: {word * 15}cafe\u0301… (150 characters)" in shown, ascii(shown)
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_text_of_many_distinct_marks_is_counted_by_the_same_rule() -> None:
    """Past MARKS_COUNTED_APART distinct marks, one pass counts them (a scan for each mark took 1.8 s a million
    characters); the count is the rule's either way."""
    marks = [chr(code) for code in range(0x300, 0x370)]  # 112 combining accents
    text = "".join(f"a{mark}" for mark in marks) * 3
    assert len(set(marks)) > text_cut.MARKS_COUNTED_APART
    assert character_count(text) == sum(1 for at, char in enumerate(text)
                                        if at == 0 or unicodedata.category(char)[0] != "M") == 3 * len(marks)
