"""How the chat words what happened: short quotes of messages, conversation sizes, notes after answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen import console
from localgen.conversation import Conversation
from localgen.events import Finished
from localgen.shorten import shorten_end, shorten_middle
from localgen.text_cut import character_count, cut_characters
from localgen.units import counted, local_minute
from localgen.wordwrap import display_width

if TYPE_CHECKING:
    from collections.abc import Set

    from localgen.conversation_summary import Summary
    from localgen.params import SamplingParams
    from localgen.session_turns import TurnStart

LIST_MESSAGE_MIN = 12  # columns of a first message that /list keeps before it drops its note ("(this chat)")
LIST_MESSAGE_SHORTEST = 5  # columns of a first message ("Tell…") below which /list drops the date, then the size
THIS_CHAT = "  (this chat)"
IN_USE = "  (in use elsewhere)"  # its lock held by another process (a chat, a run, conversations rm): /load refuses it
IN_USE_MARK = "!"  # in the column of this chat's *, kept where IN_USE is dropped
IN_USE_LEGEND = f"  {IN_USE_MARK} in use elsewhere: /load refuses it"  # said where an IN_USE was dropped
LIST_NAME_KEPT = 20  # columns of a name that /list keeps before it drops the date (a new chat's name takes 20)


def brief(text: str, limit: int = 80) -> str:
    """Text on one line, cut to about limit characters, saying how long it was (a system prompt in a summary line)."""
    line = " ".join(text.split())
    if character_count(line) <= limit:
        return line
    return f"{cut_characters(line, limit - 1)}… ({character_count(text):,} characters)"


def plain_text_note(name: str, gives_one: str = "--chat-template FILE gives it one") -> str:
    """What the chat says of a model with no chat template, as it starts and (gives_one: how the chat gets a template
    for it) as /model switches to one."""
    return f"localgen: {name} has no chat template, so the conversation goes to it as plain text to continue " \
           f"({gives_one})"


SHOWS_REASONING = "/thinking on shows its reasoning"
EARLIER_KEPT = "interrupted: the earlier answer is kept"


def answer_note(done: Finished, *, context_help: str, limit_source: str = "/set max_tokens",
                hidden_reasoning: bool = False, still_reasoning: bool = False, earlier_kept: bool = False,
                chat_ends: bool = False) -> str | None:
    """The note after an answer: why it stopped early (a token limit named by where it came from: limit_source; the
    end of the context, with what context_help says of a larger one: ChatSession.context_end_help), or that it was
    empty; hidden_reasoning: the model said nothing but reasoning, which /thinking off hid (still_reasoning: it ended
    inside it), so the note says so; earlier_kept: a /regen stopped, so the question keeps the answer it had (said for
    a Ctrl-C, in place of the rest; /regen can ask again unless chat_ends: SIGTERM or SIGHUP stopped it)."""
    if earlier_kept and done.finish_reason == "interrupted":
        return EARLIER_KEPT if chat_ends else f"{EARLIER_KEPT}; /regen asks again"
    stopped = console.finish_note(done, chat=True, limit_source=limit_source, context_help=context_help)
    if not hidden_reasoning:
        return stopped or empty_answer_note(done)
    if still_reasoning:
        return f"{stopped or 'the answer ended'} while the model was still reasoning ({SHOWS_REASONING})"
    if stopped:
        return f"{stopped} after the model's reasoning, before its answer ({SHOWS_REASONING})"
    return f"the model gave no answer after its reasoning ({SHOWS_REASONING}; /regen asks again)"


def same_answer_note(sampling: SamplingParams) -> str | None:
    """What /regen says first where, from now on, its settings give the answer it is about to give again
    (temperature 0: greedy; a fixed seed), with how to vary it; None where each answer is drawn afresh. The last
    answer may have been made with other settings: this one is not said to repeat it."""
    if sampling.temperature == 0:
        return "[temperature 0 always takes the likeliest token, so /regen gives this answer again while it is set; " \
            "/set temperature 0.7 varies it]"
    if sampling.seed is not None:
        return f"[seed {sampling.seed} is fixed, so /regen gives this answer again while it is; /set seed none (or " \
            "another seed) varies it]"
    return None


def unanswered_line(attached: int, *, sent: bool) -> str:
    """The line said of a message that got no answer (sent: the model got it, and Ctrl-C came before any text, or an
    error; else Ctrl-C just after Enter kept it from being sent): nothing in the conversation, and the files
    attached for it waiting for the next one."""
    files = f", and {counted(attached, 'attached file')} {'waits' if attached == 1 else 'wait'} for the next one" \
        if attached else ""
    said = "no answer" if sent else "interrupted"
    return f"[{said}: the message is not kept{files}; /regen sends it, Up brings it back to edit]"


def empty_answer_note(done: Finished) -> str | None:
    """A note for an answer that ended before any text, which would otherwise show as nothing at all."""
    return "the model gave an empty answer (/regen asks again)" if not done.text.strip() else None


def gist(message: str, width: int = 60) -> str:
    """A message on one line, its start and end when it is long (attached files come first, the typed text last)."""
    line = " ".join(message.split())
    if len(line) <= width:
        return line
    half = (width - 3) // 2
    return f"{line[:half].rstrip()} … {line[-half:].lstrip()}"


def room_notice(start: TurnStart) -> str | None:
    """What making room for a turn did, when it moved exchanges out of the model's context."""
    if not start.dropped:
        return None
    return (f"[{counted(start.dropped, 'earlier exchange')} left the model's context to make room; "
            f"the saved conversation keeps {'it' if start.dropped == 1 else 'them'}]")


def exchanges_in_context(conversation: Conversation) -> str:
    """How many exchanges a conversation has, and how many of them the model still sees when not all."""
    total, seen = len(conversation.turns), len(conversation.in_context())
    if seen == total:
        return counted(total, "exchange")
    last = "only the last" if seen == 1 else f"the last {seen}"
    return f"{counted(total, 'exchange')} ({last} in the model's context)"


def what_reset_kept(previous: Conversation, *, unsaved: bool = False) -> str:
    """What became of the conversation /reset left: saved (it had changes), its latest changes not saved, or never
    written."""
    if unsaved:
        return f"the latest changes to {previous.name} were not saved"
    if previous.on_disk:
        return f"{previous.name} stays saved"
    return "the previous one had nothing to save" if not previous.turns else "the previous one was not saved"


def toolbar_line(parts: list[tuple[str, int]], columns: int) -> str:
    """The bottom toolbar's parts (text, rank: 0 the most wanted) in columns (0: as they are): the parts ranked
    last are left out first, rather than the terminal cutting the line wherever it ends."""
    kept = list(parts)
    while columns and len(kept) > 1 and display_width(_toolbar(kept)) > columns:
        kept.remove(max(kept, key=lambda part: part[1]))
    return shorten_end(_toolbar(kept), columns) if columns else _toolbar(kept)


def _toolbar(parts: list[tuple[str, int]]) -> str:
    """Toolbar parts joined as the toolbar shows them."""
    return " " + " │ ".join(text for text, _ in parts)


def list_rows(entries: list[Summary], current: str | None, columns: int, others: Set[str] = frozenset()) -> list[str]:
    """/list's rows, one a conversation, marking current's with * and (this chat), and those others hold (another
    chat's, a run's) with ! and (in use elsewhere), IN_USE_LEGEND last where such a note was dropped; in columns > 0
    each row fits on one line: where the first message would keep too few columns, names longer than LIST_NAME_KEPT
    are cut first, then the date goes, then the exchange count, then names are cut further (in their middle)."""
    described = [console.one_line(entry.described) for entry in entries]
    wanted = min(LIST_MESSAGE_SHORTEST, max(map(display_width, described), default=0))
    full = [entry.name for entry in entries]
    marks = ["*" if entry.name == current else IN_USE_MARK if entry.name in others else " " for entry in entries]
    heads: list[str] = []
    for with_date, with_size in ((True, True), (False, True), (False, False)):
        heads = _list_heads(entries, full, marks, with_date=with_date, with_size=with_size)
        over = max(map(display_width, heads)) - (columns - wanted)  # columns the heads take from the message
        if not columns or over <= 0:
            break
        room = max(map(display_width, full)) - over  # the widest name that leaves the message its columns
        if room >= LIST_NAME_KEPT or not with_size:
            names = [shorten_middle(name, max(1, room)) for name in full]  # their ends tell them apart
            heads = _list_heads(entries, names, marks, with_date=with_date, with_size=with_size)
            break
    notes = {"*": THIS_CHAT, IN_USE_MARK: IN_USE, " ": ""}
    rows = [_list_row(head, text, notes[mark], columns)
            for mark, head, text in zip(marks, heads, described, strict=True)]
    dropped = any(mark == IN_USE_MARK and not row.endswith(IN_USE) for mark, row in zip(marks, rows, strict=True))
    return [*rows, IN_USE_LEGEND] if dropped else rows


def _list_heads(entries: list[Summary], names: list[str], marks: list[str], *, with_date: bool,
                with_size: bool) -> list[str]:
    """The columns of /list's rows before the first message, aligned: mark (marks: * for this chat's) and name (as
    shown: names), then date and size if wanted."""
    width = max(map(display_width, names))
    sizes = [counted(entry.exchanges, "exchange") if with_size and entry.exchanges is not None else ""
             for entry in entries]
    size_width = max(map(len, sizes), default=0)
    heads = []
    for entry, name, mark, size in zip(entries, names, marks, sizes, strict=True):
        head = f" {mark}{name}{' ' * (width - display_width(name))}  "
        head += f"{local_minute(entry.updated)}  " if with_date else ""
        head += f"{size:<{size_width}}  " if size_width else ""
        heads.append(console.one_line(head))
    return heads


def _list_row(head: str, described: str, note: str, columns: int) -> str:
    """One /list row: in columns > 0, the first message is cut to what is left, and the note dropped when the mark (*
    or !) must say it alone."""
    if columns:
        room = columns - display_width(head)
        note = note if room - display_width(note) >= min(LIST_MESSAGE_MIN, display_width(described)) else ""
        described = shorten_end(described, room - display_width(note))
    return f"{head}{described}".rstrip() + note
