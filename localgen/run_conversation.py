"""`run --conversation NAME` and `run --continue`: a one-shot run that adds its exchange to a saved conversation."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from localgen import console
from localgen.config import settings
from localgen.conversation import Conversation, DamagedConversationError
from localgen.conversation_lock import ConversationBusyError
from localgen.conversation_names import check_name
from localgen.conversation_store import latest_conversation, list_conversations, load_or_start
from localgen.conversation_summary import cut_short, name_like_saved, system_change
from localgen.errors import LocalgenError, UsageError
from localgen.events import Event
from localgen.input_text import argument_line_ends
from localgen.last_run import Continued, newest_last_run, take_last_run
from localgen.params import GenerationLimits, SamplingParams
from localgen.prompt_room import warn_of_answer_room
from localgen.runner import LoadedModel, ModelOptions, disk_prompt_cache
from localgen.session import ChatSession
from localgen.session_turns import UnsavedChangeError
from localgen.thinking import prompt_opens_thinking, without_thinking
from localgen.units import counted


def check_continuation(continue_latest: bool, name: str | None, *, raw: bool) -> bool:
    """True when the run continues a saved conversation; a UsageError for options that contradict it."""
    if continue_latest and name is not None:
        raise UsageError("--continue and --conversation contradict each other",
                         hint="--continue takes the latest saved conversation, --conversation NAME that one")
    continuing = continue_latest or name is not None
    if continuing and raw:
        raise UsageError("--raw sends plain text, which has no conversation to continue",
                         hint="drop --raw, or drop --continue/--conversation")
    if name is not None:
        check_name(name)
    return continuing


def open_conversation(name: str | None) -> Continued:
    """Conversation NAME (started when new), held for this process, or the newest: the last plain run when it is
    newer than every saved conversation (read now, saved by continued_answer), else the newest saved one, held,
    never an older one when the newest cannot be continued (in use, damaged)."""
    try:
        if name is None:
            last_run = newest_last_run()
            if last_run is not None:
                return Continued(last_run.conversation, last_run)
        conversation = load_or_start(name) if name else _newest_saved()
    except ConversationBusyError as exc:
        raise _busy_for_a_run(exc) from None
    except DamagedConversationError as exc:
        raise exc.left_untouched("--conversation NAME") from None
    _check_saveable(conversation)
    if not conversation.on_disk:
        _warn_if_mistyped(conversation.name)
    return Continued(conversation)


def _check_saveable(conversation: Conversation) -> None:
    """Refuse, before the model loads and any input is waited for, a conversation that could not be saved
    (check_saveable), where its answer would be lost."""
    from localgen.conversation_saveable import check_saveable

    try:
        check_saveable(conversation.name)
    except LocalgenError as exc:
        raise LocalgenError(f"conversation '{conversation.name}' cannot be saved: {exc.message}",
                            hint=exc.hint) from exc


def _busy_for_a_run(exc: ConversationBusyError) -> ConversationBusyError:
    """A busy conversation (or last run) with the hint of a run, not a chat's."""
    return ConversationBusyError(exc.message, hint="wait for that one to end (a run is refused, not queued), or go on "
                                                   "with another: --conversation NAME")


def _newest_saved() -> Conversation:
    """The newest saved conversation, held for this process."""
    if not list_conversations():
        raise LocalgenError("there is no saved conversation to continue", hint=_nothing_to_continue_hint())
    return latest_conversation(console.warn, newest_only=True)


def _nothing_to_continue_hint() -> str:
    """How to get something --continue can take (a plain run keeps nothing with LOCALGEN_NO_LAST_RUN set)."""
    start = 'start a conversation with `localgen run --conversation NAME "..."` or `localgen chat`'
    if settings().no_last_run:
        return f"LOCALGEN_NO_LAST_RUN keeps no plain run to continue: {start}"
    return f'ask something first with `localgen run "..."`, or {start}'


def _warn_if_mistyped(name: str) -> None:
    """A new conversation whose name is close to a saved one's (or the same but for case) may be a typo for it: say
    so (it starts anyway)."""
    like = name_like_saved(name)
    if like:
        console.warn(f"starting a new conversation '{name}'; a saved one is named '{like}' (--conversation {like} "
                     "continues it)")


def continued_answer(loaded: LoadedModel, options: ModelOptions, continued: Continued, system: str | None,
                     prompt: str | None, attachments: Sequence[str], sampling: SamplingParams,
                     limits: GenerationLimits, overrides: Mapping[str, str], *,
                     draft: str, prompt_cache: bool, stop_given: bool = False, hide_thinking: bool = False,
                     notes: list[str] | None = None, template_system: bool = False,
                     limit_source: str) -> tuple[Callable[[], Iterator[Event]], str | None]:
    """What streams the answer to prompt (after the attached files, named in the turn as a chat's are) as the next
    exchange of a saved conversation (saved with it, as chat does).

    The conversation's saved settings and stop strings apply and overrides (the options given now; stop_given:
    --stop's strings, in limits) win for this run: they are not saved. Earlier exchanges the context cannot hold
    are noted on stderr; system replaces the conversation's system prompt, as template_system (-s none) does with
    none, the chat template's own. hide_thinking takes the <think> reasoning out of what streams (the saved answer
    keeps it, as a chat's does). The last plain run becomes a saved conversation here, once the question is planned:
    a run refused before that leaves it as it was. What the save did that must be said (a file changed by hand,
    kept) goes into notes, to say once the answer is out. A prompt that leaves too little room for the token limit in
    use (limit_source: where it came from) is warned of, as a run without a conversation does. Also returned: where
    the stop strings in use came from.
    """
    conversation = continued.conversation
    if not loaded.prompt_format.is_chat:
        raise LocalgenError(f"{loaded.resolved.display_name} has no chat template, and a conversation needs one",
                            hint="give it one with --chat-template FILE, or drop --continue/--conversation")
    replaced = system is not None or template_system
    system_note = None if not replaced or continued.is_new else \
        system_change(conversation.name, conversation.system, system, loaded.prompt_format.default_system)
    if replaced:
        conversation.system = system
    session = ChatSession(loaded, options, conversation, sampling, limits, draft=draft,
                          prefix_cache=disk_prompt_cache(loaded) if prompt_cache else None, keep_saved_settings=True,
                          own_stop=stop_given)
    if notes is not None:
        session.save_notes = notes
    session.replace_conversation(conversation, overrides)
    session.attachments = list(attachments)  # recorded with the turn (attached, typed), as a chat's -f files are
    turn, events = session.ask(argument_line_ends(prompt or ""))
    if notes is not None:
        events = _unsaved_said(events, session, notes)
    if continued.last_run is not None:
        try:
            take_last_run(continued.last_run, console.say)
        except ConversationBusyError as exc:
            raise _busy_for_a_run(exc) from None
    if system_note:  # the run goes ahead: its -s is saved with the conversation, as chat's /system is
        console.say(system_note)
    ending = cut_short(conversation.turns[-1]) if conversation.turns and conversation.turns[-1].interrupted else None
    if ending:  # its text is only what came before it stopped: the model sees that
        console.say(f"localgen: the last answer in conversation '{conversation.name}' was {ending}; the model sees it "
                    "as far as it came")
    if turn.out_of_context:  # every run plans the context afresh: say each time what the model does not see
        console.say(f"localgen: the model sees {_seen(len(conversation.turns) - turn.out_of_context)} of "
                    f"{counted(len(conversation.turns), 'earlier exchange')} of conversation '{conversation.name}'; "
                    "older ones no longer fit its context (the saved conversation keeps them)")
    warn_of_answer_room(loaded, turn.prompt_tokens, session.limits.max_tokens, limit_source=limit_source)
    if hide_thinking:
        events = without_thinking(events, lambda: prompt_opens_thinking(session.prompt_text()))
    stops = session.limits.stop  # --stop given wins for a run (stop_given), then the conversation's, then models.toml's
    source = None if not stops else "--stop" if stop_given else "the conversation's" if session.own_stop else \
        "stop in models.toml"
    return (lambda: events), source


def _unsaved_said(events: Iterator[Event], session: ChatSession, notes: list[str]) -> Iterator[Event]:
    """events; where an error (writing the answer out, say) cuts them short and the answer so far could not be saved
    either, a note says so: the run's error is the one reported, and no later change saves it, as in a chat; where
    the whole answer's save fails, its error says the exchange is saved nowhere."""
    try:
        yield from events
    except UnsavedChangeError as exc:  # the answer is whole, and its save failed: that error says so, once
        raise UnsavedChangeError(f"{exc.message}; this exchange is saved nowhere",
                                 hint=f"{exc.hint + '; ' if exc.hint else ''}the answer printed is its only copy") \
            from exc
    except BaseException:
        if session.unsaved:
            notes.append(f"the answer so far was not saved in conversation '{session.conversation.name}': "
                         f"{session.unsaved_because}")
        raise


def _seen(count: int) -> str:
    """'only the last one', 'the last 3', 'none'."""
    return "none" if count <= 0 else "only the last one" if count == 1 else f"the last {count:,}"
