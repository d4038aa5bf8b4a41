"""Terminal output: model text on stdout (raw bytes on a pipe), everything else on stderr."""

from __future__ import annotations

import sys
from typing import TextIO

from localgen.events import Completion

FINISH_NOTES = {
    "length": "stopped at the --max-tokens limit",
    "context": "stopped at the end of the context window (raise --ctx-size for longer output)",
    "interrupted": "interrupted",
}


class TextOutput:
    """Streams model text to stdout, flushed per piece, ending with exactly one newline."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._pending_newlines = ""
        self._wrote_any = False

    def write(self, text: str) -> None:
        """Write a piece of text, holding back trailing newlines until more text comes."""
        body = text.rstrip("\n")
        if not body:
            self._pending_newlines += text
            return
        self._stream.write(self._pending_newlines + body)
        self._stream.flush()
        self._pending_newlines = text[len(body):]
        self._wrote_any = True

    def finish(self) -> None:
        """End the output with one newline (none when nothing was written)."""
        if self._wrote_any:
            self._stream.write("\n")
            self._stream.flush()
        self._pending_newlines = ""


def stderr_is_tty() -> bool:
    """True when stderr is an interactive terminal."""
    return sys.stderr.isatty()


def say(message: str) -> None:
    """A status line on stderr."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    """A warning on stderr."""
    say(f"localgen: warning: {message}")


def error(message: str, hint: str | None = None) -> None:
    """A one-line error with its hint on stderr."""
    say(f"localgen: error: {message}" + (f" (hint: {hint})" if hint else ""))


def format_stats(completion: Completion) -> str:
    """The one-line --stats summary of a generation."""
    usage, t = completion.usage, completion.timings
    cached = f" ({usage.cached_tokens} cached)" if usage.cached_tokens else ""
    return (f"prompt {usage.prompt_tokens} tok{cached}, TTFT {t.ttft_s * 1000:.0f} ms, "
            f"prefill {t.prefill_tokens_per_s:.1f} tok/s, generated {usage.completion_tokens} tok, "
            f"decode {t.decode_tokens_per_s:.1f} tok/s, finish {completion.finish_reason}")


def finish_note(completion: Completion) -> str | None:
    """A note about why output stopped early, or None when it ended normally."""
    return FINISH_NOTES.get(completion.finish_reason)
