"""A slash command's argument as a shell reads it: unquoted whole (/file PATH, /load NAME), or part way through, for
Tab to complete the path being typed and write the rest of it in the same quoting."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from prompt_toolkit.completion import CompleteEvent, Completion, PathCompleter
from prompt_toolkit.document import Document

from localgen.errors import UnbalancedQuoteError, UsageError
from localgen.typed_paths import expand_user_path

QUOTES = "'\""
# a backslash before a blank or a character a shell reads specially, as drag-and-drop and Tab in a shell escape
# them; a backslash before anything else stays (a quoted argument keeps every one)
_SHELL_ESCAPE = re.compile(r"\\([\s!\"#$&'()*,;<=>?[\\\]^`{|}~])")
_SHELL_SPECIAL = re.compile(r"[\s!\"#$&'()*;<=>?[\\\]^`{|}]")  # what a shell's Tab escapes (each _SHELL_ESCAPE reads)
_DOUBLE_QUOTED_SPECIAL = re.compile(r'["\\]')  # what a backslash escapes inside double quotes, as shlex reads them
_END = "x"  # written after a word typed part way, to tell a word going on from a new one begun after a blank


@dataclass(frozen=True)
class PartWord:
    """A word typed part way: what it reads as so far, the quote still open in it ("" for none), and whether it ends
    in a backslash that escapes the character still to come."""

    text: str
    quote: str
    escaping: bool


def one_argument(argument: str, usage: str) -> str:
    """A slash command's one argument (a path or a name), its quotes taken off when it is quoted (a path with
    spaces), or else the backslashes a shell would take off (my\\ notes.txt, as a terminal pastes a dropped file)."""
    if argument[0] not in QUOTES:
        return _SHELL_ESCAPE.sub(r"\1", argument)
    try:
        words = shlex.split(argument)
    except ValueError:
        raise UnbalancedQuoteError(usage) from None
    if len(words) != 1:
        raise UsageError(f"{usage} takes one argument", hint="quote the whole of it, or drop the quotes")
    return words[0]


def part_word(argument: str) -> PartWord | None:
    """What an argument typed up to the cursor reads as, as one_argument reads it once it is typed whole (None where
    a quoted one has ended and another word begun, which one_argument refuses)."""
    if not argument or argument[0] not in QUOTES:
        escaping = (len(argument) - len(argument.rstrip("\\"))) % 2 == 1
        return PartWord(_SHELL_ESCAPE.sub(r"\1", argument[:-1] if escaping else argument), "", escaping)
    for quote in ("", *QUOTES):  # as typed, or with the quote left open closed
        try:
            words = shlex.split(argument + _END + quote)
        except ValueError:
            continue
        if len(words) != 1:
            return None
        escaping = not quote and (len(argument) - len(argument.rstrip("\\"))) % 2 == 1  # \x read as x
        return PartWord(words[0].removesuffix(_END), quote, escaping)
    return None


def names_a_path(argument: str) -> bool:
    """Whether an argument typed part way reads as a path (/, ., ~ first), not a name."""
    word = part_word(argument.lstrip())
    return word is not None and word.text.startswith(("/", ".", "~"))


def quoted(text: str, quote: str) -> str:
    """Text as it is typed where quote is open ("": none): outside quotes a backslash before each blank or character
    a shell reads specially, inside double quotes before \" and \\, and a ' inside single quotes as '\\''."""
    if quote == "'":
        return text.replace("'", "'\\''")
    return (_DOUBLE_QUOTED_SPECIAL if quote else _SHELL_SPECIAL).sub(r"\\\g<0>", text)


def path_completions(argument: str, paths: PathCompleter, event: CompleteEvent) -> Iterator[Completion]:
    """The completions of a path typed part way (shell-quoted, ~ and $VAR expanded as /file expands them), each
    written in the quoting typed: a folder with its "/", as a shell's Tab writes it, so that the next Tab goes on
    inside it, and a file inside an open quote with the quote closed."""
    word = part_word(argument.lstrip())
    if word is None:
        return
    folder, name = os.path.split(word.text)
    try:
        typed = os.path.join(expand_user_path(folder), name) if folder else name
    except UsageError:  # ~nosuchuser: nothing to list
        return
    for completion in paths.get_completions(Document(typed), event):
        end = "/" if completion.display_text.endswith("/") else word.quote
        yield Completion(quoted(completion.text, word.quote) + end, -1 if word.escaping else 0,
                         display=completion.display, display_meta=completion.display_meta)
