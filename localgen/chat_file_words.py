"""What the chat's /file makes of an argument that names no one file: several files as a terminal writes those
dropped on it, or a shell's pattern, each answered with how to attach them one at a time."""

from __future__ import annotations

import glob
import os
import shlex

from localgen.errors import UsageError
from localgen.shell_words import QUOTES, one_argument
from localgen.typed_paths import expand_user_path


def pattern_files(typed: str) -> list[str]:
    """The files (two at most) that a /file argument naming no file matches as a shell's pattern (~ and $VAR
    expanded, as in one file's name)."""
    if any(char in typed for char in "*?["):
        return sorted(filter(os.path.isfile, glob.glob(str(expand_user_path(typed)))))[:2]
    return []


def dropped_files(argument: str) -> list[str]:
    """The files (two at most) that a /file argument naming no file names as a shell's words, each quoted or escaped
    as a terminal writes the files dropped on it ('my notes.txt' b.txt, my\\ notes.txt b.txt, a.txt b.txt), or
    bare, an apostrophe in one (it's.txt b.txt); [] where it names one file, or a word names none."""
    try:
        words = shlex.split(argument)
    except ValueError:  # an apostrophe in a bare name (it's.txt b.txt): its words are the blanks' parts
        words = argument.split()
    if len(words) < 2 or not all(_is_a_file(word) for word in words):
        return []
    whole = None if argument[0] in QUOTES else one_argument(argument, "/file PATH")
    return [] if whole is not None and _exists(whole) else words[:2]


def one_at_a_time(files: list[str]) -> str:
    """How to attach the files a /file argument meant, one command each."""
    if len(files) == 1:
        return f"/file takes no pattern: /file {files[0]}"
    return f"/file attaches one file at a time: /file {files[0]}, then /file {files[1]}"


def _exists(typed: str) -> bool:
    """Whether a /file argument read whole names something, ~ and $VAR expanded (False for ~user with no such
    user)."""
    try:
        return os.path.lexists(expand_user_path(typed))
    except UsageError:
        return False


def _is_a_file(typed: str) -> bool:
    """Whether a word of a /file argument names a file, ~ and $VAR expanded (False for ~user with no such user)."""
    try:
        return expand_user_path(typed).is_file()
    except UsageError:
        return False
