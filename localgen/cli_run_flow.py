"""`localgen run` from its request to its report, in phases: everything the command line says is checked before
any pipe is waited for, then the inputs are read, the model loaded, the answer streamed and the notes said."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, BinaryIO

import typer

from localgen.attached import as_given, prompt_parts
from localgen.cli_model import (
    early_refusals,
    load_for,
    model_options,
    read_system_file,
    read_texts,
    say_waiting_for,
)
from localgen.cli_run import GIVEN_LIMIT
from localgen.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from localgen.conversation import Conversation
    from localgen.events import Finished
    from localgen.grammar import ConstraintSource
    from localgen.input_text import TextBound
    from localgen.inputs import InputFile
    from localgen.last_run import Continued
    from localgen.params import GenerationLimits, Grammar, SamplingParams
    from localgen.runner import LoadedModel, ModelOptions


@dataclass(frozen=True)
class RunRequest:
    """What `localgen run` was asked, as the command line gave it (the sampling and loading flags are read from
    ctx, by name)."""

    ctx: typer.Context
    prompt: str | None = None
    model: str | None = None
    system: str | None = None
    system_file: str | None = None
    files: tuple[str, ...] = ()
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    json_schema: str | None = None
    grammar: str | None = None
    ctx_size: int | None = None
    raw: bool = False
    chat_template: str | None = None
    json_output: bool = False
    print_prompt: bool = False
    continue_latest: bool = False
    conversation_name: str | None = None
    stats: bool = False
    quiet: bool = False
    no_wrap: bool = False
    hide_thinking: bool = False
    think: str | None = None
    no_cache: bool = False
    draft: str = "none"


@dataclass
class CheckedRun:
    """A run checked as far as it can be before a pipe is read: its texts, the files its options name (not read
    yet), the conversation it continues, and the model options for it."""

    prompt: str | None  # the argument's text; None when there is none, or "-" reads it from stdin (stdin_asked)
    stdin_asked: bool
    system: str | None
    template_system: bool  # -s none: no system prompt given, not models.toml's nor a conversation's (the template's)
    sampling: SamplingParams
    limits: GenerationLimits
    files: list[InputFile]
    system_input: InputFile | None
    constraint: ConstraintSource | None
    template_file: InputFile | None
    continued: Continued | None
    options: ModelOptions
    stdin: BinaryIO | None
    warnings: list[str] = field(default_factory=list)
    bound: TextBound | None = None  # the prompt's text that the model's context cannot hold (runner.preflight)

    @property
    def conversation(self) -> Conversation | None:
        """The conversation the run continues, if any."""
        return None if self.continued is None else self.continued.conversation


@dataclass(frozen=True)
class RunInputs:
    """What a run read: the system prompt, the grammar (in sampling), the attachments, and the model options with
    the chat template and the context they need."""

    system: str | None
    sampling: SamplingParams
    attachments: list[str]
    options: ModelOptions
    texts: tuple[str | None, ...] = ()  # what the prompt is made of, the earlier exchanges too, for its size


@dataclass(frozen=True)
class RunOutcome:
    """How an answer ended, for the notes after it."""

    completion: Finished
    exit_code: int | None
    context_help: str  # what an answer at the end of the context is told (cli_run.run_context_end_help)
    stops: str | None = None  # where the stop strings that end it as the model's end of answer does came from
    limit_source: str = GIVEN_LIMIT  # where its token limit came from (cli_run.token_limit_source)
    grammar: Grammar | None = None  # what the answer had to follow (--grammar, --json-schema)


def run_command(request: RunRequest) -> None:
    """Check, read, load, answer and report: the whole of `localgen run` (-q: with stderr kept for its error), ended by
    Ctrl-\\ (SIGQUIT) as by SIGTERM: the answer so far kept and saved, exit 131, not the default's core dump."""
    from localgen.cli_exit import free_or_leave_to_exit
    from localgen.cli_output import stderr_quieted
    from localgen.signals import QUIT_SIGNALS, exit_on_signals
    from localgen.stdout_reader import ending_when_the_reader_goes

    if request.quiet and request.stats:
        raise UsageError("-q/--quiet and --stats contradict each other",
                         hint="--quiet keeps stderr to errors, where --stats prints speeds and counts: drop one")
    with exit_on_signals(QUIT_SIGNALS), stderr_quieted(request.quiet) as warn_past_quiet:  # Ctrl-\ as SIGTERM
        checked = check_run(request)
        loaded: LoadedModel | None = None
        try:  # the model freed whenever the run ends once it is loaded (the reader's news may come after the watch)
            with ending_when_the_reader_goes(sys.stdout):  # a wait for stdin, or the load, ends once no one reads
                inputs = read_run_inputs(request, checked)
                loaded = load_for(request.ctx, inputs.options, checked.conversation)
                loaded, inputs = _with_room_for_the_prompt(request, checked, inputs, loaded)
            outcome = answer_run(request, checked, inputs, loaded, warn_past_quiet)
            if outcome is not None:  # said before the model is freed, which the user need not wait for
                report_run(request, outcome)
        finally:
            if loaded is not None:
                free_or_leave_to_exit(loaded.close)


def _with_room_for_the_prompt(request: RunRequest, checked: CheckedRun, inputs: RunInputs, loaded: LoadedModel
                              ) -> tuple[LoadedModel, RunInputs]:
    """The model loaded again with a context that holds the prompt, where it takes more tokens than its size
    suggested (prompt_room.py), else as it was."""
    from localgen import console
    from localgen.prompt_room import with_room_for_the_prompt

    loaded, options = with_room_for_the_prompt(
        loaded, inputs.options, inputs.texts, checked.limits.max_tokens,
        lambda wider: load_for(request.ctx, wider, checked.conversation), console.say)
    return loaded, replace(inputs, options=options)


def empty_conversation_name() -> UsageError:
    """The error for --conversation "": what a name may be, and where names come from."""
    from localgen.conversation_names import NEW_NAME_HINT, empty_name

    return empty_name(f"{NEW_NAME_HINT}; `localgen conversations` lists the saved ones, --continue takes the "
                      "latest", given_to="--conversation")


def check_run(request: RunRequest) -> CheckedRun:
    """Everything that can be refused before piped stdin, or a pipe an option names, is waited for: the options,
    the files they name, the model reference, the conversation continued, and (when a pipe will be read, or --think
    checked) what loading would refuse."""
    from localgen import console
    from localgen.cli_model import conversation_defaults, system_file_input
    from localgen.cli_options import sampling_from, typed_name
    from localgen.cli_run import refuse_an_unwritable_stdout, refuse_emptied_by_redirects, stdin_reader
    from localgen.conversation import asks_for_no_system_prompt
    from localgen.grammar import constraint_source
    from localgen.input_text import BOM, argument_text
    from localgen.inputs import STDIN_NAME, attachment_files, reads_a_pipe
    from localgen.params import GenerationLimits, token_budget
    from localgen.resolve import check_reference
    from localgen.run_conversation import check_continuation, open_conversation
    from localgen.speculative import check_draft_mode
    from localgen.whole_inputs import chat_template_file

    refuse_an_unwritable_stdout()
    ctx, warnings = request.ctx, []
    stdin_asked = request.prompt == STDIN_NAME
    prompt = None if stdin_asked or request.prompt is None else argument_text(request.prompt, "the prompt", warnings)
    prompt = prompt if request.raw or prompt is None else prompt.removeprefix(BOM)  # "$(cat FILE)" of a Notepad file
    system, stop = read_texts(request.system, list(request.stop), warnings, exact=request.raw)
    if system == STDIN_NAME:  # as -f - and a prompt of - read stdin
        warnings.append(f"the system prompt is the text '{STDIN_NAME}', not stdin (for that: --system-file -)")
    if request.hide_thinking:
        from localgen.stopping import hidden_tag_stops

        warnings += hidden_tag_stops(stop)
    sampling = sampling_from(ctx)
    limits = GenerationLimits(max_tokens=token_budget(request.max_tokens), stop=tuple(stop),
                              stops_in_answer_only=request.hide_thinking)
    check_draft_mode(request.draft)
    think = _checked_think(request)
    if request.raw and request.chat_template is not None:
        raise UsageError("--raw and --chat-template contradict each other",
                         hint="--raw sends the text with no template; drop one of them")
    if request.conversation_name == "":
        raise empty_conversation_name()
    continuing = check_continuation(request.continue_latest, request.conversation_name, raw=request.raw)
    if request.print_prompt and continuing:
        raise UsageError("--print-prompt shows the prompt of a run outside any conversation",
                         hint="drop --continue/--conversation; `localgen conversations show NAME` shows a saved one")
    stdin_taken = stdin_reader(request.files, stdin_asked=stdin_asked)  # two of them refused: it is read once
    files = attachment_files(list(request.files))  # every file an option names is checked now, read once the rest is
    system_input = system_file_input(system, request.system_file, stdin_taken=stdin_taken,
                                     option=typed_name(ctx, "system_file"))
    template_system = asks_for_no_system_prompt(system)
    constraint = constraint_source(request.grammar, request.json_schema, grammar_option=typed_name(ctx, "grammar"))
    template_file = chat_template_file(request.chat_template)
    named = [*files, *(f for f in (system_input, template_file, constraint and constraint.file) if f is not None)]
    stdin = sys.stdin.buffer if sys.stdin else None
    refuse_emptied_by_redirects(named, stdin)  # before a warning is written to the file 2> emptied
    console.warn_each(warnings)
    if request.model is not None:  # all of this is refused before piped stdin, or a pipe an option names, is waited for
        check_reference(request.model)
    continued = open_conversation(request.conversation_name) if continuing else None
    conversation = None if continued is None else continued.conversation
    model, ctx_size = conversation_defaults(request.model, request.ctx_size, conversation)
    options = replace(model_options(ctx, model=model, ctx_size=ctx_size, raw=request.raw, min_ctx=0), think=think)
    # what loading would refuse is refused before a pipe is waited for too, and a pipe too long for the model as
    # soon as its size shows it
    bound = early_refusals(ctx, options, conversation, pipe=reads_a_pipe(named, stdin))
    return CheckedRun(prompt=prompt, stdin_asked=stdin_asked, system=None if template_system else system,
                      template_system=template_system, sampling=sampling, limits=limits,
                      files=files, system_input=system_input, constraint=constraint, template_file=template_file,
                      continued=continued, options=options, stdin=stdin, warnings=warnings, bound=bound)


def _checked_think(request: RunRequest) -> str | None:
    """--think's value, checked (refused beside --raw, which renders no template)."""
    from localgen.cli_args import command_line_with
    from localgen.think_switch import parse_think

    if request.think is None:
        return None
    if request.raw:
        raise UsageError("--raw and --think contradict each other",
                         hint="--raw sends the text with no chat template, whose switch --think sets: drop one")
    try:
        return parse_think(request.think, "--think")
    except UsageError as exc:
        written = None if request.prompt is not None or request.files or _stdin_gives_text() \
            else command_line_with("--think", request.think, "on")  # the word after a bare --think: the prompt meant
        if written is None:
            raise
        raise UsageError(exc.message, hint=f"--think takes a value, where Ollama's alone turns thinking on: "
                                           f"`{shlex.join(['localgen', *written])}`") from None


def _stdin_gives_text() -> bool:
    """Whether stdin may hold a prompt: a pipe, a socket or a file (not a terminal, nor /dev/null)."""
    from localgen.console import pipe_or_socket

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no stdin
        return False
    return stat.S_ISREG(mode) or pipe_or_socket(mode)


def read_run_inputs(request: RunRequest, checked: CheckedRun) -> RunInputs:
    """Read what the run was given to read (the grammar or schema file, --system-file, --chat-template, -f files
    and piped stdin), each checked as it is read; a message with nothing in it is refused."""
    from localgen import console
    from localgen.cli_run import gather_attachments, say_reading_a_terminal
    from localgen.fit import prompt_context, text_bytes
    from localgen.grammar import grammar_for
    from localgen.runner import check_given_template
    from localgen.whole_inputs import read_chat_template

    warnings, stdin, system = checked.warnings, checked.stdin, checked.system
    # a schema or grammar given as text is checked before a --system-file pipe is waited for
    sampling = replace(checked.sampling, grammar=grammar_for(checked.constraint, warnings, waiting=say_waiting_for))
    if checked.system_input is not None:
        if checked.system_input.path is None:
            say_reading_a_terminal(stdin, f"the system prompt (--system-file {as_given(checked.system_input)})")
        named = prompt_parts([], system=True, prompt=bool(checked.prompt))  # what a refusal while it is read names
        system = read_system_file(checked.system_input, stdin, warnings, exact=request.raw,
                                  bound=checked.bound and checked.bound.beside(checked.prompt).named(named))
        stdin = None if checked.system_input.path is None else stdin  # --system-file - read it
    template = read_chat_template(checked.template_file, waiting=say_waiting_for)
    check_given_template(replace(checked.options, chat_template=template))
    console.warn_each(warnings)
    bound = checked.bound and checked.bound.beside(checked.prompt, system)
    attachments, made_of = gather_attachments(checked.prompt, checked.files, stdin, stdin_asked=checked.stdin_asked,
                                              model_given=request.model, warnings=warnings, bound=bound,
                                              system=bool(system))
    prompt_bytes = text_bytes(*attachments, checked.prompt, system)
    conversation = checked.conversation  # the context is sized for the whole prompt, its earlier exchanges too
    texts = (*attachments, checked.prompt, system, *(() if conversation is None else conversation.texts()))
    options = replace(checked.options, chat_template=template,
                      min_ctx=prompt_context(text_bytes(*texts), checked.limits.max_tokens),
                      floor_bytes=prompt_bytes,  # earlier exchanges can leave the context; it cannot
                      floor_texts=made_of)  # as read: an empty pipe or file, or a file given twice, named not
    return RunInputs(system=system, sampling=sampling, attachments=attachments, options=options, texts=texts)


def answer_run(request: RunRequest, checked: CheckedRun, inputs: RunInputs, loaded: LoadedModel,
               warn_past_quiet: Callable[[str], None]) -> RunOutcome | None:
    """Stream the answer to stdout (or print the prompt: None) with the model's models.toml settings where the
    command line gave none; the exchange goes into the conversation continued (where its save went is said past
    -q: warn_past_quiet), else is kept as the last run."""
    from localgen import console
    from localgen.answer_record import gave_an_answer
    from localgen.cli_options import from_command_line, given_settings, with_model_settings
    from localgen.cli_output import finish_output, stream_to_stdout
    from localgen.cli_run import (
        fresh_answer,
        fresh_messages,
        run_context_end_help,
        token_limit_source,
        user_message,
        write_prompt,
    )
    from localgen.conversation_edits import SavedInPlaceNote
    from localgen.input_text import argument_line_ends
    from localgen.last_run import last_run_keeper
    from localgen.promptcache_unsaved import unsaid_warnings
    from localgen.registry import model_defaults
    from localgen.run_conversation import continued_answer
    from localgen.think_switch import refuse_think

    ctx, continued, system, options = request.ctx, checked.continued, inputs.system, inputs.options
    refuse_think(loaded.prompt_format.template, options.think, model_name=loaded.prompt_format.model_name)
    defaults = model_defaults(loaded.resolved.spec)
    sampling, limits = with_model_settings(ctx, defaults, inputs.sampling, checked.limits)
    if system is None and not request.raw and not checked.template_system and (continued is None or continued.is_new):
        system = defaults.system  # not a saved conversation's
    user_text = user_message(loaded, checked.prompt, inputs.attachments)
    notes: list[str] = []  # what saving the exchange did that must be said, once the answer is out
    limit_source = token_limit_source(given=from_command_line(ctx, "max_tokens"),
                                      conversation=None if continued is None else continued.conversation)
    if continued is not None:
        start, stops = continued_answer(loaded, options, continued, system, checked.prompt, inputs.attachments,
                                        sampling, limits, given_settings(ctx), draft=request.draft,
                                        prompt_cache=not request.no_cache, stop_given=from_command_line(ctx, "stop"),
                                        hide_thinking=request.hide_thinking, notes=notes,
                                        template_system=checked.template_system, limit_source=limit_source)
    else:
        messages = fresh_messages(loaded, user_text, system, raw=request.raw)
        if request.print_prompt:
            if sampling.grammar is not None:  # refused as the answer would be: its tokens are this model's
                loaded.engine.check_grammar(sampling.grammar)
            write_prompt(loaded, messages, json_output=request.json_output, made_of=options.floor_texts,
                         stats=request.stats, answer_tokens=limits.max_tokens, limit_source=limit_source)
            return None
        typed = argument_line_ends(checked.prompt or "")  # as a conversation's turn takes it (run_conversation)
        keep = None if request.raw else last_run_keeper(loaded, options, system, typed, inputs.attachments,
                                                        notes.append)
        stops = None if not limits.stop else "--stop" if request.stop else "stop in models.toml"
        start = fresh_answer(loaded, messages, sampling, limits, draft=request.draft,
                             prompt_cache=not request.no_cache, hide_thinking=request.hide_thinking,
                             made_of=options.floor_texts, limit_source=limit_source, keep=keep)
    output = None if request.json_output else console.TextOutput(wrap=not request.no_wrap)
    try:
        completion, exit_code, late_error = stream_to_stdout(loaded, start, output)
        conversation = checked.conversation  # --json names it once the exchange is saved in it (no answer: never)
        saved_in = conversation.name if conversation is not None and late_error is None \
            and gave_an_answer(completion) else None
        finish_output(loaded, completion, output, saved_in, signal_code=exit_code)
    finally:  # after the whole answer and its newline, which the writer holds back while it streams
        for note in notes:  # past -q: NAME-2 and an answer not saved, not a save made where asked
            (console.warn if continued is None or isinstance(note, SavedInPlaceNote) else warn_past_quiet)(note)
        console.warn_each(unsaid_warnings())  # the prompt cache's, which its save amid the answer held
    if late_error is not None:  # the answer is out; now the failure to save it
        raise late_error
    return RunOutcome(completion, exit_code, stops=stops, limit_source=limit_source,
                      context_help=run_context_end_help(loaded.engine), grammar=sampling.grammar)


def report_run(request: RunRequest, outcome: RunOutcome) -> None:
    """The notes on stderr once the answer is out (cli_run.report_after_run), and the exit code a signal asked
    for."""
    from localgen.cli_run import report_after_run

    report_after_run(outcome.completion, json_output=request.json_output, stats=request.stats,
                     limit_source=outcome.limit_source, stops=outcome.stops, context_help=outcome.context_help,
                     grammar=outcome.grammar)
    if outcome.exit_code is not None:
        raise typer.Exit(outcome.exit_code)
