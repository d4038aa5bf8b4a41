"""What `run` and `chat` share: reading their texts, their model options, and loading the model for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from localgen.cli_options import from_command_line

if TYPE_CHECKING:
    from localgen.conversation import Conversation
    from localgen.runner import LoadedModel, ModelOptions


def read_texts(system: str | None, stop: list[str] | None, warnings: list[str]) -> tuple[str | None, list[str]]:
    """The --system text and the --stop strings as given; a warning when the system prompt is the name of a file
    (llama-cli's -sysf reads one; -s takes the text)."""
    import shlex

    from localgen.inputs import argument_text, is_existing_file

    if system and not any(c.isspace() for c in system) and is_existing_file(system):
        warnings.append(f"the system prompt is the text {system!r}, the name of a file, not what it holds "
                        f"(for that: -s \"$(cat {shlex.quote(system)})\")")
    return (None if system is None else argument_text(system, "--system", warnings),
            [argument_text(s, "--stop", warnings) for s in stop or ()])


def conversation_defaults(model: str | None, ctx_size: int | None,
                          conversation: Conversation | None) -> tuple[str | None, int | None]:
    """The model and context size to load: as given, else as the continued conversation recorded them."""
    if conversation is None:
        return model, ctx_size
    return model or conversation.model, ctx_size if ctx_size is not None else conversation.ctx_size


def model_options(ctx: typer.Context, *, model: str | None, ctx_size: int | None, chat_template: str | None,
                  min_ctx: int, floor_ctx: int = 0, raw: bool = False) -> ModelOptions:
    """ModelOptions from the command's engine flags, with its --chat-template already read and the context its
    input needs (fit.prompt_context, fit.prompt_floor)."""
    from localgen.runner import ModelOptions

    given = ctx.params
    flash_attn = given["flash_attn"]
    if flash_attn == "auto" and given.get("draft") == "lookup":
        flash_attn = "on"  # lookup's verified batches round as one-token steps do only in flash attention's kernels
    return ModelOptions(model=model, ctx_size=ctx_size, threads=given["threads"], threads_batch=given["threads_batch"],
                        batch_size=given["batch_size"], ubatch_size=given["ubatch_size"],
                        flash_attn=flash_attn, kv_type=given["kv_type"], offline=given["offline"] or None,
                        gpu_layers=given["gpu_layers"], no_gpu=given["no_gpu"], raw=raw, chat_template=chat_template,
                        chat_template_file=given["chat_template"], min_ctx=min_ctx, floor_ctx=floor_ctx)


def load_for(ctx: typer.Context, options: ModelOptions, conversation: Conversation | None) -> LoadedModel:
    """Load the model for a run or chat; a model or a context size that a resumed conversation recorded and that
    cannot be used is named as the conversation's (the user gave no -m or --ctx-size)."""
    from localgen.errors import ContextOverflowError, ContextSizeError, ModelNotFoundError, UsageError
    from localgen.runner import load_model

    try:
        return load_model(options, note=say_note)
    except ModelNotFoundError as exc:
        if conversation is None or conversation.model is None or from_command_line(ctx, "model"):
            raise
        another = "go on with another model: add -m MODEL"
        raise ModelNotFoundError(f"conversation '{conversation.name}' was using {conversation.model}: {exc.message}",
                                 hint=f"{exc.hint}; or {another}" if exc.hint else another) from exc
    except ContextSizeError as exc:
        if conversation is None or from_command_line(ctx, "ctx_size") or conversation.ctx_size is None:
            raise
        raise UsageError(f"conversation '{conversation.name}' was started with --ctx-size {conversation.ctx_size:,},"
                         f" beyond this model's maximum of {exc.maximum:,}",
                         hint=f"give --ctx-size {exc.maximum} or less") from exc
    except ContextOverflowError as exc:
        if conversation is None or from_command_line(ctx, "ctx_size") or conversation.ctx_size is None:
            raise
        raise ContextOverflowError(f"{exc.message} (conversation '{conversation.name}' was started with that size)",
                                   hint=exc.hint) from exc


def say_note(note: str) -> None:
    """Say on stderr what loading chose or changed, as it happens."""
    from localgen import console

    console.say(f"localgen: {note}")
