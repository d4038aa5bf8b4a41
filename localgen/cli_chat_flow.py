"""`localgen chat` from its request to the REPL, in phases: everything the command line says is checked before any
pipe is waited for, then the inputs are read, the model loaded and the chat run on it."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import typer

from localgen.attached import AttachedText, once_each, prompt_parts
from localgen.cli_model import (
    load_for,
    model_options,
    read_system_file,
    read_texts,
    say_waiting_for,
)
from localgen.cli_options import RESUME_LATEST
from localgen.errors import UsageError
from localgen.system_file import SystemFile

if TYPE_CHECKING:
    from localgen.conversation import Conversation
    from localgen.input_text import TextBound
    from localgen.inputs import InputFile
    from localgen.last_run import Continued
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.repl import Repl
    from localgen.repl_terminal import TypedAhead
    from localgen.runner import ModelOptions


@dataclass(frozen=True)
class ChatRequest:
    """What `localgen chat` was asked, as the command line gave it (the sampling and loading flags are read from
    ctx, by name)."""

    ctx: typer.Context
    model: str | None = None
    system: str | None = None
    system_file: str | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    ctx_size: int | None = None
    markdown: bool = True
    wrap: bool = True
    show_thinking: bool = True
    stats: bool = False
    prefill_while_typing: bool = True
    resume: str | None = None  # RESUME_LATEST: the latest conversation
    files: tuple[str, ...] = ()
    chat_template: str | None = None
    think: str | None = None


@dataclass
class CheckedChat:
    """A chat checked as far as it can be before a file is read: its texts, the files its options name (not read
    yet), its settings, the conversation it resumes and the model options for it."""

    system: str | None
    files: list[InputFile]
    system_input: InputFile | None
    template_file: InputFile | None
    sampling: SamplingParams
    limits: GenerationLimits
    continued: Continued | None
    options: ModelOptions
    warnings: list[str] = field(default_factory=list)
    unsaveable: bool = False  # the start said this chat cannot be saved: its saves fail quietly
    template_system: bool = False  # -s none: no system prompt given, not models.toml's nor a resumed chat's
    bound: TextBound | None = None  # the files' text that the model's context cannot hold (runner.preflight)

    @property
    def named(self) -> list[InputFile]:
        """Every file the options name: the -f files, --system-file and --chat-template."""
        return [*self.files, *(f for f in (self.system_input, self.template_file) if f is not None)]

    @property
    def conversation(self) -> Conversation | None:
        """The conversation the chat resumes, if any (the last plain run's: not saved before the chat starts)."""
        return None if self.continued is None else self.continued.conversation


@dataclass(frozen=True)
class ChatStart:
    """What a chat starts with: the system prompt given, the first message's files, and the model options with the
    chat template and the context those files need."""

    system: str | None
    attachments: list[str]
    options: ModelOptions
    texts: tuple[str | None, ...] = ()  # what the context was sized for: the files, the resumed conversation
    system_file: SystemFile | None = None  # the file the system prompt was read from, where it is a regular one


def chat_command(request: ChatRequest) -> None:
    """Check, read, load and chat: the whole of `localgen chat`, in the chat's terminal (keys typed while it starts
    wait unechoed for the prompt) from the moment the command line is checked, or where a file it reads is a device
    (-f /dev/tty: typed, in the terminal's line mode, until Ctrl-D) once that is read."""
    import contextlib

    from localgen.inputs import reads_a_device
    from localgen.repl_terminal import chat_terminal
    from localgen.signals import QUIT_SIGNALS, exit_on_signals

    views: list[Repl] = []  # the REPL, once there: its live view is cleared when Ctrl-Z stops the chat

    def pause_views() -> None:
        for view in views:
            view.pause_view()

    checked = check_chat(request)
    typed = reads_a_device(checked.named)
    with contextlib.ExitStack() as terminal:
        terminal.enter_context(exit_on_signals(QUIT_SIGNALS))  # Ctrl-\ ends a chat as SIGTERM does, not with a core
        typed_ahead = None if typed else terminal.enter_context(chat_terminal(before_suspend=pause_views))
        start = read_chat_inputs(checked)
        if typed_ahead is None:
            typed_ahead = terminal.enter_context(chat_terminal(before_suspend=pause_views))
        run_chat(request, checked, start, views, typed_ahead)


def check_chat(request: ChatRequest) -> CheckedChat:
    """Everything that can be refused before a file is read (a pipe given with -f, --system-file or
    --chat-template may keep it waiting): the options, the files they name, the model reference, the conversation
    resumed, then no terminal, and (when a pipe will be read, or --think checked) what loading would refuse."""
    from localgen import console
    from localgen.cli_model import conversation_defaults, early_refusals, system_file_input
    from localgen.cli_options import sampling_from, typed_name
    from localgen.cli_run import refuse_emptied_by_redirects
    from localgen.conversation import asks_for_no_system_prompt
    from localgen.conversation_lock import remove_leftovers
    from localgen.conversation_store import conversations_dir
    from localgen.inputs import attachment_files, reads_a_pipe, refuse_special_file
    from localgen.params import GenerationLimits, token_budget
    from localgen.resolve import check_reference
    from localgen.stdin_names import names_stdin
    from localgen.think_switch import parse_think
    from localgen.whole_inputs import chat_template_file

    ctx, warnings = request.ctx, []
    system, stop = read_texts(request.system, list(request.stop), warnings)
    stdin_file = next(filter(names_stdin, request.files), None)  # "-", or /dev/stdin
    if stdin_file is not None:
        raise UsageError(f"chat reads its messages from the terminal, so -f {stdin_file} has no stdin to read",
                         hint='attach files by name; for piped text use `... | localgen run "..."`')
    system_input = system_file_input(system, request.system_file, option=typed_name(ctx, "system_file"),
                                     stdin_taken="chat reads its messages from the terminal")
    template_system = asks_for_no_system_prompt(system)  # as run's -s none
    system = None if template_system else system
    files = attachment_files(list(request.files))  # every file an option names is checked, then read before loading
    for path, typed in ((file.path, file.typed) for file in files if file.path is not None):
        refuse_special_file(path, typed, pipes=True)  # as /file does, but a pipe (<(cmd)) is waited for, with a note
    template_file = chat_template_file(request.chat_template)
    named = [*files, *(f for f in (system_input, template_file) if f is not None)]
    refuse_emptied_by_redirects(named, None)  # before a warning is written to the file 2> emptied
    console.warn_each(warnings)
    sampling = sampling_from(ctx)
    limits = GenerationLimits(max_tokens=token_budget(request.max_tokens), stop=tuple(stop))
    if request.model is not None:  # all of this is refused before a pipe an option names is waited for
        check_reference(request.model)
    continued = _resumed(request.resume)
    conversation = None if continued is None else continued.conversation
    model, ctx_size = conversation_defaults(request.model, request.ctx_size, conversation)
    think = None if request.think is None else parse_think(request.think, "--think")
    options = replace(model_options(ctx, model=model, ctx_size=ctx_size, min_ctx=0,
                                    floor_texts=prompt_parts(files, system=bool(system) or system_input is not None)),
                      think=think)
    _refuse_without_terminal()  # after the command line's own errors, as every command says those first
    unsaveable = _warn_if_unsaveable(conversation.name if conversation is not None and conversation.on_disk else None)
    if not unsaveable:  # as a listing does: what saves (an hour ago), renames and deletions killed part way left goes
        remove_leftovers(conversations_dir())
    # what loading would refuse is refused before a pipe is waited for too, and a pipe too long for the model as
    # soon as its size shows it
    checked = CheckedChat(system=system, files=files, system_input=system_input, template_file=template_file,
                          sampling=sampling, limits=limits, continued=continued, options=options, warnings=warnings,
                          unsaveable=unsaveable, template_system=template_system)
    checked.bound = early_refusals(ctx, options, conversation, pipe=reads_a_pipe(checked.named, None))
    return checked


def _refuse_without_terminal() -> None:
    """Refuse a chat whose stdin or stdout is not a terminal (a pipe, a file, closed)."""
    if sys.stdin is None or not sys.stdin.isatty():
        raise UsageError("localgen chat needs a terminal", hint='for pipes and scripts use `localgen run "..."`, '
                         'and `localgen run --conversation NAME "..."` for one exchange after another')
    if not sys.stdout.isatty():  # the screen would be garbled and the file full of terminal controls
        raise UsageError("localgen chat needs a terminal on stdout too",
                         hint="conversations are saved as JSON (/save, `localgen chat --resume`); for a transcript "
                              'of one answer use `localgen run "..." > FILE`')


def _resumed(resume: str | None) -> Continued | None:
    """The conversation --resume NAME names, or for --resume alone (RESUME_LATEST) the latest one, the last plain
    run's when it is newer (saved as a conversation once the chat starts, as run --continue saves it once it
    answers); None without --resume."""
    from localgen import console
    from localgen.conversation import DamagedConversationError
    from localgen.conversation_names import empty_name
    from localgen.conversation_store import load_conversation
    from localgen.last_run import Continued, latest_to_resume

    if resume is None:
        return None
    if resume == RESUME_LATEST:
        return latest_to_resume(console.warn)
    if not resume:  # --resume "$NAME" with NAME unset: never the newest in its place
        raise empty_name("give a saved conversation's name (`localgen conversations` lists them), or --resume alone "
                         "for the newest", given_to="--resume")
    try:
        return Continued(load_conversation(resume, shell=True))
    except DamagedConversationError as exc:  # the hint of a command line, not of /load's
        raise exc.left_untouched("--resume NAME") from None


def _warn_if_unsaveable(resumed: str | None) -> bool:
    """Say at the start, not at the first save, that the chat cannot be saved (check_saveable: the conversations
    folder, and the file of the conversation it resumes, resumed); whether it said so."""
    from localgen import console
    from localgen.conversation_saveable import check_saveable
    from localgen.errors import LocalgenError

    try:
        check_saveable(resumed)
    except LocalgenError as exc:
        console.warn(f"this chat cannot be saved: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        return True
    return False


def read_chat_inputs(checked: CheckedChat) -> ChatStart:
    """Read --system-file, the -f files and --chat-template (a pipe among them is waited for, with a note), and
    plan the context with room for the first message's files and the resumed conversation. Files that no context of
    the model could hold, however they tokenize, are refused: a pipe among them as soon as that much of it is read
    (the bound check_chat got), the others when the model loads, before its weights are read."""
    from localgen import console
    from localgen.fit import prompt_context, text_bytes
    from localgen.inputs import read_attachments
    from localgen.runner import check_given_template
    from localgen.whole_inputs import read_chat_template

    warnings, system, system_file = checked.warnings, checked.system, None
    if checked.system_input is not None:
        bound = checked.bound and checked.bound.named(prompt_parts([], system=True))  # read first: it alone
        path = checked.system_input.path and checked.system_input.path.absolute()
        identity = SystemFile.before_reading(path)
        system = read_system_file(checked.system_input, None, warnings, bound=bound)
        system_file = SystemFile(path, identity, system) if path is not None and identity is not None else None
    bound = checked.bound and checked.bound.beside(system)
    read = read_attachments(checked.files, None, warnings, waiting=say_waiting_for, bound=bound,
                            made_of=lambda files, _: prompt_parts(files, system=bool(system)))  # those read by then
    attachments = once_each([AttachedText(text, file) for text, file in zip(read, checked.files, strict=True)],
                            [file.name for file in checked.files], warnings)  # a refusal of the message names them
    attachments = [text for text in attachments if text.strip()]  # a blank one, warned about, is not attached (/file's)
    template = read_chat_template(checked.template_file, waiting=say_waiting_for)
    check_given_template(replace(checked.options, chat_template=template))  # before the model loads
    console.warn_each(warnings)
    conversation = checked.conversation  # room for the first message's files and the resumed conversation
    texts = (*((*attachments, system) if attachments else ()), *(conversation.texts() if conversation else ()))
    options = replace(checked.options, chat_template=template,
                      min_ctx=prompt_context(text_bytes(*texts), checked.limits.max_tokens),
                      floor_bytes=text_bytes(*attachments, system))  # refused as run refuses it
    return ChatStart(system=system, attachments=attachments, options=options, texts=texts,
                     system_file=system_file)


def run_chat(request: ChatRequest, checked: CheckedChat, start: ChatStart, views: list[Repl],
             typed_ahead: TypedAhead) -> None:
    """Load the model and chat on it in the REPL (added to views, told what was typed ahead) until the user leaves,
    freeing the model (the one /model loaded last) at the end, or leaving that to the process's exit
    (cli_exit.free_or_leave_to_exit)."""
    from localgen import console
    from localgen.cli_exit import free_or_leave_to_exit
    from localgen.cli_options import from_command_line, given_settings, with_model_settings
    from localgen.conversation import Conversation
    from localgen.conversation_summary import system_change
    from localgen.last_run import take_last_run
    from localgen.prompt_room import with_room_for_the_prompt
    from localgen.registry import model_defaults
    from localgen.repl import Repl
    from localgen.session import ChatSession
    from localgen.think_switch import refuse_think

    ctx, system, conversation, resumed = request.ctx, start.system, checked.conversation, request.resume is not None
    loaded, options = with_room_for_the_prompt(load_for(ctx, start.options, conversation), start.options,
                                               start.texts, checked.limits.max_tokens,
                                               lambda wider: load_for(ctx, wider, conversation), console.say)
    session = None
    try:
        refuse_think(loaded.prompt_format.template, options.think, model_name=loaded.prompt_format.model_name)
        defaults = model_defaults(loaded.resolved.spec)
        model_system = defaults.system
        sampling, limits = with_model_settings(ctx, defaults, checked.sampling, checked.limits)
        system_note, given = None, system is not None or checked.template_system  # -s none gives the template's
        if conversation is None:  # the session records the model it loaded
            conversation = Conversation.new(system=system if given else model_system, model=None)
        elif given:  # said as run --conversation -s says it
            system_note = system_change(conversation.name, conversation.system, system,
                                        loaded.prompt_format.default_system)
            conversation.system = system
        session = ChatSession(loaded, options, conversation, sampling, limits,
                              model_settings=defaults.settings, own_settings=given_settings(ctx),
                              model_system=model_system, own_system=given, model_stop=defaults.stop,
                              own_stop=from_command_line(ctx, "stop"))
        session.system_file = start.system_file
        if resumed:  # a flag given now wins over the resumed conversation's setting
            session.replace_conversation(conversation, given_settings(ctx), system_given=given)
        for text in start.attachments:  # one the context cannot hold ends the chat, as one too long by its size does
            session.check_attachment(text, text.file.name, fewer="attach fewer files with -f")
            session.attachments.append(text)
        last_run = checked.continued.last_run if checked.continued is not None else None  # saved as the chat starts
        repl = Repl(session, markdown=request.markdown, wrap=request.wrap, show_thinking=request.show_thinking,
                    resumed=resumed,
                    stats=request.stats, prefill_while_typing=request.prefill_while_typing,
                    system_note=system_note, save_system=system_note is not None and last_run is None,
                    unsaveable=checked.unsaveable, typed_ahead=typed_ahead)
        views.append(repl)
        if last_run is not None:  # the chat starts: saved now (with the system prompt -s gave it)
            take_last_run(last_run, console.say, again="start again: --resume", this="chat")
        repl.run()
    finally:  # /model may have replaced the first model; the localgen entry point leaves its free to the exit
        free_or_leave_to_exit((session.loaded if session is not None else loaded).close)

