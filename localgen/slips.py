"""What a name typed with a slip of the keyboard (temprature), or in another tool's words (num_ctx), stands for: one
guess for a models.toml key and a chat's /set setting alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

SLIP_CUTOFF = 0.7  # difflib similarity a slip's name keeps to the one meant


def meant_name(typed: str, known: Iterable[str], aliases: Mapping[str, str] | None = None) -> str | None:
    """The known name a typed one stands for: another tool's word for it (aliases, read in snake case), else the
    closest by a slip of the keyboard; None when none is near."""
    import difflib

    names = list(known)
    alias = (aliases or {}).get(typed.lower().replace("-", "_"))
    if alias in names:
        return alias
    close = difflib.get_close_matches(typed.lower(), names, n=1, cutoff=SLIP_CUTOFF)
    return close[0] if close else None


def did_you_mean(typed: str, known: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """'did you mean NAME? ' for the name a typed one stands for (meant_name), '' when none is near."""
    meant = meant_name(typed, known, aliases)
    return f"did you mean {meant}? " if meant else ""
