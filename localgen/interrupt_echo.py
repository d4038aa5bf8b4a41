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
    """While it lasts, the terminal on stream (the foreground's, echoing keys) writes no ^C for Ctrl-C (ECHOCTL
    off): yields whether it does not, for the caller to write ECHOES' after the answer; its modes come back however it
    ends."""
    try:
        import termios
    except ImportError:  # not a Unix terminal
        yield False
        return
    try:
        fd = stream.fileno()
        modes = termios.tcgetattr(fd)
        foreground = os.tcgetpgrp(fd) == os.getpgrp()  # setting a terminal from the background would stop us
    except (AttributeError, ValueError, OSError, termios.error):  # not a terminal
        yield False
        return
    echoed = termios.ECHO | termios.ECHOCTL
    if not foreground or modes[3] & echoed != echoed:
        yield False
        return
    quiet = [*modes[:3], modes[3] & ~termios.ECHOCTL, *modes[4:]]
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
    except (OSError, termios.error):
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, modes)
