"""Split streamed text into reasoning (inside <think>…</think>) and answer, across chunk boundaries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from localgen.events import Event, Finished, TextChunk
from localgen.stopping import partial_suffix

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
