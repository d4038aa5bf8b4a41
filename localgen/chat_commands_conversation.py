"""The chat's commands for its conversation and model: /reset, /undo, /regen, /file, /save, /load, /list,
/history and /model."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable

from localgen import console
from localgen.attached import AttachedText, attached_again_warning, attached_files
from localgen.chat_commands_settings import settings_text
from localgen.chat_file_words import dropped_files, one_at_a_time, pattern_files
from localgen.config import settings
from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import held_by_others, held_names, release
from localgen.conversation_names import NAME_PATTERN, NEW_NAME_HINT, check_name, empty_name
from localgen.conversation_store import (
    MissingConversationError,
    conversations_dir,
    let_go,
    list_conversations,
    load_conversation,
    saved_path,
)
from localgen.conversation_summary import name_like_saved, not_a_file, summaries
from localgen.conversation_transcript import exchanges, shortened
from localgen.errors import ContextSizeError, UsageError
from localgen.inputs import InputFile, attachment_text, refuse_special_file
from localgen.model_switch import AlreadyLoaded, names_loaded_file
from localgen.registry import reads_as_a_model
from localgen.repl_input import LIST_NEWEST, usage_error
from localgen.repl_state import ChatState
from localgen.repl_text import (
    brief,
    exchanges_in_context,
    gist,
    list_rows,
    plain_text_note,
    same_answer_note,
    what_reset_kept,
)
from localgen.runner import LoadedModel
from localgen.session import ChatSession
from localgen.session_room import restart_command
from localgen.shell_words import one_argument
from localgen.stopping import escaped
from localgen.think_switch import CHAT_HINT, think_problem
from localgen.typed_paths import expand_user_path, option_path, short_path
from localgen.units import alternatives, counted

NOTHING_OF_ITS_OWN = "no exchange, and no system prompt, setting or stop strings of its own"  # nothing /save keeps


def reset_command(state: ChatState, _: str) -> None:
    """/reset: start a new conversation, keeping the system prompt."""
    session = state.session
    if not state.leaving.may_leave("/reset", state.typed):
        return
    attached, unsaved = len(session.attachments), session.unsaved
    previous = session.reset()
    dropped = f"; dropped {counted(attached, 'attached file')}" if attached else ""
    kept = what_reset_kept(previous, unsaved=unsaved)
    console.say(f"new conversation {session.conversation.name} ({kept}{dropped})")


def undo_command(state: ChatState, _: str) -> None:
    """/undo: drop the last exchange, the files its message carried attached to the next one again."""
    session = state.session
    conversation, attached = session.conversation, session.attachments
    saved, name = conversation.on_disk, conversation.name
    turn = session.undo()
    deleted = saved and not conversation.on_disk and conversation.name == name  # (renamed: its file was kept, said)
    notes = [f"{name} had no other exchange and is no longer saved"] if deleted else []
    if saved and conversation.on_disk and not conversation.turns:  # one the user saved (/save, /load) is kept
        notes = [f"{name} has no exchange left and stays saved; `localgen conversations rm {name}` deletes it"]
    one = len(turn.attached) == 1
    names = ", ".join(short_path(file.name) for file in turn.attached)
    if session.attachments is not attached:
        notes.append(f"{names} {'is' if one else 'are'} attached to the next message again as sent; "
                     f"/file none drops {'it' if one else 'them'}")
    elif turn.attached:  # saved before localgen recorded each file's part of the message
        named = turn.attached[0].name not in ("-", "(text)")  # stdin's text has no name /file takes
        again = "/file attaches each" if not one else \
            f"/file {shlex.quote(turn.attached[0].name)} attaches it" if named else "/file PATH attaches it"
        notes.append(f"{names} {'is' if one else 'are'} not attached again: the saved conversation holds "
                     f"{'its text' if one else 'their texts'} only as part of the message; {again} again")
    note = f" ({'; '.join(notes)})" if notes else ""
    console.say(f"dropped: {gist(turn.headline())!r}{note}")  # files attached named, as listings name them


def regen_command(state: ChatState, _: str) -> None:
    """/regen: answer the last question again, or send the message typed last where it got no answer; where the
    settings give this answer again from now on (temperature 0, a fixed seed), it says so first, with how to vary it."""
    session = state.session
    again = session.dropped_question is None  # (else a message that got no answer is sent: a first answer)
    start, stream = session.regenerate()
    note = same_answer_note(session.sampling) if again else None
    if note is not None:
        console.say(note)
    state.show_answer(start, stream)


def file_command(state: ChatState, argument: str) -> None:
    """/file [PATH|none]: attach a file's text to the next message; none drops the attached files; alone, lists them."""
    session = state.session
    if not argument:
        files = [f"{short_path(file.name)} ({file.characters:,} characters)"
                 for file in attached_files(session.attachments)]
        console.say(f"attached to the next message: {', '.join(files)} (/file none drops "
                    f"{'it' if len(files) == 1 else 'them'})" if files else
                    "no files are attached (/file PATH attaches one)")
        return
    if argument == "none":  # a file named none: /file ./none
        attached = session.attachments
        console.say(f"dropped {counted(len(attached), 'attached file')}" if attached else "no files are attached")
        session.attachments = []
        return
    several = dropped_files(argument)
    if several:
        raise UsageError(f"no such file: {argument}", hint=one_at_a_time(several))
    typed = one_argument(argument, "/file PATH")
    text = _file_text(typed)
    if text is None:
        return
    text = AttachedText(text, InputFile("/file", expand_user_path(typed), typed))  # a refusal names it
    again = attached_again_warning(text, session.attachments)
    if again is not None:
        console.warn(again)
        return
    session.check_attachment(text, short_path(typed))
    session.attachments.append(text)
    console.say(f"attached {short_path(typed)} ({len(text):,} characters) to the next message")


def _file_text(typed: str) -> str | None:
    """The text of the file /file names (as typed), or None, after a warning, when it has none to attach; a pattern
    that names files (/file *.txt) is refused with how to attach them."""
    option_path(typed, "/file")  # an empty name is refused, not read as the current folder
    path = expand_user_path(typed)
    several = [] if os.path.lexists(path) else pattern_files(typed)
    if several:
        raise UsageError(f"no such file: {typed}", hint=one_at_a_time(several))
    if typed == "-" and not os.path.lexists(path):  # run's -f -: stdin, which is the chat's terminal
        raise UsageError("- is stdin, which is the chat's terminal here, not a file",
                         hint="type or paste the text as a message; a file named - is /file ./-")
    refuse_special_file(path, typed)
    warnings: list[str] = []
    text = attachment_text(path, warnings, option="/file", typed=typed)
    empty = not text.strip()
    if empty:  # its warning (the last) says so: a file that adds nothing is not counted as attached
        warnings[-1] += ", so it is not attached"
    console.warn_each(warnings)
    return None if empty else text


def save_command(state: ChatState, argument: str) -> None:
    """/save [NAME]: save the conversation; NAME renames one still under its automatic name and copies one the user
    named, saying which (one with nothing in it, no exchange and nothing chosen, is not written,
    and said so); a new NAME the same but for case as a saved one's is warned about (a case-insensitive file system
    takes them for one file)."""
    session = state.session
    conversation = session.conversation
    before = conversation.name
    name = one_argument(argument, "/save NAME") if argument else None  # quoted as /load's
    if name == "":  # /save '': never a save under the current name
        raise empty_name(f"{NEW_NAME_HINT}; /save alone keeps its name ({before})")
    chosen = session.own_system or session.own_settings or session.own_stop  # kept with no exchange: a preset
    if not (conversation.turns or chosen) and (name is not None or not conversation.on_disk):
        if name is not None:
            check_name(name)  # a name no conversation can have is said first
        console.say(_nothing_to_save(conversation))
        return
    saved_before = conversation.on_disk
    path = state.session.save(name)
    if name is None or conversation.name == before or not saved_before:
        console.say(f"saved to {path}{_preset_note(session)}")
    elif not os.path.isfile(saved_path(before)):  # nothing of it left there (an automatic name's file removed)
        console.say(f"renamed {before} to {conversation.name}: saved to {path}")
    else:
        console.say(f"saved a copy as {conversation.name} ({path}), which this chat goes on in; {before} stays saved "
                    "as it was")
    like = name_like_saved(conversation.name, close=False) if argument and conversation.name != before else None
    if like:
        console.warn(f"saved as a new conversation '{conversation.name}'; a saved one is named '{like}' (/load {like} "
                     "continues it)")


def _preset_note(session: ChatSession) -> str:
    """What /save adds where the conversation it wrote has no exchange: that only what was chosen in it is kept,
    which /load of it starts from ('' where it has exchanges)."""
    if session.conversation.turns:
        return ""
    chosen = [*["its system prompt"] * session.own_system,
              *[f"its {'setting' if len(session.own_settings) == 1 else 'settings'} "
                f"({', '.join(sorted(session.own_settings))})"] * bool(session.own_settings),
              *["its stop strings"] * session.own_stop]
    if not chosen:  # a saved one /undo emptied: saved so, as it is now
        return f" with {NOTHING_OF_ITS_OWN}"
    return (f" with no exchange yet: only {alternatives(chosen, 'and')}, which /load {session.conversation.name} "
            "starts from")


def _nothing_to_save(conversation: Conversation) -> str:
    """What /save says of a conversation with no exchange and nothing chosen in it, which it does not write (a new
    chat's, or a copy of one /undo emptied)."""
    if conversation.on_disk:
        return f"nothing to save: {conversation.name} has {NOTHING_OF_ITS_OWN} (it stays saved as it is)"
    return f"nothing to save yet: this chat has {NOTHING_OF_ITS_OWN} (it is saved with its first exchange)"


def load_command(state: ChatState, argument: str) -> None:
    """/load NAME: continue a saved conversation, saying where the one left is saved where this chat asked in it; a
    Ctrl-C meanwhile says which conversation is open, the other let go."""
    session = state.session
    if not argument:
        raise usage_error("/load", "/load needs the name of a saved conversation (/list lists them)")
    name = one_argument(argument, "/load NAME")  # quoted, as the name /model and the path /file take
    previous, folder = session.conversation, conversations_dir()
    held_before = held_names(folder)
    try:
        _load(state, _opened(name))
    except KeyboardInterrupt:
        now = session.conversation
        for other in held_names(folder) - held_before - {now.name}:  # taken by this /load (between its steps)
            release(folder, other)
        if previous.name != now.name:
            let_go(previous)
        console.say(f"[interrupted: {now.name} is loaded (/show tells of it)]" if now is not previous else
                    f"[interrupted: {now.name} is still the conversation open]")


def _opened(name: str) -> Conversation:
    """The saved conversation /load names, held for this chat (a name that cannot be loaded is refused)."""
    try:
        return load_conversation(name)
    except (MissingConversationError, UsageError) as exc:  # no such conversation, or not a name one can have
        if not name or not reads_as_a_model(name, settings().user_registry):
            raise
        raise type(exc)(exc.message, hint=f"{name} is a model: /model {name} switches to it") from None


def _load(state: ChatState, conversation: Conversation) -> None:
    """Continue the conversation /load opened, where the one open may be left (else it is let go again)."""
    session = state.session
    leaving = False
    try:
        leaving = state.leaving.may_leave("/load", state.typed)
    finally:  # not left (a save that failed, a Ctrl-C during it): the conversation opened is let go again
        if not leaving and conversation.name != session.conversation.name:
            let_go(conversation)
    if not leaving:
        return
    saved_with = conversation.model
    previous, unsaved, asked = session.conversation, session.unsaved, state.asked_in_current()
    session.replace_conversation(conversation)
    left = previous.name != conversation.name
    if asked and not left:  # reread from its file: still the conversation this chat asked in
        state.asked_in = conversation
    kept = f" ({what_reset_kept(previous, unsaved=unsaved)})" if asked and left else ""  # as /reset says it
    console.say(f"loaded {conversation.name}{kept}: {conversation_summary(session)}")
    say_last_exchange(conversation)
    if session.attachments:  # /file's files are for the next message, in whichever conversation it is
        console.say(f"your next message still takes {counted(len(session.attachments), 'attached file')} "
                    "(/file none drops them)")
    if saved_with and saved_with != conversation.model and not names_loaded_file(session.loaded, saved_with):
        if os.path.isabs(saved_with) and not os.path.exists(saved_with):  # a file moved or deleted since
            console.say(f"it was saved with {saved_with}, which is no longer there, and goes on with "
                        f"{conversation.model}")
        else:
            console.say(f"it was saved with {saved_with} and goes on with {conversation.model} "
                        f"(/model {saved_with} to switch)")
    warning = session.no_room_warning()  # its system prompt may leave no room in this model's context
    if warning is not None:
        console.warn(warning)


def list_command(state: ChatState, argument: str) -> None:
    """/list [all]: list the newest saved conversations (all: every one), marking this chat's and those another chat
    or run has open, and say how many older ones there are."""
    if argument.lower() not in ("", "all"):
        raise usage_error("/list", f"/list takes all or nothing, not {argument!r}")
    listing = list_conversations(unusable=True)  # a stat of each file: summaries reads only the ones it lists
    conversation = state.session.conversation
    current = conversation.name if conversation.on_disk else None
    entries = summaries(None if argument else LIST_NEWEST, listing=listing, keep=current)  # this chat's, if older
    if not entries:
        console.say("no saved conversations")
        return
    misnamed = _misnamed_files(listing)
    also = f" and {counted(misnamed, 'misnamed file')}" if misnamed else ""
    console.say(f"{counted(len(listing) - misnamed, 'saved conversation')}{also}, newest first:")
    others = held_by_others(conversations_dir(), (entry.name for entry in entries))  # as /load would find them
    for row in list_rows(entries, current, console.status_width(), others):
        console.say(row)
    older = len(listing) - len(entries)
    if older > 0:
        console.say(f"{counted(older, 'older one')} not shown (/list all lists every one)")


def _misnamed_files(listing: list[tuple[str, float]]) -> int:
    """How many files of a listing are misnamed: regular files under a name no command opens (my notes.json, copied
    in by hand); a pipe under such a name is a damaged conversation, as `conversations list` lists it."""
    return sum(1 for name, _ in listing if not NAME_PATTERN.fullmatch(name) and not not_a_file(name))


def history_command(state: ChatState, argument: str) -> None:
    """/history [N]: print the last N exchanges of the conversation (alone: every one), as `localgen conversations
    show` writes them."""
    turns = state.session.conversation.turns
    count = _exchange_count(argument) if argument else len(turns)
    if not turns:
        console.say("no exchange yet in this conversation")
        return
    shown = turns[-count:]
    if len(shown) < len(turns):
        console.say(f"[the last {counted(len(shown), 'exchange')} of {len(turns):,}; /history alone shows every one]")
    _say_exchanges(shown)


def _exchange_count(argument: str) -> int:
    """The N of /history N: a whole number of at least 1, in ASCII digits (str.isdigit takes a '²' int() refuses)."""
    if not (argument.isascii() and argument.isdigit()) or int(argument) < 1:
        raise usage_error("/history", f"/history takes a number of exchanges (at least 1), not {argument!r}")
    return int(argument)


def say_last_exchange(conversation: Conversation) -> None:
    """Say the last exchange of a conversation gone back to (--resume, /load), its messages shortened where long (said
    so); nothing where it has none."""
    if conversation.turns:
        total = len(conversation.turns)
        console.say(f"last exchange (/history shows all {total:,}):" if total > 1 else "last exchange:")
        _say_exchanges(conversation.turns[-1:], shorten=shortened, before="\n")


def _say_exchanges(turns: list[Turn], *, shorten: Callable[[str], str] = str, before: str = "") -> None:
    """Say exchanges as `conversations show` writes them on a terminal: their saved text's control characters shown,
    not obeyed, and each answer's details dim (in italics where the terminal takes no style, or NO_COLOR); a pipe
    gets them as they are (before: what is said before them, a blank line)."""
    terminal = sys.stderr.isatty()
    dim = console.writes_dim(sys.stderr)
    text = "\n".join(exchanges(turns, terminal=terminal, dim=dim, shorten=shorten)).rstrip("\n")
    console.say(before + text, made_safe=True)


def model_command(state: ChatState, argument: str) -> None:
    """/model REF: switch model, keeping the conversation (alone: name the model in use)."""
    session = state.session
    if not argument:
        now = session.loaded
        using = f"using {now.resolved.display_name}; " if now.engine.is_open else ""
        console.say(f"{using}/model REF switches (a name, NAME:QUANT, ORG/REPO or a .gguf path)")
        return
    reference = one_argument(argument, "/model REF")
    before, system, stops = session.settings(), session.conversation.system, session.limits.stop
    own = session.loaded.prompt_format.default_system()  # the template's own, where none is set, may change with it
    n_ctx, seen, previous = session.loaded.engine.n_ctx, len(session.conversation.in_context()), session.loaded
    try:
        loaded = session.switch_model(reference, note=console.say, keep_loaded=True)
    except AlreadyLoaded:
        console.say(f"{session.loaded.resolved.display_name} is already loaded: nothing changed (/model REF switches "
                    "to another model)")
        return
    except ContextSizeError as exc:  # the context the chat started with: a chat started again takes another
        command = restart_command(session, exc.maximum, model=reference, unsaveable=state.leaving.quiet)
        raise exc.with_hint(f"a context of {exc.maximum:,} or less: {command}") from None
    except KeyboardInterrupt:
        now = session.loaded
        console.say(_switch_interrupted(now) if now.engine.is_open and now.resolved != previous.resolved else
                    f"[interrupted: still using {now.resolved.display_name}]" if now.engine.is_open else
                    "[interrupted: no model is loaded (/model NAME loads one)]")
        return
    try:  # the switch is done: a Ctrl-C now stops only what is said of it
        changed = [f"{key}={session.value_of(key)[1]}" for key, value in session.settings().items()
                   if before[key] != value]
        conversation = session.conversation
        if conversation.system != system or (system is None and loaded.prompt_format.default_system() != own):
            changed.append(_system_prompt_text(session))
        if session.limits.stop != stops:
            now_stops = session.limits.stop
            changed.append(f"stop strings {', '.join(map(escaped, now_stops))}" if now_stops else "no stop strings")
        if loaded.engine.n_ctx != n_ctx:
            changed.append(f"context {loaded.engine.n_ctx:,} tokens")
        console.say(f"now using {loaded.resolved.display_name}"
                    + (f" (changed with it: {', '.join(changed)})" if changed else ""))
        if not loaded.prompt_format.is_chat:
            restart = restart_command(session, None, model=reference, unsaveable=state.leaving.quiet,
                                      option="--chat-template FILE")  # /model takes no --chat-template
            console.say(plain_text_note(loaded.resolved.display_name, f"a chat template: {restart}"))
        if len(conversation.in_context()) < seen:
            console.say(f"[the conversation: {exchanges_in_context(conversation)}]")
        think = session.options.think
        problem = think and think_problem(loaded.prompt_format.template, think, flag="/think", hide_hint=CHAT_HINT)
        if problem:  # kept for a model that can take it
            console.say(f"[/think {think} does not apply to it: {problem[0]}; {problem[1]}]")
        warning = session.no_room_warning() or session.last_exchange_warning(  # the model is loaded all the same
            f"/model {shlex.quote(previous.resolved.display_name)} goes back to the model before")
        if warning is not None:
            console.warn(warning)
    except KeyboardInterrupt:
        console.say(_switch_interrupted(loaded))


def _switch_interrupted(loaded: LoadedModel) -> str:
    """What a Ctrl-C that came once /model had loaded the new model says: the switch stands (what it changed, or
    whether the system prompt leaves room in the new context, may have gone unsaid)."""
    return (f"[interrupted once the switch was done: now using {loaded.resolved.display_name}; /show says what it "
            "runs with]")


def conversation_summary(session: ChatSession) -> str:
    """Exchanges, system prompt, settings, stop strings and /think choice of the current conversation, for /load and
    --resume."""
    conversation, stops, think = session.conversation, session.limits.stop, session.options.think
    system = _system_prompt_text(session)
    return (f"{exchanges_in_context(conversation)}, {system}; settings: {settings_text(session)}"
            + (f"; stop strings {', '.join(map(escaped, stops))}" if stops else "")
            + (f"; /think {think}" if think else ""))


def _system_prompt_text(session: ChatSession) -> str:
    """The system prompt the model gets, as a summary names it: briefly quoted, empty, the chat template's own where
    none is set, or none."""
    system = session.conversation.system
    if system == "":
        return "an empty system prompt (the template's default is left out)"
    if system:
        return f"system prompt {brief(system)!r}"
    default = session.loaded.prompt_format.default_system()
    return f"the chat template's own system prompt {brief(default)!r}" if default else "no system prompt"
