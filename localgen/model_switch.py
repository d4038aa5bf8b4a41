"""A chat's /model: free the model in use, load another in its place, and load the first again if that fails."""

from __future__ import annotations

from collections.abc import Callable

from localgen.errors import LocalgenError
from localgen.runner import LoadedModel, ModelOptions, ignore_note, load_model


def load_instead(current: LoadedModel, current_options: ModelOptions, options: ModelOptions, *,
                 reloaded: Callable[[LoadedModel], None], note: Callable[[str], None] = ignore_note) -> LoadedModel:
    """Load options' model in place of current (loaded with current_options), and return it.

    note gets what loading chose or changed (the quant for ORG/REPO, a lowered context), as it happens.

    The current model is freed before the new one is planned and loaded, so the plan sees its memory (the quant for
    ORG/REPO without one is chosen before that, counting the current model's memory as free). If the load fails, the
    current model is loaded again and given to reloaded, and the error is raised; a signal that ends the program
    (SignalExit) is raised at once.
    """
    released = False

    def release() -> None:
        nonlocal released
        released = True  # first: a signal during close() must still lead to the reload
        current.close()

    try:
        held = current.plan.estimate if current.plan and current.engine.is_open else None
        return load_model(options, release=release, held=held, note=note)
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
