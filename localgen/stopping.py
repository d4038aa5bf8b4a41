"""Stop strings: warnings about ones that cannot match as meant, and incremental matching over streamed text, without
rescanning the output."""

from __future__ import annotations

import re

ESCAPES = {"\\n": "a newline", "\\t": "a tab", "\\r": "a carriage return"}
READ_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\r": "\r", "\\\\": "\\"}  # chat's /set stop reads these


def escapes_read(text: str) -> str:
    """A stop string typed in the chat (/set stop) with \\n, \\t, \\r and \\\\ read as what they stand for (any other
    backslash is kept)."""
    return re.sub(r"\\[ntr\\]", lambda found: READ_ESCAPES[found[0]], text)


def partial_suffix(text: str, word: str, *, longer_than: int = 0) -> int:
    """Length of the longest suffix of text, over longer_than, that is a proper prefix of word; else 0."""
    for size in range(min(len(word) - 1, len(text)), longer_than, -1):
        if text.endswith(word[:size]):
            return size
    return 0


def typed_escape_warnings(stops: list[str]) -> list[str]:
    """A warning for each --stop string holding a typed escape (a backslash and n, t or r): llama-cli reads '\\n' in
    its reverse prompts as a newline; localgen takes --stop as the shell gives it, so such a string rarely matches."""
    import shlex

    warnings = []
    for stop in stops:
        typed = [(escape, name) for escape, name in ESCAPES.items() if escape in stop]
        if typed:
            escape, name = typed[0]
            meant = "$'" + stop.replace("'", "\\'") + "'"
            warnings.append(f"--stop {shlex.quote(stop)} holds {escape} as a backslash and a letter, not {name}: stop "
                            f"strings are taken as typed (in bash or zsh, --stop {meant} turns {escape} into {name})")
    return warnings


def hidden_tag_stops(stops: list[str]) -> list[str]:
    """A warning for each --stop string that spells <think> or </think>: --hide-thinking matches stop strings in the
    answer shown, which has those tags left out, so such a string never matches."""
    from localgen.thinking import CLOSE_TAG, OPEN_TAG  # thinking imports this module

    return [f"--stop {stop!r} never matches with --hide-thinking: stop strings are matched in the answer, which has "
            f"its {OPEN_TAG}…{CLOSE_TAG} reasoning left out (without --hide-thinking it stops at the tag)"
            for stop in stops if OPEN_TAG in stop or CLOSE_TAG in stop]


class StopMatcher:
    """Holds back text that may be the start of a stop string; reports a full match."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.matched: str | None = None

    def feed(self, text: str) -> str:
        """Add streamed text; return what is now safe to emit (text before any stop string)."""
        if not self._stops:
            return text
        buffer = self._held + text
        cut = min((i for i in (buffer.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.matched = next(s for s in self._stops if buffer.find(s) == cut)
            self._held = ""
            return buffer[:cut]
        keep = 0
        for stop in self._stops:
            keep = partial_suffix(buffer, stop, longer_than=keep) or keep
        self._held = buffer[len(buffer) - keep:] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """Release held-back text at the end of the stream."""
        held, self._held = self._held, ""
        return held

