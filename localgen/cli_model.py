"""What `run` and `chat` share: reading their texts, their model options, and loading the model for them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

import typer

from localgen.cli_options import from_command_line

if TYPE_CHECKING:

    from localgen.conversation import Conversation
    from localgen.errors import LocalgenError
    from localgen.input_text import TextBound
    from localgen.inputs import InputFile
    from localgen.runner import LoadedModel, ModelOptions

SYSTEM_FILE_OPTION = "--system-file"


def read_texts(system: str | None, stop: list[str] | None, warnings: list[str], *,
               exact: bool = False) -> tuple[str | None, list[str]]:
    """The --system text (read as a file's text: `-s "$(cat FILE)"`; exactly as given where exact, for --raw) and the
    --stop strings as given (--stop '' alone: none, in place of models.toml's); a warning when the system prompt is
    the name of a file (--system-file reads one; -s takes the text), or a number (llama-cli's -s is its seed), and
    for each stop string holding a typed escape."""
    import re

    from localgen.input_text import argument_as_file_text, argument_text
    from localgen.inputs import file_name_warning, names_a_file
    from localgen.stopping import typed_escape_warnings

    if system and names_a_file(system):
        warnings.append(file_name_warning("the system prompt", system, SYSTEM_FILE_OPTION))
    elif system and re.fullmatch(r"\s*-?[0-9]+\s*", system):  # llama-cli's -s is its seed
        warnings.append(f"the system prompt is the text {system!r}: -s is --system here, not llama-cli's seed "
                        f"(for that: --seed {system.strip()})")
    text = None if system is None else argument_text(system, "--system", warnings)
    text = text if exact or text is None else argument_as_file_text(text)
    stops = [argument_text(s, "--stop", warnings) for s in stop or () if stop != [""]]
    warnings += typed_escape_warnings(stops)
    return text, stops


def system_file_input(system: str | None, system_file: str | None, *, stdin_taken: str | None,
                      option: str = SYSTEM_FILE_OPTION) -> InputFile | None:
    """The --system-file given, checked ("-" is stdin, unless stdin_taken says what else reads it), its errors naming
    the option as typed (-sysf); beside -s, which gives the system prompt too, it is refused."""
    from localgen.errors import UsageError
    from localgen.inputs import InputFile
    from localgen.stdin_names import names_stdin

    if system_file is None:
        return None
    if system is not None:
        raise UsageError(f"-s/--system and {option} both give the system prompt",
                         hint=f"give one of them: -s TEXT or {option} FILE")
    if stdin_taken is not None and names_stdin(system_file):
        raise UsageError(f"{option} {system_file} cannot read stdin: {stdin_taken}",
                         hint="give the system prompt's file by name")
    return InputFile.checked(system_file, option, stdin=True)


def read_system_file(file: InputFile, stdin: BinaryIO | None, warnings: list[str],
                     bound: TextBound | None = None, *, exact: bool = False) -> str:
    """The system prompt a --system-file holds (inputs.system_prompt_text; exact: its line ends kept, for --raw),
    noting a pipe that keeps it waiting; bound refuses it as soon as it is certainly too long for the model (a pipe's,
    runner.preflight)."""
    from localgen.inputs import system_prompt_text

    text = file.read(stdin, warnings, warn_empty=True, waiting=say_waiting_for, bound=bound)
    return system_prompt_text(text, exact=exact)


def say_waiting_for(name: str | None, option: str, *, terminal: bool = False) -> None:
    """Tell a person at a terminal that the command waits for a pipe given with option (name: as messages name it),
    or for stdin (name None; option: what reads it, `-f -` or the prompt -, or UNASKED_STDIN), to end: it is read
    whole before the model is asked; or (terminal) that the file named is a terminal, read until Ctrl-D."""
    from localgen import console
    from localgen.stdin_names import UNASKED_STDIN
    from localgen.typed_paths import FILE_OPTION

    if terminal:
        say_reading_the_terminal(f"the text -f {name} attaches" if option == FILE_OPTION else f"{name} ({option})")
        return
    if not sys.stderr.isatty():
        return
    if name is not None:
        console.say(f"localgen: waiting for {name} (a pipe given with {option}: it is read once a writer "
                    "has opened it and closed it)")
    elif option == UNASKED_STDIN:
        console.say("localgen: waiting for stdin to end (it goes to the model with the prompt; "
                    "</dev/null runs without it)")
    else:
        console.say(f"localgen: waiting for stdin to end ({option} reads it)")


def say_reading_the_terminal(what: str) -> None:
    """Tell the person at the terminal that what is read from it, until Ctrl-D (a silent wait looks hung)."""
    from localgen import console

    console.say(f"localgen: reading {what} from the terminal; Ctrl-D at the start of a line ends it")


def conversation_defaults(model: str | None, ctx_size: int | None,
                          conversation: Conversation | None) -> tuple[str | None, int | None]:
    """The model and context size to load: as given, else as the continued conversation recorded them."""
    if conversation is None:
        return model, ctx_size
    return model or conversation.model, ctx_size if ctx_size is not None else conversation.ctx_size


def model_options(ctx: typer.Context, *, model: str | None, ctx_size: int | None, chat_template: str | None = None,
                  min_ctx: int, floor_bytes: int = 0, floor_texts: str = "", raw: bool = False) -> ModelOptions:
    """ModelOptions from the command's engine flags, with its --chat-template already read and the context its
    input needs (fit.prompt_context, and floor_bytes: the bytes of the texts it needs a context for at least, which
    floor_texts names, as attached.prompt_parts says them)."""
    from localgen.runner import ModelOptions
    from localgen.speculative import flash_attn_for

    given = ctx.params
    draft = given.get("draft") or "none"
    flash_attn = flash_attn_for(given["flash_attn"], draft)
    keys_for_drafts = draft == "lookup" and not from_command_line(ctx, "kv_type")  # a --kv-type given is kept
    return ModelOptions(model=model, ctx_size=ctx_size, threads=given["threads"], threads_batch=given["threads_batch"],
                        batch_size=given["batch_size"], ubatch_size=given["ubatch_size"],
                        flash_attn=flash_attn, kv_type=given["kv_type"],
                        gpu_layers=given["gpu_layers"], no_gpu=given["no_gpu"], raw=raw, chat_template=chat_template,
                        chat_template_file=given["chat_template"], min_ctx=min_ctx, floor_bytes=floor_bytes,
                        floor_texts=floor_texts, keys_for_drafts=keys_for_drafts)


def load_for(ctx: typer.Context, options: ModelOptions, conversation: Conversation | None) -> LoadedModel:
    """Load the model for a run or chat; a model or a context size that a resumed conversation recorded and that
    cannot be used is named as the conversation's (the user gave no -m or --ctx-size)."""
    from localgen.runner import load_model

    with _named_as_the_conversations(ctx, conversation):
        return load_model(options, note=say_note)


def preflight_for(ctx: typer.Context, options: ModelOptions, conversation: Conversation | None) -> TextBound | None:
    """runner.preflight, its errors worded as load_for's (its bound's too, which names options.floor_texts as what
    the text is made of, or what TextBound.named says as it is read)."""
    from dataclasses import replace

    from localgen.errors import ContextOverflowError
    from localgen.runner import preflight

    with _named_as_the_conversations(ctx, conversation):
        bound = preflight(replace(options, floor_texts=""))  # the refusal names what is read by then (naming)
    if bound is None:
        return None
    read_bound = bound

    def naming(made_of: str) -> Callable[[int], None]:
        def refuse(size: int) -> None:
            with _named_as_the_conversations(ctx, conversation):
                try:
                    read_bound.refuse(size)
                except ContextOverflowError as exc:
                    raise ContextOverflowError(f"{exc.message} {made_of}".rstrip(), hint=exc.hint) from None
        return refuse

    return replace(bound, refuse=naming(options.floor_texts), naming=naming)


def early_refusals(ctx: typer.Context, options: ModelOptions, conversation: Conversation | None, *,
                   pipe: bool) -> TextBound | None:
    """preflight_for before a pipe is waited for (pipe: its bound returned), and without one where a --think needs
    only the model's header to be refused, not the whole model loaded."""
    from localgen.runner import preflight_checks_think

    if pipe:
        return preflight_for(ctx, options, conversation)
    if preflight_checks_think(options):
        preflight_for(ctx, options, conversation)
    return None


@contextmanager
def _named_as_the_conversations(ctx: typer.Context, conversation: Conversation | None) -> Iterator[None]:
    """Name a model or context size that cannot be used as a resumed conversation's, when it recorded them and the
    command line did not give them: a model file gone, broken or that does not load says how to go on with another."""
    from localgen.errors import (
        ContextOverflowError,
        ContextSizeError,
        GGUFError,
        ModelLoadError,
        ModelNotFoundError,
        UsageError,
    )

    try:
        yield
    except (ModelNotFoundError, GGUFError, ModelLoadError) as exc:
        if conversation is None or conversation.model is None or from_command_line(ctx, "model"):
            raise
        raise _as_the_conversations_model(exc, conversation) from exc
    except ContextSizeError as exc:
        if conversation is None or from_command_line(ctx, "ctx_size") or conversation.ctx_size is None:
            raise
        raise UsageError(f"conversation '{conversation.name}' was started with --ctx-size {conversation.ctx_size},"
                         f" beyond this model's maximum of {exc.maximum:,}",
                         hint=f"give --ctx-size {exc.maximum} or less") from exc
    except ContextOverflowError as exc:
        if conversation is None or from_command_line(ctx, "ctx_size") or conversation.ctx_size is None:
            raise
        raise ContextOverflowError(f"{exc.message} (conversation '{conversation.name}' was started with that size)",
                                   hint=exc.hint) from exc


def _as_the_conversations_model(exc: LocalgenError, conversation: Conversation) -> LocalgenError:
    """exc, about the model a resumed conversation recorded, said as that conversation's, with the way on (another
    model); of its own class, which decides the exit code."""
    import copy

    named = copy.copy(exc)
    named.message = f"conversation '{conversation.name}' was using {conversation.model}: {exc.message}"
    named.args = (named.message,)
    another = "go on with another model: add -m MODEL"
    named.hint = f"{exc.hint}; or {another}" if exc.hint else another
    return named


def say_note(note: str) -> None:
    """Say on stderr what loading chose or changed, as it happens."""
    from localgen import console

    console.say(f"localgen: {note}")
