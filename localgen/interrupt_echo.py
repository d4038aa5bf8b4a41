"""A key that stops an answer on a terminal (Ctrl-C, Ctrl-\\) echoed after the text shown: the terminal itself would
echo it as the key is pressed, before the text the line wrapper still holds (the end of a word) and the model's
last tokens, which the answer saved keeps."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import TextIO

ECHOES = {signal.SIGINT: "^C", signal.SIGQUIT: "^\\"}  # as a terminal's ECHOCTL writes these keys


class EchoHeld:
    """Whether the terminal writes no ^C for Ctrl-C (nor ^\\ for Ctrl-\\): as the hold begins, then, once it is over,
    as it ended (a run stopped with Ctrl-Z gets its shell's modes, which echo keys, until it is continued in the
    foreground)."""

    def __init__(self, held: bool) -> None:
        """Held or not, as the hold begins."""
        self.held = held

    def __bool__(self) -> bool:
        """True while the terminal's echo of those keys is held (the caller writes ECHOES after the answer)."""
        return self.held


@contextlib.contextmanager
def key_echo_held(stream: TextIO) -> Iterator[EchoHeld]:
    """While it lasts, the terminal on stream writes no ^C for Ctrl-C (nor ^\\ for Ctrl-\\), held again after Ctrl-Z
    and `fg`; yields whether that is so (a terminal in the foreground that echoed them), for the caller to write the
    key's ECHOES after the answer. The terminal echoes them again however it ends, in the background (`bg`) too."""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):  # no file behind it
        fd = None
    held = EchoHeld(fd is not None and _hold_echo(fd))
    if not held:
        yield held
        return
    try:
        with _held_again_when_continued(fd):
            yield held
    finally:
        held.held = _give_echo_back(fd)


def _hold_echo(fd: int) -> bool:
    """Turn ECHOCTL off on the terminal fd, where it is in the foreground and echoes keys so; whether it did (not on
    a file or pipe, nor on a terminal in the background, which setting would stop us)."""
    try:
        import termios
    except ImportError:  # not a Unix terminal
        return False
    try:
        modes = termios.tcgetattr(fd)
        if os.tcgetpgrp(fd) != os.getpgrp() or modes[3] & (termios.ECHO | termios.ECHOCTL) != (
                termios.ECHO | termios.ECHOCTL):
            return False
        termios.tcsetattr(fd, termios.TCSANOW, [*modes[:3], modes[3] & ~termios.ECHOCTL, *modes[4:]])
    except (OSError, termios.error):  # not a terminal, or one gone
        return False
    return True


@contextlib.contextmanager
def _held_again_when_continued(fd: int) -> Iterator[None]:
    """While it lasts, a run continued in the foreground (`fg` after Ctrl-Z: the shell gave the terminal its own
    modes as the run stopped) holds the echo on fd again."""
    if not hasattr(signal, "SIGCONT") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGCONT, lambda _signum, _frame: _hold_echo(fd))
    try:
        yield
    finally:
        signal.signal(signal.SIGCONT, signal.SIG_DFL if previous is None else previous)


def _give_echo_back(fd: int) -> bool:
    """Turn ECHOCTL on again on the terminal fd, the rest of its modes left as they are now (the shell's, where the
    run went on in the background: it is at its prompt); whether it was off, held to the end."""
    import termios

    try:
        modes = termios.tcgetattr(fd)
        if modes[3] & termios.ECHOCTL:  # the shell gave the terminal its modes as Ctrl-Z stopped the run
            return False
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})  # setting from the background
        try:  # (`bg`) would stop the run until `fg` (Stopped (tty output)) where SIGTTOU is not held back
            termios.tcsetattr(fd, termios.TCSANOW, [*modes[:3], modes[3] | termios.ECHOCTL, *modes[4:]])
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    except (OSError, termios.error):  # the terminal is gone
        return False
    return True
