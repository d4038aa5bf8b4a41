"""`run --conversation NAME` and `run --continue`: a one-shot run that adds its exchange to a saved conversation."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from localgen import console
from localgen.conversation import (
    Conversation,
    DamagedConversationError,
    check_name,
    latest_conversation,
    list_conversations,
    load_or_start,
)
from localgen.conversation_lock import ConversationBusyError
from localgen.conversation_summary import cut_short
from localgen.errors import LocalgenError, UsageError
from localgen.events import Event
from localgen.last_run import take_last_run
from localgen.params import GenerationLimits, SamplingParams
from localgen.runner import LoadedModel, ModelOptions, disk_prompt_cache
from localgen.session import ChatSession
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


def open_conversation(name: str | None) -> Conversation:
    """Conversation NAME (started when new), or the newest: the last plain run (then saved as a conversation) when
    it is newer than every saved one, else the newest saved one, never an older one when the newest cannot be
    continued (in use, damaged). Held for this process either way."""
    try:
        conversation = load_or_start(name) if name else _newest()
    except ConversationBusyError as exc:  # the hint of a run, not a chat's
        raise ConversationBusyError(exc.message, hint="wait for that one to end (a run is refused, not queued), or "
                                                      "go on with another: --conversation NAME") from None
    except DamagedConversationError as exc:
        remove = f"move it away or delete it (`localgen conversations rm {exc.name}`)" if exc.removable else \
            "move that folder away"
        raise DamagedConversationError(exc.message, hint=f"it was left untouched: {remove}, or go on with another: "
                                                         "--conversation NAME", name=exc.name) from None
    if not conversation.on_disk:
        _warn_if_mistyped(conversation.name)
    return conversation


def _newest() -> Conversation:
    """The last plain run, as a new saved conversation, when it is the newest; else the newest saved conversation."""
    taken = take_last_run(console.say)
    if taken is not None:
        return taken
    if not list_conversations():
        raise LocalgenError("there is no saved conversation to continue",
                            hint='ask something first with `localgen run "..."`, or start a conversation with '
                                 '`localgen run --conversation NAME "..."` or `localgen chat`')
    return latest_conversation(console.warn, newest_only=True)


def _warn_if_mistyped(name: str) -> None:
    """A new conversation whose name is close to a saved one's may be a typo for it: say so (it starts anyway)."""
    import difflib

    try:
        saved = [saved_name for saved_name, _ in list_conversations()]
    except LocalgenError:  # an unreadable folder: the save will say what is wrong
        return
    close = difflib.get_close_matches(name, saved, n=1, cutoff=0.8)
    if close:
        console.warn(f"starting a new conversation '{name}'; a saved one is named '{close[0]}' "
                     f"(--conversation {close[0]} continues it)")


def continued_answer(loaded: LoadedModel, options: ModelOptions, conversation: Conversation, system: str | None,
                     text: str, sampling: SamplingParams, limits: GenerationLimits, overrides: Mapping[str, str], *,
                     draft: str, prompt_cache: bool, hide_thinking: bool = False) -> Callable[[], Iterator[Event]]:
    """What streams the answer to text as the next exchange of a saved conversation (saved with it, as chat does).

    The conversation's saved settings apply and overrides (the options given now) win for this run: they are not
    saved. Earlier exchanges the context cannot hold are noted on stderr. hide_thinking takes the
    <think> reasoning out of what streams (the saved answer keeps it, as a chat's does).
    """
    if not loaded.prompt_format.is_chat:
        raise LocalgenError(f"{loaded.resolved.display_name} has no chat template, and a conversation needs one",
                            hint="give it one with --chat-template FILE, or drop --continue/--conversation")
    if system is not None:
        conversation.system = system
    session = ChatSession(loaded, options, conversation, sampling, limits, draft=draft,
                          prefix_cache=disk_prompt_cache(loaded) if prompt_cache else None, keep_saved_settings=True)
    session.replace_conversation(conversation, overrides)
    ending = cut_short(conversation.turns[-1]) if conversation.turns and conversation.turns[-1].interrupted else None
    if ending:  # its text is only what came before it stopped: the model sees that
        console.say(f"localgen: the last answer in conversation '{conversation.name}' was {ending}; the model sees it "
                    "as far as it came")
    turn, events = session.ask(text)
    if turn.out_of_context:  # every run plans the context afresh: say each time what the model does not see
        console.say(f"localgen: the model sees {_seen(len(conversation.turns) - turn.out_of_context)} of "
                    f"{counted(len(conversation.turns), 'earlier exchange')} of conversation '{conversation.name}'; "
                    "older ones no longer fit its context (the saved conversation keeps them)")
    if hide_thinking:
        events = without_thinking(events, lambda: prompt_opens_thinking(session.prompt_text()))
    return lambda: events


def _seen(count: int) -> str:
    """'only the last one', 'the last 3', 'none'."""
    return "none" if count <= 0 else "only the last one" if count == 1 else f"the last {count:,}"
