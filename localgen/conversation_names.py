"""What a conversation may be named: the rule and its check, a valid name offered for one that is not, NAME-2 for a
second conversation named NAME, and the error for a name typed empty."""

from __future__ import annotations

import os
import re
import shlex
import unicodedata
from collections.abc import Callable
from pathlib import Path

from localgen.errors import UsageError
from localgen.shorten import shown_name
from localgen.tab_separated import NAMED_ESCAPES, byte_escapes

MAX_NAME_LENGTH = 100
MAX_NAME_SUFFIX = 1000  # NAME-2 ... NAME-1000 are tried before a first save gives up
NAME_RULE = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME_LENGTH - 1}}}"  # a conversation name, as a pattern
NAME_PATTERN = re.compile(rf"^{NAME_RULE}$")
AUTOMATIC_NAME = "chat-%Y%m%d-%H%M%S"  # a new conversation's name: when it started (strftime)
_AUTOMATIC = re.compile(r"chat-\d{8}-\d{6}(?:-\d+)?")  # one, or NAME-2, NAME-3, ... beside another of that second
_EXAMPLE_NAME = "notes"  # the example a name gets when nothing of it makes one
_CHARACTERS = "start with an ASCII letter or digit, then use ASCII letters, digits, '.', '_' and '-'"
_ESCAPED = {**NAMED_ESCAPES, "'": "\\'"}  # in a shell's $'...'
NEW_NAME_HINT = f"give one: {_CHARACTERS} (up to {MAX_NAME_LENGTH} characters), e.g. {_EXAMPLE_NAME}"  # for '' given


def check_name(name: str) -> str:
    """A conversation name that is safe as a file name."""
    if not name:
        raise empty_name(NEW_NAME_HINT)
    if not NAME_PATTERN.fullmatch(name):
        if (copied := _renamable_entry(name)) is not None:  # `chat --resume "my notes"` of a file copied in by hand
            raise UsageError(f"'{shown_name(name)}' is not a valid conversation name",
                             hint=f"{copied} is there: `localgen "
                                  f"{command_words('conversations mv', name, free_name(name, name_taken))}` renames "
                                  "it to a name chat and run take")
        too_long = len(name) > MAX_NAME_LENGTH  # its example would be the name again, cut: said once, and shortened
        like = None if too_long else suggested_name(name)
        raise UsageError(f"'{shown_name(name)}' is not a valid conversation name",
                         hint=f"{_CHARACTERS} (up to {MAX_NAME_LENGTH} characters"
                              + (f"; it has {len(name):,}" if too_long else "") + ")"
                              + (f", e.g. {like}" if like else ""))
    return name


def is_automatic_name(name: str) -> bool:
    """Whether a conversation still has the name it was given when it started (chat-20261206-025201, or -2 after it),
    not one the user gave."""
    return _AUTOMATIC.fullmatch(name) is not None


def empty_name(hint: str, *, given_to: str | None = None) -> UsageError:
    """The error for a conversation name typed empty ('' in a chat, "$NAME" with NAME not set): said to be empty,
    never taken for the current or the newest conversation's; hint: what to give instead, and where names come from;
    given_to: the option it was given to (--conversation)."""
    what = f"the name given to {given_to}" if given_to else "the conversation name"
    return UsageError(f"{what} is empty", hint=hint)


def numbered_name(name: str, number: int) -> str:
    """NAME-NUMBER (NAME-2 for a second conversation named NAME), NAME shortened as far as it takes to stay a valid
    name."""
    suffix = f"-{number}"
    return name[:MAX_NAME_LENGTH - len(suffix)] + suffix


def suggested_name(name: str) -> str | None:
    """A valid name close to one that is not ('my notes': my-notes, 'café': cafe, 'my notes.json': my-notes), an
    example where nothing of it is left ('.json', '日本語': notes), or None for a path (what to name it is the
    user's to say)."""
    if "/" in name or "\\" in name:
        return None
    name = name[:-len(".json")] if name.lower().endswith(".json") else name  # its file's name means it
    letters = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    like = re.sub(r"[^A-Za-z0-9._-]+", "-", letters).lstrip("._-")[:MAX_NAME_LENGTH].rstrip("-")
    return like if like and like != name and NAME_PATTERN.fullmatch(like) else _EXAMPLE_NAME


def misnamed_file(stem: str, taken: Callable[[str], bool]) -> str:
    """Why a file of the conversations folder named against the rule (my notes.json, copied there by hand) is not
    resumed, as a listing says it (taken: whether a name has a file)."""
    free = free_name(stem, taken)
    if stem.startswith("-"):  # typed as the listing names it, it would be read as an option
        return f"invalid name: rename it ({command_words('conversations mv', stem, free)}) to resume it"
    return f"invalid name: rename it (conversations mv) to {free} to resume it"


def free_name(stem: str, taken: Callable[[str], bool]) -> str:
    """The valid name to rename a file named against the rule to ('my notes': my-notes; taken: whether a name has a
    file, one taken giving NAME-2, NAME-3, ...)."""
    like = suggested_name(stem.replace("\\", "-")) or _EXAMPLE_NAME
    return next((name for name in (like, *(numbered_name(like, n) for n in range(2, MAX_NAME_SUFFIX + 1)))
                 if not taken(name)), like)


def typed(name: str) -> str:
    """A name as a shell takes it: quoted where it must be; one with a character that is not printable (a control, a
    no-break or zero-width space, a byte that was not UTF-8) in $'...', tab, newline and the like as \\t, \\n, any other
    as \\xHH of each byte its file's name has for it, as a listing on a pipe writes a control character."""
    if name.isprintable():
        return shlex.quote(name)
    return "$'" + "".join(_ESCAPED.get(char) or (char if char.isprintable() else byte_escapes(char))
                          for char in name) + "'"


def command_words(command: str, *names: str) -> str:
    """A command a hint gives with names as a shell takes them (conversations mv 'my notes' my-notes), after -- where
    one starts with '-', which the command would read as an option (conversations rm -- -cut)."""
    ends_options = ["--"] if any(name.startswith("-") for name in names) else []
    return " ".join([command, *ends_options, *map(typed, names)])


def listed_entry(name: str) -> Path | None:
    """The entry NAME.json of the conversations folder a listing names NAME, if it is there, whatever NAME is (a file
    copied in as my notes.json, a pipe): never one outside the folder (a name with a path separator, or a drive as
    Windows reads D:x) or a hidden one; a backslash is a file name's character where it separates nothing (POSIX)."""
    from localgen.conversation_store import conversations_dir

    separators = {"/", "\0", os.sep, os.altsep or "/"}
    if not name or name.startswith(".") or any(char in name for char in separators):
        return None
    folder = conversations_dir()
    path = folder / f"{name}.json"
    return path if path.parent == folder and os.path.lexists(path) else None  # a name too long: not there


def _renamable_entry(name: str) -> Path | None:
    """listed_entry where `conversations mv` takes it (a file, or a link, moved as it is), never a pipe or a folder."""
    entry = listed_entry(name)
    return entry if entry is not None and (entry.is_symlink() or entry.is_file()) else None


def name_taken(name: str) -> bool:
    """Whether the conversations folder has a file (or a link) NAME.json."""
    from localgen.conversation_store import conversations_dir

    return os.path.lexists(conversations_dir() / f"{name}.json")
