"""The interactive chat REPL: lines read with prompt-toolkit, each sent as a message or run as a slash command
(chat_commands), and answers streamed."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Generator

from prompt_toolkit import PromptSession
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.layout.processors import ConditionalProcessor, Processor, TabsProcessor

from localgen import console
from localgen.answer_view import AnswerView
from localgen.chat_commands import refuse_bang_habit, run_command
from localgen.chat_commands_conversation import conversation_summary, say_last_exchange
from localgen.chat_commands_settings import last_decode_speed, say_stats
from localgen.errors import LocalgenError, MemoryMarginError, internal_error_text
from localgen.events import Event, Finished, TextChunk
from localgen.memory_limits import out_of_memory_hint, ran_out_of_memory
from localgen.output_writes import WholeWrites, end_writes_on
from localgen.prefill_ahead import PrefillWhileTyping
from localgen.prefill_status import PrefillStatus, without_prefill_progress
from localgen.refusals import permission_failure
from localgen.repl_echo import TallInputEcho
from localgen.repl_editor import MessageEditor
from localgen.repl_input import (
    PROMPT,
    SafeFileHistory,
    SlashCompleter,
    continuation,
    keep_cleared,
    means_leaving,
    message_text,
    open_history,
    parse_command,
    typed_message,
    typed_text,
    without_controls,
)
from localgen.repl_keys import PasteMark, key_bindings, keys_of
from localgen.repl_state import ChatState
from localgen.repl_terminal import (
    TypedAhead,
    bracketed_paste,
    cursor_requests_given_up_once_unanswered,
    prompt_output,
    signals_end_the_prompt,
)
from localgen.repl_text import answer_note, plain_text_note, room_notice, toolbar_line, unanswered_line
from localgen.repl_unsaved import LeaveGuard
from localgen.session import ChatSession
from localgen.session_room import resume_command
from localgen.session_turns import TurnStart, UnsavedChangeError
from localgen.signals import ANSWER_ENDING_SIGNALS, SignalExit, StopOnSignal
from localgen.think_switch import think_values
from localgen.thinking import ThinkingSplitter, cut_off, prompt_opens_thinking
from localgen.units import counted
from localgen.wordwrap import TAB_STOP

LEAVING_HINT = "Ctrl-D or /exit to quit"  # said for a Ctrl-C at an empty prompt


def tabs_as_spaces(buffer: Callable[[], Buffer]) -> Processor:
    """Tabs in the input drawn as spaces to the next tab stop (not ^I), where the text has any: the processor goes
    through every character of a line at each redraw, half of a redraw's time in a long pasted line."""
    return ConditionalProcessor(TabsProcessor(tabstop=TAB_STOP, char1=" ", char2=" "),
                                Condition(lambda: "\t" in buffer().text))


class UnsentLine(KeyboardInterrupt):
    """Ctrl-C just after Enter: the line read (None: none) is not sent."""

    def __init__(self, line: str | None) -> None:
        super().__init__()
        self.line = line


class Repl:
    """Reads lines, runs slash commands, streams answers; nothing typed can crash it."""

    def __init__(self, session: ChatSession, *, markdown: bool, show_thinking: bool, resumed: bool = False,
                 stats: bool = False, prefill_while_typing: bool = True, system_note: str | None = None,
                 save_system: bool = False, unsaveable: bool = False, wrap: bool = True,
                 typed_ahead: TypedAhead | None = None) -> None:
        self.session = session
        session.in_chat = True  # a context too small for a message is helped by a restart with a larger one
        self.resumed = resumed
        self._system_note = system_note  # -s replacing a resumed conversation's system prompt
        self._save_system = save_system  # saved once the note is said, as /system saves it
        # a TERM=dumb terminal (Emacs' shell) shows escapes as text: no live Markdown redraws, and no recalled or
        # completed lines, which its prompt could not show before they were sent (what is sent is still saved)
        self._escapes = console.takes_escapes(sys.stdout)
        leaving = LeaveGuard(session, unsaveable=unsaveable)  # unsaveable: the start said the chat cannot be saved
        session.cannot_save = lambda: leaving.quiet  # its context hints never resume what is not saved
        self.state = ChatState(session, leaving, self._show_answer, escapes=self._escapes,
                               markdown=markdown and self._escapes, show_thinking=show_thinking, wrap=wrap,
                               stats_after_answers=stats)
        self._history, self._history_warning = open_history(recall=self._escapes)
        self._paste = PasteMark()
        self._editor = MessageEditor()
        self._typed_ahead = typed_ahead or TypedAhead()
        self._view: AnswerView | None = None  # the answer being shown, if any
        self._prefill_status: PrefillStatus | None = None  # the long prompt's progress line, if any
        self._prompt = PromptSession(
            # a redraw waits on a held terminal a bounded time once a signal ends the chat; on a dumb terminal, no
            # output: prompt_toolkit's plain prompt, on chat_terminal()'s output through the same bounded writes
            output=prompt_output(),
            history=self._history,
            completer=SlashCompleter(self._offline, self._think_values) if self._escapes else None,
            complete_while_typing=False,
            key_bindings=key_bindings(self._paste, self._editor),
            bottom_toolbar=self._toolbar,
            enable_history_search=False,
            enable_suspend=True,  # Ctrl-Z suspends the chat, as in a shell; fg brings the prompt back
            multiline=True,
            prompt_continuation=continuation,
            input_processors=[tabs_as_spaces(lambda: self._prompt.default_buffer)],
        )
        # a terminal that never says where its cursor is (a serial console, some web terminals) only goes without
        # the bottom toolbar: no "WARNING: your terminal doesn't support cursor position requests (CPR)."
        self._prompt.app.renderer.cpr_not_supported_callback = None
        self._echo = (TallInputEcho(self._prompt.app, PROMPT, lambda: self._prompt.default_buffer.text)
                      if self._escapes else None)  # (a dumb terminal's prompt draws every line)
        self._ahead = PrefillWhileTyping(session.prefill_ahead) if prefill_while_typing else None
        session.display_options = lambda: [*self.state.display_options(),
                                           *([] if self._ahead is not None else ["--no-prefill-while-typing"])]
        self._prompt.default_buffer.on_text_changed += self._text_changed

    def _offline(self) -> bool:
        """Whether the network is off for this chat (chat --offline, LOCALGEN_OFFLINE=1, HF_HUB_OFFLINE=1)."""
        from localgen.hub import is_offline

        return is_offline()

    def _think_values(self) -> tuple[str, ...]:
        """What /think takes with the model in use: none where its chat template has no switch for thinking."""
        return think_values(self.session.loaded.prompt_format.template)

    def _toolbar(self) -> str:
        """Model, context used by the conversation / size, attached files, the last answer's decode speed; on a narrow
        terminal, the context and the attached files before the rest."""
        engine = self.session.loaded.engine
        columns = self._prompt.output.get_size().columns
        if not engine.is_open:
            return toolbar_line([("no model loaded", 0), ("/model NAME", 1), ("/help", 2)], columns)
        speed = last_decode_speed(self.session)
        files = len(self.session.attachments)
        attached = [(f"{counted(files, 'file')} attached", 0)] if files else []
        used = self.session.context_used()
        rate = f"{speed:.1f}" if speed else "–"  # no answer yet, or one stopped before a second token
        return toolbar_line([(self.session.loaded.resolved.short_name, 2),
                             (f"{'?' if used is None else f'{used:,}'}/{engine.n_ctx:,} tokens", 1), *attached,
                             (f"{rate} tok/s", 3), ("/help", 4)], columns)

    def run(self) -> None:
        """The read-eval-print loop, until /exit or Ctrl-D; run it inside chat_terminal()."""
        console.say(f"localgen chat with {self.session.loaded.resolved.display_name}: "
                    "/help for commands, Ctrl-D to quit, Alt-Enter for a newline")
        if not self.session.loaded.prompt_format.is_chat:
            console.say(plain_text_note(self.session.loaded.resolved.display_name))
        if self._history_warning:
            console.warn(self._history_warning)
        if self.resumed:
            console.say(f"resumed {self.session.conversation.name}: {conversation_summary(self.session)}")
            say_last_exchange(self.session.conversation)
        if self._system_note:
            console.say(self._system_note)
            if self._save_system:
                self._save_given_system()
        no_room = self.session.no_room_warning()  # before anything is typed, as /model says it
        if no_room is not None:
            console.warn(no_room)
        if self.session.attachments:
            which, files = "next" if self.resumed else "first", len(self.session.attachments)
            console.say(f"{counted(files, 'file')} attached to your {which} message "
                        f"(/file none drops {'it' if files == 1 else 'them'})")
        try:
            while self.state.running:
                self._step()
                console.warn_each(self.session.save_notes)  # once the answer or the command is said
        finally:
            if self._ahead is not None:
                self._ahead.close()
            self.state.leaving.last_save()
        self._say_where_saved()

    def _save_given_system(self) -> None:
        """Save the system prompt -s gave the resumed conversation; say at once what the save did, or why it failed."""
        self.session.save_given_system()
        console.warn_each(self.session.save_notes)
        error, self.session.save_error = self.session.save_error, None
        if error is not None:
            self.state.leaving.say_unsaved(error)

    def _say_where_saved(self) -> None:
        """As the chat ends (/exit, Ctrl-D): the saved conversation's name and the command that goes on with it, where
        something was asked in it in this chat, and it has an exchange and its latest changes saved."""
        name = self._saved_as()
        if self.state.asked_in_current() and name is not None:
            console.say(f"conversation saved as {name}; `{resume_command(name)}` goes on with it")

    def _saved_as(self) -> str | None:
        """The saved conversation's name, where it has an exchange and its latest changes saved; None where not."""
        conversation = self.session.conversation
        saved = conversation.on_disk and conversation.turns and not self.session.unsaved
        return conversation.name if saved else None

    def _step(self) -> None:
        """Read one line and act on it."""
        try:
            line = self._read_line()
        except UnsentLine as exc:  # Ctrl-C just after Enter: the line is not sent
            self._unsent(exc.line)
            return
        except KeyboardInterrupt:
            console.say("[interrupted]")
            return
        if line is None:
            return
        try:
            self._handle(self._decoded(line), pasted=self._paste.began(line))
        except KeyboardInterrupt:  # Ctrl-C outside an answer (e.g. while /model loads)
            console.say("[interrupted]")
        except UnsavedChangeError as exc:
            self.state.leaving.say_unsaved(exc)
        except MemoryMarginError as exc:  # only a higher limit helps: a saved conversation goes on after it
            name = self._saved_as()
            console.error(exc.message, exc.hint if name is None else
                          f"{exc.hint}, then `{resume_command(name)}`: the conversation is saved")
        except LocalgenError as exc:
            console.error(exc.message, exc.hint)
        except Exception as exc:  # nothing typed at the prompt may end the session
            logging.getLogger("localgen").debug("the traceback of the error below", exc_info=True)
            denied = permission_failure(exc)
            if denied is None and ran_out_of_memory(exc):  # Python may be left calling the wrong functions: the
                raise LocalgenError("out of memory", hint=out_of_memory_hint()) from None  # chat ends (last save)
            console.error(*((denied.message, denied.hint) if denied is not None else
                            (internal_error_text(exc), "the conversation is kept; LOCALGEN_DEBUG=1 shows details")))

    def _read_line(self) -> str | None:
        """Read one line, prefilling it while it is typed; None for Ctrl-C (on an empty line, after saying how to
        quit) or Ctrl-D (which ends the chat) at the prompt, UnsentLine for Ctrl-C just after Enter. Once this
        returns, the engine is the chat's alone."""
        line: str | None = None
        try:  # a Ctrl-C before the prompt is drawn (as a command ends) is one at an empty prompt
            self._prompt.default_buffer.reset()  # the line sent last is no longer the one typed
            self._paste.clear()
            self._editor.new_prompt()
            if self._ahead is not None:
                self._ahead.arm()
            self._read_typed_ahead_first()
            with signals_end_the_prompt(self._prompt.app):  # not raised inside prompt-toolkit's tasks
                line = self._prompt.prompt(PROMPT)
            if self._echo is not None:
                self._echo.write(line)
            if isinstance(self._history, SafeFileHistory):
                self._history.sent(line)
        except KeyboardInterrupt:  # clears the line, kept for Up; on an empty one, says how to leave (as Ollama)
            if line is not None:  # Ctrl-C just after Enter, as the message is echoed: it is not sent
                raise UnsentLine(line) from None
            self._cleared(self._prompt.default_buffer.text)
        except EOFError:
            self.state.running = not self.state.leaving.may_leave("Ctrl-D")
        finally:
            bracketed_paste(True)  # prompt-toolkit turned it off: a paste typed ahead must stay one paste
            cursor_requests_given_up_once_unanswered(self._prompt.app)
            settled = self._ahead is None or self._ahead.settle(self._message_sent(line))
            self._report_history_problem()
        if not settled or (line is not None and self._ctrl_c_typed_ahead()):
            raise UnsentLine(line)
        return line

    def _read_typed_ahead_first(self) -> None:
        """Give the prompt the lines typed before the chat took its terminal (a Ctrl-D among them too), before the keys
        it reads from the terminal."""
        from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead

        if self._typed_ahead.text:
            keys = keys_of(self._typed_ahead.text)
            self._typed_ahead.forget()
            store_typeahead(self._prompt.input, keys + get_typeahead(self._prompt.input))

    def _cleared(self, text: str) -> None:
        """After Ctrl-C at the prompt: the text typed is kept for Up to bring back (said where it had several lines,
        too many to copy back from the screen); on an empty line, say how to leave."""
        if not text.strip():
            console.say(LEAVING_HINT)
            return
        keep_cleared(self._history, text)
        lines = text.strip("\n").count("\n") + 1
        if lines > 1 and self._escapes:
            console.say(f"[cleared {counted(lines, 'line')}: Up brings them back]")

    def _unsent(self, line: str | None) -> None:
        """Say that Ctrl-C just after Enter kept the line from being sent; a message is then /regen's to send."""
        text = self._message_sent(line)
        if line is None or text is None or means_leaving(line, pasted=self._paste.began(line)):
            console.say("[interrupted]")
            return
        self.session.dropped_question = text
        console.say(unanswered_line(len(self.session.attachments), sent=False))

    def _ctrl_c_typed_ahead(self) -> bool:
        """Whether a Ctrl-C came in the same read as Enter (prompt-toolkit keeps such keys for the next prompt, where
        it would only clear the line): it is taken out, with the keys before it, as Ctrl-C just after Enter."""
        from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
        from prompt_toolkit.keys import Keys

        keys = get_typeahead(self._prompt.input)
        last = max((i for i, key in enumerate(keys) if key.key == Keys.ControlC), default=None)
        store_typeahead(self._prompt.input, keys if last is None else keys[last + 1:])
        return last is not None

    def _decoded(self, line: str, *, warn: bool = True) -> str:
        """The line as text: bytes a non-UTF-8 terminal sent become U+FFFD (but in a typed /file or /model path), and
        control characters (a quoted Ctrl-Z, say) are dropped, each with a warning (when warn)."""
        warnings: list[str] = []
        pasted = self._paste.began(line)
        line, dropped = without_controls(line)  # first: the line is read as a command as _handle reads it
        line = typed_text(line, warnings, pasted=pasted)
        if dropped:
            warnings.append(f"dropped {counted(len(dropped), 'control character')} ({' '.join(dict.fromkeys(dropped))})"
                            " from the input")
        for warning in warnings if warn else ():
            console.warn(warning)
        return line

    def _message_typed(self, line: str) -> str | None:
        """The message the line at the prompt sends (so far), or None for a command."""
        return typed_message(self._decoded(line, warn=False), pasted=self._paste.began(line))

    def _message_sent(self, line: str | None) -> str | None:
        """The message a line returned by the prompt sends, as _handle sends it: None for none (no line, a command, a
        blank line)."""
        text = None if line is None else message_text(self._decoded(line, warn=False), pasted=self._paste.began(line))
        return text if text is not None and text.strip() else None

    def _text_changed(self, buffer: Buffer) -> None:
        """Prefill the message being typed (prompt-toolkit calls this on every change of the input)."""
        if self._ahead is not None:
            self._ahead.typed(self._message_typed(buffer.text))

    def _report_history_problem(self) -> None:
        """Print a history read/write failure once, outside prompt-toolkit's screen."""
        if isinstance(self._history, SafeFileHistory) and self._history.problem:
            console.warn(self._history.problem)
            self._history.problem = None

    def _handle(self, line: str, *, pasted: bool = False) -> None:
        """Dispatch one input line; one that began with a paste is a message, sent as pasted."""
        text = message_text(line, pasted=pasted)
        command = parse_command(line) if text is None else None
        if command is None and means_leaving(line, pasted=pasted):
            command = parse_command("/exit")
        self.state.leaving.next_input(command.name if command is not None else None)
        if command is None:
            refuse_bang_habit(line, pasted=pasted)  # llm chat's !multi: not a message for the model
            if text and text.strip():
                self._show_answer(*self.session.ask(text))
            return
        run_command(self.state, command)

    def _show_answer(self, start: TurnStart, events: Generator[Event, None, None]) -> None:
        """Stream an answer to the terminal (a message's, or /regen's); Ctrl-C stops it and keeps what was said (a
        /regen stopped keeps the earlier answer). Where the message got no answer, what that left is said after it.

        SIGTERM, SIGHUP and SIGQUIT (Ctrl-\\) stop it too, then end the chat (SignalExit) once the answer is saved
        and the terminal echoes again; a write the terminal keeps waiting (held with Ctrl-S) then waits a bounded time,
        as run's does. What making room for the turn did (start) is said when the answer's first text arrives (a turn
        that gets no answer changes nothing).
        """
        self.state.asked_in = self.session.conversation
        room = self.session.answer_room_warning_once(start.prompt_tokens)  # before the prompt is read in, as run's
        if room is not None:
            console.warn(room)
        engine = self.session.loaded.engine
        # Python runs signal handlers only between llama.cpp calls, so a second signal could not stop any
        # sooner than the first: it never escalates, and the answer is always recorded.
        signals = StopOnSignal(engine.request_stop, signals=(signal.SIGINT, *ANSWER_ENDING_SIGNALS),
                               ending=ANSWER_ENDING_SIGNALS, escalate=False, reset=engine.clear_stop,
                               ended=_end_writes_if_ending)
        try:
            with signals:
                self._stream(events, room_notice(start), chat_ends=lambda: signals.ending_signal is not None)
        except Exception as exc:  # e.g. the terminal is gone: a signal that ends the chat still decides
            if signals.ending_signal is None:
                raise
            raise SignalExit(signals.ending_signal) from exc  # a save that failed is said as the chat ends
        if signals.ending_signal is not None:
            raise SignalExit(signals.ending_signal)
        if self.session.unanswered and self.session.dropped_question is not None:  # (a /regen of an answer keeps it)
            console.say(unanswered_line(len(self.session.attachments), sent=True))
        elif self.state.stats_after_answers and not (self.session.unanswered or self.session.earlier_kept):
            say_stats(self.session)

    def pause_view(self) -> None:
        """Clear what the answer view and the prompt's progress line draw live (before Ctrl-Z stops the chat: the
        shell writes below it)."""
        if self._prefill_status is not None:
            self._prefill_status.clear()
        if self._view is not None:
            self._view.pause()

    def _stream(self, events: Generator[Event, None, None], notice: str | None, *,
                chat_ends: Callable[[], bool]) -> None:
        """Show the events as they come; the answer is recorded (events closed) even when showing fails. chat_ends:
        whether the signal that stopped the answer ends the chat (its note then offers nothing more to type)."""
        view = self._view = AnswerView(markdown=self.state.markdown, show_thinking=self.state.show_thinking,
                                       wrap=self.state.wrap, stream=WholeWrites(sys.stdout))  # a bounded wait
        splitter: ThinkingSplitter | None = None  # made at the first text, once the prompt is final (/regen)
        done: Finished | None = None
        try:
            self._prefill_status = PrefillStatus(sys.stderr)
            for event in without_prefill_progress(events, self._prefill_status):
                if isinstance(event, TextChunk):
                    if splitter is None and notice:
                        console.say(notice)
                    splitter = splitter or ThinkingSplitter(inside=self._opens_thinking())
                    for thinking, text in splitter.feed(event.text):
                        (view.thinking if thinking else view.answer)(text)
                elif isinstance(event, Finished):
                    done = event
            for thinking, text in splitter.flush(cut=cut_off(done)) if splitter else ():  # markup cut short: dropped
                (view.thinking if thinking else view.answer)(text)
        finally:
            self._view = self._prefill_status = None
            events.close()
            view.close(None if done is None else answer_note(
                done, limit_source=self.session.limit_source(),
                hidden_reasoning=view.shows_nothing_but_hidden_reasoning,
                still_reasoning=splitter is not None and splitter.inside, earlier_kept=self.session.earlier_kept,
                chat_ends=chat_ends(), context_help=self.session.context_end_help()), cut_off=cut_off(done))

    def _opens_thinking(self) -> bool:
        """True when this model's generation prompt opens a reasoning block itself."""
        if not self.session.loaded.prompt_format.is_chat:
            return False
        return prompt_opens_thinking(self.session.prompt_text())


def _end_writes_if_ending(signum: int) -> None:
    """A signal that ends the chat (not a Ctrl-C, which stops the answer alone) bounds the wait of its writes on a
    terminal that takes no more (output_writes.end_writes_on), as run's."""
    if signum in ANSWER_ENDING_SIGNALS:
        end_writes_on(signum)
