"""The steps of `localgen run`: its input gathered into one message, a new answer's stream or the prompt printed, and
the notes after it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, BinaryIO

from localgen.errors import LocalgenError, UsageError

GIVEN_LIMIT = "-n/--max-tokens"  # the token limit's source where this command line gave it (token_limit_source)
RUN_CONTEXT_HELP = "raise --ctx-size for longer output"  # where the model does not say the most it takes

if TYPE_CHECKING:
    import os

    from localgen.chat import Message
    from localgen.conversation import Conversation
    from localgen.engine import Engine
    from localgen.events import Event, Finished
    from localgen.input_text import TextBound
    from localgen.inputs import InputFile
    from localgen.params import GenerationLimits, Grammar, SamplingParams
    from localgen.runner import LoadedModel


def gather_attachments(prompt: str | None, files: list[InputFile], stdin: BinaryIO | None, *, stdin_asked: bool,
                       model_given: str | None, warnings: list[str], system: bool,
                       bound: TextBound | None = None) -> tuple[list[str], str]:
    """The attachments of the message, -f files and piped stdin (none from stdin None: --system-file - read it),
    and what the prompt is made of (attached.prompt_parts: the files and stdin that held text, the prompt, the
    system prompt where there is one); their warnings are said here. A prompt that names a model (`ollama run NAME`)
    with no -m given (model_given), or a message with nothing in it, is refused; so is one too long for the model,
    as its size shows it (bound). Stdin's text is the prompt, recorded as typed (attached.question_turn), where
    `run -` asks for it or no prompt is typed beside it."""
    from localgen import console
    from localgen.attached import AttachedText, TypedText, as_given, first_with_text, once_each, prompt_parts
    from localgen.cli import app
    from localgen.cli_args import given_after_double_dash
    from localgen.cli_model import say_waiting_for
    from localgen.config import settings
    from localgen.inputs import (
        emptiness,
        empty_attachment_note,
        file_name_warning,
        names_a_file,
        read_attachments,
    )
    from localgen.registry import reads_as_a_model

    if model_given is None and prompt and reads_as_a_model(prompt, settings().user_registry) \
            and not given_after_double_dash(app, prompt):  # `cat notes.md | ollama run NAME` too; before stdin
        ask = f'send it what is attached with `localgen run -m {prompt}`, and a prompt with `localgen run -m ' \
              f'{prompt} "..."`' if files or _piped(stdin) else \
            f'ask it with `localgen run -m {prompt} "..."`, or chat with `localgen chat -m {prompt}`'
        raise UsageError(f"'{prompt}' is the name of a model, not a prompt",
                         hint=f"{ask} (`localgen run -- {prompt}` sends the name itself)")
    stdin_file = next((file for file in files if file.path is None), None)  # -f -, or -f /dev/stdin
    if stdin_asked or stdin_file is not None:
        say_reading_a_terminal(stdin, "the prompt" if stdin_file is None else
                               f"the text -f {as_given(stdin_file)} attaches")
    else:
        warnings += filter(None, [rest_of_a_read_file_warning(stdin)])
    sent = _holds_what_was_sent(stdin)
    sent_whole = not stdin_asked and sent
    attachments = read_attachments(files, stdin, warnings, stdin_asked=stdin_asked, waiting=say_waiting_for,
                                   bound=bound, made_of=lambda read, piped: prompt_parts(
                                       read, system=system, stdin=piped, prompt=bool(prompt)))
    names = [file.name for file in files] + ["stdin"] * (len(attachments) - len(files))  # piped stdin comes last
    counted = first_with_text(attachments)
    made_of = prompt_parts([files[index] for index in counted if index < len(files)], system=system,
                           stdin=any(index >= len(files) for index in counted), prompt=bool(prompt))
    piped = attachments[-1] if len(attachments) > len(files) else None  # stdin, attached unasked
    attachments = [*(AttachedText(text, file) for text, file in zip(attachments[:len(files)], files, strict=True)),
                   *attachments[len(files):]]  # stdin piped unasked, after them: a saved turn names the files
    attachments = once_each(attachments, names, warnings)
    attached, typed = any(map(str.strip, attachments)), bool(prompt and prompt.strip())
    if sent_whole and piped is not None and not piped.strip() and (attached or typed):
        warnings.append(f"stdin {emptiness(piped)}")  # as -f - is (`cat missing.txt | localgen run "summarize"`)
    nothing = not attached and not typed
    empty = list(dict.fromkeys(map(empty_attachment_note, files, attachments))) if nothing else []
    warnings[:] = [warning for warning in warnings if warning not in empty]  # said by the error, on its one line
    console.warn_each(warnings)
    if nothing:  # </dev/null, as README tells loops, is no stdin read, nor a terminal's Ctrl-D at `run -`
        raise nothing_to_send(stdin_read=len(names) > len(files) and (sent or _piped(stdin)),
                              model=model_given, empty_files=empty,
                              stdin_attached=stdin_file is not None and (sent_whole or _piped(stdin)))
    if prompt and names_a_file(prompt) and not reads_as_a_model(prompt, settings().user_registry):
        console.warn(file_name_warning("the prompt", prompt, "-f"))
    if stdin_asked or not typed:  # `run -`, or stdin piped with no prompt beside it: the question asked
        attachments = [text if isinstance(text, AttachedText) else TypedText(text) for text in attachments]
    return attachments, made_of


def _piped(stdin: BinaryIO | None) -> bool:
    """True when stdin is a pipe, a socket or a file with text in it (not /dev/null or a terminal), which a run
    attaches."""
    import os
    import stat

    from localgen.console import pipe_or_socket

    try:
        mode = os.fstat(stdin.fileno()) if stdin is not None else None
    except (OSError, ValueError):  # closed
        return False
    return mode is not None and (pipe_or_socket(mode.st_mode) or (stat.S_ISREG(mode.st_mode) and mode.st_size > 0))


def _holds_what_was_sent(stdin: BinaryIO | None) -> bool:
    """True when stdin is a pipe or a file not yet read from (`< notes.md`): what it holds is what was sent, and its
    being empty is worth a word (not /dev/null, a terminal, the rest of a file a loop reads, or a socket, which ssh
    and service managers give a command whether or not anything is sent on it)."""
    import os
    import stat

    try:
        fd = stdin.fileno() if stdin is not None else None
        mode = os.fstat(fd).st_mode if fd is not None else None
        return mode is not None and (stat.S_ISFIFO(mode) or (stat.S_ISREG(mode) and os.lseek(fd, 0, os.SEEK_CUR) == 0))
    except (OSError, ValueError):  # closed
        return False


def stdin_reader(files: Sequence[str], *, stdin_asked: bool) -> str | None:
    """What reads stdin among run's -f files and its prompt ("-f /dev/stdin reads it"), for a --system-file that
    would read it too to be refused, or None; two of them are refused, stdin being read once (the second would find
    it empty)."""
    from localgen.stdin_names import PROMPT_READER, names_stdin, stdin_reader_name
    from localgen.typed_paths import FILE_OPTION
    from localgen.units import alternatives

    readers = [stdin_reader_name(FILE_OPTION, name) for name in files if names_stdin(name)]
    readers += [PROMPT_READER] * stdin_asked
    if len(set(readers)) == 1 < len(readers):
        raise UsageError(f"{readers[0]} is given twice, but stdin is read once", hint=f"give {readers[0]} once")
    if len(readers) > 1:
        hint = (f"drop one: {readers[0]} attaches stdin before the prompt; a prompt of - is stdin itself"
                if readers[1:] == [PROMPT_READER] else "give one of them")
        raise UsageError(f"{alternatives(readers, 'and')} {'both' if len(readers) == 2 else 'all'} read stdin, which "
                         "is read once", hint=hint)
    return f"{readers[0]} reads it" if readers else None


def rest_of_a_read_file_warning(stdin: BinaryIO | None) -> str | None:
    """A warning where stdin, attached unasked, is a file that was read part way before this run and has more after
    that (`while read q; do localgen run "$q"; done < questions.txt`): the run takes the rest, which the loop then
    never gets; None otherwise."""
    import os
    import stat

    if stdin is None:
        return None
    try:
        fd = stdin.fileno()
        size, at = os.fstat(fd), os.lseek(fd, 0, os.SEEK_CUR)
    except (OSError, ValueError, AttributeError):
        return None
    if not stat.S_ISREG(size.st_mode) or not 0 < at < size.st_size:
        return None
    return (f"stdin is a file already read up to byte {at:,} (by `read`, a `while read` loop, or a script run as "
            "`bash < FILE`), so this run attaches the rest of it, and whatever reads stdin after this run gets none "
            "of it (</dev/null runs without stdin; -f - attaches it unwarned)")


def say_reading_a_terminal(stdin: BinaryIO | None, what: str) -> None:
    """Tell the person at the terminal that a "-" reads what from it, until Ctrl-D (a silent wait looks hung)."""
    from localgen.cli_model import say_reading_the_terminal

    with contextlib.suppress(OSError, ValueError):
        if stdin is not None and stdin.isatty():
            say_reading_the_terminal(what)


def refuse_an_unwritable_stdout() -> None:
    """Refuse a stdout where no answer can be written, before anything is read or loaded for it: one open for
    reading only (`localgen run "..." 1< FILE`), or /dev/full or a file that cannot grow (a full file system,
    `ulimit -f`), as file_refusal finds them; a --json answer, written whole once generated, found it so only
    then."""
    from localgen.cli_exit import stdout_open_to_read
    from localgen.output_writes import file_refusal

    if stdout_open_to_read():
        raise UsageError("stdout is open for reading only: there is nowhere to write the answer",
                         hint="send it to a file with > FILE, or to a pipe")
    with contextlib.suppress(OSError, ValueError, AttributeError):  # closed
        refusal = file_refusal(sys.stdout.fileno())
        if refusal is not None:
            raise refusal


def refuse_emptied_by_redirects(files: list[InputFile], stdin: BinaryIO | None) -> None:
    """Refuse a file given to read, or stdin, that is the file stdout (or stderr) goes to, which the shell's > (2>)
    emptied before localgen could read it (`localgen run -f notes.md "Fix it." > notes.md`, `-f /dev/stderr hi
    2> n.txt`): the answer would come without it."""
    import os

    from localgen.stdin_names import names_a_descriptor

    inputs = [(file.name, file.path.stat) for file in files if file.path is not None]
    if stdin is not None:
        inputs.append(("stdin", lambda: os.fstat(stdin.fileno())))
    for stream, written, redirect in (("stdout", "the answer", ">"), ("stderr", "the messages", "2>")):
        out = _emptied_output(getattr(sys, stream))
        for name, status in inputs if out is not None else []:
            with contextlib.suppress(OSError, ValueError):
                if os.path.samestat(status(), out):
                    shown = "the file stdin reads" if name == "stdin" else name
                    elsewhere = "" if name == "stdin" or names_a_descriptor(name) else f" ({redirect} {name}.new)"
                    raise UsageError(f"{shown} is also where {stream} goes, so the shell emptied it for {written} "
                                     f"({redirect}) before localgen could read it",
                                     hint=f"send {written} to another file{elsewhere}, then restore the text that was "
                                          "in it from a copy")


def _emptied_output(stream: IO[str] | None) -> os.stat_result | None:
    """What stream (stdout, stderr) writes to is, where it is a file the shell's > emptied for it: a regular file,
    empty, not appended to (>> keeps the file); None otherwise."""
    import fcntl
    import os
    import stat

    if stream is None:
        return None
    try:
        fd = stream.fileno()
        out = os.fstat(fd)
        appends = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
    except (OSError, ValueError, AttributeError):  # closed, or no descriptor behind it
        return None
    return out if stat.S_ISREG(out.st_mode) and not out.st_size and not appends else None


def nothing_to_send(*, stdin_read: bool, model: str | None = None, empty_files: Sequence[str] = (),
                    stdin_attached: bool = False) -> UsageError:
    """The error for a message with nothing in it; stdin_read: stdin was read, and had nothing in it either (the
    command piped in failed, say); model: the -m given, which the commands suggested keep (`ollama run NAME` at a
    terminal chats with it); empty_files: what is said of the files attached with nothing in them (ws.txt holds only
    whitespace); stdin_attached: a pipe or a file sent on stdin was among them (-f -), so text was piped in."""
    import shlex

    from localgen.units import alternatives

    given = "" if model is None else f" -m {shlex.quote(model)}"
    example = f'localgen run{given} "Why is the sky blue?"'
    files = f"{'; ' if stdin_read else ', and '}{alternatives(empty_files, 'and')}" if empty_files else ""
    if stdin_read or stdin_attached:
        return UsageError(f"nothing to send: the prompt is empty{', and so is stdin' if stdin_read else ''}{files}",
                          hint=f"check what feeds stdin, or give a prompt, e.g. {example}")
    chat_hint = f"; `localgen chat{given}` starts a conversation" if sys.stdin is not None and sys.stdin.isatty() \
        else ""
    return UsageError(f"nothing to send: the prompt is empty{files}",
                      hint=f"give a prompt, e.g. {example}, or pipe text in{chat_hint}")


def user_message(loaded: LoadedModel, prompt: str | None, attachments: list[str]) -> str:
    """The message the attachments and the prompt make (chat.compose_user_message), the prompt read as the
    attachments are (`localgen run "$(cat notes.txt)"`: plain newlines): for a model without a chat template, a
    plain completion, exactly as given."""
    from localgen.chat import compose_user_message
    from localgen.input_text import argument_line_ends

    exact = not loaded.prompt_format.is_chat
    return compose_user_message(prompt if exact or prompt is None else argument_line_ends(prompt), attachments,
                                exact=exact)


def fresh_messages(loaded: LoadedModel, user_text: str, system: str | None, *, raw: bool) -> list[Message]:
    """The messages of a run outside any conversation (a model without a chat template gets them as a plain
    completion, which is said unless --raw asked for it)."""
    from localgen import console
    from localgen.chat import Message

    if not loaded.prompt_format.is_chat and not raw:
        console.say(f"localgen: {loaded.resolved.display_name} has no chat template; "
                    "sending the text as a plain completion")
    return ([Message("system", system)] if system is not None else []) + [Message("user", user_text)]


def fresh_answer(loaded: LoadedModel, messages: list[Message], sampling: SamplingParams, limits: GenerationLimits,
                 *, draft: str, prompt_cache: bool, hide_thinking: bool, made_of: str = "",
                 limit_source: str = GIVEN_LIMIT,
                 keep: Callable[[Iterator[Event]], Iterator[Event]] | None = None) -> Callable[[], Iterator[Event]]:
    """What starts the answer to messages outside any conversation (a prompt too long refused naming made_of, what it
    holds; one that leaves too little room for the token limit given, from limit_source, warned of first); keep, when
    given, gets the model's own stream (last_run.last_run_keeper), before hide_thinking takes the <think> reasoning
    out of it."""
    from localgen.prompt_room import warn_of_answer_room
    from localgen.runner import stream_answer
    from localgen.thinking import prompt_opens_thinking, without_thinking

    def start() -> Iterator[Event]:
        prompt = loaded.prompt_format.prompt(loaded.engine, messages)
        warn_of_answer_room(loaded, len(prompt[1]), limits.max_tokens, limit_source=limit_source, made_of=made_of)
        events = stream_answer(loaded, messages, sampling, limits, draft=draft, prompt_cache=prompt_cache,
                               made_of=made_of, prompt=prompt)
        if keep is not None:
            events = keep(events)
        if not hide_thinking:
            return events
        return without_thinking(events, lambda: prompt_opens_thinking(prompt[0]))

    return start


def write_prompt(loaded: LoadedModel, messages: list[Message], *, json_output: bool, made_of: str = "",
                 stats: bool = False, answer_tokens: int | None = None, limit_source: str = GIVEN_LIMIT) -> None:
    """Print the prompt messages make for the loaded model, as stream_answer gives it to the model (its chat
    template applied, special tokens as text, the BOS token its tokenizer adds included); with json_output, one
    object with that text and its token count; with stats, its token count and the context size on stderr, as
    --stats says them after an answer. A prompt the context cannot hold is refused, as the run would be (naming
    made_of, what it holds; its hint counting the answer_tokens asked for, from limit_source)."""
    from localgen import console
    from localgen.control_chars import terminal_safe
    from localgen.output_writes import write_out
    from localgen.prompt_room import check_answer_room
    from localgen.runner import checked_prompt

    prompt = loaded.prompt_format.prompt(loaded.engine, messages)
    check_answer_room(loaded, len(prompt[1]), answer_tokens, limit_source=limit_source, made_of=made_of)
    text, tokens = checked_prompt(loaded, messages, made_of, prompt=prompt)
    bos = loaded.prompt_format.bos_token
    if tokens[:1] == [loaded.engine.bos_token] and not text.startswith(bos):
        text = bos + text
    if json_output:
        console.print_json({"prompt": text, "prompt_tokens": len(tokens)})
    elif sys.stdout.isatty():  # its line ended, as an answer's, so that the shell's prompt or the stats start their own
        shown = terminal_safe(text)
        write_out(sys.stdout, shown if not shown or shown.endswith("\n") else f"{shown}\n")
    else:  # byte for byte
        write_out(sys.stdout, text)
    if stats:
        console.say(f"prompt {len(tokens):,} tok, context {len(tokens):,}/{loaded.engine.n_ctx:,}")


def token_limit_source(*, given: bool, conversation: Conversation | None) -> str:
    """Where run's token limit came from, as the note on an answer it stopped names it: -n, else the saved
    conversation's max_tokens (conversation: the one continued, as it was before the run), else models.toml's."""
    if given:
        return GIVEN_LIMIT
    if conversation is not None and conversation.settings.get("max_tokens") is not None:
        return f"max_tokens of conversation '{conversation.name}'; -n overrides it"
    return "max_tokens in models.toml; -n overrides it"


def run_context_end_help(engine: Engine) -> str:
    """What run's answer stopped at the end of the context window is told of a larger context: the --ctx-size the
    model takes, or that this one is the most it takes (prompt_room.context_end_help, as the chat says it)."""
    from localgen import prompt_room

    larger = f"{RUN_CONTEXT_HELP}: {prompt_room.larger_context_words(engine)}"
    return prompt_room.context_end_help(engine, lambda: larger, unknown=RUN_CONTEXT_HELP)


def report_after_run(completion: Finished, *, json_output: bool, stats: bool, context_help: str,
                     limit_source: str = GIVEN_LIMIT, stops: str | None = None, grammar: Grammar | None = None) -> None:
    """The notes on stderr once the answer is out: why it stopped early (a token limit named by where it came from,
    token_limit_source, and said for -n given on the command line with --stats alone, as asked for; the end of the
    context, with context_help: run_context_end_help), an empty answer and why (stops: where the stop strings came from,
    --stop or models.toml), reasoning left out, and --stats; then the error for an answer that stopped before its
    grammar (--grammar, --json-schema) could end (grammar_cut_error)."""
    from localgen import console

    note = console.finish_note(completion, limit_source=limit_source, context_help=context_help)
    cut = grammar_cut_error(completion, grammar, limit_source=limit_source, context_help=context_help)
    asked = completion.finish_reason == "length" and limit_source == GIVEN_LIMIT and not stats
    if note and completion.finish_reason != "interrupted" and not json_output and not asked and cut is None:
        console.say(f"localgen: {note}")  # --json: finish_reason; a cut grammar: its error
    all_hidden = completion.thinking_closed is not None and completion.usage.completion_tokens and not completion.text
    if all_hidden and not json_output:
        console.say("localgen: the answer after its <think> reasoning is empty (--hide-thinking left the reasoning out)"
                    if completion.thinking_closed else
                    "localgen: the answer ended inside its <think> reasoning, which --hide-thinking left out")
    empty = None if json_output or all_hidden else \
        empty_answer_note(completion, stops=stops, grammar=grammar)  # --json: its "text"
    if empty:
        console.say(f"localgen: {empty}")
    if stats:
        console.say(console.format_stats(completion))
    if cut is not None:
        raise cut


def grammar_cut_error(completion: Finished, grammar: Grammar | None, *, limit_source: str,
                      context_help: str) -> LocalgenError | None:
    """The error for an answer that stopped before its grammar could end, which a script must not take as an answer
    in it: a token limit or the context's end cut it, or the model ended inside the reasoning the grammar waits out
    (a stop string's cut is not checked); None otherwise."""
    from localgen.units import counted

    if grammar is None or completion.grammar_complete is not False:
        return None
    if completion.finish_reason == "stop":  # by the model, not a stop string: where the grammar had not begun
        return LocalgenError(f"the model ended the answer inside its <think> reasoning, before the grammar of "
                             f"{grammar.source} began",
                             hint="the grammar applies after the reasoning's </think>, which the model never wrote: "
                                  "reword the prompt, or try another --seed with --temperature above 0")
    if completion.finish_reason == "length":
        where = f"at the limit of {counted(completion.usage.completion_tokens, 'token')} ({limit_source})"
        hint = f"give a larger {GIVEN_LIMIT}" + ("" if limit_source == GIVEN_LIMIT else ", which overrides it")
    elif completion.finish_reason == "context":
        where, hint = "at the end of the context window", context_help
    else:
        return None
    whole = ": it is not complete JSON" if grammar.is_json_schema else ""
    return LocalgenError(f"the answer stopped {where} before the grammar of {grammar.source} could end{whole}",
                         hint=hint)


def empty_answer_note(completion: Finished, *, stops: str | None, grammar: Grammar | None = None) -> str | None:
    """Why an answer that ended by itself has no text (stdout shows nothing): the stop string that matched, a grammar
    that matches only the empty text, or the model's end of answer; None where it has some (stops: where the stop
    strings came from, --stop or models.toml)."""
    from localgen.stopping import escaped

    if completion.finish_reason != "stop" or completion.text.strip():
        return None
    from localgen.grammar_cost import matches_only_empty  # an empty answer's alone: a plain run never imports it

    what = "empty" if not completion.text else "blank (whitespace only)"
    if completion.stop_string is not None:
        given = f" ({stops})" if stops else ""
        why = f"the stop string {escaped(completion.stop_string)}{given} matched before any text"
    elif grammar is not None and not completion.text and matches_only_empty(grammar.text):
        why = f"the grammar of {grammar.source} matches only the empty text"
    else:
        why = "the model ended it before any text"
    return f"the answer is {what}: {why}"
