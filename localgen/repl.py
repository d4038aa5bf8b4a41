"""The interactive chat REPL: prompt-toolkit input, slash commands, streamed answers."""

from __future__ import annotations

import logging
import shlex
import signal
import sys
from collections.abc import Callable, Generator
from dataclasses import replace

from prompt_toolkit import PromptSession
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.history import DummyHistory
from prompt_toolkit.layout.processors import TabsProcessor

from localgen import console
from localgen.answer_view import AnswerView
from localgen.config import settings
from localgen.conversation_store import MissingConversationError, let_go, load_conversation
from localgen.errors import LocalgenError, UsageError, internal_error_text
from localgen.events import Event, Finished, TextChunk
from localgen.inputs import (
    argument_text,
    attachment_text,
    expand_user_path,
    option_path,
    refuse_waiting_reads,
    short_path,
)
from localgen.prefill_ahead import PrefillWhileTyping
from localgen.registry import reads_as_a_model
from localgen.repl_input import (
    ALIASES,
    PROMPT,
    WITHOUT_ARGUMENT,
    PasteMark,
    SafeFileHistory,
    SlashCompleter,
    continuation,
    help_lines,
    key_bindings,
    means_leaving,
    meant_command,
    message_text,
    one_argument,
    open_history,
    parse_command,
    typed_message,
    unwrap_block,
    without_controls,
)
from localgen.repl_show import EMPTY_SYSTEM, show, stop_strings_line, system_prompt_line
from localgen.repl_terminal import bracketed_paste
from localgen.repl_text import (
    answer_note,
    brief,
    exchanges_in_context,
    gist,
    list_rows,
    room_notice,
    what_reset_kept,
)
from localgen.repl_unsaved import LeaveGuard, say_unsaved
from localgen.session import SETTING_NAMES, ChatSession, UnsavedChangeError
from localgen.signals import ENDING_SIGNALS, SignalExit, StopOnSignal
from localgen.thinking import ThinkingSplitter, prompt_opens_thinking
from localgen.units import counted
from localgen.wordwrap import terminal_width

TAB_STOP = 8  # as terminals show tabs


class Repl:
    """Reads lines, runs slash commands, streams answers; nothing typed can crash it."""

    def __init__(self, session: ChatSession, *, markdown: bool, show_thinking: bool, resumed: bool = False,
                 stats: bool = False, prefill_while_typing: bool = True) -> None:
        self.session = session
        self.resumed = resumed
        # a TERM=dumb terminal (Emacs' shell) shows escapes as text: no live Markdown redraws, and no recalled or
        # completed lines, which its prompt could not show before they were sent
        self._escapes = console.takes_escapes(sys.stdout)
        self.markdown = markdown and self._escapes
        self.show_thinking = show_thinking
        self.stats_after_answers = stats  # chat --stats, /stats on
        self._running = True
        self._leaving = LeaveGuard(session)
        self._typed: str | None = None  # the command as typed (/bye for /exit), for messages
        self._history, self._history_warning = open_history() if self._escapes else (DummyHistory(), None)
        self._paste = PasteMark()
        self._view: AnswerView | None = None  # the answer being shown, if any
        self._prefill_status: console.PrefillStatus | None = None  # the long prompt's progress line, if any
        self._prompt = PromptSession(
            history=self._history,
            completer=SlashCompleter() if self._escapes else None,
            complete_while_typing=False,
            key_bindings=key_bindings(self._paste),
            bottom_toolbar=self._toolbar,
            enable_history_search=False,
            enable_suspend=True,  # Ctrl-Z suspends the chat, as in a shell; fg brings the prompt back
            multiline=True,
            prompt_continuation=continuation,
            input_processors=[TabsProcessor(tabstop=TAB_STOP, char1=" ", char2=" ")],  # pasted tabs, not ^I
        )
        self._handlers: dict[str, Callable[[str], None]] = {
            "/help": self._help, "/system": self._system, "/set": self._set, "/show": self._show,
            "/stats": self._stats, "/reset": self._reset, "/undo": self._undo, "/regen": self._regen,
            "/file": self._file, "/save": self._save, "/load": self._load, "/list": self._list,
            "/model": self._model, "/thinking": self._thinking, "/markdown": self._markdown, "/exit": self._exit,
        }
        self._handlers |= {alias: self._handlers[name] for alias, name in ALIASES.items()}
        self._ahead = PrefillWhileTyping(session.prefill_ahead) if prefill_while_typing else None
        self._prompt.default_buffer.on_text_changed += self._text_changed

    def _toolbar(self) -> str:
        """Model, context used by the conversation / size, attached files, last decode speed."""
        engine = self.session.loaded.engine
        if not engine.is_open:
            return " no model loaded │ /model NAME │ /help"
        speed = self.session.last.timings.decode_tokens_per_s if self.session.last else 0.0
        attached = f"{counted(len(self.session.attachments), 'file')} attached │ " if self.session.attachments else ""
        used = self.session.context_used()
        rate = f"{speed:.1f}" if speed else "–"  # no answer yet, or one stopped before a second token
        return (f" {self.session.loaded.resolved.short_name} │ {'?' if used is None else f'{used:,}'}/"
                f"{engine.n_ctx:,} tokens │ {attached}{rate} tok/s │ /help")

    def run(self) -> None:
        """The read-eval-print loop, until /exit or Ctrl-D; run it inside chat_terminal()."""
        console.say(f"localgen chat with {self.session.loaded.resolved.display_name}: "
                    "/help for commands, Ctrl-D to quit, Alt-Enter for a newline")
        if not self.session.loaded.prompt_format.is_chat:
            console.say(f"localgen: {self.session.loaded.resolved.display_name} has no chat template, so the "
                        "conversation goes to it as plain text to continue (--chat-template FILE gives it one)")
        if self._history_warning:
            console.warn(self._history_warning)
        if self.resumed:
            console.say(f"resumed {self.session.conversation.name}: {self._conversation_summary()}")
        if self.session.attachments:
            which = "next" if self.resumed else "first"
            console.say(f"{counted(len(self.session.attachments), 'file')} attached to your {which} message "
                        "(/file none drops them)")
        try:
            while self._running:
                self._step()
        finally:
            if self._ahead is not None:
                self._ahead.close()
            self._leaving.last_save()

    def _step(self) -> None:
        """Read one line and act on it."""
        try:
            line = self._read_line()
        except KeyboardInterrupt:  # Ctrl-C just after Enter: the line is not sent
            console.say("[interrupted]")
            return
        if line is None:
            return
        try:
            self._handle(self._decoded(line), pasted=self._paste.began(line))
        except KeyboardInterrupt:  # Ctrl-C outside an answer (e.g. while /model loads)
            console.say("[interrupted]")
        except UnsavedChangeError as exc:
            say_unsaved(exc)
        except LocalgenError as exc:
            console.error(exc.message, exc.hint)
        except Exception as exc:  # nothing typed at the prompt may end the session
            logging.getLogger("localgen").debug("the traceback of the internal error below", exc_info=True)
            console.error(internal_error_text(exc), hint="the conversation is kept; LOCALGEN_DEBUG=1 shows details")

    def _read_line(self) -> str | None:
        """Read one line, prefilling it while it is typed; None for Ctrl-C or Ctrl-D (which ends the chat) at the
        prompt, KeyboardInterrupt for Ctrl-C just after Enter. Once this returns, the engine is the chat's alone."""
        self._paste.clear()
        if self._ahead is not None:
            self._ahead.arm()
        line: str | None = None
        try:
            line = self._prompt.prompt(PROMPT)
        except KeyboardInterrupt:
            pass
        except EOFError:
            self._running = not self._leaving.may_leave("Ctrl-D")
        finally:
            bracketed_paste(True)  # prompt-toolkit turned it off: a paste typed ahead must stay one paste
            settled = self._ahead is None or self._ahead.settle(self._message_sent(line))
            self._report_history_problem()
        if not settled or (line is not None and self._ctrl_c_typed_ahead()):
            raise KeyboardInterrupt
        return line

    def _ctrl_c_typed_ahead(self) -> bool:
        """Whether a Ctrl-C came in the same read as Enter (prompt-toolkit keeps such keys for the next prompt, where
        it would only clear the line): it is taken out, with the keys before it, as Ctrl-C just after Enter."""
        from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
        from prompt_toolkit.keys import Keys

        keys = get_typeahead(self._prompt.input)
        last = max((i for i, key in enumerate(keys) if key.key == Keys.ControlC), default=None)
        store_typeahead(self._prompt.input, keys if last is None else keys[last + 1:])
        return last is not None

    @staticmethod
    def _decoded(line: str, *, warn: bool = True) -> str:
        """The line as text: bytes a non-UTF-8 terminal sent become U+FFFD, and control characters (a quoted
        Ctrl-Z, say) are dropped, each with a warning (when warn)."""
        warnings: list[str] = []
        line = argument_text(line, "the input", warnings)
        line, dropped = without_controls(line)
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
        """The message a line returned by the prompt sends: None for none (no line, a command, a blank line)."""
        text = None if line is None else self._message_typed(line)
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
        self._leaving.next_input(command.name if command is not None else None)
        if command is None:
            if text and text.strip():
                start, events = self.session.ask(text)
                self._show_answer(events, notice=room_notice(start))
                attached = len(self.session.attachments)
                if self.session.unanswered and attached:
                    waits = "waits" if attached == 1 else "wait"
                    console.say(f"[no answer: {counted(attached, 'attached file')} {waits} for your next message]")
            return
        handler = self._handlers.get(command.name)
        if handler is None:
            meant = meant_command(command, self._handlers)
            console.error(f"unknown command {command.name}",
                          hint=(f"did you mean {meant}? " if meant else "")
                          + "/help lists the commands; // at the start sends a message that starts with /")
            return
        if command.argument and command.name in WITHOUT_ARGUMENT:
            console.error(f"{command.name} takes no argument", hint=f"type {command.name} alone; /help lists the rest")
            return
        self._typed = command.name
        try:
            handler(command.argument)
        finally:  # a change the command made and said, then why it is not saved
            error, self.session.save_error = self.session.save_error, None
            if error is not None:
                say_unsaved(error)

    def _show_answer(self, events: Generator[Event, None, None], *, notice: str | None = None) -> None:
        """Stream an answer to the terminal; Ctrl-C stops it and keeps what was said.

        SIGTERM and SIGHUP stop it too, then end the chat (SignalExit) once the answer is saved and the terminal
        echoes again. notice is printed when the answer's first text arrives (a turn that gets no answer changes
        nothing).
        """
        engine = self.session.loaded.engine
        # Python runs signal handlers only between llama.cpp calls, so a second signal could not stop any
        # sooner than the first: it never escalates, and the answer is always recorded.
        signals = StopOnSignal(engine.request_stop, signals=(signal.SIGINT, *ENDING_SIGNALS), escalate=False,
                               reset=engine.clear_stop)
        try:
            with signals:
                self._stream(events, notice)
        except Exception as exc:  # e.g. the terminal is gone: a signal that ends the chat still decides
            if signals.ending_signal is None:
                raise
            raise SignalExit(signals.ending_signal) from exc  # a save that failed is said as the chat ends
        if signals.ending_signal is not None:
            raise SignalExit(signals.ending_signal)
        if self.stats_after_answers and not self.session.unanswered:
            self._stats("")

    def pause_view(self) -> None:
        """Clear what the answer view and the prompt's progress line draw live (before Ctrl-Z stops the chat: the
        shell writes below it)."""
        if self._prefill_status is not None:
            self._prefill_status.clear()
        if self._view is not None:
            self._view.pause()

    def _stream(self, events: Generator[Event, None, None], notice: str | None) -> None:
        """Show the events as they come; the answer is recorded (events closed) even when showing fails."""
        view = self._view = AnswerView(markdown=self.markdown, show_thinking=self.show_thinking)
        splitter: ThinkingSplitter | None = None  # made at the first text, once the prompt is final (/regen)
        done: Finished | None = None
        try:
            self._prefill_status = console.PrefillStatus(sys.stderr)
            for event in console.without_prefill_progress(events, self._prefill_status):
                if isinstance(event, TextChunk):
                    if splitter is None and notice:
                        console.say(notice)
                    splitter = splitter or ThinkingSplitter(inside=self._opens_thinking())
                    for thinking, text in splitter.feed(event.text):
                        (view.thinking if thinking else view.answer)(text)
                elif isinstance(event, Finished):
                    done = event
            for thinking, text in splitter.flush() if splitter else ():
                (view.thinking if thinking else view.answer)(text)
        finally:
            self._view = self._prefill_status = None
            events.close()
            view.close(None if done is None else answer_note(
                done, hidden_reasoning=view.shows_nothing_but_hidden_reasoning,
                still_reasoning=splitter is not None and splitter.inside))

    def _opens_thinking(self) -> bool:
        """True when this model's generation prompt opens a reasoning block itself."""
        if not self.session.loaded.prompt_format.is_chat:
            return False
        return prompt_opens_thinking(self.session.prompt_text())

    # --- commands ------------------------------------------------------------------------------

    def _help(self, _: str) -> None:
        """/help: list the commands and the keys."""
        for line in help_lines(terminal_width(sys.stderr)()):
            console.say(line)

    def _system(self, argument: str) -> None:
        """/system [TEXT|none|""]: show the system prompt, set it, clear it, or make it empty."""
        if not argument:
            console.say(system_prompt_line(self.session))
            return
        text = _unquoted(unwrap_block(argument))  # a triple-quoted block, as Ollama's /set system takes
        if argument.lower() == "none":  # "none" quoted is the text none
            self.session.set_system(None)
            console.say("system prompt cleared")
        elif not text:  # "" or '', as -s "" gives: an empty one, not the template's own
            self.session.set_system("")
            console.say(f"system prompt set: {EMPTY_SYSTEM}")
        else:
            self.session.set_system(text)
            console.say("system prompt set")

    def _set(self, argument: str) -> None:
        """/set PARAM VALUE: change a setting (PARAM alone shows it; Ollama's spellings too)."""
        word, _, rest = argument.partition(" ")
        ollama = {"parameter": lambda: self._set(rest.strip()), "system": lambda: self._system(rest.strip()),
                  "verbose": lambda: self._stats("on"), "quiet": lambda: self._stats("off")}
        if word.lower() == "stop":  # /set stop TEXT..., as Ollama's /set parameter stop (for this chat, as --stop)
            self._set_stop(rest.strip())
            return
        if word.lower() in ollama:  # Ollama's spellings: /set parameter NAME VALUE, /set system TEXT, /set verbose
            if word.lower() in ("verbose", "quiet") and rest.strip():
                console.say(f"usage: /set {word.lower()}")
            else:
                ollama[word.lower()]()
            return
        parts = argument.split(None, 1)
        if len(parts) == 1:  # /set temp: the current value
            key, value = self.session.value_of(parts[0])
            console.say(f"{key} = {value} (/set {key} VALUE changes it)")
            return
        if len(parts) != 2:
            console.say(f"usage: /set PARAM VALUE ({', '.join(SETTING_NAMES)}), or /set stop TEXT...")
            return
        key, value = self.session.set_value(parts[0], parts[1])
        console.say(f"{key} = {value}" + (" (random)" if key == "seed" and value == "none" else ""))

    def _set_stop(self, argument: str) -> None:
        """/set stop TEXT...: this chat's stop strings (quoted as in a shell, backslashes kept; none clears them;
        alone: shows them)."""
        if not argument:
            console.say(stop_strings_line(self.session.limits.stop))
            return
        lexer = shlex.shlex(argument, posix=True)
        lexer.whitespace_split, lexer.escape = True, ""  # "\n" stays as typed, as --stop takes it from a shell
        try:
            words = [] if argument.lower() == "none" else list(lexer)
        except ValueError as exc:
            raise UsageError(f"/set stop: {exc}", hint='quote each one whole: /set stop "User says:" "###"') from None
        if "" in words:
            raise UsageError("/set stop: a stop string is empty", hint="give each stop string some text")
        self.session.limits = replace(self.session.limits, stop=tuple(words))
        console.say(stop_strings_line(self.session.limits.stop) if words else "stop strings cleared")

    def _show(self, argument: str) -> None:
        """/show [PART]: what this chat runs with (the model, settings, system prompt, template or license)."""
        show(self.session, argument.strip(), self._settings_text())

    def _stats(self, argument: str) -> None:
        """/stats [on|off]: the last answer's figures, or turn them on or off after every answer."""
        if argument:
            switch = _on_or_off(argument, "/stats")
            if switch is not None:
                self.stats_after_answers = switch
                console.say(f"stats {'after every answer' if switch else 'on request (/stats)'}")
            return
        last = self.session.last
        if last is None:
            console.say("no answer yet")
            return
        used = self.session.context_used()
        context = None if used is None else (used, self.session.loaded.engine.n_ctx)
        console.say(console.format_stats(last, context=context))

    def _reset(self, _: str) -> None:
        """/reset: start a new conversation, keeping the system prompt."""
        if not self._leaving.may_leave("/reset", self._typed):
            return
        attached, unsaved = len(self.session.attachments), self.session.unsaved
        previous = self.session.reset()
        dropped = f"; dropped {counted(attached, 'attached file')}" if attached else ""
        kept = what_reset_kept(previous, unsaved=unsaved)
        console.say(f"new conversation {self.session.conversation.name} ({kept}{dropped})")

    def _undo(self, _: str) -> None:
        """/undo: drop the last exchange."""
        turn = self.session.undo()
        console.say(f"dropped: {gist(turn.user)!r}")

    def _regen(self, _: str) -> None:
        """/regen: answer the last question again."""
        start, events = self.session.regenerate()
        self._show_answer(events, notice=room_notice(start))

    def _file(self, argument: str) -> None:
        """/file PATH|none: attach a file's text to the next message, or drop the attached files."""
        if not argument:
            console.say("usage: /file PATH, or /file none to drop the attached files")
            return
        if argument == "none":  # a file named none: /file ./none
            attached = self.session.attachments
            console.say(f"dropped {counted(len(attached), 'attached file')}" if attached else "no files are attached")
            self.session.attachments = []
            return
        typed = one_argument(argument, "/file PATH")
        option_path(typed, "/file")  # an empty name is refused, not read as the current folder
        path = expand_user_path(typed)
        refuse_waiting_reads(path, typed)
        warnings: list[str] = []
        text = attachment_text(path, warnings, option="/file", typed=typed)
        empty = not text.strip()
        if empty:  # its warning (the last) says so: a file that adds nothing is not counted as attached
            warnings[-1] += ", so it is not attached"
        console.warn_each(warnings)
        if empty:
            return
        if text in self.session.attachments:
            console.say(f"{short_path(typed)} is attached already, or a file with the same text is "
                        "(/file none drops the attached files)")
            return
        self.session.attachments.append(text)
        console.say(f"attached {short_path(typed)} ({len(text):,} characters) to the next message")

    def _save(self, argument: str) -> None:
        """/save [NAME]: save the conversation."""
        path = self.session.save(one_argument(argument, "/save NAME") if argument else None)  # quoted as /load's
        console.say(f"saved to {path}")

    def _load(self, argument: str) -> None:
        """/load NAME: continue a saved conversation."""
        if not argument:
            console.say("usage: /load NAME (see /list)")
            return
        name = one_argument(argument, "/load NAME")  # quoted, as the name /model and the path /file take
        try:
            conversation = load_conversation(name)  # a name that cannot be loaded is refused before anything else
        except (MissingConversationError, UsageError) as exc:  # no such conversation, or not a name one can have
            if not name or not reads_as_a_model(name, settings().user_registry):
                raise
            raise type(exc)(exc.message, hint=f"{name} is a model: /model {name} switches to it") from None
        if not self._leaving.may_leave("/load", self._typed):
            if conversation.name != self.session.conversation.name:
                let_go(conversation)
            return
        saved_with = conversation.model
        self.session.replace_conversation(conversation)
        console.say(f"loaded {name}: {self._conversation_summary()}")
        if saved_with and saved_with != conversation.model:
            console.say(f"it was saved with {saved_with} and goes on with {conversation.model} "
                        f"(/model {saved_with} to switch)")

    def _settings_text(self) -> str:
        """The sampling settings as 'name=value, ...' (unset ones as none)."""
        return ", ".join(f"{k}={'none' if v is None else v}" for k, v in self.session.settings().items())

    def _conversation_summary(self) -> str:
        """Exchanges, system prompt and settings of the current conversation, for /load and --resume."""
        conversation = self.session.conversation
        system = _system_prompt_text(conversation.system)
        return f"{exchanges_in_context(conversation)}, {system}; settings: {self._settings_text()}"

    def _list(self, _: str) -> None:
        """/list: list the saved conversations, marking this chat's."""
        from localgen.conversation_summary import summaries

        entries = summaries()
        if not entries:
            console.say("no saved conversations")
            return
        current = self.session.conversation.name if self.session.conversation.on_disk else None
        for row in list_rows(entries, current, console.status_width()):
            console.say(row)

    def _model(self, argument: str) -> None:
        """/model REF: switch model, keeping the conversation (alone: name the model in use)."""
        if not argument:
            now = self.session.loaded
            using = f"using {now.resolved.display_name}; " if now.engine.is_open else ""
            console.say(f"{using}/model REF switches (a name, NAME:QUANT, ORG/REPO or a .gguf path)")
            return
        reference = one_argument(argument, "/model REF")
        before, system = self.session.settings(), self.session.conversation.system
        n_ctx, seen = self.session.loaded.engine.n_ctx, len(self.session.conversation.in_context())
        try:
            loaded = self.session.switch_model(reference, note=console.say)
        except KeyboardInterrupt:
            now = self.session.loaded
            console.say(f"[interrupted: still using {now.resolved.display_name}]" if now.engine.is_open else
                        "[interrupted: no model is loaded (/model NAME loads one)]")
            return
        changed = [f"{key}={self.session.value_of(key)[1]}" for key, value in self.session.settings().items()
                   if before[key] != value]
        conversation = self.session.conversation
        if conversation.system != system:
            changed.append(_system_prompt_text(conversation.system))
        if loaded.engine.n_ctx != n_ctx:
            changed.append(f"context {loaded.engine.n_ctx:,} tokens")
        console.say(f"now using {loaded.resolved.display_name}"
                    + (f" (changed with it: {', '.join(changed)})" if changed else ""))
        if len(conversation.in_context()) < seen:
            console.say(f"[the conversation: {exchanges_in_context(conversation)}]")
        problem = self.session.system_prompt_problem(conversation.system)
        if problem is not None:  # the model is loaded all the same: the prompt is what must change
            console.warn(f"{problem}: /system TEXT sets a shorter one, /system none removes it")

    def _thinking(self, argument: str) -> None:
        """/thinking [on|off]: show or hide the model's reasoning (alone: say which)."""
        if not argument:
            console.say("reasoning is shown (/thinking off hides it)" if self.show_thinking
                        else "reasoning is hidden (/thinking on shows it)")
            return
        switch = _on_or_off(argument, "/thinking")
        if switch is not None:
            self.show_thinking = switch
            console.say(f"reasoning is {'shown' if switch else 'hidden'}")

    def _markdown(self, argument: str) -> None:
        """/markdown [on|off]: render answers as Markdown, or print them exactly as written (alone: say which)."""
        if not argument:
            console.say("answers are shown as Markdown (/markdown off prints them exactly as written)" if self.markdown
                        else "answers are shown as plain text, exactly as written (/markdown on renders Markdown)")
            return
        switch = _on_or_off(argument, "/markdown")
        if switch and not self._escapes:
            console.say("Markdown needs a terminal that takes escape sequences (TERM=dumb here); answers stay plain")
        elif switch is not None:
            self.markdown = switch
            console.say(f"answers are shown {'as Markdown' if switch else 'as plain text, exactly as written'}")

    def _exit(self, _: str) -> None:
        """/exit: end the chat."""
        self._running = not self._leaving.may_leave("/exit", self._typed)


def _system_prompt_text(system: str | None) -> str:
    """The system prompt as a summary names it: briefly quoted, empty, or its absence."""
    if system == "":
        return "an empty system prompt (the template's default is left out)"
    return f"system prompt {brief(system)!r}" if system else "no system prompt"


def _unquoted(text: str) -> str:
    """Text without the quotes around it when it is one quoted string ("Be brief." as -s takes it from a shell);
    other text as it is (quotes inside it, or only at one end, are its own)."""
    stripped = text.strip()
    quote = stripped[:1]
    if quote in ("'", '"') and len(stripped) >= 2 and stripped.endswith(quote) and quote not in stripped[1:-1]:
        return stripped[1:-1]
    return text


def _on_or_off(argument: str, command: str) -> bool | None:
    """A switch command's argument as True (on) or False (off); None, after printing the usage, for anything else."""
    switch = argument.lower()
    if switch not in ("on", "off"):
        console.say(f"usage: {command} on|off")
        return None
    return switch == "on"
