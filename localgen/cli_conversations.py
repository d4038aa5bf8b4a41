"""`localgen conversations`: list, show, rename and delete the conversations that chat and `run --conversation` save."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from localgen.cli_examples import alone_lists
from localgen.cli_options import JsonOpt, ListingJsonOpt, PlainUsage, confirmed, list_by_default, whole_number
from localgen.errors import LocalgenError, UsageError
from localgen.units import counted, local_minute

conversations_app = typer.Typer(
    rich_markup_mode=None,
    help="List, show, rename and delete saved conversations (chat's and run --conversation's).",
    no_args_is_help=False, epilog=alone_lists("conversations", "-n 5"))


LimitOpt = Annotated[int | None, typer.Option(
    "--limit", "-n", metavar="N", parser=whole_number, help="Only the newest N conversations.")]
ListingLimitOpt = Annotated[int | None, typer.Option(  # the group's: list's, shown there
    "--limit", "-n", metavar="N", parser=whole_number, hidden=True)]


@conversations_app.callback(invoke_without_command=True)
def _conversations_default(ctx: typer.Context, json_output: ListingJsonOpt = False,
                           limit: ListingLimitOpt = None) -> None:
    """List saved conversations (`localgen conversations` = `localgen conversations list`)."""
    list_by_default(ctx, conversations_list, json_output=json_output, limit=limit)


@conversations_app.command("list", short_help="List saved conversations, newest first.")
def conversations_list(json_output: JsonOpt = False, limit: LimitOpt = None) -> None:
    """List saved conversations, newest first, with their model and first message. On a pipe, tab-separated: a
    backslash, tab, newline or carriage return in a field is written \\\\, \\t, \\n, \\r, another control character
    \\xHH. The first message is a preview on one line: runs of whitespace as one space, cut with … past 60
    characters (--json has the whole text)."""
    from localgen import console
    from localgen.conversation_summary import summaries

    if limit is not None and limit < 1:
        raise UsageError(f"-n/--limit {limit} lists nothing: it takes a count of at least 1",
                         hint="e.g. `localgen conversations -n 5` lists the newest five; without -n, all of them")
    rows = summaries(limit)
    if json_output:
        console.print_json([row.to_dict() for row in rows], indent=2)
        return
    if not rows:
        console.say('localgen: no saved conversations (`localgen chat` saves them, and so does '
                    '`localgen run --conversation NAME "..."`)')
        return
    console.print_table(["NAME", "UPDATED", "EXCHANGES", "MODEL", "FIRST MESSAGE"], [
        [r.name, local_minute(r.updated), "-" if r.problem else f"{r.exchanges:,}", r.model or "-", r.described]
        for r in rows],
        squeeze=("FIRST MESSAGE",))


@conversations_app.command("show", short_help="Print a saved conversation as Markdown.")
def conversations_show(
    name: Annotated[str | None, typer.Argument(metavar="[NAME]",
                                               help="The conversation to print (default: the newest).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the saved JSON record.")] = False,
) -> None:
    """Print a saved conversation as Markdown: system prompt, then each question and answer."""
    from localgen import console
    from localgen.control_chars import json_escaped
    from localgen.conversation import DamagedConversationError
    from localgen.conversation_store import latest_conversation, read_conversation
    from localgen.conversation_transcript import transcript
    from localgen.output_writes import write_out, write_record

    try:  # the newest as `chat --resume` takes it: a damaged one is skipped, with a warning
        conversation = read_conversation(name) if name is not None else latest_conversation(console.warn, held=False)
    except DamagedConversationError as exc:  # the hint of this command, not a chat's
        raise exc.left_untouched() from None
    terminal = sys.stdout.isatty()  # saved text (answers, attached files) is shown, never obeyed
    if json_output:
        text = conversation.to_json(touch=False)  # on a terminal, its controls escaped: the same JSON value
        text = json_escaped(text) if terminal else text
    else:
        text = transcript(conversation, terminal=terminal, dim=console.writes_dim(sys.stdout))
    (write_record if json_output else write_out)(sys.stdout, text)  # a closed pipe ends it quietly (run_app)


@conversations_app.command("rm", short_help="Delete saved conversations.", cls=PlainUsage)
def conversations_rm(
    names: Annotated[list[str], typer.Argument(metavar="NAME...", help="The conversations to delete.",
                                                  show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete saved conversations (never one that a chat or a run has open)."""
    from localgen import console, line_ends
    from localgen.conversation_lock import ConversationBusyError
    from localgen.conversation_moves import delete_conversations, saved_paths
    from localgen.conversation_store import listed_name
    from localgen.signals import SignalExit, exit_on_signals

    several = len(names) > 1  # a refusal then says that the others are kept too
    try:
        names = list(dict.fromkeys(listed_name(name) for name in names))  # notes.json: notes
        saved_paths(names)  # every name is a saved conversation before anything is asked or deleted
    except LocalgenError as exc:
        raise _none_deleted(exc, several) from None
    listed = f"{counted(len(names), 'conversation')} ({', '.join(names)})"
    told: list[str] = []

    def say_deleted(name: str) -> None:
        """Say that name is deleted, as it is: a Ctrl-C part way leaves each one deleted said."""
        told.append(name)
        console.say(f"localgen: deleted {name}")

    # asked once none is in use (a chat or a run with one open is said first), and held from then until deleted
    try:
        with exit_on_signals():  # SIGTERM as Ctrl-C: what is kept said
            delete_conversations(names, lambda: confirmed("delete", listed, yes=yes, declined="nothing deleted"),
                                 deleted=say_deleted)
    except ConversationBusyError as exc:
        raise _none_deleted(exc, several) from None
    except (KeyboardInterrupt, SignalExit):
        if told and len(told) < len(names):
            line_ends.end_interrupted_line()
            console.say(f"localgen: stopped; {counted(len(names) - len(told), 'conversation')} kept")
        raise


@conversations_app.command("mv", short_help="Rename a saved conversation.", cls=PlainUsage)
def conversations_mv(
    old: Annotated[str, typer.Argument(metavar="OLD", help="The conversation to rename.", show_default=False)],
    new: Annotated[str, typer.Argument(metavar="NEW", help="Its new name.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", "-f", help="Replace a conversation saved as NEW.")] = False,
) -> None:
    """Rename a saved conversation (never one that a chat or a run has open; a conversation saved as NEW only with
    --force, which replaces it)."""
    from localgen import console
    from localgen.conversation import DamagedConversationError
    from localgen.conversation_moves import rename_conversation
    from localgen.conversation_store import given_name, listed_name

    old, new = listed_name(old), given_name(new)  # notes.json: notes; "my notes" as listed
    try:
        moved = rename_conversation(old, new, force=force)
    except DamagedConversationError as exc:  # the hint of this command, not a chat's
        raise exc.left_untouched() from None
    if moved:
        console.say(f"localgen: renamed {old} to {new}")
    else:
        console.say(f"localgen: removed {old}, a link to {new}'s own file (the conversation is saved as {new})")


conversations_app.command("rename", hidden=True, cls=PlainUsage)(conversations_mv)  # llm's and git's other word


def _none_deleted(error: LocalgenError, several: bool) -> LocalgenError:
    """An error that refuses `conversations rm` before it deletes anything, saying so where several names were given
    ("...; nothing deleted")."""
    if several:
        error.message = f"{error.message}; nothing deleted"
    return error
