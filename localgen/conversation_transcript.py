"""A saved conversation as Markdown: `conversations show` prints it whole, the chat's /history its last exchanges,
and a resumed chat its last one, shortened."""

from __future__ import annotations

import re
from collections.abc import Callable

from localgen.control_chars import terminal_safe
from localgen.conversation import Conversation, Turn
from localgen.conversation_summary import details_line
from localgen.dim_style import dim_escapes
from localgen.text_cut import character_count, cut_characters
from localgen.units import counted, local_minute_of

RESUMED_LINES = 8  # lines of each message of the last exchange that a resumed chat shows
RESUMED_CHARS = 600  # and characters
# an escape sequence the cut leaves open at the end: ESC alone or with intermediates, a CSI without its final byte,
# an OSC (a title, a link) without its BEL or ESC \
_OPEN_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\](?:(?!\x1b\\)[^\x07])*|[ -/]*)\Z")


def transcript(conversation: Conversation, *, terminal: bool = False, dim: bool = False) -> str:
    """A conversation as Markdown: a heading per message, the answers as the model wrote them, each followed by its
    details in italics (dim: in the terminal's dim style instead); terminal: control characters in the saved text
    are shown, not obeyed."""
    shown = terminal_safe if terminal else str
    facts = [f"model {conversation.model or 'not recorded'}", counted(len(conversation.turns), "exchange"),
             f"started {local_minute_of(conversation.created)}"]
    parts = [shown(f"# {conversation.name}\n\n{', '.join(facts)}\n")]
    aside = _aside(shown, dim)
    if conversation.system and conversation.system.strip():
        parts.append(shown(f"## system\n\n{conversation.system}\n"))
    elif conversation.system:  # given, and sent as it is, but with nothing to show
        parts.append(f"## system\n\n{aside('(whitespace only)')}\n")
    elif conversation.system == "":  # an empty system prompt, not none: the template's own is left out
        parts.append("## system\n\n*(empty: the template's default is left out)*\n")
    parts += exchanges(conversation.turns, terminal=terminal, dim=dim)
    return "\n".join(parts)


def exchanges(turns: list[Turn], *, terminal: bool = False, dim: bool = False,
              shorten: Callable[[str], str] = str) -> list[str]:
    """Each exchange as transcript writes it: the user's message (its attached files named, not quoted: [doc.txt]
    Summarize) and the answer under their headings, then the answer's details (shorten: what each message is cut to,
    as a resumed chat's last exchange)."""
    shown = terminal_safe if terminal else str
    aside = _aside(shown, dim)
    parts = []
    for turn in turns:
        blank = blank_answer(turn.answer)
        answer = aside(blank) if blank else shown(shorten(turn.answer or ""))
        text = shown(f"## user\n\n{shorten(turn.headline())}\n\n## assistant\n\n") + answer
        line = details_line(turn)
        if line:
            text += f"\n\n{aside(line)}"
        parts.append(text + "\n")
    return parts


def _aside(shown: Callable[[str], str], dim: bool) -> Callable[[str], str]:
    """How a note about the saved text is set apart from it: dim (between dim_escapes'), or in italics."""
    if not dim:
        return lambda note: f"*{shown(note)}*"
    start, end = dim_escapes()
    return lambda note: f"{start}{shown(note)}{end}"


def blank_answer(answer: str | None) -> str | None:
    """What a transcript shows for an answer with no text to show ("(empty answer)"), or None for one with text."""
    if answer is None:
        return "(no answer)"
    if not answer:
        return "(empty answer)"
    return None if answer.strip() else "(an answer of whitespace only)"


def shortened(text: str, *, lines: int = RESUMED_LINES, chars: int = RESUMED_CHARS) -> str:
    """A message cut to its first lines and characters, marked where text is cut ("[… 1,234 more characters: /history
    shows it whole]"; whitespace at its end is none), never inside an escape sequence (a pipe gets the text raw)."""
    kept = cut_characters("\n".join(text.split("\n")[:lines]), chars)
    open_escape = _OPEN_ESCAPE.search(kept)
    kept = (kept[:open_escape.start()] if open_escape else kept).rstrip()
    more = character_count(text.rstrip()) - character_count(kept)
    if more <= 0:
        return text
    return f"{kept} […{counted(more, 'more character')}: /history shows it whole]"
