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
    """Stop strings matched in the answer only: a <think> block that the prompt opens, or that the answer opens
    with, passes unmatched (for --hide-thinking, where a stop inside the hidden reasoning leaves no answer)."""

    def __init__(self, stops: tuple[str, ...], *, inside: bool) -> None:
        self._matcher = StopMatcher(stops)
        self._state = "inside" if inside else "start"  # start: not known yet whether the answer opens with <think>;
        # then inside the reasoning, after it (its blank lines), or in the answer
        self._held = ""  # at the start: text that may yet be <think>; inside: the last characters passed on

    @property
    def matched(self) -> str | None:
        """The stop string found, once found."""
        return self._matcher.matched

    def feed(self, text: str) -> str:
        """Add streamed text; return what is now safe to emit (the reasoning at once, the answer before a stop)."""
        out = ""
        while text:
            if self._state == "answer":
                return out + self._matcher.feed(text)
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
            out, text, self._held, self._state = out + text[:cut], text[cut:], "", "after"
        return out

    def flush(self) -> str:
        """Release held-back text at the end of the stream."""
        held = self._held if self._state == "start" else ""
        self._held = ""
        return held + self._matcher.flush()


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
