"""Reading what the user sends: files given with -f and text piped on stdin."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn, Protocol

from localgen.console import pipe_or_socket
from localgen.descriptor_reader import DescriptorReader
from localgen.errors import UsageError, os_reason
from localgen.input_streams import refuse_unreadable_stream
from localgen.input_text import (
    DOCUMENT_HINT,
    SizeCap,
    TextBound,
    decode_input,
    plain_newlines,
    refuse_binary,
    typed_at_a_terminal,
)
from localgen.line_ends import end_typed_line
from localgen.stdin_names import (
    PROMPT_READER,
    STDIN_NAME,
    UNASKED_STDIN,
    names_stdin,
    nohup_stdin,
    nohup_stdin_unread,
    own_descriptor,
    stdin_reader_name,
)
from localgen.typed_paths import (
    FILE_OPTION,
    dangling_link_refusal,
    file_identity,
    is_existing_file,
    option_path,
    short_path,
)

MAX_INPUT_BYTES = 256 * 1024 * 1024
_LINE_ENDS_AT_END = re.compile(r"(\r?\n)+\Z")
BINARY_SNIFF_BYTES = 64 * 1024  # binary input is told from its first block
STDIN_QUIET_S = 2.0  # a pipe silent this long gets a note that localgen waits for it


class Waiting(Protocol):
    """Told that a read waits: on a pipe, or (terminal) on what is typed at a terminal given as a file."""

    def __call__(self, name: str | None, option: str, *, terminal: bool = False) -> None:
        """name: the file as typed (None: stdin); option: the option that gave it."""


def read_file_input(path: Path, warnings: list[str], *, option: str = FILE_OPTION,
                    binary_hint: str = DOCUMENT_HINT, waiting: Callable[[], None] | None = None,
                    shown: str | None = None, terminal: Callable[[], None] | None = None,
                    bound: TextBound | None = None, cap: SizeCap | None = None) -> str:
    """Read a text file named with option, with clear errors for missing, directory or unreadable paths, naming it
    as shown (the path as typed; else path); waiting is called once when the file is a pipe that keeps quiet for
    STDIN_QUIET_S seconds (no writer yet, say), terminal before a terminal (/dev/tty) is read; bound stops the
    read of a text too long for its use, cap (else a document's) of one too large for the option (_bounded_read)."""
    name = short_path(shown or path)
    try:
        with _open_noting(path, waiting, terminal) as reader:
            data = _bounded_read(reader, name, binary_hint, "send a smaller file", bound, cap)
            end_typed_line(reader, data)
            typed = reader.isatty()
    except OSError as exc:
        raise _unreadable(path, name, option, exc) from None
    text = decode_input(data, name, warnings, binary_hint=binary_hint)
    return typed_at_a_terminal(text, warnings) if typed else text


def check_file_path(path: Path, option: str = FILE_OPTION, *, shown: str | None = None,
                    binary_hint: str = DOCUMENT_HINT, cap: SizeCap | None = None) -> None:
    """Refuse a path given to option that cannot be a file to read (missing, a directory, a file over the size
    bound, cap where given...) without reading it (but for an oversized file's first block), so that a bad one is named
    (as shown, the path as typed; else path) before a pipe among the others is waited for."""
    name = short_path(shown or path)
    try:
        status = path.stat()
    except OSError as exc:
        if own_descriptor(str(path)) == 0 and isinstance(exc, FileNotFoundError) and not _is_open(0):
            raise stdin_closed(name, option) from None
        raise _unreadable(path, name, option, exc) from None
    mode = status.st_mode
    if stat.S_ISREG(mode) and status.st_size > (MAX_INPUT_BYTES if cap is None else cap.size):  # not read through
        _refuse_oversized(path, name, option, binary_hint, cap)
    if stat.S_ISDIR(mode):
        raise _unreadable(path, name, option, IsADirectoryError(errno.EISDIR, "Is a directory"))
    refuse_unreadable_stream(status, name, option)
    if not os.access(path, os.R_OK):
        raise _unreadable(path, name, option, PermissionError(errno.EACCES, "Permission denied"))


def stdin_closed(name: str, option: str | None = None) -> UsageError:
    """The error for stdin asked for (as '-', or by a name such as /dev/stdin given to option) when it is closed
    (<&-)."""
    return UsageError(f"stdin is closed, so {name} has nothing to read",
                      hint=f"pipe text in, or drop {option} {name}" if option else f"pipe text in, or drop the {name}")


def _is_open(fd: int) -> bool:
    """Whether a file descriptor is open."""
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _refuse_oversized(path: Path, name: str, option: str, binary_hint: str, cap: SizeCap | None) -> NoReturn:
    """Refuse a regular file over MAX_INPUT_BYTES (over cap, where given): as binary data where its first block says
    so (a model, a video), as reading it would, else by its size (opening a regular file does not wait)."""
    try:
        with path.open("rb") as handle:
            refuse_binary(handle.read(BINARY_SNIFF_BYTES), name, binary_hint)
    except OSError as exc:
        raise _unreadable(path, name, option, exc) from None
    if cap is not None:
        raise cap.refusal(name)
    raise UsageError(f"{name} is larger than {MAX_INPUT_BYTES // 2**20} MiB", hint="send a smaller file")


def _unreadable(path: Path, name: str, option: str, exc: OSError) -> UsageError:
    """The error for a file at path, named with option, that cannot be opened or read, called name in it: a missing
    one that is a link to nothing (its target missing, a loop of links, a path through a file) is named so
    (dangling_link_refusal), checked or read (deleted in between)."""
    link = dangling_link_refusal(path, name, option) if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR) \
        else None
    if link is not None:
        return link
    if isinstance(exc, FileNotFoundError):
        return UsageError(f"no such file: {name}", hint=f"check the path given to {option}")
    if isinstance(exc, IsADirectoryError):
        return UsageError(f"{name} is a directory", hint=f"pass a file to {option}")
    if exc.errno in (errno.ENAMETOOLONG, errno.ENOTDIR):  # f.txt/x: a file where a folder goes
        hint = f"check the path given to {option}"
    elif exc.errno == errno.ELOOP:  # a link that leads back to itself: no file to pass, nor a pipe
        hint = f"check the symbolic links in the path given to {option}"
    elif isinstance(exc, PermissionError):
        hint = "check the file's permissions"
    else:  # a device that cannot be read (/dev/tty without a terminal, /proc/self/mem)
        hint = f"pass a file or a pipe to {option}"
    return UsageError(f"cannot read {name}: {os_reason(exc)}", hint=hint)


@contextlib.contextmanager
def _open_noting(path: Path, waiting: Callable[[], None] | None,
                 terminal: Callable[[], None] | None = None) -> Iterator[BinaryIO | DescriptorReader]:
    """A reader of path: for a pipe, one that calls waiting once when no writer opens it, or the writer keeps quiet,
    for STDIN_QUIET_S seconds; for a terminal, one that calls terminal first (it waits for what is typed)."""
    if waiting is None or not stat.S_ISFIFO(path.stat().st_mode):
        with path.open("rb") as handle:
            if terminal is not None and handle.isatty():
                terminal()
            yield handle
        return
    once = _Once(waiting)
    timer = threading.Timer(STDIN_QUIET_S, once)  # opening a pipe waits for its writer
    timer.daemon = True
    timer.start()
    try:
        handle = path.open("rb")
    finally:
        timer.cancel()
        timer.join()  # a note already being said ends before the reading starts
    with handle:
        yield DescriptorReader.of(handle, once, STDIN_QUIET_S)


class _Once:
    """A callable that calls a function on its first call only (the timer's, then the reader's: never at once)."""

    def __init__(self, function: Callable[[], None]) -> None:
        self._function: Callable[[], None] | None = function

    def __call__(self) -> None:
        function, self._function = self._function, None
        if function is not None:
            function()


@dataclass(frozen=True)
class InputFile:
    """A file given to an option (-f, --system-file, --grammar...), or stdin where the option reads "-": checked when
    made (check_file_path) and read later, so that every file a command is given is checked before a pipe among them
    is waited for."""

    option: str
    path: Path | None = None  # None: stdin
    typed: str | None = None  # the path as the user typed it, as messages name it (Path drops a leading ./); stdin's
    # where a name stood for it (/dev/stdin)
    cap: SizeCap | None = None  # a size cap lower than a document's (a grammar's, schema's or template's file)

    @classmethod
    def checked(cls, name: str, option: str, *, stdin: bool = False, binary_hint: str = DOCUMENT_HINT,
                cap: SizeCap | None = None) -> InputFile:
        """The file name given to option, checked (binary_hint: the hint for a binary one; cap: a lower size cap than
        a document's); with stdin, "-" stands for standard input, and so does /dev/stdin (or the like) where it is
        stdin (stdin_names.names_stdin)."""
        if stdin and names_stdin(name):
            return cls(option, typed=None if name == STDIN_NAME else name)
        path = option_path(name, option)
        check_file_path(path, option, shown=name, binary_hint=binary_hint, cap=cap)
        return cls(option, path, name, cap)

    @property
    def name(self) -> str:
        """The file as messages name it: as typed."""
        return "stdin" if self.path is None else short_path(self.typed or self.path)

    def read(self, stdin: BinaryIO | None, warnings: list[str], *, binary_hint: str = DOCUMENT_HINT,
             warn_empty: bool = False, waiting: Waiting | None = None, bound: TextBound | None = None) -> str:
        """The text of the file (read_file_input), or of stdin (read_stdin_input, even from a terminal); waiting is
        told when it is a pipe that keeps quiet for STDIN_QUIET_S seconds, or a terminal given by name (/dev/tty);
        with warn_empty, an empty one is warned about; bound stops the read of a text too long for its use."""
        told = None
        if waiting is not None:  # stdin named by what reads it (-f -), a file by its name and option
            told = functools.partial(waiting, None, stdin_reader_name(self.option, self.typed)) if self.path is None \
                else functools.partial(waiting, self.name, self.option)
        if self.path is None:
            text = read_stdin_input(stdin, warnings, asked=True, asked_by=self.option, waiting=told, bound=bound) or ""
        else:
            typed = None if waiting is None else lambda: waiting(self.name, self.option, terminal=True)
            text = read_file_input(self.path, warnings, option=self.option, binary_hint=binary_hint, waiting=told,
                                   shown=self.typed, terminal=typed, bound=bound, cap=self.cap)
        if warn_empty and not text.strip():
            warnings.append(f"{self.name} {emptiness(text)}")
        return text


def emptiness(text: str) -> str:
    """How a text with nothing to read in it is empty: "is empty", or "holds only whitespace"."""
    return "is empty" if not text else "holds only whitespace"


def empty_attachment_note(file: InputFile, text: str) -> str:
    """What is said of an attached file with nothing in it: "a.txt is empty", "stdin (-f -) holds only whitespace"."""
    name = file.name if file.path is not None else f"stdin (-f {file.typed or STDIN_NAME})"
    return f"{name} {emptiness(text)}"


def attachment_text(path: Path, warnings: list[str], *, option: str = FILE_OPTION, typed: str | None = None) -> str:
    """The text of a file attached to a message (named as typed), with a warning when it is empty."""
    return InputFile(option, path, typed).read(None, warnings, warn_empty=True)


def system_prompt_text(text: str, *, exact: bool = False) -> str:
    """A system prompt read from a file: Windows line ends (CRLF) as plain newlines, as in attachments, and without
    the newlines it ends with (as `-s "$(cat FILE)"` gives it); exact (--raw) keeps its line ends, less those it ends
    with."""
    return _LINE_ENDS_AT_END.sub("", text) if exact else plain_newlines(text).rstrip("\n")


def refuse_special_file(path: Path, typed: str | None = None, *, pipes: bool = False) -> None:
    """Refuse, by its type and unopened, a path (named as typed) that is no file to attach: a device (a terminal, or
    /dev/kmsg, waits on input; /dev/null holds none), a socket, or unless pipes, a pipe (waits on its writer).
    Anything else is left for read_file_input. (Linux's terminals: ttyN and ttySN, /dev/tty, ptys.)"""
    try:
        status = path.stat()
    except (OSError, ValueError):
        return
    mode, kind, hint = status.st_mode, "a device", "attach a file, or paste the text"
    if stat.S_ISCHR(mode) and sys.platform == "linux" and os.major(status.st_rdev) in {4, 5, *range(136, 144)}:
        kind, hint = "a terminal", "type or paste the text as a message"
    elif pipe_or_socket(mode):
        if pipes and stat.S_ISFIFO(mode):
            return
        kind = "a pipe" if stat.S_ISFIFO(mode) else "a socket"
    elif not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
        return
    raise UsageError(f"{short_path(typed or path)} is {kind}, not a file", hint=hint)


def names_a_file(text: str) -> bool:
    """Whether a text given as such (a prompt, a system prompt) is just the name of an existing file, meant to be read
    (`localgen run notes.md`, meant as -f notes.md)."""
    return not any(c.isspace() for c in text) and is_existing_file(text)


def file_name_warning(what: str, text: str, option: str) -> str:
    """The warning for a text (what: "the prompt") that names a file (names_a_file), with the option that reads it."""
    import shlex

    return (f"{what} is the text {text!r}, the name of a file, not what it holds "
            f"(for that: {option} {shlex.quote(text)})")


def read_stdin_input(stream: BinaryIO | None, warnings: list[str], *, asked: bool = False,
                     asked_by: str | None = None, waiting: Callable[[], None] | None = None,
                     bound: TextBound | None = None) -> str | None:
    """Piped stdin as text, or None when stdin is a terminal (unless asked for with "-", by the option asked_by
    where one gave it) or absent.

    waiting is called when a pipe has sent nothing for a while (`sleep 60 | localgen run ...` would look hung);
    bound stops the read of a text too long for its use (_bounded_read).
    """
    if stream is None and asked:
        raise stdin_closed(f"'{STDIN_NAME}'", asked_by)
    if asked and stream is not None and nohup_stdin(stream):
        raise nohup_stdin_unread(asked_by)
    if stream is None or (stream.isatty() and not asked) or (not asked and nohup_stdin(stream)):
        return None
    quiet = None if stream.isatty() else waiting  # a terminal's wait is said before it is read
    try:
        data = _bounded_read(DescriptorReader.of(stream, quiet, STDIN_QUIET_S), "stdin", DOCUMENT_HINT,
                             "send less text", bound)
    except OSError as exc:  # a stdin opened for writing only (0>FILE), say
        raise UsageError(f"cannot read stdin: {os_reason(exc)}",
                         hint="pipe text in, or give the prompt alone with </dev/null") from None
    end_typed_line(stream, data)
    text = decode_input(data, "stdin", warnings)
    return typed_at_a_terminal(text, warnings) if stream.isatty() else text


def _bounded_read(stream: BinaryIO | DescriptorReader, source: str, binary_hint: str, smaller_hint: str,
                  bound: TextBound | None = None, cap: SizeCap | None = None) -> bytes:
    """All of stream, refused when larger than MAX_INPUT_BYTES, or cap where given (read to one byte more), or
    binary: binary data is told from its first block, not after reading the whole bound (/dev/urandom); with bound,
    also once its text is certainly too long for where it goes (`yes |`), as soon as that many bytes are read."""
    most = MAX_INPUT_BYTES if cap is None else cap.size
    data = stream.read(BINARY_SNIFF_BYTES)
    refuse_binary(data, source, binary_hint)
    parts, size = [data], len(data)
    check_at = most + 1 if bound is None else bound.check(data)
    while BINARY_SNIFF_BYTES <= size <= most:  # a shorter first block was all there was
        wanted = min(check_at, most + 1) - size
        parts.append(stream.read(wanted))
        size += len(parts[-1])
        if len(parts[-1]) < wanted:  # the end of the stream
            break
        if bound is not None and size >= check_at:
            check_at = bound.check(b"".join(parts))
    data = b"".join(parts)  # no copy of a single part
    if len(data) > most and cap is not None:
        raise cap.refusal(source)
    if len(data) > most:
        raise UsageError(f"{source} is larger than {MAX_INPUT_BYTES // 2**20} MiB", hint=smaller_hint)
    return data


def attachment_files(names: Sequence[str]) -> list[InputFile]:
    """The -f files as given, each checked ("-" is stdin)."""
    return [InputFile.checked(name, FILE_OPTION, stdin=True) for name in names]


def reads_a_device(files: Iterable[InputFile]) -> bool:
    """Whether one of these files is a character device: a terminal (/dev/tty, read as typed until Ctrl-D), or
    another such as /dev/null."""
    for file in files:
        with contextlib.suppress(OSError):
            if file.path is not None and stat.S_ISCHR(file.path.stat().st_mode):
                return True
    return False


def reads_a_pipe(files: Iterable[InputFile], stdin: BinaryIO | None) -> bool:
    """Whether reading piped stdin, or one of these files, may wait on a pipe's writer (a FIFO or a socket)."""
    with contextlib.suppress(OSError, ValueError):
        if stdin is not None and not stdin.isatty() and pipe_or_socket(os.fstat(stdin.fileno()).st_mode):
            return True
    for file in files:
        with contextlib.suppress(OSError):
            if file.path is not None and pipe_or_socket(file.path.stat().st_mode):
                return True
    return False


def read_attachments(files: Sequence[InputFile], stdin: BinaryIO | None, warnings: list[str], *,
                     stdin_asked: bool = False, waiting: Waiting | None = None, bound: TextBound | None = None,
                     made_of: Callable[[list[InputFile], bool], str] | None = None) -> list[str]:
    """The texts of the -f files, stdin's where the first "-" stands among them, else last.

    Stdin is read when it is piped, or asked for (a "-" among the files, or stdin_asked: a prompt of "-"), then even
    from a terminal. The named files are read first, so that a bad one is refused before stdin is waited for. bound
    refuses their texts together as they are read, once they are certainly too long for the model, naming what
    made_of(files, piped stdin) says for the files read by then that held text and the one being read.
    """
    stdin_at = next((index for index, file in enumerate(files) if file.path is None), None)
    texts: list[str] = []
    read: list[InputFile] = []  # the files read whose text counts, as a refusal names them

    def step(reading: list[InputFile], piped: bool) -> TextBound | None:
        counted = bound and bound.beside(*dict.fromkeys(texts))  # a text given twice is in the prompt once
        return counted.named(made_of(reading, piped)) if counted and made_of else counted

    by_identity: dict[object, str] = {}  # a file given twice, by any name, is read once (a pipe could not be again)
    for file in (file for file in files if file.path is not None):
        identity = file_identity(file.path)
        if identity in by_identity:
            texts.append(by_identity[identity])
            continue
        said: list[str] = []
        texts.append(file.read(stdin, said, warn_empty=True, waiting=waiting, bound=step([*read, file], False)))
        by_identity[identity] = texts[-1]
        warnings.extend(warning for warning in said if warning not in warnings)  # a file given twice: warned once
        read += [file] if texts[-1].strip() and texts[-1] not in texts[:-1] else []
    asker = PROMPT_READER if stdin_asked else UNASKED_STDIN
    if stdin_at is not None:
        asker = stdin_reader_name(files[stdin_at].option, files[stdin_at].typed)
    told = None if waiting is None else lambda: waiting(None, asker)
    reading = read if stdin_at is None else sorted([*read, files[stdin_at]], key=files.index)  # -f - as a file
    piped = read_stdin_input(stdin, warnings, asked=stdin_asked or stdin_at is not None, waiting=told,
                             asked_by=None if stdin_at is None else files[stdin_at].option,
                             bound=step(reading, stdin_at is None))
    if piped is not None and stdin_at is not None and not piped.strip():  # -f - attaches it, as a file: warned alike
        warnings.append(empty_attachment_note(files[stdin_at], piped))
    if piped is not None:
        texts.insert(len(texts) if stdin_at is None else stdin_at, piped)
    return texts

