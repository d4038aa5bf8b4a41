"""The chat's input history file kept to its newest entries: trimmed as a chat opens it, under the file's lock, which
each chat's append of a line takes too, so that no entry another chat writes meanwhile is lost or torn (one written
without the lock, after LOCK_WAIT_S, just as a trim's copy takes the file's place, can be)."""

from __future__ import annotations

import collections
import contextlib
import logging
import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from localgen.errors import LocalgenError
from localgen.file_locks import locked_descriptor
from localgen.storage import atomic_write_bytes, regular_file_descriptor, remove_leftover_temp_files

MAX_HISTORY_ENTRIES = 10_000  # the newest entries a history file keeps
MAX_HISTORY_BYTES = 16 * 1024 * 1024  # ... within this size (a few pasted files would otherwise fill it)
TRIM_ABOVE = 1.1  # a history is trimmed once it holds this share of either bound, so a chat at the bound rewrites none
READ_BYTES = int(MAX_HISTORY_BYTES * TRIM_ABOVE) + 1024 * 1024  # a trim reads the file's last bytes alone
DAMAGED_SUFFIX = ".damaged"  # a damaged history file is moved aside to its name with this
LOCK_WAIT_S = 2.0  # another chat's trim or append holds the lock this long at most; then the write goes on without
_LOCK_RETRY_S = 0.01
# the line a trim keeping one entry alone writes in place of its time's header line: no line of a file so kept but the
# first is a header, so that no version looking for the newest entry's header finds one to keep it from
ALONE_MARK = b"# localgen: the newest entry alone below, %d bytes\n"
_ALONE_MARKED = re.compile(rb"# localgen: the newest entry alone below, (\d+) bytes\n")
_FOREIGN_LINE = re.compile(r"^[^+#\n]", re.MULTILINE)  # a line neither an entry's text ('+') nor a header ('#')
_HEADER_LINE = re.compile(rb"\n(?!\+)")  # the start of a line that is no entry's text
_ENTRY_LAST_LINE = re.compile(rb"(?m)^\+.*(?:\n(?!\+)|\Z)")  # an entry's last line of text (\r is text)

log = logging.getLogger("localgen")


@contextlib.contextmanager
def history_lock(path: Path) -> Iterator[bool]:
    """Hold the lock of the history file at path while the block runs (True), once no other chat's trim or append
    holds it; False where it cannot be had (no file, a file system without locks, one held past LOCK_WAIT_S, one
    whose file identities never agree) or is not needed (a link to /dev/null, which keeps no history, and whose lock
    any other program may hold)."""
    fd = locked_descriptor(path, lambda: _opened_file(path), wait_s=LOCK_WAIT_S, poll_s=_LOCK_RETRY_S)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)  # its lock goes with it


def _opened_file(path: Path) -> int | None:
    """A read-only descriptor of the regular file at path; None where it is not there yet (an append makes it), is
    unreadable (said where it is read or written), or is not a regular file."""
    try:
        return regular_file_descriptor(path)
    except OSError:
        return None


def newest_entries(data: bytes, most: int = MAX_HISTORY_ENTRIES, most_bytes: int = MAX_HISTORY_BYTES) -> bytes | None:
    """A history file's data (prompt-toolkit's: each entry a '# time' header, then its lines, each after a '+') kept to
    its newest most entries within most_bytes (the newest one with text whatever its size, and whatever lines with
    none follow it), each whole with its header; None where it holds no more."""
    if len(data) <= most_bytes and data.count(b"\n+") + data.startswith(b"+") <= most:
        return None  # fewer lines of text than the entries it may keep
    starts = collections.deque([0], maxlen=most + 2)  # where the newest entries begin: a header after text
    starts.extend(map(re.Match.end, _ENTRY_LAST_LINE.finditer(data)))  # found in C, not line by line
    kept_from, entries = len(data), 0
    for start in reversed(starts):
        text = data.startswith(b"+", start) or data.find(b"\n+", start, kept_from) >= 0
        if entries and (entries + text > most or len(data) - start > most_bytes):
            break  # an entry with text is kept already
        entries, kept_from = entries + text, start
    return data[kept_from:] if kept_from else None


def history_damage(data: bytes, start: int = 0) -> str | None:
    """Why a history file's data from start (the start of a line) is not what prompt-toolkit writes (NUL bytes,
    invalid UTF-8, foreign lines), or None."""
    if data.find(b"\0", start) >= 0:
        return "it contains NUL bytes"
    try:
        with memoryview(data) as whole, whole[start:] as checked:
            text = str(checked, "utf-8")  # not copied first: a long history's last bytes are 18.6 MiB
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start}"
    foreign = _FOREIGN_LINE.search(text)  # found in place: a list of a long history's lines is ten times its size
    return None if foreign is None else f"line {text.count(chr(10), 0, foreign.start()) + 1} is not a history entry"


def check_and_trim_history(path: Path) -> str | None:
    """Check the history file at path (a link's target) under its lock, so that no line another chat is appending is
    seen half-written, and keep it to its newest entries (newest_entries) once it holds TRIM_ABOVE of a bound; where
    it is damaged (history_damage), move it aside (to its name with DAMAGED_SUFFIX) and return why. Only the file's
    last READ_BYTES are read, whatever its size: what is before them the trim drops, but for the newest entry where it
    is longer (a large paste), kept alone, mapped, not read into memory, and marked alone (ALONE_MARK), so that a
    later start, nothing appended since, looks through it no more. One that cannot be trimmed now (a full disk,
    another chat's line appended meanwhile) is left whole, to be trimmed next time."""
    target = Path(os.path.realpath(path))
    remove_leftover_temp_files(target.parent, re.escape(target.name))  # a trim killed part way
    with history_lock(target):
        before = target.stat()
        with open(target, "rb") as file:
            head = file.read(len(ALONE_MARK) + 20)
            file.seek(max(0, before.st_size - READ_BYTES))
            data = file.read(READ_BYTES)
        read_whole = before.st_size <= READ_BYTES
        damage = history_damage(data, 0 if read_whole else data.find(b"\n") + 1)  # from a line's start
        if damage is not None:
            os.replace(path, path.with_name(path.name + DAMAGED_SUFFIX))
            return damage if read_whole else f"{damage} (counted in its last {READ_BYTES:,} bytes)"
        if read_whole or b"\n#" in data:
            kept = _kept_part(data, read_whole)
            if kept is not None:
                _write_trimmed(target, kept, before)
            return None
        if _alone_as_marked(head, before.st_size):
            return None  # as a trim left it, nothing appended since: no need to look through it again
        with open(target, "rb") as file, _newest_entry_mapped(file) as newest_alone:  # longer than what is read
            if newest_alone is not None:
                _write_trimmed(target, (ALONE_MARK % len(newest_alone), newest_alone), before)
    return None


def _alone_as_marked(head: bytes, size: int) -> bool:
    """Whether a history file of size bytes, which begins with head, is one entry as the trim that kept it alone
    marked it (ALONE_MARK), nothing appended since: its text after the mark, not its header's line, which an older
    localgen's mark came before (converted once, as an older localgen rewrites a file whose entry has no header)."""
    marked = _ALONE_MARKED.match(head)
    return marked is not None and size == marked.end() + int(marked[1]) and head[marked.end():][:1] in (b"+", b"")


def _write_trimmed(target: Path, kept: bytes | tuple[bytes, memoryview], before: os.stat_result) -> None:
    """Put the trimmed history kept in the place of the file at target, where it is still as it was (before)."""
    try:
        # a line another chat appends meanwhile (without the lock, or past LOCK_WAIT_S) leaves the file as it is;
        # one it appends between that check and the rename (microseconds) goes into the old file and is lost: only
        # the lock, which that chat gave up waiting for, closes that window
        atomic_write_bytes(target, kept, replace_if=lambda: _same_file(target.stat(), before))
    except (OSError, LocalgenError) as exc:
        log.debug("the input history %s was not trimmed: %s", target, exc)


@contextlib.contextmanager
def _newest_entry_mapped(file: BinaryIO) -> Iterator[memoryview | None]:
    """The text of the newest entry of the history file open as file, its lines after its header's, mapped from the
    file, not read into memory (one pasted in may be of any size), for a trim that drops the entries before it and
    marks it alone (the whole file's where it is one entry already); None where the file cannot be mapped."""
    try:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:  # a file system that maps no files: left whole
        log.debug("the input history was not mapped to be trimmed: %s", exc)
        yield None
        return
    with mapped, memoryview(mapped) as whole:
        start = mapped.rfind(b"\n#")  # a header's line: each line of an entry's text starts with '+'
        text = mapped.find(b"\n", start + 1) + 1 if start >= 0 or mapped[:1] == b"#" else 0  # after its header
        with whole[text:] as newest:
            yield newest


def recalled_entries(path: Path) -> list[str]:
    """The entries of the history file at path that Up recalls, newest first, read as prompt-toolkit reads them, but
    from the file's last READ_BYTES alone and kept as a trim keeps them (_kept_part: all of a file within TRIM_ABOVE of
    its bounds), so that a start reads and holds a bounded part of a history of any size: an entry longer than that (a
    huge paste a trim kept alone) stays in the file, not recalled."""
    with open(path, "rb") as file:  # the byte before the last READ_BYTES too: whether their first line is whole
        offset = file.seek(max(0, os.fstat(file.fileno()).st_size - READ_BYTES - 1))
        data = file.read(READ_BYTES + 1)
    kept = _kept_part(data, read_whole=offset == 0)
    return _entries(data if kept is None and offset == 0 else kept or b"")[::-1]


def _entries(data: bytes) -> list[str]:
    """The entries of a history file's data, oldest first, as prompt-toolkit's FileHistory reads them: each the text
    of its lines that start with '+', without its last newline, the other lines between entries."""
    # split into entries, not lines: a list of a history's short lines is 70 times its size
    # its last character dropped once decoded, as prompt-toolkit does: a last line with no newline loses a character
    return [data[start + 1:end].replace(b"\n+", b"\n").decode("utf-8", "replace")[:-1]
            for start, end in _entry_texts(data)]


def _entry_texts(data: bytes) -> Iterator[tuple[int, int]]:
    """Where the text of each entry of a history file's data begins and ends, oldest first: its lines that start with
    '+', each to its newline (a carriage return is text, as prompt-toolkit reads it), found entry by entry, not line
    by line."""
    start: int | None = 0 if data.startswith(b"+") else _next_text(data, 0)
    while start is not None:
        after = _HEADER_LINE.search(data, start)  # the next line that is no entry's text
        end = len(data) if after is None else after.start() + 1
        yield start, end
        start = _next_text(data, end - 1)


def _next_text(data: bytes, start: int) -> int | None:
    """Where the first line of an entry's text after start (a newline, or within a line) begins in data; None."""
    newline = data.find(b"\n+", start)
    return None if newline < 0 else newline + 1


def _from_first_whole_entry(data: bytes) -> bytes:
    """data, bytes read from within a history file, from the first entry they hold whole: its header's line."""
    first = data.find(b"\n")  # the first line read may be part of one
    header = _HEADER_LINE.search(data, first) if first >= 0 else None  # a line after it that is not an entry's text
    return data[header.start() + 1:] if header is not None else b""


def _kept_part(data: bytes, read_whole: bool) -> bytes | None:
    """The newest entries of a history file, from data, its last READ_BYTES (read_whole: all of it); None where it
    holds less than TRIM_ABOVE of either bound, or its newest entry alone is longer than what is read."""
    if read_whole:
        slack = int(MAX_HISTORY_ENTRIES * TRIM_ABOVE), int(MAX_HISTORY_BYTES * TRIM_ABOVE)
        return None if newest_entries(data, *slack) is None else newest_entries(data)
    data = _from_first_whole_entry(data)
    return (newest_entries(data) or data) if b"\n+" in data else None


def _same_file(now: os.stat_result, before: os.stat_result) -> bool:
    """Whether a file's stat now is before's: the same file, size and time of last change."""
    return (now.st_ino, now.st_size, now.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
