"""Ctrl-X Ctrl-E at the chat prompt: the message being typed edited in $VISUAL, else $EDITOR, else the first of
editor, nano and vi on PATH, as in bash and zsh; the text edited comes back to the prompt, for Enter to send."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType

from prompt_toolkit.application import in_terminal
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document

from localgen import console
from localgen.errors import LocalgenError, os_reason
from localgen.input_text import BOM
from localgen.signals import ENDING_SIGNALS, QUIT_SIGNALS, restore_handlers

FALLBACK_EDITORS = ("editor", "nano", "vi")  # tried in turn, on PATH, where neither VISUAL nor EDITOR is set
MESSAGE_FILE = "message.txt"  # in a private temporary folder, removed once the editor is done
KEPT = "the message is kept as it was"
TEMP_HINT = "free some space there, or set TMPDIR to a folder with room"


def editor_command(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The editor to run, with its arguments: $VISUAL, else $EDITOR (either may hold arguments, as `code -w`), else
    the first fallback editor on PATH."""
    for name in ("VISUAL", "EDITOR"):
        value = environ.get(name, "")
        if not value.strip():
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            raise LocalgenError(f"cannot read ${name} ({value!r}): a quote is left open; {KEPT}",
                                hint=f"set it to a command, as export {name}=nano") from None
        if shutil.which(words[0], path=environ.get("PATH")) is None:
            raise LocalgenError(f"cannot run the editor {words[0]!r} (${name}): not found; {KEPT}",
                                hint=f"install it, or set {name} to an editor you have, as export {name}=nano")
        return words
    for name in FALLBACK_EDITORS:
        found = shutil.which(name, path=environ.get("PATH"))
        if found is not None:
            return [found]
    raise LocalgenError(f"no editor to open: VISUAL and EDITOR are not set, and none of {', '.join(FALLBACK_EDITORS)} "
                        f"is on PATH; {KEPT}", hint="set one, as export EDITOR=nano")


def edited_text(text: str, command: list[str],
                started: Callable[[subprocess.Popen[bytes]], None] | None = None) -> str:
    """The text as the editor left it (its last newlines dropped, which editors add), from a private temporary file
    that is removed afterwards; LocalgenError when the editor cannot run, fails, or leaves text that is not UTF-8.
    started is told of the editor's process as it runs."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="localgen-"))  # mode 0700: the message is no other user's to read
    except OSError as exc:
        raise LocalgenError(f"cannot make a temporary folder for the message: {os_reason(exc)}; {KEPT}",
                            hint=TEMP_HINT) from None
    try:
        path = folder / MESSAGE_FILE
        try:
            path.write_bytes(_encoded(text + "\n" if text else ""))
        except OSError as exc:
            raise LocalgenError(f"cannot write the message to {path}: {os_reason(exc)}; {KEPT}",
                                hint=TEMP_HINT) from None
        name = Path(command[0]).name
        try:
            editor = subprocess.Popen([*command, str(path)])
        except OSError as exc:
            raise LocalgenError(f"cannot run the editor {name!r}: {os_reason(exc)}; {KEPT}",
                                hint="set VISUAL or EDITOR to an editor you have, as export EDITOR=nano") from None
        with editor:
            if started is not None:
                started(editor)
            status = editor.wait()
        if status:
            how = f"was ended by {_signal_name(-status)}" if status < 0 else f"exited with status {status}"
            raise LocalgenError(f"the editor {name!r} {how}; {KEPT}", hint="save and quit the editor to use its text")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise LocalgenError(f"cannot read the text the editor saved: {os_reason(exc)}; {KEPT}",
                                hint=f"save it to the file the editor opened, {MESSAGE_FILE}") from None
        try:
            edited = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LocalgenError(f"the editor saved text that is not UTF-8 (byte {exc.start}); {KEPT}",
                                hint="save the file as UTF-8 in the editor") from None
        return edited.removeprefix(BOM).replace("\r\n", "\n").rstrip("\n")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _encoded(text: str) -> bytes:
    """The text as UTF-8; bytes a non-UTF-8 terminal sent (lone surrogates) written as they came."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _signal_name(signum: int) -> str:
    """A signal's name (SIGINT), or its number when it has none."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class MessageEditor:
    """Opens the prompt's text in an editor: the terminal the editor's (in line mode, the prompt erased) while it
    runs; Ctrl-C and Ctrl-\\ there end at most the editor, and Ctrl-Z stops the chat with it, as it would a shell."""

    def __init__(self) -> None:
        self.interrupted = False  # a SIGINT came while the editor ran: prompt-toolkit's own reading of it, which
        # would clear the line, is for the chat's keys to drop (repl_keys binds <sigint> to nothing then)
        self.ending_signal: int | None = None  # a SIGTERM or SIGHUP came while the editor ran: the chat ends

    def new_prompt(self) -> None:
        """Forget a Ctrl-C the last prompt's editor got."""
        self.interrupted = False

    async def edit(self, buffer: Buffer) -> bool:
        """Replace the buffer's text with what the editor leaves (undo brings the text before back); on any failure,
        say so on a line of its own and keep the text (False)."""
        async with in_terminal():
            try:
                command = editor_command()
                with self._editor_signals() as editors:
                    text = edited_text(buffer.text, command, started=editors.append)
            except LocalgenError as exc:
                if self.ending_signal is None:  # the chat ending says nothing of the editor it ended
                    console.error(exc.message, exc.hint)
                return False
        buffer.save_to_undo_stack()
        buffer.document = Document(text, cursor_position=len(text))
        return True

    @contextlib.contextmanager
    def _editor_signals(self) -> Iterator[list[subprocess.Popen[bytes]]]:
        """While the editor runs (its process put in the list yielded): SIGINT and SIGQUIT (Ctrl-C and Ctrl-\\ in an
        editor that leaves them to the terminal) noted, not acted on; SIGTERM and SIGHUP passed on to the editor,
        then to the chat's own handler, which ends the chat once the editor is gone; SIGTSTP stopping the chat as it
        stops the editor. The editor gets each signal's default: a handler of Python's is not inherited by the
        program run."""
        editors: list[subprocess.Popen[bytes]] = []

        def noted(signum: int, _frame: FrameType | None) -> None:
            self.interrupted = self.interrupted or signum == signal.SIGINT

        def ending(signum: int, frame: FrameType | None) -> None:
            self.ending_signal = signum
            for editor in editors:
                with contextlib.suppress(OSError):  # already gone
                    editor.send_signal(signum)
            handler = previous.get(signum)
            if callable(handler):
                handler(signum, frame)

        previous = {sig: signal.signal(sig, noted) for sig in (signal.SIGINT, *QUIT_SIGNALS)
                    if signal.getsignal(sig) is not signal.SIG_IGN}
        previous |= {sig: signal.signal(sig, ending) for sig in ENDING_SIGNALS
                     if signal.getsignal(sig) is not signal.SIG_IGN}
        if hasattr(signal, "SIGTSTP"):
            previous[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            yield editors
        finally:
            restore_handlers(previous)
