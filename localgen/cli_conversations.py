"""`localgen conversations`: list, show and delete the conversations that chat and `run --conversation` save."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from localgen.cli_manage import JsonOpt, misplaced_option
from localgen.errors import EXIT_OK, UsageError
from localgen.units import counted, local_minute

if TYPE_CHECKING:
    from localgen.conversation import Conversation

conversations_app = typer.Typer(help="List, show and delete saved conversations (chat's and run --conversation's).",
                                no_args_is_help=False)


@conversations_app.callback(invoke_without_command=True)
def _conversations_default(ctx: typer.Context, json_output: JsonOpt = False) -> None:
    """List saved conversations (`localgen conversations` = `localgen conversations list`)."""
    if ctx.invoked_subcommand is None:
        conversations_list(json_output=json_output)
    elif json_output:
        misplaced_option(ctx)


@conversations_app.command("list")
def conversations_list(json_output: JsonOpt = False) -> None:
    """List saved conversations, newest first, with their model and first question."""
    from localgen import console
    from localgen.conversation_summary import summaries

    rows = summaries()
    if json_output:
        print(console.json_text([row.to_dict() for row in rows], indent=2))
        return
    if not rows:
        console.say('localgen: no saved conversations (`localgen chat` saves them, and so does '
                    '`localgen run --conversation NAME "..."`)')
        return
    console.print_table(["NAME", "UPDATED", "EXCHANGES", "MODEL", "FIRST QUESTION"], [
        [r.name, local_minute(r.updated), "-" if r.problem else f"{r.exchanges:,}", r.model or "-", r.described]
        for r in rows],
        squeeze=("FIRST QUESTION",))


@conversations_app.command("show")
def conversations_show(
    name: Annotated[str, typer.Argument(help="The conversation to print.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print the saved JSON record.")] = False,
) -> None:
    """Print a saved conversation as Markdown: system prompt, then each question and answer."""
    from localgen import console
    from localgen.conversation import read_conversation

    conversation = read_conversation(name)
    text = conversation.to_json(touch=False) if json_output else transcript(conversation)
    try:
        console.write_out(sys.stdout, text)
    except BrokenPipeError:
        from localgen.cli_exit import silence_stdout
        from localgen.errors import EXIT_BROKEN_PIPE

        silence_stdout()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None


def transcript(conversation: Conversation) -> str:
    """A conversation as Markdown: a heading per message, the answers as the model wrote them."""
    facts = [f"model {conversation.model or 'not recorded'}", counted(len(conversation.turns), "exchange"),
             f"started {conversation.created}"]
    parts = [f"# {conversation.name}\n\n{', '.join(facts)}\n"]
    if conversation.system:
        parts.append(f"## system\n\n{conversation.system}\n")
    for turn in conversation.turns:
        answer = turn.answer or ""
        mark = "\n\n*(interrupted)*" if turn.interrupted else ""
        parts.append(f"## user\n\n{turn.user}\n\n## assistant\n\n{answer}{mark}\n")
    return "\n".join(parts)


@conversations_app.command("rm")
def conversations_rm(
    names: Annotated[list[str], typer.Argument(help="The conversations to delete.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete saved conversations (never one that a chat or a run has open)."""
    from localgen import console
    from localgen.conversation import check_name, conversations_dir, delete_conversation, read_conversation

    names = list(dict.fromkeys(names))
    for name in names:  # every name must be a saved conversation (a damaged one too) before any is deleted
        if not (conversations_dir() / f"{check_name(name)}.json").is_file():
            read_conversation(name)  # the error for an unknown name
    what = ", ".join(names)
    if not yes and sys.stdin is not None and sys.stdin.isatty():
        if not console.confirm(f"delete {counted(len(names), 'conversation')} ({what})?"):
            console.say("nothing deleted")
            raise typer.Exit(EXIT_OK)
    elif not yes:
        raise UsageError(f"deleting {what} needs confirmation", hint="pass --yes when not on a terminal")
    for name in names:
        delete_conversation(name)
        console.say(f"deleted {name}")
