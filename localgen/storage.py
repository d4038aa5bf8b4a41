"""Files localgen keeps: atomic writes (a reader sees the old file or the new one, never half of one), and folders
that must be folders."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from localgen.config import settings
from localgen.errors import DISK_FULL_ERRNOS, SIZE_LIMITS, LocalgenError, os_reason
from localgen.file_locks import still_names, try_flock
from localgen.links import FOLDER_LINK_HINT, broken_link
from localgen.replaceable import check_replaceable, keep_group
from localgen.shorten import short_path

LINKS_UNSUPPORTED = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})
TEMP_SUFFIX = ".tmp"
TEMP_TOKEN_BYTES = 4  # a temp file's name carries this many random bytes, as hex digits
TEMP_RANDOM = f"[0-9a-f]{{{2 * TEMP_TOKEN_BYTES}}}"  # a temp name's random part, as a pattern
OLDER_TEMP_RANDOM = "[a-z0-9_]{8}"  # the random part of an older localgen's temp names (tempfile.mkstemp's)
# a temp file is made new, never one already there opened
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
STALE_TEMP_S = 3600.0  # a temp file whose lock cannot be tested, untouched this long, was left by a killed process
TEMP_TRIES = 5  # a new temp file a sweep held locked (or deleted) as it was made is made again this many times


def atomic_write_bytes(path: Path, data: bytes | bytearray | memoryview | tuple[bytes | bytearray | memoryview, ...],
                       *, mode: int = 0o600, replace: bool = True, replace_if: Callable[[], bool] | None = None,
                       keep_mode: bool = True, own_record: bool = False, group: int | None = None) -> bool:
    """Write data to path through a temp file, fsync and rename; return whether it was written. A file there keeps its
    mode and group (a user's chmod and chgrp outlive the rewrite), and one the user made read-only (mode 444) or may
    not replace (another user's, in a sticky folder as /tmp is) is refused, left as it is; a new file gets mode
    (private to the user unless it says otherwise; keep_mode=False: mode over a file there too, and group, where this
    process may give it (keep_group), else the process's). Another user's file the user may replace (a `sudo
    localgen` left it) is replaced. own_record: a record of localgen's own (a verification marker, a cache entry, a
    Hub listing), no document of the user's, is replaced whatever its mode, with mode.

    data may be a tuple of parts, written one after the other (no joined copy of a large buffer is made).
    replace=False never overwrites: FileExistsError is raised when path exists, and nothing is written.
    replace_if, asked once the temp file is complete and synced, just before it takes path's place: False leaves
    path as it is (the check is as close to the rename as it can be).
    """
    tmp_name: str | None = None
    fd: int | None = None
    if replace and not own_record:
        kept, kept_group = check_replaceable(path, mode)
        mode, group = (kept, kept_group) if keep_mode else (mode, group)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name, locked = new_temp_file(path)
        with os.fdopen(fd, "wb", closefd=False) as tmp:
            keep_group(tmp.fileno(), group)
            os.fchmod(tmp.fileno(), mode)
            write_synced(tmp, data if isinstance(data, tuple) else (data,))
        if not locked:  # closed before the rename, where an open file cannot be renamed (Windows)
            os.close(fd)
            fd = None
        if replace_if is not None and not replace_if():
            return False
        if replace:
            os.replace(tmp_name, path)
            tmp_name = None
        elif _claim_name(tmp_name, path, mode):  # the temp file was renamed to path
            tmp_name = None
        fsync_folder(path.parent)
        return True
    except OSError as exc:
        blocker = file_in_the_way(path.parent)
        if blocker is not None:
            what, hint = in_the_way(blocker)
            raise LocalgenError(f"could not write {path}: {what}", hint=hint) from exc
        if isinstance(exc, FileExistsError) and not replace:
            raise
        if os.path.isdir(path) and not os.path.islink(path):  # (os.path's: False under a folder not to be entered)
            raise LocalgenError(f"could not write {path}: a folder is in its place",
                                hint="move that folder away") from exc
        kept = "; the previous file is unchanged" if os.path.isfile(path) else ""
        raise LocalgenError(f"could not write {path}: {os_reason(exc)}",
                            hint=f"{unwritable_hint(exc, path.parent, write_hint(exc, path.parent))}{kept}") from exc
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
        if fd is not None:
            os.close(fd)  # its lock goes once its name is gone: no sweep ever finds a write under way free


def new_temp_file(path: Path, named: Callable[[Path], str] | None = None) -> tuple[int, str, bool]:
    """A new private temp file beside path for a write of it: its descriptor, its name, and whether it holds its lock
    (not where the file system has no locks, nor where the locked file cannot be told to be the one named, as on some
    FUSE mounts: a sweep goes by its age there). named: how its name is made (temp_name's way by default)."""
    named = named or temp_name
    for _ in range(TEMP_TRIES):
        fd, name = _make_temp_file(path, named)
        locked = try_flock(fd)
        if locked is None or (locked and still_names(fd, Path(name))):
            return fd, name, bool(locked)
        os.close(fd)  # a sweep held its lock as it was made, or deleted it: make another
        with contextlib.suppress(OSError):
            os.unlink(name)  # this process's random name, nobody else's: where it is still there, it goes
    fd, name = _make_temp_file(path, temp_name)
    return fd, name, False  # a file system whose file identities never agree: its age decides


def _make_temp_file(path: Path, named: Callable[[Path], str]) -> tuple[int, str]:
    """A new empty private file beside path, its name made by named: its descriptor and its name."""
    for _ in range(TEMP_TRIES - 1):
        name = str(path.with_name(named(path)))
        with contextlib.suppress(FileExistsError):  # a random name taken: another
            return os.open(name, _TEMP_FLAGS, 0o600), name
    name = str(path.with_name(named(path)))
    return os.open(name, _TEMP_FLAGS, 0o600), name


def temp_name(path: Path) -> str:
    """A new name for the temp file of a write of path: hidden, beside it (`.NAME.` 8 random hex digits `.tmp`)."""
    return f".{path.name}.{secrets.token_hex(TEMP_TOKEN_BYTES)}{TEMP_SUFFIX}"


def temp_names(written: str, random_part: str = TEMP_RANDOM) -> re.Pattern[str]:
    """The names temp_name gives the temp files of writes of the files whose names match the pattern written
    (random_part: what stands for its random part, OLDER_TEMP_RANDOM for an older localgen's names)."""
    return re.compile(rf"\.(?:{written})\.{random_part}{re.escape(TEMP_SUFFIX)}")


def remove_leftover_temp_files(folder: Path, written: str, *, by_lock: bool = True) -> None:
    """Remove the temp files in folder that writes of the files whose names match the pattern written (re.escape of
    one name) left behind where their process was killed part way (kill -9, a power cut), never one whose lock is
    held, as a write under way holds its own until its temp file is renamed: those whose lock is free; those untouched
    for STALE_TEMP_S where no lock can be tested (a file system without locks, some FUSE mounts), where not by_lock,
    and for the names an older localgen gave them (tempfile's), as only some of those versions locked them.
    by_lock=False is for a sweep that holds no lock of the file written, where a write on another machine may hold a
    lock this one cannot see (a folder shared over NFS)."""
    leftover, older = temp_names(written), temp_names(written, OLDER_TEMP_RANDOM)
    try:
        entries = list(os.scandir(folder))
    except OSError:  # no folder, no leftovers
        return
    for entry in entries:
        ours = leftover.fullmatch(entry.name) is not None
        if ours or older.fullmatch(entry.name):
            with contextlib.suppress(OSError):
                _remove_if_left(Path(entry.path), by_lock=by_lock and ours)


def regular_file_descriptor(path: Path, *, follow_links: bool = True) -> int | None:
    """A read-only descriptor of the regular file at path (not through a link unless follow_links); None where path is
    another kind of file. Opened without waiting: a FIFO put in a file's place would block the open for a writer that
    never comes; blocking again once it is known to be a regular file."""
    no_follow = 0 if follow_links else getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | no_follow | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_if_left(path: Path, *, by_lock: bool = True) -> None:
    """Delete the temp file at path where its writer has ended (by_lock: its lock is free; else, as where no lock can
    be tested, it is untouched for STALE_TEMP_S; one whose lock is held, never), while the lock taken here is held (a
    directory, a link or any other file that is no regular one is left alone)."""
    fd = regular_file_descriptor(path, follow_links=False)
    if fd is None:
        return
    try:
        info = os.fstat(fd)
        free = try_flock(fd)
        if free and not still_names(fd, path):  # renamed into place since it was opened, or some FUSE mount
            free = None if os.path.lexists(path) else False
        stale = time.time() - info.st_mtime > STALE_TEMP_S
        if free is not False and ((free and by_lock) or stale):
            os.unlink(path)
    finally:
        os.close(fd)  # the lock taken here goes with it


def file_in_the_way(folder: Path) -> Path | None:
    """The file (or dangling link) that stands where folder, or a folder above it, should be; None where none does."""
    for candidate in (folder, *folder.parents):
        try:
            if candidate.is_dir():
                return None
            if candidate.exists() or candidate.is_symlink():
                return candidate
        except OSError:  # under a folder that may not be entered: the one above says what is there
            continue
    return None


def in_the_way(blocker: Path, folder: str = "a folder") -> tuple[str, str]:
    """What file_in_the_way found, said (a file, a device, a link to one, where folder should be, or a link that leads
    to nothing), and the hint that clears it."""
    link = broken_link(blocker)
    if link is not None:
        return f"{blocker} is {link}", FOLDER_LINK_HINT
    try:
        return f"{blocker} is a link to {short_path(os.readlink(blocker))}, where {folder} should be", FOLDER_LINK_HINT
    except OSError:  # no link
        pass
    return f"{blocker} is {_kind_of_file(blocker)}, where {folder} should be", "move that file out of the way"


def _kind_of_file(path: Path) -> str:
    """What path is, said as in_the_way says it: a device, a pipe, a socket, else a file."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a file"


def make_folder(folder: Path, *, mode: int = 0o777) -> None:
    """Make a folder and those above it, with a clear error where a file stands in the way."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=mode)
    except OSError as exc:
        blocker = file_in_the_way(folder)
        if blocker is not None:
            what, hint = in_the_way(blocker)
            raise LocalgenError(f"could not create {folder}: {what}", hint=hint) from exc
        raise LocalgenError(f"could not create {folder}: {os_reason(exc)}",
                            hint=unwritable_hint(exc, folder, write_hint(exc, folder))) from exc


def check_writable(folder: Path) -> None:
    """Raise a LocalgenError where no file can be made in folder (its permissions, a read-only file system); the
    test file made leaves no name behind where the file system allows (O_TMPFILE)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise LocalgenError(f"cannot write to {folder}: {os_reason(exc)}",
                            hint=unwritable_hint(exc, folder, write_hint(exc, folder))) from exc


def write_hint(exc: OSError, folder: Path) -> str:
    """What to do about a file or folder that could not be made in folder, where no more telling hint applies: for
    a permission refused, the folder that refused it (and LOCALGEN_HOME, which moves localgen's own), never the disk's
    free space."""
    if not isinstance(exc, PermissionError):
        return "check free disk space and permissions"
    refused = next((place for place in (folder, *folder.parents) if os.path.lexists(place)), folder)
    elsewhere = ", or set LOCALGEN_HOME to a folder you can write to" if _is_localgen_folder(folder) else ""
    return f"check the permissions of {refused}{elsewhere}"


def unwritable_hint(exc: OSError, folder: Path, otherwise: str = "check free disk space and permissions", *,
                    setting: str | None = None) -> str:
    """What to do about a write in folder that failed with exc: a read-only file system is named as such, with the
    setting that moves the folder (setting, else LOCALGEN_HOME for localgen's own folders), a full disk as that; else
    otherwise. A size limit on files (`ulimit -f`) is named too."""
    if exc.errno == errno.EROFS:
        setting = setting or ("LOCALGEN_HOME" if _is_localgen_folder(folder) else None)
        elsewhere = f", or set {setting} to a folder on a writable one" if setting else ""
        return f"its file system is mounted read-only: remount it read-write{elsewhere}"
    if exc.errno in DISK_FULL_ERRNOS:
        return "free some disk space"
    if exc.errno == errno.EFBIG:
        return f"the file would pass a size limit {SIZE_LIMITS}: raise it"
    return otherwise


def _is_localgen_folder(folder: Path) -> bool:
    """Whether folder is one of localgen's own (config, data, cache), or under one, which LOCALGEN_HOME moves."""
    places = (settings().config_dir, settings().data_dir, settings().cache_dir)
    return any(folder == place or place in folder.parents for place in places)


def _claim_name(tmp_name: str, path: Path, mode: int) -> bool:
    """Put the complete temp file at path only if path does not exist (FileExistsError otherwise).

    A hard link does it in one step (False: the temp file's name is still there, to remove). A file system without
    hard links (FAT, exFAT, some network and FUSE mounts) gets an empty placeholder made with O_EXCL instead, that
    the temp file then replaces (True: the temp file's name is gone). Should that replace fail, or an exception
    (Ctrl+C, a signal) land before it is done, the placeholder is removed again: no empty file is left to hold the
    name.
    """
    try:
        os.link(tmp_name, path)
        return False
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in LINKS_UNSUPPORTED:
            raise
    placeholder: os.stat_result | None = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            placeholder = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp_name, path)
    except BaseException:
        if placeholder is not None:
            _remove_placeholder(path, placeholder)
        raise
    return True


def _remove_placeholder(path: Path, placeholder: os.stat_result) -> None:
    """Remove the empty placeholder _claim_name made at path, if path is still that file and still empty."""
    with contextlib.suppress(OSError):
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) == (placeholder.st_dev, placeholder.st_ino) and now.st_size == 0:
            os.unlink(path)


def write_synced(handle: BinaryIO, parts: Iterable[bytes | bytearray | memoryview]) -> None:
    """Write parts to handle one after the other and have the disk hold them (fsync_file), as a temp file must be
    before it is renamed into place."""
    for part in parts:
        handle.write(part)
    fsync_file(handle)


def fsync_file(handle: BinaryIO) -> None:
    """Write handle's buffered bytes and have the disk hold them, as a file must before it is renamed into place
    (after a power cut the rename could be on disk and the bytes not)."""
    handle.flush()
    os.fsync(handle.fileno())


def fsync_folder(directory: Path) -> None:
    """Make a rename in directory durable (best effort: not every platform can open a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str, *, mode: int = 0o600, replace: bool = True,
                      replace_if: Callable[[], bool] | None = None, keep_mode: bool = True,
                      own_record: bool = False, group: int | None = None) -> bool:
    """Write UTF-8 text to path atomically (replace=False: never over an existing file; replace_if, keep_mode,
    own_record, group: see atomic_write_bytes); return whether it was written."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode, replace=replace, replace_if=replace_if,
                              keep_mode=keep_mode, own_record=own_record, group=group)


def check_folder(path: Path, keeps: str) -> None:
    """Raise a LocalgenError when path, or a folder above it, is a file or a link to something not there (or into a
    loop of links), or when it cannot be read: a listing of it would look empty.

    A folder that does not exist yet is fine; keeps names what the folder holds ("saved conversations").
    """
    try:
        is_folder = stat.S_ISDIR(path.stat().st_mode)
    except FileNotFoundError:
        blocker = file_in_the_way(path)  # a link to a folder not there, in its place or above it
        if blocker is None:
            return  # not there yet: nothing to list
        what, hint = in_the_way(blocker)
        raise LocalgenError(f"{path} cannot hold {keeps}: {what}", hint=hint) from None
    except NotADirectoryError:
        is_folder = False
    except PermissionError:  # a folder above it may not be entered
        is_folder = True
        readable = False
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        is_folder = False  # a link that leads into a loop of links, in its place or above it
    else:
        readable = os.access(path, os.R_OK | os.X_OK)
    if not is_folder:
        what, hint = in_the_way(file_in_the_way(path) or path)
        raise LocalgenError(f"{path} cannot hold {keeps}: {what}", hint=hint)
    if not readable:
        raise LocalgenError(f"cannot read {path}, which holds {keeps}: {os.strerror(errno.EACCES)}",
                            hint="check the permissions of that folder and those above it")
