"""A key that stops an answer on a terminal (Ctrl-C, Ctrl-\\) echoed after the text shown: the terminal itself would
echo it as the key is pressed, before the text the line wrapper still holds (the end of a word) and the model's
last tokens, which the answer saved keeps."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import TextIO

ECHOES = {signal.SIGINT: "^C", signal.SIGQUIT: "^\\"}  # as a terminal's ECHOCTL writes these keys


@contextlib.contextmanager
def key_echo_held(stream: TextIO) -> Iterator[bool]:
    """While it lasts, the terminal on stream writes no ^C for Ctrl-C (nor ^\\ for Ctrl-\\); yields whether that is
    so (a terminal in the foreground that echoed them), for the caller to write the key's ECHOES after the answer.
    The terminal's modes come back however it ends."""
    held = _hold_echo(stream)
    try:
        yield held is not None
    finally:
        if held is not None:
            _set_modes(*held)


def _hold_echo(stream: TextIO) -> tuple[int, list] | None:
    """Turn ECHOCTL off on the terminal on stream, where it is in the foreground and echoes keys so; the terminal
    and the modes it had, or None where nothing changed (no terminal, or one in the background, which setting would
    stop us)."""
    try:
        import termios
    except ImportError:  # not a Unix terminal
        return None
    try:
        fd = stream.fileno()
        modes = termios.tcgetattr(fd)
        if os.tcgetpgrp(fd) != os.getpgrp() or modes[3] & (termios.ECHO | termios.ECHOCTL) != (
                termios.ECHO | termios.ECHOCTL):
            return None
        termios.tcsetattr(fd, termios.TCSANOW, [*modes[:3], modes[3] & ~termios.ECHOCTL, *modes[4:]])
    except (AttributeError, ValueError, OSError, termios.error):  # not a terminal
        return None
    return fd, modes


def _set_modes(fd: int, modes: list) -> None:
    """Give the terminal fd its modes back (nothing where it is gone)."""
    import termios

    with contextlib.suppress(OSError, termios.error):
        termios.tcsetattr(fd, termios.TCSANOW, modes)
