"""Incremental stop-string matching."""

from __future__ import annotations

import pytest

from localgen.stopping import StopMatcher


def _stream(stops: tuple[str, ...], pieces: list[str]) -> tuple[str, str | None]:
    matcher = StopMatcher(stops)
    out = []
    for piece in pieces:
        out.append(matcher.feed(piece))
        if matcher.matched:
            return "".join(out), matcher.matched
    out.append(matcher.flush())
    return "".join(out), None


@pytest.mark.parametrize(
    ("pieces", "stops", "expected", "matched"),
    [
        (["Hello", " wor", "ld"], ("world",), "Hello ", "world"),
        (["ab", "c<", "/s", "> tail"], ("</s>",), "abc", "</s>"),
        (["no stop here"], ("xyz",), "no stop here", None),
        (["x", "y"], ("yz",), "xy", None),  # a partial match at the end is released
        (["aaa", "ab"], ("aab",), "aa", "aab"),
        (["one", "two"], ("two", "ne"), "o", "ne"),
    ],
)
def test_stop_matching(pieces: list[str], stops: tuple[str, ...], expected: str, matched: str | None) -> None:
    assert _stream(stops, pieces) == (expected, matched)


def test_held_text_is_not_emitted_early() -> None:
    matcher = StopMatcher(("STOP",))
    assert matcher.feed("abc ST") == "abc "
    assert matcher.feed("O") == ""
    assert matcher.feed("x") == "STOx"


REASONED = "<think>\nStep one.\n\nStep two.\n</think>\n\nThe answer is 42.\n\nMore text."


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
@pytest.mark.parametrize(("text", "inside", "expected"), [
    (REASONED, False, "<think>\nStep one.\n\nStep two.\n</think>\n\nThe answer is 42."),
    (REASONED.removeprefix("<think>"), True, "\nStep one.\n\nStep two.\n</think>\n\nThe answer is 42."),
    ("  The answer.\n\nMore", False, "  The answer."),  # no reasoning: matched from the start
    ("<b>bold</b>\n\nMore", False, "<b>bold</b>"),  # a tag that is no <think>
])
def test_answer_stops_pass_the_reasoning_and_its_blank_lines(size: int, text: str, inside: bool,
                                                              expected: str) -> None:
    from localgen.thinking import AnswerStops

    matcher, out = AnswerStops(("\n\n",), inside=inside), ""
    for start in range(0, len(text), size):
        out += matcher.feed(text[start:start + size])
        if matcher.matched:
            break
    assert (out, matcher.matched) == (expected, "\n\n")


def test_answer_stops_release_a_start_that_never_became_a_tag() -> None:
    from localgen.thinking import AnswerStops

    matcher = AnswerStops(("STOP",), inside=False)
    assert matcher.feed("  <th") == "" and matcher.flush() == "  <th" and matcher.matched is None


LATER_TAG = "Intro.<think>\nA\n\nB\n</think>\n\nAnswer.\n\nMore."


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
@pytest.mark.parametrize(("stop", "expected"), [
    ("\n\n", "Intro.<think>\nA"),  # a <think> after the answer's start is text, matched as the rest
    ("B", "Intro.<think>\nA\n\n"),
    ("<think>", "Intro."),
    ("Answer.", "Intro.<think>\nA\n\nB\n</think>\n\n"),
])
def test_answer_stops_match_a_later_think_tag_as_answer_text(size: int, stop: str, expected: str) -> None:
    from localgen.thinking import AnswerStops

    matcher, out = AnswerStops((stop,), inside=False), ""
    for start in range(0, len(LATER_TAG), size):
        out += matcher.feed(LATER_TAG[start:start + size])
        if matcher.matched:
            break
    assert (out, matcher.matched) == (expected, stop)


def test_answer_stops_match_a_start_of_think_that_never_finished() -> None:
    from localgen.thinking import AnswerStops

    matcher = AnswerStops(("<th",), inside=False)
    assert matcher.feed("Yes <th") == "Yes " and matcher.flush() == "" and matcher.matched == "<th"


@pytest.mark.parametrize(("stop", "warned"), [
    ("\\n", "--stop '\\n' holds \\n as a backslash and a letter, not a newline"),
    ("Q:\\t", "--stop 'Q:\\t' holds \\t as a backslash and a letter, not a tab"),
    ("\n", None),  # a newline, as $'\n' gives
    ("a\\b", None),
    ("User:", None),
])
def test_a_stop_string_with_a_typed_escape_is_warned_about(stop: str, warned: str | None) -> None:
    """llama-cli reads --reverse-prompt '\\n' as a newline; here it was two characters that never matched, silently."""
    from localgen.stopping import typed_escape_warnings

    found = typed_escape_warnings([stop])
    if warned is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(warned) and "--stop $'" in found[0], found



def test_chat_s_set_stop_reads_escapes_and_keeps_any_other_backslash() -> None:
    from localgen.stopping import escapes_read

    assert escapes_read(r"\n Q:\t \r\n") == "\n Q:\t \r\n"
    assert escapes_read(r"a\\tb \d \\\n \x") == "a\\tb \\d \\\n \\x"  # \\ is one backslash; \d and \x stay


@pytest.mark.parametrize(("typed", "stops"), [
    ("'###' , 'User:'", ["###", "User:"]),  # a space before the comma
    ("'###','User:'", ["###", "User:"]),
    ("x, y", ["x", "y"]),  # unquoted
    ("x,y ,z", ["x", "y", "z"]),
    ("### , User:", ["###", "User:"]),
    ("'a, b' 'c,d'", ["a, b", "c,d"]),  # a comma in quotes stays
    ("',' x", [",", "x"]),
    (",", []),  # a lone comma is no stop string
    ("x ,, y,", ["x", "y"]),
])
def test_set_stop_parts_stop_strings_at_commas_between_words(typed: str, stops: list[str]) -> None:
    """A comma outside quotes parts two stop strings, as a space does, wherever it stands; /set stop '###' , 'User:'
    set ',' as a stop string, and /set stop x, y set 'x,'."""
    from localgen.stopping import words_read

    assert words_read(typed) == stops


@pytest.mark.parametrize(("chunks", "text", "thinking"), [
    (["\n", "<think>", "Hmm.", "</think>", "\n\n", "Paris."], "Paris.", "Hmm."),  # token by token, as streamed
    ([" \n", "<think>", "</think>", "Yes."], "Yes.", ""),  # an empty block
    (["\n", "<think>", "cut off"], "", "cut off"),
    ([" ", "\n"], " \n", ""),  # blank space alone is the answer
    ([" ", "sat."], " sat.", ""),  # no block: the answer keeps its space
])
def test_blank_space_before_the_reasoning_is_no_answer(chunks: list[str], text: str, thinking: str) -> None:
    """--hide-thinking and --json left the blank space a model opens its <think> block after in the answer, when it
    came as a token of its own: run printed '\\n\\n\\nParis.' where one chunk gave 'Paris.'."""
    from localgen.events import Finished, TextChunk, Timings, Usage
    from localgen.thinking import without_thinking

    done = Finished("".join(chunks), "stop", Usage(1, 0, len(chunks)), Timings(0.1, 0.1, 10.0, 0.1, 10.0))
    events = list(without_thinking(iter([*(TextChunk(c) for c in chunks), done]), lambda: False))
    assert ["".join(e.text for e in events if isinstance(e, TextChunk)), events[-1].text] == [text, text]
    assert events[-1].thinking == thinking


@pytest.mark.parametrize("opening", ["\ufeff", "\n\ufeff", "\ufeff\n"])
def test_a_byte_order_mark_before_the_reasoning_is_blank_space(opening: str) -> None:
    """A <think> after a byte-order mark (U+FEFF, which str.strip keeps) was taken for answer text, its reasoning
    shown as the answer, and a stop string matched inside it."""
    from localgen.events import Finished, TextChunk, Timings, Usage
    from localgen.thinking import AnswerStops, without_thinking

    chunks = [opening, "<think>", "User: hmm", "</think>", "\n\n", "Paris."]
    done = Finished("".join(chunks), "stop", Usage(1, 0, len(chunks)), Timings(0.1, 0.1, 10.0, 0.1, 10.0))
    events = list(without_thinking(iter([*(TextChunk(c) for c in chunks), done]), lambda: False))
    assert (events[-1].text, events[-1].thinking) == ("Paris.", "User: hmm")
    matcher = AnswerStops(("User:",), inside=False)
    out = "".join(matcher.feed(chunk) for chunk in chunks) + matcher.flush()
    assert (out, matcher.matched) == ("".join(chunks), None)
