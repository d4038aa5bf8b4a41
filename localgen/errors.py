"""User-facing errors: every failure a user can cause or meet is one of these."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TypeVar

from localgen.links import FILE_LINK_HINT, broken_link_behind

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})  # no space, or over the user's quota
SIZE_LIMITS = "(`ulimit -f`, or the file system's: 4 GiB on FAT32)"  # what limits a file's size (EFBIG)
UNWRITABLE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})  # permissions (PermissionError), read-only

AnyLocalgenError = TypeVar("AnyLocalgenError", bound="LocalgenError")


class LocalgenError(Exception):
    """A failure with a one-line message, a hint for what to do next, and an exit code."""

    exit_code: int = EXIT_RUNTIME

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def copied(self: AnyLocalgenError) -> AnyLocalgenError:
        """A fresh copy of the error (its kind, message, exit code and fields), which a caller may add to alone."""
        other = type(self).__new__(type(self), *self.args)
        other.__dict__.update(self.__dict__)
        return other

    def with_hint(self: AnyLocalgenError, hint: str | None) -> AnyLocalgenError:
        """The same error (its kind, message, exit code and fields) with another hint."""
        other = self.copied()
        other.hint = hint
        return other


class UsageError(LocalgenError):
    """Bad command-line arguments or input."""

    exit_code = EXIT_USAGE


class ContextSizeError(UsageError):
    """A context size beyond what the model was trained for (maximum: that size)."""

    def __init__(self, requested: int, maximum: int) -> None:
        super().__init__(f"--ctx-size {requested} is beyond the model's maximum of {maximum:,}",
                         hint=f"use --ctx-size {maximum} or less")
        self.maximum = maximum


class UnbalancedQuoteError(UsageError):
    """A slash command's argument with a quote left open (usage: the command as /help writes it; more: what the hint
    adds for that command)."""

    def __init__(self, usage: str, more: str = "") -> None:
        super().__init__(f"unbalanced quote in {usage}", hint="close the quote, or drop the quotes" + more)


class MemoryMarginError(LocalgenError):
    """A message refused where a memory limit leaves less than what any batch maps beside its own: only a higher
    limit lets it be answered."""


class ModelNotFoundError(LocalgenError):
    """A model reference that resolves to nothing."""


class ModelLoadError(LocalgenError):
    """llama.cpp could not load a model file."""


class EngineLibraryError(LocalgenError):
    """llama-cpp-python, or the llama.cpp library it ships, that cannot be loaded (a broken or mismatched install)."""


class InsufficientMemoryError(ModelLoadError):
    """A model that cannot fit in this machine's memory (said before downloading or loading it)."""

    def __init__(self, message: str, hint: str | None = None, *, needed_bytes: int = 0, usable_bytes: int = 0,
                 n_ctx: int = 0, short: str | None = None) -> None:
        super().__init__(message, hint)
        self.needed_bytes = needed_bytes
        self.usable_bytes = usable_bytes
        self.n_ctx = n_ctx
        self.short = short or message  # a table cell: 'needs 1.2 GiB RAM at 2,048 ctx'


class GGUFError(LocalgenError):
    """A GGUF file that is malformed, truncated or hostile."""


class GGUFUnreadableError(GGUFError):
    """A file that could not be read (gone, permissions, an I/O error, too little memory), whatever it holds."""


class NotGGUFError(GGUFError):
    """A file that holds no GGUF at all: empty, text, a web page, safetensors."""


def is_files_own_refusal(exc: Exception) -> bool:
    """Whether an error reading a GGUF header is the file's own, which the same version of it gives again: not one
    that it could not be read (a permission, too little memory: neither changes its version)."""
    return isinstance(exc, GGUFError) and not isinstance(exc, GGUFUnreadableError)


class TemplateError(LocalgenError):
    """A chat template that failed to render."""


class ContextOverflowError(LocalgenError):
    """A prompt that does not fit in the context window."""


def beyond_the_model(tokens: int, maximum: int, made_of: str = "", *, at_least: bool = False,
                     kept: int = 1) -> ContextOverflowError:
    """The error for a prompt of tokens (at_least: counted by its size, part of it maybe unread, as of a pipe that
    goes on) that the model's maximum context cannot hold with room for an answer, kept tokens of it (a chat's), one
    by default (made_of: what it holds, 'with -f a.txt and the prompt'): where the prompt fits the maximum but not
    with the answer's room, that is what is said."""
    hint = "shorten the input, or split it and ask about each part"
    made_of = f" {made_of}" if made_of else ""
    if answer_room_passes(tokens, maximum, at_least=at_least, kept=kept):
        return ContextOverflowError(f"the prompt and the {kept:,} tokens kept for the answer pass the model's maximum "
                                    f"of {maximum:,} tokens: the prompt takes {tokens:,} tokens{made_of}", hint=hint)
    room = ", which leaves no room for an answer" if tokens <= maximum and not at_least else ""
    return ContextOverflowError(f"the prompt is too long for the model's maximum of {maximum:,} tokens: it takes "
                                f"{'at least ' if at_least else ''}{tokens:,} tokens{made_of}{room}", hint=hint)


def answer_room_passes(tokens: int, maximum: int, *, at_least: bool = False, kept: int = 1) -> bool:
    """Whether a prompt of tokens (at_least: or more) fits the model's maximum context with room for a token of an
    answer, but not with the kept tokens for it: a shorter answer makes it fit."""
    return not at_least and kept > 1 and tokens + 1 < maximum


class HubError(LocalgenError):
    """A failure talking to the Hugging Face Hub or its cache."""


class ConfigError(LocalgenError):
    """A configuration file that cannot be read."""


def internal_error_text(exc: BaseException) -> str:
    """The one-line message for an unexpected exception: its class name and text."""
    return f"internal error: {type(exc).__name__}: {exc}"


def os_reason(exc: OSError) -> str:
    """Why a file operation failed, as a message says it: the OS's words ("Permission denied"), else the error's."""
    return exc.strerror or str(exc)


def read_failure(path: str | os.PathLike[str], exc: OSError, hint: str | None = None) -> LocalgenError:
    """The error for a file that could not be read: `cannot read PATH: REASON`, where path is a link that leads to
    nothing (into a loop of links, say) `cannot read PATH: it is a link to TARGET, which ...`, with the hint for it."""
    broken = broken_link_behind(Path(path), exc)
    if broken is not None:
        return LocalgenError(f"cannot read {path}: it is {broken}", hint=FILE_LINK_HINT)
    return LocalgenError(f"cannot read {path}: {os_reason(exc)}", hint=hint)
