"""Incremental stop-string matching over streamed text, without rescanning the output."""

from __future__ import annotations


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
        keep = self._longest_partial_suffix(buffer)
        self._held = buffer[len(buffer) - keep:] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """Release held-back text at the end of the stream."""
        held, self._held = self._held, ""
        return held

    def _longest_partial_suffix(self, buffer: str) -> int:
        """Length of the longest suffix of buffer that is a proper prefix of a stop string."""
        best = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(buffer)), best, -1):
                if buffer.endswith(stop[:size]):
                    best = size
                    break
        return best
