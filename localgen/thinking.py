"""Split streamed text into reasoning and answer, across chunk boundaries: the reasoning is the <think>…</think> block
an answer opens with (after blank space), or the one its prompt opened (a template whose generation prompt ends with
<think>, as Qwen3's and DeepSeek-R1's may), or the analysis and commentary channels of an answer that opens in
GPT-OSS's harmony format (<|channel|>); a <think> anywhere else is text the model wrote (an HTML-ish tag quoted, the tag
explained)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from localgen.events import Event, Finished, TextChunk
from localgen.harmony import CHANNEL, FINAL_HEADER, HarmonySplitter, markup_begun
from localgen.input_text import BOM
from localgen.stopping import StopMatcher, partial_suffix

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def after_blank(text: str) -> str:
    """The text after its leading blank space and byte-order marks (U+FEFF, which str.strip keeps)."""
    while (head := text.lstrip().lstrip(BOM)) != text:
        text = head
    return text


def may_open_thinking(text: str) -> bool:
    """True while the start of an answer may yet open a <think> block (blank space, then part of the tag) or a
    harmony message (part of <|channel|>)."""
    head = after_blank(text)
    return (not head.startswith(OPEN_TAG) and OPEN_TAG.startswith(head)) or (len(text) < len(CHANNEL)
                                                                              and CHANNEL.startswith(text))


class ThinkingSplitter:
    """Feed text chunks; get (is_thinking, text) segments, the reasoning block's tags removed."""

    def __init__(self, *, inside: bool = False) -> None:
        self.inside = inside
        self.closed = 0  # </think> tags met so far (one at most: the reasoning's)
        self._at_start = not inside  # not known yet whether the answer opens with <think> (or in harmony)
        self._held = ""
        self._harmony: HarmonySplitter | None = None  # the answer's splitter, where it opened in harmony

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """Split a chunk into segments, holding back what may yet be a tag of the reasoning block."""
        buffer, self._held = self._held + text, ""
        segments: list[tuple[bool, str]] = []
        if self._at_start:
            if may_open_thinking(buffer):
                self._held = buffer
                return segments
            self._at_start = False
            if buffer.startswith(CHANNEL):
                self._harmony = HarmonySplitter()
            opens = buffer.find(OPEN_TAG)
            if self._harmony is None and opens >= 0 and not after_blank(buffer[:opens]):
                if opens:
                    segments.append((False, buffer[:opens]))
                buffer, self.inside = buffer[opens + len(OPEN_TAG):], True
        if self._harmony is not None:
            segments = self._harmony.feed(buffer)
            self.inside, self.closed = self._harmony.inside, self._harmony.closed
            return segments
        if self.inside:
            closes = buffer.find(CLOSE_TAG)
            if closes < 0:
                keep = partial_suffix(buffer, CLOSE_TAG)
                buffer, self._held = buffer[:len(buffer) - keep], buffer[len(buffer) - keep:]
                return segments + ([(True, buffer)] if buffer else [])
            if closes:
                segments.append((True, buffer[:closes]))
            buffer, self.inside = buffer[closes + len(CLOSE_TAG):], False
            self.closed += 1
        return segments + ([(False, buffer)] if buffer else [])

    @property
    def in_harmony(self) -> bool:
        """Whether the answer is in GPT-OSS's harmony format (a message of it begun)."""
        return self._harmony is not None and self._harmony.messages > 0

    def flush(self, *, cut: bool = False) -> list[tuple[bool, str]]:
        """Release any held-back text at the end of the stream (cut: the stream was cut off, cut_off says, so held
        text that had begun a tag, markup_begun says, is a tag that never finished, and is dropped)."""
        if self._harmony is not None:
            segments = self._harmony.flush(cut=cut)
            self.inside, self.closed = self._harmony.inside, self._harmony.closed  # a last message end, taken now
            return segments
        held, self._held = self._held, ""
        return [(self.inside, held)] if held and not (cut and markup_begun(held)) else []


class AnswerStops:
    """Stop strings matched in the answer only, never inside its reasoning: the <think> block the prompt opens or the
    answer opens with, or a harmony answer's messages before its final one (for --hide-thinking, which leaves them out
    of the answer shown); a <think> later is answer text.
    """

    def __init__(self, stops: tuple[str, ...], *, inside: bool) -> None:
        self._matcher = StopMatcher(stops)
        self._state = "inside" if inside else "start"  # start: not known yet whether the answer opens with <think>;
        # then inside the block, after it (its blank lines, before any answer), or in the answer
        self._held = ""  # at the start: text that may yet be <think>; inside: the last characters passed on
        self._close = CLOSE_TAG  # what ends the reasoning: </think>, or a harmony answer's final header

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
                if may_open_thinking(self._held + text):
                    self._held += text  # whitespace, or the start of <think>
                    return out
                text, self._held = self._held + text, ""
                self._close = FINAL_HEADER if text.startswith(CHANNEL) else CLOSE_TAG
                self._state = "inside" if after_blank(text).startswith(OPEN_TAG) or text.startswith(CHANNEL) \
                    else "answer"
                continue
            seen = self._held + text
            end = seen.find(self._close)
            if end < 0:
                self._held = seen[-(len(self._close) - 1):]
                return out + text
            cut = end + len(self._close) - len(self._held)
            out, text, self._held = out + text[:cut], text[cut:], ""
            self._state = "after"
        return out

    def flush(self) -> str:
        """Release held-back text at the end of the stream (a start of <think> that never finished is answer)."""
        held = self._held if self._state == "start" else ""
        self._held = ""
        passed = self._matcher.feed(held) if held else ""
        return passed if self.matched is not None else passed + self._matcher.flush()


def prompt_opens_thinking(prompt_text: str) -> bool:
    """True when the template's generation prompt already opened a <think> block."""
    tail = prompt_text.rstrip()
    return tail.endswith(OPEN_TAG)


def cut_off(finished: Finished | None) -> bool:
    """Whether an answer that finished so was cut off (by -n, Ctrl-C, the context's end; None: no end came, an error
    cut it short), where the model or a stop string ended it."""
    return finished is None or finished.finish_reason != "stop"


def _block_closed(splitter: ThinkingSplitter | None) -> bool | None:
    """Whether the reasoning block the splitter met was closed (None: it met none)."""
    if splitter is None or not (splitter.inside or splitter.closed):
        return None
    return not splitter.inside


def without_thinking(events: Iterator[Event], opens: Callable[[], bool]) -> Iterator[Event]:
    """The events of an answer with its <think> reasoning taken out; opens() tells, at the first text, whether the
    prompt opened the block (the prompt is final only once the answer streams).

    Text chunks carry only the answer (the blank lines after a </think> dropped); the Finished event's text is that
    answer, its `thinking` the reasoning and its `thinking_closed` whether the reasoning's block was closed.
    """
    splitter: ThinkingSplitter | None = None
    reasoning: list[str] = []
    answer: list[str] = []
    blank: list[str] = []  # blank text the answer starts with: the space before a reasoning block, dropped then

    def answer_parts(segments: list[tuple[bool, str]]) -> Iterator[TextChunk]:
        for thinking, text in segments:
            if thinking:
                reasoning.append(text)
                blank.clear()
                continue
            if not answer and splitter is not None and splitter.closed:
                text = text.lstrip()
                blank.clear()
            if not answer and not after_blank(text):
                blank.append(text)
                continue
            text, blank[:] = "".join(blank) + text, []
            answer.append(text)
            yield TextChunk(text)

    def blank_answer() -> Iterator[TextChunk]:
        """An answer of blank space alone, held back in case a reasoning block came after it."""
        if not answer and (text := "".join(blank)):
            answer.append(text)
            yield TextChunk(text)

    for event in events:
        if isinstance(event, TextChunk):
            splitter = splitter or ThinkingSplitter(inside=opens())
            yield from answer_parts(splitter.feed(event.text))
        elif isinstance(event, Finished):
            yield from answer_parts(splitter.flush(cut=cut_off(event)) if splitter else [])
            yield from blank_answer()
            yield replace(event, text="".join(answer), thinking="".join(reasoning).strip(),
                          thinking_closed=_block_closed(splitter))
        else:
            yield event


def split_reasoning(text: str, *, opened: bool) -> tuple[str, str] | None:
    """A whole answer's (reasoning, answer), as without_thinking splits them as they stream (opened: the prompt opened
    the <think> block); None where the answer has no reasoning, nor is in harmony, or where its reasoning never
    closed (cut off by a limit, or a <think> the model wrote): that text is the answer as it stands."""
    splitter = ThinkingSplitter(inside=opened)
    segments = splitter.feed(text) + splitter.flush()
    if splitter.inside or (_block_closed(splitter) is None and not splitter.in_harmony):
        return None
    reasoning = "".join(part for thinking, part in segments if thinking).strip()
    return reasoning, "".join(part for thinking, part in segments if not thinking).lstrip()
