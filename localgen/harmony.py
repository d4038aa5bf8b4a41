"""GPT-OSS's harmony answers, split as they stream: each message opens with a header (<|channel|>analysis, then
<|start|>assistant<|channel|>final, maybe a recipient or <|constrain|>json) up to <|message|>, and its body runs to
<|end|>; the final channel's bodies are the answer, the analysis and commentary channels' (a preamble before a tool
call, the call's arguments) the reasoning, as --stop matches the final channel only."""

from __future__ import annotations

from localgen.stopping import partial_suffix

CHANNEL = "<|channel|>"  # an answer in harmony opens with it (its generation prompt wrote <|start|>assistant)
MESSAGE = "<|message|>"  # ends a message's header
MESSAGE_ENDS = ("<|end|>", "<|return|>", "<|call|>")  # end a message's body (the last two end the answer, as EOG)
HEADER_OPENS = ("<|start|>", CHANNEL)  # a message end is one only where a header follows it, or the answer ends
REASONING_CHANNELS = ("analysis", "commentary")
FINAL_HEADER = CHANNEL + "final" + MESSAGE  # the answer's own message opens with it
REASONING_GAP = "\n\n"  # between two reasoning messages' bodies in the reasoning
HEADER_LIMIT = 256  # characters: text held this long without <|message|> is no header, but answer


def markup_begun(held: str) -> bool:
    """Whether text held back as what may yet be markup (a tag, a harmony header or message end) has gone past its
    '<' into one (`</thi`, `<|end`, `<|channel|>analysis`): cut off there, it is markup that never finished; a '<'
    alone, or a `<th` that may yet open <think>, may as well be text."""
    return held.startswith(("</", "<|"))


def channel_of(header: str) -> str:
    """The channel a message's header names ('' for none): the word after <|channel|>."""
    _, found, rest = header.partition(CHANNEL)
    words = rest.replace("<|", " ").split()
    return words[0] if found and words else ""


def _first_end(text: str) -> tuple[int, str]:
    """Where the first message end in text starts, and which it is ((-1, '') for none)."""
    found = [(text.find(end), end) for end in MESSAGE_ENDS if end in text]
    return min(found) if found else (-1, "")


class HarmonySplitter:
    """Feed a harmony answer's text chunks; get (is_reasoning, text) segments, its headers and message ends removed
    (as ThinkingSplitter gives a <think> block's)."""

    def __init__(self) -> None:
        self.inside = False  # in an analysis message's body
        self.closed = 0  # analysis messages ended so far
        self._in_header = True
        self.messages = 0  # messages whose body has begun
        self._ending = ""  # a message end met, not known yet to be one: body text unless a header follows
        self._held = ""

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """Split a chunk into segments, holding back a header until its <|message|>, what may yet be a message's end,
        and after one, what may yet open a header (else the end was body text)."""
        buffer, self._held = self._held + text, ""
        segments: list[tuple[bool, str]] = []
        while buffer:
            if self._ending:
                if any(opener.startswith(buffer) for opener in HEADER_OPENS if len(buffer) < len(opener)):
                    self._held = buffer
                    return segments
                if buffer.startswith(HEADER_OPENS):
                    self._end_message()
                else:  # the model wrote the marker as text in its message
                    segments.append((self.inside, self._ending))
                self._ending = ""
                continue
            if self._in_header:
                header, found, rest = buffer.partition(MESSAGE)
                if not found and len(buffer) <= HEADER_LIMIT:
                    self._held = buffer
                    return segments
                if not found:  # no header: the model wrote on without one
                    self.inside, self._in_header, self.messages = False, False, self.messages + 1
                    continue
                self.inside, self._in_header, buffer = channel_of(header) in REASONING_CHANNELS, False, rest
                self.messages += 1
                if self.inside and self.closed:
                    segments.append((True, REASONING_GAP))
                continue
            at, end = _first_end(buffer)
            if at < 0:
                keep = max(partial_suffix(buffer, end) for end in MESSAGE_ENDS)
                buffer, self._held = buffer[:len(buffer) - keep], buffer[len(buffer) - keep:]
                return segments + ([(self.inside, buffer)] if buffer else [])
            if at:
                segments.append((self.inside, buffer[:at]))
            self._ending, buffer = end, buffer[at + len(end):]
        return segments

    def _end_message(self) -> None:
        """End the message whose body ran so far: a header comes next."""
        self.closed += self.inside
        self.inside, self._in_header, self._ending = False, True, ""

    def flush(self, *, cut: bool = False) -> list[tuple[bool, str]]:
        """Release held-back text at the end of the stream: the start of a message end is body text, but where the
        stream was cut off in it (markup_begun); a header that never reached its <|message|> is markup, dropped, or
        where no message came before it and the stream ended there, answer text."""
        held, self._held = self._held, ""
        if self._ending:  # the answer ended after it, or a header that never finished
            self._end_message()
            return []
        if not held or (cut and markup_begun(held)) or (self._in_header and self.messages):
            return []
        return [(self.inside, held)]
