"""Whether a file localgen writes again may be replaced, and what it keeps of the one it replaces: its mode (a user's
chmod outlives the rewrite), never a file the user made read-only nor another user's in a sticky folder."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import stat
from pathlib import Path

from localgen.errors import LocalgenError, os_reason


def check_replaceable(path: Path, mode: int = 0o600) -> tuple[int, int | None]:
    """The mode and group a write of path gives it: the file's own where there is one (a regular file, not through a
    link: see kept_mode), else mode and the process's (None); a LocalgenError where the file there is the user's own
    made read-only, or another user's in a sticky folder, which the rename cannot replace, either of which a write
    leaves as it is."""
    try:
        info = os.lstat(path)
    except OSError:
        return mode, None  # none there (or none to be looked at: the write says why it fails)
    if not stat.S_ISREG(info.st_mode):
        return mode, None
    kept = stat.S_IMODE(info.st_mode)
    # a file on a read-only mount is not refused here: the write's error says what that is
    writable = os.access(path, os.W_OK, **_EFFECTIVE_IDS) or _on_read_only_mount(path)
    if not writable and _euid() in (info.st_uid, None) and _folder_writable(path):  # (None: no owners to tell
        # apart; a folder that may not be written to is the first thing to mend: the write's error names it)
        if info.st_mode & stat.S_IWUSR:  # writable by its mode: immutable, append-only, an ACL's or a security rule's
            _refuse_unwritable(path)
        else:
            raise LocalgenError(f"could not write {path}: it is read-only (mode {kept:o})",
                                hint=f"it is kept as it is; `chmod u+w {shlex.quote(str(path))}` lets localgen write "
                                     "it")
    folder = _folder_status(path)
    if folder is not None and folder.st_mode & stat.S_ISVTX and not _may_replace_in_sticky(info, folder):
        raise LocalgenError(f"could not write {path}: it is another user's (uid {info.st_uid}), in a folder where only "
                            "a file's owner may replace it (sticky, as /tmp is)",
                            hint="it is kept as it is; copy it to a name of your own, or set LOCALGEN_HOME to a "
                                 "folder of your own")
    return kept_mode(info), info.st_gid


def _folder_writable(path: Path) -> bool:
    """Whether a file may be made in the folder holding path (which a rename's temp file needs)."""
    return os.access(path.parent, os.W_OK | os.X_OK, **_EFFECTIVE_IDS)


def _refuse_unwritable(path: Path) -> None:
    """Raise the error opening path to write it meets, where its mode allows it (an immutable file: Operation not
    permitted), with what lets it be written; nothing where it opens after all."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)))
    except OSError as exc:
        quoted = shlex.quote(str(path))
        how = f"`lsattr {quoted}` shows whether it is immutable or append-only, which `chattr -i -a {quoted}` as " \
            "root undoes" if exc.errno == errno.EPERM else "check its permissions (`getfacl` shows those of an ACL)"
        raise LocalgenError(f"could not write {path}: {os_reason(exc)}", hint=f"it is kept as it is; {how}") from None


def kept_mode(info: os.stat_result) -> int:
    """The permission bits a file written in place of one (info), or as its copy (a moved conversation), takes from
    it: no set-id or sticky bit, and, from another user's (a `sudo localgen` writing the user's file, or the user's
    writing one sudo left), no write for its group or others, which the new owner never gave."""
    bits = stat.S_IMODE(info.st_mode) & 0o777
    return bits if _euid() in (info.st_uid, None) else bits & ~0o022


def _on_read_only_mount(path: Path) -> bool:
    """Whether path is on a file system mounted read-only (False where that cannot be told)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # (AttributeError: no statvfs, Windows)
        return False


def _euid() -> int | None:
    """This process's effective user id (None where the system has none: Windows)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


_EFFECTIVE_IDS = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
_CAP_FOWNER = 3  # the capability that lets a process replace any file in a sticky folder (root's, unless dropped)


def _folder_status(path: Path) -> os.stat_result | None:
    """The status of the folder holding path; None where it cannot be looked at."""
    try:
        return os.stat(path.parent)
    except OSError:
        return None


def _may_replace_in_sticky(info: os.stat_result, folder: os.stat_result) -> bool:
    """Whether this process may replace a file (info) in a sticky folder (folder): as the owner of either, or with
    CAP_FOWNER (root's, unless it was dropped)."""
    uid = _euid()
    return uid in (info.st_uid, folder.st_uid) or (uid == 0 and _has_capability(_CAP_FOWNER))


def _has_capability(number: int) -> bool:
    """Whether this process holds the Linux capability number in its effective set (True where that cannot be read:
    root elsewhere holds every one)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            line = next((line for line in status if line.startswith("CapEff:")), None)
    except OSError:
        return True
    return line is None or bool(int(line.split()[1], 16) >> number & 1)


def keep_group(fd: int, group: int | None) -> None:
    """Give the file open as fd the group of the file it replaces (None: none to keep), where this process may (a
    group it is in, or as root): where it may not, it keeps the process's."""
    if group is not None and hasattr(os, "fchown"):
        with contextlib.suppress(PermissionError):
            os.fchown(fd, -1, group)
