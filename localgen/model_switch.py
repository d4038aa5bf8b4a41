"""A chat's /model: free the model in use, load another in its place, and load the first again if that fails."""

from __future__ import annotations

import os
from collections.abc import Callable

from localgen.errors import LocalgenError
from localgen.resolve import ResolvedModel, resolve_model
from localgen.runner import LoadedModel, ModelOptions, ignore_note, load_model


class AlreadyLoaded(Exception):
    """The model asked for is the one in use (is_loaded): nothing was loaded."""


def load_instead(current: LoadedModel, current_options: ModelOptions, options: ModelOptions, *,
                 reloaded: Callable[[LoadedModel], None], note: Callable[[str], None] = ignore_note,
                 keep_loaded: bool = False) -> LoadedModel:
    """Load options' model in place of current (loaded with current_options), and return it.

    note gets what loading chose or changed (the quant for ORG/REPO, a lowered context), as it happens.

    The current model is freed before the new one is planned and loaded, so the plan sees its memory (the quant for
    ORG/REPO without one is chosen before that, counting the current model's memory as free). If the load fails, the
    current model is loaded again and given to reloaded, and the error is raised; a signal that ends the program
    (SignalExit) is raised at once. keep_loaded: where options name current's model (is_loaded), AlreadyLoaded is
    raised before anything is freed, and current stays in use.
    """
    released = False

    def found(resolved: ResolvedModel) -> None:
        if keep_loaded and is_loaded(current, resolved):
            raise AlreadyLoaded

    def release() -> None:
        nonlocal released
        released = True  # first: a signal during close() must still lead to the reload
        current.close()

    try:
        held = current.plan.estimate if current.plan and current.engine.is_open else None
        return load_model(options, release=release, held=held, note=note, found=found)
    except BaseException as exc:
        if released and not isinstance(exc, SystemExit):  # a SIGTERM ends the chat now, without a reload
            reloaded(_reload(current_options, exc))
        raise


def _reload(options: ModelOptions, cause: BaseException) -> LoadedModel:
    """Load the current model again after a failed switch; say so when even that fails (the session then has no
    model: questions are refused until /model loads one)."""
    try:
        return load_model(options)
    except SystemExit:
        raise
    except BaseException as exc:
        what = cause.message if isinstance(cause, LocalgenError) else type(cause).__name__
        why = exc.message if isinstance(exc, LocalgenError) else type(exc).__name__
        raise LocalgenError(f"{what}; then reloading {options.model or 'the default model'} failed too "
                            f"({why}): no model is loaded", hint="/model NAME loads one") from cause


def is_loaded(current: LoadedModel, found: ResolvedModel) -> bool:
    """Whether a model found for a reference is the one loaded and open: the same file, by the same models.toml entry
    (another entry for that file brings other settings) or by none, and by the same name (a link to it is another,
    which the conversation records)."""
    loaded = current.resolved
    return current.engine.is_open and found.spec == loaded.spec and found.path == loaded.path


ModelFile = tuple[int, int] | str  # a model file's device and inode, or its real path where it cannot be looked at


def model_file(loaded: LoadedModel) -> ModelFile:
    """The file loaded's model came from, whatever it was named (a link, a models.toml entry or a path to it)."""
    return file_identity(loaded.resolved.path)


def file_identity(path: str | os.PathLike[str]) -> ModelFile:
    """A model file, whatever it is named: its device and inode, or its real path where it cannot be looked at."""
    try:
        found = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return found.st_dev, found.st_ino


def names_loaded_file(current: LoadedModel, name: str) -> bool:
    """Whether a model's name resolves, with no network and nothing downloaded, to the file current's model came from
    (an older spelling of its name, smollm2-135m:q4_1 for smollm2-135m); False where it no longer resolves."""
    try:
        found = resolve_model(name, offline=True, pull=False)
    except LocalgenError:
        return False
    return file_identity(found.path) == model_file(current)
