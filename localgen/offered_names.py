"""The names Tab offers, one list for the shell's completion and the chat's: the models -m and /model take, and the
saved conversations --resume, --conversation and /load take."""

from __future__ import annotations

from collections.abc import Iterable


def models_offered(*, offline: bool) -> list[tuple[str, bool]]:
    """The models `models list --all` lists, by name, with whether each is downloaded: offline, the downloaded ones
    alone (nothing else can run); none where they cannot be listed (a broken models.toml: a run says why)."""
    from localgen.catalog import list_all_models
    from localgen.config import settings
    from localgen.registry import load_registry

    try:
        rows = list_all_models(load_registry(settings().user_registry))
    except Exception:  # a completion offers nothing rather than fail
        return []
    return sorted((row.name, row.downloaded) for row in rows if row.downloaded or not offline)


def conversations_offered() -> list[str]:
    """The saved conversations' names, newest first (none where their folder cannot be listed: a link to itself)."""
    from localgen.conversation_store import list_conversations

    try:
        return [name for name, _ in list_conversations()]
    except Exception:  # a completion offers nothing rather than fail
        return []


def starting_with(names: Iterable[str], typed: str) -> list[str]:
    """The names that start with typed, in any case (a model's name and quant are read so: smollm2-135m:q is
    smollm2-135m:Q8_0's start)."""
    return [name for name in names if name.lower().startswith(typed.lower())]
