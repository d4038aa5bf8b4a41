"""The chat prompt's keys: Enter (after a backslash too), Alt-Enter, Tab in a message and on an empty line, pastes,
Ctrl-X Ctrl-E, Ctrl-G, the keys that move the cursor in a search, and text that prompt-toolkit would take for a mouse
report."""

from __future__ import annotations

import re
import signal
from typing import TYPE_CHECKING

from prompt_toolkit.filters import Condition, has_completions, is_searching
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.key_binding.bindings.mouse import load_mouse_bindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.search import SearchDirection, accept_search, start_search, stop_search
from prompt_toolkit.utils import is_dumb_terminal

from localgen.output_writes import end_writes_on
from localgen.repl_editor import MessageEditor
from localgen.repl_input import block_is_open, command_block_is_open, parse_command
from localgen.signals import SignalExit

if TYPE_CHECKING:
    from prompt_toolkit.key_binding.key_bindings import NotImplementedOrNone

LINE_GOES_ON = "\\"  # at the end of a message's line, Enter starts a new line of it (as in llama-cli)
# Shift-Enter and Alt-Enter as terminals that tell them from Enter send them (xterm's modifyOtherKeys, tmux's extended
# keys, the CSI u form of kitty and iTerm2): a newline, as in chat apps; prompt-toolkit read the first as Enter and
# the others as text
NEWLINE_ENTERS = frozenset({"\x1b[27;2;13~", "\x1b[27;3;13~", "\x1b[13;2u", "\x1b[13;3u"})
for _sequence in NEWLINE_ENTERS:  # read as Enter, which tells them apart by their data
    ANSI_SEQUENCES.setdefault(_sequence, Keys.ControlM)
# the mouse reports a terminal sends whole: xterm's SGR (ESC [ < b;x;y M or m) and urxvt's (ESC [ b;x;y M); its parser
# takes more for one: an SGR colour (ESC [ 31m), and X10's shape (ESC [ M and any three characters), which the chat
# never asks for and a captured log holds (ESC [ M is delete-line)
_SGR_OR_URXVT_MOUSE = re.compile(r"\x1b\[(<\d+;\d+;\d+[mM]|\d+;\d+;\d+M)")
_read_mouse_report = load_mouse_bindings().get_bindings_for_keys((Keys.Vt100MouseEvent,))[0].handler


def is_mouse_report(data: str) -> bool:
    """True when data (what prompt-toolkit's parser took for a mouse report) is one a terminal sends, which it reads
    without failing."""
    return bool(_SGR_OR_URXVT_MOUSE.fullmatch(data))


class PasteMark:
    """The text of a bracketed paste that began an input line: such a line is a message, never a command."""

    def __init__(self) -> None:
        self.text = ""
        self.line_after = ""  # the line as the last paste that ended it left it (a backslash there is pasted)

    def clear(self) -> None:
        """Forget the paste (a new prompt)."""
        self.text = self.line_after = ""

    def began(self, line: str) -> bool:
        """True when the line starts with the text pasted at its beginning."""
        return bool(self.text) and line.startswith(self.text)


def keys_of(text: str) -> list[KeyPress]:
    """The keys text read from a terminal stands for, as the prompt would read them (escape sequences as one key)."""
    keys: list[KeyPress] = []
    Vt100Parser(keys.append).feed_and_flush(text)
    return keys


def key_bindings(paste: PasteMark, editor: MessageEditor) -> KeyBindings:
    """Enter sends (or continues a typed \"\"\" block, or a message whose line ends with a backslash, which it drops);
    Alt-Enter / Esc Enter (and Shift-Enter where the terminal tells it apart) insert a newline; paste notes a paste that
    begins the line; Tab in a message is a tab (in a command line it completes; on an empty line it writes the slash
    and lists the commands); Ctrl-X Ctrl-E edits the line in the editor; Ctrl-\\ ends the chat; text taken for a
    mouse report that is none is text. During a history search (Ctrl-R), prompt-toolkit's own keys apply (Enter
    accepts the match), but for Ctrl-G, which gives up the search and puts back the line as it was before it, as
    readline's does, Ctrl-C, which then clears that line, and the keys that move the cursor (Left, Right, Home, End,
    Ctrl-A, Ctrl-E), which end the search on the line found and move in it, as readline's do, where prompt-toolkit
    moved in the text searched for.
    """
    bindings = KeyBindings()
    before_search: list[tuple[int, int]] = []  # the line's place in the history, and the cursor's, as a search began

    @bindings.add("c-r", filter=~is_searching)
    @bindings.add("c-s", filter=~is_searching)
    def _search(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        before_search[:] = [(buffer.working_index, buffer.cursor_position)]
        backward = event.key_sequence[0].key == Keys.ControlR
        start_search(direction=SearchDirection.BACKWARD if backward else SearchDirection.FORWARD)

    @bindings.add("c-g", filter=is_searching)
    def _give_up_search(event: KeyPressEvent) -> None:
        searched = event.app.layout.search_target_buffer_control
        stop_search()
        if searched is not None and before_search:
            searched.buffer.working_index, searched.buffer.cursor_position = before_search.pop()

    @bindings.add("c-c", filter=is_searching)
    def _cancel_search(event: KeyPressEvent) -> None:
        _give_up_search(event)  # then Ctrl-C as at the prompt: the line as it was is cleared, and kept for Up
        event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    @bindings.add("left", filter=is_searching)
    @bindings.add("right", filter=is_searching)
    @bindings.add("home", filter=is_searching)
    @bindings.add("end", filter=is_searching)
    @bindings.add("c-a", filter=is_searching)
    @bindings.add("c-e", filter=is_searching)
    def _move_in_the_match(event: KeyPressEvent) -> None:
        accept_search()
        event.app.key_processor.feed(event.key_sequence[0], first=True)  # the key again, now in the line found

    @Condition
    def in_a_message() -> bool:
        from prompt_toolkit.application import get_app

        text = get_app().current_buffer.text  # (an empty line: Tab lists the commands)
        return bool(text) and (parse_command(text) is None or command_block_is_open(text))

    @Condition
    def on_an_empty_line() -> bool:
        from prompt_toolkit.application import get_app

        return not get_app().current_buffer.text

    @bindings.add("tab", filter=~is_searching & ~has_completions & in_a_message)
    def _tab(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\t")

    # (not on prompt_toolkit's plain prompt, TERM=dumb or unknown, which shows no menu: there Tab does nothing)
    @bindings.add("tab", filter=~is_searching & ~has_completions & on_an_empty_line & ~Condition(is_dumb_terminal))
    def _list_commands(event: KeyPressEvent) -> None:
        """Tab on an empty line writes the slash and opens the menu of commands, none picked yet (the next Tab picks
        the first)."""
        event.current_buffer.insert_text("/")
        event.current_buffer.start_completion(select_first=False)

    @bindings.add("escape", "enter", filter=~is_searching)
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-x", "c-e", filter=~is_searching)
    def _edit(event: KeyPressEvent) -> None:
        async def edit() -> None:
            if not await editor.edit(event.current_buffer):
                return
            text = event.current_buffer.text
            if parse_command(text) is None:  # a message is sent as saved, as a paste is: a backslash at its end
                paste.text = paste.line_after = text  # and a triple quote are its text
            else:  # a command (/system TEXT edited at length) runs, as typed
                paste.clear()

        event.app.create_background_task(edit())

    @bindings.add(Keys.SIGINT, filter=Condition(lambda: editor.interrupted))
    def _interrupt_from_editor(_event: KeyPressEvent) -> None:
        """A Ctrl-C the editor got (its terminal sent SIGINT to the chat too) leaves the line alone."""

    @bindings.add("c-\\")
    def _quit(event: KeyPressEvent) -> None:
        """Ctrl-\\, which the prompt reads as a key, ends the chat as its SIGQUIT does elsewhere (its conversation
        saved), its writes to a terminal that stopped reading waiting a bounded time, the prompt's closing redraw's
        too."""
        if event.app.future is not None and not event.app.future.done():
            end_writes_on(signal.SIGQUIT)
            event.app.exit(exception=SignalExit(signal.SIGQUIT), style="class:aborting")

    @bindings.add(Keys.BracketedPaste, filter=~is_searching)
    def _paste(event: KeyPressEvent) -> None:
        text = event.data.replace("\r\n", "\n").replace("\r", "\n")  # as prompt-toolkit's own paste does
        buffer = event.current_buffer
        if buffer.cursor_position == 0:
            paste.text = text
        buffer.insert_text(text)
        paste.line_after = buffer.text if buffer.cursor_position == len(buffer.text) else ""

    @bindings.add(Keys.Vt100MouseEvent)
    def _mouse(event: KeyPressEvent) -> NotImplementedOrNone:
        """A mouse report goes to prompt-toolkit; text it took for one (ESC [ 31m or ESC [ M of a paste its terminal
        did not mark, or typed by a script) is text typed, its escape then dropped as other control characters are,
        where prompt-toolkit failed on it with a traceback and a "Press ENTER to continue" that took the next Enter,
        or read ESC [ M and three characters as a click."""
        if is_mouse_report(event.data):
            return _read_mouse_report(event)
        event.current_buffer.insert_text(event.data)
        return None

    @bindings.add("enter", filter=~is_searching)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if event.key_sequence[0].data in NEWLINE_ENTERS:  # Shift-Enter or Alt-Enter
            buffer.insert_text("\n")
            return
        opened = block_is_open(buffer.text) or command_block_is_open(buffer.text)
        if opened and not paste.began(buffer.text):  # a paste's """ is its text, not a block to continue
            buffer.insert_text("\n")
        elif (buffer.text.endswith(LINE_GOES_ON) and not opened and parse_command(buffer.text) is None
              and buffer.text != paste.line_after):  # a pasted backslash at the end is the paste's text
            buffer.cursor_position = len(buffer.text)  # as llama-cli's: the backslash gives way to a new line
            buffer.delete_before_cursor()
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return bindings
