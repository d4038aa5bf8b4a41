"""The chat service: one loaded model, one conversation, turns that reuse the KV cache."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Generator, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

from localgen.answer_record import recorded
from localgen.attached import SentFiles, question_turn, with_attached
from localgen.chat import Message
from localgen.chat_settings import SETTING_NAMES
from localgen.conversation import Conversation, Turn
from localgen.conversation_moves import unsave
from localgen.conversation_store import holds_as_is, let_go, save_conversation
from localgen.engine.prefix import PrefixCache
from localgen.errors import ContextOverflowError, LocalgenError, UsageError
from localgen.events import Event, Finished
from localgen.held_tokens import drops_held, with_held_tokens
from localgen.model_switch import ModelFile, load_instead, model_file
from localgen.params import (
    CHAT_SETTINGS,
    SETTINGS_THAT_MAY_BE_NONE,
    STOP_SETTING,
    GenerationLimits,
    SamplingParams,
    with_settings,
)
from localgen.prompt_tokens import ReusingTokenizer, reusing_tokenizer
from localgen.registry import model_defaults
from localgen.resolve import ResolvedModel
from localgen.runner import LoadedModel, ModelOptions, ignore_note, warn_if_left_out
from localgen.session_figures import SessionFigures
from localgen.session_room import ContextRoom
from localgen.session_settings import SessionSettings
from localgen.session_think import THINK_SETTING, SessionThink
from localgen.session_turns import TurnStart, UnsavedChangeError
from localgen.signals import DeferredSignals, deferred_signals

RENDERS_KEPT = 3  # rendered prompts kept: the conversation's, the next question's, and one being typed


class ChatSession(SessionSettings, SessionThink, SessionFigures, ContextRoom):
    """A model and a conversation; each turn prefills only what the KV cache does not hold."""

    def __init__(self, loaded: LoadedModel, options: ModelOptions, conversation: Conversation,
                 sampling: SamplingParams, limits: GenerationLimits, *, autosave: bool = True, draft: str = "none",
                 prefix_cache: PrefixCache | None = None, keep_saved_settings: bool = False,
                 model_settings: Mapping[str, int | float | None] | None = None, own_settings: Iterable[str] = (),
                 model_system: str | None = None, own_system: bool = False, model_stop: tuple[str, ...] = (),
                 own_stop: bool = False) -> None:
        super().__init__(sampling, limits, model_settings, own_settings, model_stop=model_stop, own_stop=own_stop)
        self.loaded = loaded
        self.options = options
        self._think_flag = options.think
        self.conversation = conversation
        self.autosave = autosave
        self.draft = draft  # speculative decoding, as run's --draft
        self.prefix_cache = prefix_cache  # the on-disk prompt cache (run's; a chat keeps its KV cache in memory)
        self.keep_saved_settings = keep_saved_settings  # a run's options hold for that run only, unsaved
        self.model_system = model_system  # the system prompt models.toml gives the loaded model
        self.own_system = own_system  # the system prompt was chosen (-s, /system, a resumed chat's): /model keeps it
        self.attachments: list[str] = []
        self.sent_files = SentFiles()  # the files each message sent carried, for /undo to attach again
        self._figures: list[tuple[Turn, Finished | None, ModelFile]] = []  # each answer this chat computed, its
        # figures (None: an error cut it short) and the model file that gave it
        self._model_file = model_file(loaded)  # the model in use's
        self._loaded_with = self._model_file  # the model in use as the conversation was loaded (its saved figures')
        self.unanswered = False  # the last question got no answer (an error, or Ctrl-C before any text)
        self.earlier_kept = False  # the last /regen was stopped (Ctrl-C, an error), and its earlier answer stays
        self.dropped_question: str | None = None  # the message typed last, where it got no answer: /regen asks it
        self.unsaved = False  # the last change could not be saved: the file is behind the conversation
        self.unsaved_because: str | None = None  # why, while unsaved
        self.save_error: UnsavedChangeError | None = None  # why a command's change could not be saved, to say
        self.save_notes: list[str] = []  # what saves did that the user must hear of (a file changed by hand kept)
        self._autosaved: Conversation | None = None  # the conversation whose file autosave made, never /saved
        self._rendered: list[tuple[LoadedModel, list[Message], str, list[int]]] = []  # the latest prompts made
        self._tokenizer: ReusingTokenizer | None = None  # the latest prompts' pieces, tokenized once
        self._record_model()

    # --- settings ------------------------------------------------------------------------------

    def set_value(self, name: str, raw: str) -> tuple[str, str]:
        """Change one sampling setting from text (/set NAME VALUE) and save; return its name and new value as text."""
        key = self._apply_setting(name, raw)
        self.chose_in_chat(key)
        self._save(command=True)
        return self.value_of(key)

    def _use_model_defaults(self, chosen: Mapping[str, int | float | None], system: str | None,
                            stop: tuple[str, ...]) -> None:
        """Take a new model's models.toml settings where the user chose none (one only the previous model's entry
        gave goes back to its built-in value), and its system prompt and stop strings unless the user chose them."""
        if not self.own_system:
            self.conversation.system = system
        self.model_system = system
        self._take_model_settings(chosen)
        self._take_model_stop(stop)

    # --- turns ---------------------------------------------------------------------------------

    def ask(self, text: str) -> tuple[TurnStart, Generator[Event, None, None]]:
        """Plan the user's message (with attachments) and return the stream of its answer.

        The exchanges that must leave the context to make room are counted now, but the conversation and the
        attachments change only when the stream starts: one dropped before it starts (Ctrl-C meanwhile) leaves them
        as they were.
        """
        self.dropped_question = text  # until it is answered: one refused, or stopped before any text, is /regen's
        planned = self._planned(text)
        if not planned.turns[-1].user:
            raise UsageError("the message is empty", hint="type a question, or /help")
        dropped = self._make_room(planned, with_attached(self.attachments))
        return TurnStart(dropped, planned.context_start, self._count(planned.messages())), \
            self._answer(question=planned, sends_attachments=True)

    def _planned(self, text: str, attachments: list[str] | None = None) -> Conversation:
        """The conversation with text (after the attached files, or those given) as its next message: what ask()
        sends, and so what prefill_ahead() must compute, token for token."""
        files = self.attachments if attachments is None else attachments
        return replace(self.conversation, turns=[*self.conversation.turns, question_turn(text, files)])

    def check_attachment(self, text: str, name: str, *,
                         fewer: str = "/file none drops the files attached already") -> None:
        """Refuse a file's text (name: as the user typed it) that, beside the files attached already (fewer: how to
        attach fewer), leaves the next message too long for the context: by its size at once, as run refuses a
        prompt that no context of the model holds, else by its tokens (_attachment_tokens)."""
        tokens, counted = self._attachment_tokens(self._planned("", [*self.attachments, text]), text)
        budget = self._budget()
        if tokens <= budget:
            return
        helps = ["split it and attach a part at a time"]
        if self.attachments:
            helps.append(fewer)
        made_of = f"with {name}" + (" and the files attached already" if self.attachments else "")
        beyond = self._beyond_the_model(tokens, counted=counted, made_of=made_of, hint="; ".join(helps))
        if beyond is not None:
            raise beyond
        larger = self._larger_context_help(tokens, counted=counted)
        raise ContextOverflowError(f"{name} is too long to attach: with it the next message needs "
                                   f"{'' if counted else 'at least '}{tokens:,} tokens but only {budget:,} are free "
                                   "in the context",
                                   hint="; ".join([*helps, *([larger] if larger else [])]))

    def prefill_ahead(self, text: str, should_stop: Callable[[], bool]) -> None:
        """Compute the prompt of text as the next message (attachments included) into the KV cache before it is
        sent, so that ask() finds it there; stop as soon as should_stop() is true (see Engine.prefill_ahead).

        Called on another thread while the user types: it changes nothing but the KV cache. A message that would
        not fit, or a failing template, is left for ask() to report; one that moves earlier exchanges out of the
        context is not computed over the conversation the KV cache holds, which shortening it would need again.
        """
        engine = self.loaded.engine
        if not engine.is_open or should_stop():
            return
        planned = self._planned(text)
        try:
            dropped = planned.fit(self._count, self._budget(), self.loaded.longest_token)
            tokens = self._with_held_tokens(self._prompt(planned.messages())[1])
            if dropped and drops_held(engine, tokens, self._prompt(self.conversation.messages())[1]):
                return  # the conversation's prompt is rendered for the toolbar on every key: no rendering here
        except LocalgenError:
            return
        if not should_stop():  # rendering a long conversation takes a while: it may be too late now
            engine.prefill_ahead(tokens, should_stop)

    def regenerate(self) -> tuple[TurnStart, Generator[Event, None, None]]:
        """Answer the last question again (the old answer stays if the new one is stopped or fails, even part
        way), making room as a new question does (a smaller model's context, a longer system prompt); a message that
        got no answer (Ctrl-C before any text, an error), the last typed, is the one asked again."""
        if self.dropped_question is not None:
            return self.ask(self.dropped_question)
        turns = self.conversation.turns
        if not turns:
            raise UsageError("there is no question to answer again", hint="ask something first")
        question = replace(turns[-1], answer=None, interrupted=False, details=None, extra={})  # its files named
        planned = replace(self.conversation, turns=[*turns[:-1], question])
        again = turns[-1].answer is not None  # (a file written by hand may end with a question alone)
        start = TurnStart(self._make_room(planned), prompt_tokens=self._count(planned.messages()))
        return start, self._answer(question=planned, again=again)

    def undo(self) -> Turn:
        """Drop the last exchange (the files its message carried attached again, as SentFiles.taken_back gives them)."""
        if not self.conversation.turns:
            raise UsageError("there is nothing to undo", hint="the conversation is empty")
        conversation = self.conversation
        attachments = self.sent_files.taken_back(conversation.turns[-1], self.attachments) or self.attachments
        with whole_save(command=True):  # the exchange leaves the conversation and its file together
            turn = conversation.turns.pop()
            self.attachments = attachments
            self.sent_files.keep_only(conversation.turns)
            self.dropped_question = None
            self._bring_back_earlier()
            if not conversation.turns and conversation is self._autosaved:  # a chat's own one left empty is unsaved,
                unsave(conversation, self.save_notes.append)  # as before it began
            self._save(command=True)
        return turn

    def reset(self) -> Conversation:
        """Start a new conversation with the same system prompt; return the previous one, let go (its changes saved)."""
        previous = self.conversation
        let_go(previous)
        self.conversation = Conversation.new(system=previous.system, model=previous.model)
        self.conversation.ctx_size = previous.ctx_size
        self.attachments, self.dropped_question = [], None
        self.unsaved = False
        self.sent_files.keep_only([])
        return previous

    def set_system(self, text: str | None) -> None:
        """Replace the system prompt ("": an empty one; None: none, the template's own) (one that leaves no room for
        a message in the context is refused)."""
        no_room = self._no_room(text)
        if no_room is not None:
            raise UsageError(*no_room)
        self.conversation.system = text
        self.own_system = True
        with contextlib.suppress(LocalgenError):  # no model, or a template that refuses: the next message says why
            self._replan_context()  # the whole prompt is new: what fits beside this system prompt, as /show says
        self._save(command=True)

    def switch_model(self, reference: str, note: Callable[[str], None] = ignore_note, *,
                     keep_loaded: bool = False) -> LoadedModel:
        """Load another model in place of this one (see load_instead) and keep the conversation (a --chat-template
        belonged to the first model); its models.toml settings and system prompt apply where the user chose none.
        note gets what loading chose or changed, as it happens; keep_loaded: a reference to the model in use raises
        AlreadyLoaded, and nothing changes."""
        options = replace(self.options, model=reference, chat_template=None)
        new = load_instead(self.loaded, self.options, options, reloaded=self._reloaded, note=note,
                           keep_loaded=keep_loaded)
        self.loaded, self.options = new, options
        self._use_model_defaults(*model_defaults(new.resolved.spec))
        self._model_file = model_file(new)
        self._record_model()
        self._replan_context()
        self._save(command=True)
        return new

    def _reloaded(self, loaded: LoadedModel) -> None:
        """Go on with the model loaded again after a failed switch."""
        self.loaded, self._model_file = loaded, model_file(loaded)

    def replace_conversation(self, conversation: Conversation, overrides: Mapping[str, str] | None = None, *,
                             system_given: bool = False) -> None:
        """Continue a loaded conversation, its settings applied where valid, then overrides (flags given now), with the
        model in use; nothing is written (the next change saves settings and model). Earlier exchanges that fit come
        back into the context. The previous one is let go; on failure the session keeps it and its settings.
        system_given: -s gave its system prompt (/model keeps it)."""
        previous, settings_before = (self.conversation, self.own_system), self.chosen_settings()
        think = self.options.think
        self.conversation = conversation
        try:
            self._record_model()
            # what /set chose for the previous conversation is not this one's
            self.sampling, self.limits = with_settings(self.sampling, self.limits, self._start_settings)
            saved = {key: "none" if value is None else str(value) for key, value in conversation.settings.items()
                     if key in SETTING_NAMES and (value is not None or key in SETTINGS_THAT_MAY_BE_NONE)}
            for key, value in (saved | dict(overrides or {})).items():
                self._apply_setting(key, value)
            defaults = self.default_settings()  # a saved value no default gives was chosen
            self.own_settings = {key for key, value in self.settings().items() if value != defaults[key]}
            self.chose_on_resume(overrides or {})
            self._take_saved_stop(conversation.settings.get(STOP_SETTING), flag_wins=overrides is not None)
            self._take_saved_think(conversation.settings.get(THINK_SETTING), flag_wins=overrides is not None)
            self.own_system = system_given or conversation.system != self.model_system
            self._replan_context()
        except BaseException:  # a bad flag, a failing template: the chat goes on with the conversation it had
            self.conversation, self.own_system = previous
            self.restore_settings(settings_before)
            self.set_think(think)
            if conversation.name != previous[0].name:
                let_go(conversation)
            raise
        self.unsaved, self.dropped_question, self._loaded_with = False, None, self._model_file
        self.sent_files.keep_only([])  # (a conversation reread is one read with its files as they are)
        if conversation.name != previous[0].name:
            let_go(previous[0])

    # --- internals -----------------------------------------------------------------------------

    def _record_model(self) -> None:
        """Note the model in use and the --ctx-size given in the conversation, so that --resume loads them again."""
        self.conversation.model = model_reference(self.loaded.resolved)
        self.conversation.ctx_size = self.options.ctx_size

    def prompt_text(self, messages: list[Message] | None = None) -> str:
        """The rendered prompt for messages (default: the conversation's)."""
        return self._prompt(self.conversation.messages() if messages is None else messages)[0]

    def _prompt(self, messages: list[Message]) -> tuple[str, list[int]]:
        """Rendered text and tokens for messages; the last few results are kept, as a turn needs its prompt
        three times (making room, the thinking check, the answer) and the toolbar the conversation's on every key,
        and a new prompt tokenizes only the pieces the recent ones lack (prompt_tokens): a whole 8,000-token
        conversation takes 13 ms to tokenize. Safe to call from prefill_ahead's thread."""
        loaded, kept = self.loaded, self._rendered
        for cached in kept:
            if cached[0] is loaded and cached[1] == messages:
                self._rendered = [cached, *(other for other in kept if other is not cached)]  # the latest used first
                return cached[2], cached[3]
        self._tokenizer = tokenizer = reusing_tokenizer(self._tokenizer, loaded.engine, loaded.prompt_format)
        text, tokens = loaded.prompt_format.prompt(tokenizer, messages)
        self._rendered = [(loaded, list(messages), text, tokens), *kept[:RENDERS_KEPT - 1]]
        return text, tokens

    def _with_held_tokens(self, tokens: list[int]) -> list[int]:
        """tokens with the KV cache's own where they spell the same text (held_tokens), unless that takes more than
        the budget planned with the rendered tokens (a model's tokens can outnumber its text's), leaving the answer
        less room than it was promised or none."""
        kept = with_held_tokens(self.loaded.engine, tokens)
        return kept if len(kept) <= max(len(tokens), self._budget()) else tokens

    def _count(self, messages: list[Message]) -> int:
        """Tokens a conversation takes once rendered."""
        return len(self._prompt(messages)[1])

    def _answer(self, *, question: Conversation | None = None, sends_attachments: bool = False,
                again: bool = False) -> Generator[Event, None, None]:
        """Stream the answer to the last turn (of question, the conversation planned with a new question, when
        given), recording it (even partial) in the conversation; sends_attachments: the question holds the files
        attached for it, which are then used up (a question answered again leaves them for the next one); an
        answer lets go of the message kept for /regen (dropped_question).

        If no answer comes (an error, or Ctrl-C before any text), the conversation and attachments stay as they
        were before the question (the context it would have left included); so the conversation never holds two
        questions in a row. An error after some text keeps that text, as an interrupted answer, except where the
        question is asked again (again: /regen): an answer stopped part way then leaves the conversation, /stats and
        the KV cache (which holds the question alone) as they were, the previous answer kept (earlier_kept).
        """
        conversation = self.conversation
        before = (list(conversation.turns), conversation.context_start, self.attachments)
        turn = (question or conversation).turns[-1]
        previous = (turn.answer, turn.interrupted, turn.details)
        stream = None
        failed = False
        self.unanswered = self.earlier_kept = False
        held = {id(kept) for kept in conversation.turns}  # the figures of answers gone (/undo, /reset) go too
        self._figures = [figures for figures in self._figures if id(figures[0]) in held]
        keep, given_by = self._figures.append, self._model_file  # the answer's figures, the turn and model file
        try:
            if question is not None:
                conversation.turns[:], conversation.context_start = question.turns, question.context_start
            if sends_attachments:
                self.attachments = []
            turn.answer, turn.interrupted, turn.details = None, False, None
            messages = conversation.messages()
            text, tokens = self._prompt(messages)
            warn_if_left_out(self.loaded, text, messages)
            tokens = self._with_held_tokens(tokens)
            stream = self.loaded.engine.generate(tokens, self.sampling, self.limits, draft=self.draft,
                                                 prefix_cache=self.prefix_cache)
            yield from recorded(stream, turn, conversation.model, answered=lambda done: keep((turn, done, given_by)))
        except BaseException:
            failed = True
            raise
        finally:
            answered = turn.answer is not None
            self.unanswered = not answered
            self._turn_ended(answered)
            self.earlier_kept = again and (not answered or turn.interrupted)
            if answered and not self.earlier_kept:
                self.dropped_question = None
                self.sent_files.remember(turn, before[2] if sends_attachments else [], conversation.turns)
                if not self._figures or self._figures[-1][0] is not turn:  # an error cut it short: no figures
                    keep((turn, None, given_by))
            if not answered or self.earlier_kept:
                conversation.turns[:], conversation.context_start, self.attachments = before
                turn.answer, turn.interrupted, turn.details = previous
            if answered and self.earlier_kept and stream is not None:  # the next turn computes the answer kept
                stream.close()  # (ended, unless its reader left): the engine is done with it
                self.loaded.engine.forget_after(len(tokens))  # not the stopped answer's tokens
            try:
                if answered and not self.earlier_kept:  # otherwise the conversation is as it was (or unborn)
                    self._save()
            except LocalgenError:
                if not failed:
                    raise
                # the error already on its way out is the one to report; the next change saves again

    def save(self, name: str | None = None, *, stoppable: bool = False) -> Path:
        """Save the conversation with its settings (name: save as), whole (stoppable: see whole_save's command)."""
        with whole_save(command=not stoppable) as deferred:
            try:
                return self._save_now(name)
            except LocalgenError:
                deferred.forget(signal.SIGINT)  # the failed save's error is what follows it, not a Ctrl-C
                raise

    def _save_now(self, name: str | None = None) -> Path:
        """Write the conversation with the current settings (see save)."""
        if not self.keep_saved_settings:  # settings a later version saved are kept
            kept = {key: value for key, value in self.conversation.settings.items()
                    if key not in CHAT_SETTINGS and key not in (STOP_SETTING, THINK_SETTING)}
            self.conversation.settings = kept | self.settings() | self.saved_stop() | self.saved_think()
        path = save_conversation(self.conversation, name, warn=self.save_notes.append)
        self.unsaved, self.unsaved_because, self._autosaved = False, None, None
        return path

    def save_given_system(self) -> None:
        """Save the system prompt -s gave a resumed chat, its settings as saved (flags given then, with the next)."""
        kept, self.keep_saved_settings = self.keep_saved_settings, True
        try:
            self._save(command=True)  # as /system's: a failure kept in save_error
        finally:
            self.keep_saved_settings = kept

    def _save(self, *, command: bool = False) -> None:
        """Autosave the conversation after every change, from its first exchange (one that only changed settings
        is not a conversation to resume). A save that fails leaves the change made and (unless its file holds it
        already) marks the conversation unsaved: UnsavedChangeError is raised, or for a command kept in save_error."""
        if not (self.autosave and (self.conversation.turns or self.conversation.on_disk)):
            self.unsaved = False  # nothing to save (a first exchange undone before it was ever written)
            return
        autosaved = self._autosaved if self.conversation.on_disk else self.conversation  # (save() forgets it)
        with whole_save(command=command):  # the file and unsaved agree before a signal lands
            try:
                self._save_now()
                self._autosaved = autosaved
            except LocalgenError as exc:
                if holds_as_is(self.conversation):  # the change was undone: the file is not behind the conversation
                    self.unsaved, self._autosaved = False, autosaved
                    return
                self.unsaved, self.unsaved_because = True, exc.message
                error = UnsavedChangeError(exc.message, hint=exc.hint)
                if not command:
                    raise error from exc
                self.save_error = error


def whole_save(*, command: bool) -> AbstractContextManager[DeferredSignals]:
    """Where a save runs: Ctrl-C and the signals that end the chat (Ctrl-\\, SIGTERM, SIGHUP) wait until it is done, as
    they do for an answer's save, so that a change is never left off the file while the chat takes it as saved; a
    signal that ends the chat ends it then, the change saved. A command's Ctrl-C then has nothing left to stop, and
    is let go (the command says what it did); an answer's goes where it would have gone (run exits 130)."""
    return deferred_signals(dropped=(signal.SIGINT,) if command else ())


def model_reference(resolved: ResolvedModel) -> str:
    """How a conversation names its model, one name -m takes back to that very file: as every command names it
    (display_name), a file named by the path it was given by (model_names.named_by_path: all but a file of the Hub
    cache that -m of its name loads) by its absolute path (valid from any folder, as `models default` keeps it)."""
    from localgen.model_names import named_by_path

    ref = resolved.ref
    return os.path.abspath(ref.path) if ref.path is not None and named_by_path(resolved) else resolved.display_name
