"""A model file's header errors named as the user gave the file: by the path typed, or by its models.toml entry."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from localgen.errors import GGUFError
from localgen.inputs import short_path


@contextlib.contextmanager
def named_as_typed(model: str | None) -> Iterator[None]:
    """Name a local model file given by path as typed in the header errors met within (they name the file alone:
    `-m ./notes/README.md` is not 'README.md: not a GGUF file'), and a models.toml entry's own file (path =) by its
    path and the entry; without a model, the default's errors say which setting gives it."""
    try:
        yield
    except GGUFError as exc:
        from localgen.registry import blamed_on_entry, own_file_entry_for

        entry = own_file_entry_for(model)
        if entry is not None:
            raise blamed_on_entry(exc, entry) from exc
        if model is None:
            from localgen.default_model import blamed_on_default

            raise blamed_on_default(exc) from exc
        name = None if model is None else os.path.basename(model)
        if not model or model == name or not exc.message.startswith(f"{name}: ") \
                or not os.path.isfile(os.path.expanduser(model)):
            raise
        raise type(exc)(f"{short_path(model)}{exc.message[len(name):]}", hint=exc.hint,
                        exit_code=exc.exit_code) from exc
