"""Split streamed text into reasoning (inside <think>…</think>) and answer, across chunk boundaries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from localgen.events import Event, Finished, TextChunk
from localgen.stopping import StopMatcher, partial_suffix

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


class ThinkingSplitter:
    """Feed text chunks; get (is_thinking, text) segments with the tags removed."""

    def __init__(self, *, inside: bool = False) -> None:
        self.inside = inside
        self.closed = 0  # </think> tags met so far
        self._held = ""

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """Split a chunk into segments, holding back a possible partial tag."""
        buffer = self._held + text
        segments: list[tuple[bool, str]] = []
        while True:
            tag = CLOSE_TAG if self.inside else OPEN_TAG
            index = buffer.find(tag)
            if index < 0:
                break
            if index:
                segments.append((self.inside, buffer[:index]))
            buffer = buffer[index + len(tag):]
            self.closed += self.inside
            self.inside = not self.inside
        keep = partial_suffix(buffer, CLOSE_TAG if self.inside else OPEN_TAG)
        self._held = buffer[len(buffer) - keep:] if keep else ""
        if len(buffer) > keep:
            segments.append((self.inside, buffer[: len(buffer) - keep]))
        return segments

    def flush(self, *, cut: bool = False) -> list[tuple[bool, str]]:
        """Release any held-back text at the end of the stream (cut: the stream was cut off, so the start of a tag
        held back is a tag that never finished, and is dropped)."""
        held, self._held = self._held, ""
        return [(self.inside, held)] if held and not cut else []


class AnswerStops:
    """Stop strings matched in the answer only, never inside a <think> block: one the prompt opens, one the answer
    opens with, or one later in the answer (for --hide-thinking, which leaves every block out of the answer shown).

    A stop string is matched within a stretch of answer text: one split by a <think> block is not.
    """

    def __init__(self, stops: tuple[str, ...], *, inside: bool) -> None:
        self._matcher = StopMatcher(stops)
        self._state = "inside" if inside else "start"  # start: not known yet whether the answer opens with <think>;
        # then inside a block, after it (its blank lines, before any answer), or in the answer
        self._held = ""  # at the start or in the answer: text that may yet be <think>; inside: the last characters
        # passed on
        self._answered = False  # answer text (not blank) has been passed on

    @property
    def matched(self) -> str | None:
        """The stop string found, once found."""
        return self._matcher.matched

    def feed(self, text: str) -> str:
        """Add streamed text; return what is now safe to emit (the reasoning at once, the answer before a stop)."""
        out = ""
        while text:
            if self._state == "answer":
                passed, text = self._feed_answer(text)
                out += passed
                if self.matched is not None:
                    return out
                continue
            if self._state == "after":  # the blank lines after </think>, which the answer shown leaves out
                rest = text.lstrip()
                out, text = out + text[: len(text) - len(rest)], rest
                self._state = "answer" if rest else "after"
                continue
            if self._state == "start":
                head = (self._held + text).lstrip()
                if not head.startswith(OPEN_TAG) and OPEN_TAG.startswith(head):
                    self._held += text  # whitespace, or the start of <think>
                    return out
                text, self._held = self._held + text, ""
                self._state = "inside" if head.startswith(OPEN_TAG) else "answer"
                continue
            seen = self._held + text
            end = seen.find(CLOSE_TAG)
            if end < 0:
                self._held = seen[-(len(CLOSE_TAG) - 1):]
                return out + text
            cut = end + len(CLOSE_TAG) - len(self._held)
            out, text, self._held = out + text[:cut], text[cut:], ""
            self._state = "answer" if self._answered else "after"
        return out

    def _feed_answer(self, text: str) -> tuple[str, str]:
        """Answer text matched up to a <think> that opens a block (passed on with it, what is held back for a stop
        string released); returns what is safe to emit, and the text after the <think>."""
        seen = self._held + text
        opens = seen.find(OPEN_TAG)
        answer = seen if opens < 0 else seen[:opens]
        keep = partial_suffix(answer, OPEN_TAG) if opens < 0 else 0
        answer, self._held = answer[: len(answer) - keep], answer[len(answer) - keep:]
        self._answered = self._answered or bool(answer.strip())
        passed = self._matcher.feed(answer)
        if opens < 0 or self.matched is not None:
            return passed, ""
        self._state = "inside"
        return passed + self._matcher.flush() + OPEN_TAG, seen[opens + len(OPEN_TAG):]

    def flush(self) -> str:
        """Release held-back text at the end of the stream (a start of <think> that never finished is answer)."""
        held = self._held if self._state in ("start", "answer") else ""
        self._held = ""
        passed = self._matcher.feed(held) if held else ""
        return passed if self.matched is not None else passed + self._matcher.flush()


def prompt_opens_thinking(prompt_text: str) -> bool:
    """True when the template's generation prompt already opened a <think> block."""
    tail = prompt_text.rstrip()
    return tail.endswith(OPEN_TAG)


def without_thinking(events: Iterator[Event], opens: Callable[[], bool]) -> Iterator[Event]:
    """The events of an answer with its <think> reasoning taken out; opens() tells, at the first text, whether the
    prompt opened the block (the prompt is final only once the answer streams).

    Text chunks carry only the answer (the blank lines after a </think> dropped); the Finished event's text is that
    answer and its `thinking` the reasoning.
    """
    splitter: ThinkingSplitter | None = None
    reasoning: list[str] = []
    answer: list[str] = []

    def answer_parts(segments: list[tuple[bool, str]]) -> Iterator[TextChunk]:
        for thinking, text in segments:
            if thinking:
                reasoning.append(text)
                continue
            if not answer and splitter is not None and splitter.closed:
                text = text.lstrip()
            if text:
                answer.append(text)
                yield TextChunk(text)

    for event in events:
        if isinstance(event, TextChunk):
            splitter = splitter or ThinkingSplitter(inside=opens())
            yield from answer_parts(splitter.feed(event.text))
        elif isinstance(event, Finished):
            yield from answer_parts(splitter.flush(cut=event.finish_reason != "stop") if splitter else [])
            yield replace(event, text="".join(answer), thinking="".join(reasoning).strip())
        else:
            yield event
