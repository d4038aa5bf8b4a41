"""A model file's header errors named as the user gave the file: by the path typed, or by its models.toml entry."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import GGUFError
from localgen.inputs import short_path

if TYPE_CHECKING:
    from localgen.registry import ModelSpec


@contextlib.contextmanager
def named_as_typed(model: str | None) -> Iterator[None]:
    """Name a local model file given by path as typed in the header errors met within (they name the file alone:
    `-m ./notes/README.md` is not 'README.md: not a GGUF file'), and a models.toml entry's own file (path =) by its
    path and the entry; without a model, the default's errors say which setting gives it too."""
    try:
        yield
    except GGUFError as exc:
        from localgen.registry import own_file_entry_for

        entry = own_file_entry_for(model)
        named = exc if entry is None else entry_file_error(exc, entry)
        if model is None:
            from localgen.default_model import blamed_on_default

            raise blamed_on_default(named) from exc
        if named is not exc:
            raise named from exc
        if model == os.path.basename(model) or not os.path.isfile(os.path.expanduser(model)):
            raise
        raise type(exc)(with_path_named(exc.message, model), hint=exc.hint, exit_code=exc.exit_code) from exc


def with_path_named(message: str, path: Path | str) -> str:
    """A header error's message, which names the file by its base name, naming it by path instead (the message as
    it is where it does not start with that name)."""
    name = os.path.basename(path)
    return f"{short_path(path)}{message[len(name):]}" if message.startswith(f"{name}: ") else message


def entry_file_error(exc: GGUFError, spec: ModelSpec) -> GGUFError:
    """A header error met in the file an entry names (path =), naming that file by its path and the entry, as the
    error for a missing file does."""
    assert spec.path is not None
    return type(exc)(f"{with_path_named(exc.message, spec.path)} ({spec.origin})", hint=exc.hint,
                     exit_code=exc.exit_code)
