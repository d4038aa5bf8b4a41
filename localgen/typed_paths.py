"""Paths as the user typed them: a leading ~ and $VAR expanded where no shell did, a / after a file's name refused as
`cat` refuses it, and long ones cut in messages."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from localgen.errors import UsageError
from localgen.links import broken_link
from localgen.shorten import short_path

FILE_OPTION = "-f/--file"  # the option that attaches files, as messages name it


def expand_user_path(text: str, base: Path | None = None) -> Path:
    """A path the user typed where no shell expands it (the chat's /file, models.toml), with a leading ~ or ~user
    expanded (an unknown user is a UsageError), and $VAR and ${VAR} where no file has the name as typed, taken from
    base (a models.toml's folder) or the current folder (a file named with a $ is read as named; a variable that is
    not set is left as typed)."""
    if "$" in text and not os.path.lexists(os.path.join(base or "", text)):
        text = os.path.expandvars(text)
    try:
        return Path(text).expanduser()
    except RuntimeError:
        raise UsageError(f"cannot expand '{text.split('/')[0]}' in {text}: no such user or home directory",
                         hint="write the full path") from None


def option_path(text: str, option: str) -> Path:
    """A file path given with option, a leading ~ or a $VAR expanded where the shell left it (--file=~/notes.txt,
    -f~/x.txt, the chat's /file) and no file has that name (an empty one is a UsageError, not the current folder)."""
    if not text:
        raise UsageError(f"the file name given to {option} is empty", hint=f"pass a file path to {option}")
    if text.lower().startswith(("http://", "https://")):
        fetch = f'curl -sL {text} | localgen run "..."' if option == FILE_OPTION else f"curl -sL {text} > FILE"
        raise UsageError(f"{option} reads a local file, not an address: {text}", hint=f"fetch it first: {fetch}")
    left = text.startswith("~") or "$" in text
    path = expand_user_path(text) if left and not os.path.lexists(text) else Path(text)
    refuse_file_as_folder(text, path)
    return path


def refuse_file_as_folder(text: str, path: Path) -> None:
    """Refuse a path typed with a / (or /.) after a file's name (f.txt/, -m m.gguf/), which Path drops and `cat`
    refuses as "Not a directory": the file is not read in its place (path: the typed one, expanded)."""
    if not text.endswith(("/", "/.")):
        return
    with contextlib.suppress(OSError, ValueError):
        if not path.is_dir() and path.exists():
            file = re.sub(r"(/\.?)+$", "", text)
            raise UsageError(f"cannot read {short_path(text)}: Not a directory",
                             hint=f"{short_path(file)} is a file, not a folder: drop the / after it")


def reads_as_no_path(value: str) -> bool:
    """Whether a value given where a file is asked for names no file and reads as no path, but as text or a name
    (`yes|no`, `type: object`, `chatml`): it has no leading - or ~, no folder, no extension, and no file has its
    name, a $VAR in it expanded."""
    if not value or value[0] in "-~" or "/" in value or os.path.splitext(value)[1][1:].isalnum():
        return False
    return not os.path.lexists(expand_user_path(value))


def unset_variables_hint(text: str) -> str | None:
    """For a path that is not there, the $VARs in it that are not set, which were left as typed ($NOPE is not
    set), if any."""
    names = dict.fromkeys(name or braced for name, braced in re.findall(r"\$(?:(\w+)|\{(\w+)\})", text)
                          if (name or braced) not in os.environ)
    if not names:
        return None
    listed = " and ".join(f"${name}" for name in names)
    return f"{listed} {'is' if len(names) == 1 else 'are'} not set"


def is_existing_file(text: str) -> bool:
    """Whether text names an existing file (False for names no file can have: too long, a NUL in them)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def is_existing_folder(text: str) -> bool:
    """Whether text names an existing folder (False for names no folder can have: too long, a NUL in them)."""
    try:
        return Path(text).is_dir()
    except (OSError, ValueError):
        return False


def file_identity(path: Path) -> object:
    """What the file at path is, whatever its name: its device and inode (its path where it cannot be read)."""
    try:
        status = path.stat()
    except OSError:
        return path
    return status.st_dev, status.st_ino


def dangling_link_refusal(path: Path, name: str, option: str) -> UsageError | None:
    """The error for a path given to option (named name) that is a link leading to nothing (links.broken_link: a
    target not there, named), where the file is missing; None where it is no such link."""
    broken = broken_link(path)
    return None if broken is None else UsageError(
        f"{name} is {broken}", hint=f"point the link at a file, or pass the file's own path to {option}")
