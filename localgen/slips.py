"""What a name typed with a slip of the keyboard (temprature), or in another tool's words (num_ctx), stands for: one
guess for a models.toml key and a chat's /set setting alike; and whether a file or repo name is a slip for another."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SLIP_CUTOFF = 0.7  # difflib similarity a slip's name keeps to the one meant
NAME_SUGGESTIONS = 3  # the names an unknown name's hint offers at most
SUGGESTION_SPREAD = 0.15  # how much less alike than the likest name another may be and still be offered


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


def close_names(typed: str, names: list[str], *, cutoff: float = 0.5) -> list[str]:
    """The names an unknown name (a model's, a conversation's) may have meant: those it begins, in any case (phi:
    phi3.5-mini, phi4-mini; meet: meeting-notes-2026), then the likest by spelling, at least cutoff alike, and those
    nearly as alike (smollm2-135 is not offered llama3.2-3b beside smollm2-135m)."""
    import difflib

    begun = [name for name in names if len(typed) >= 2 and name.casefold().startswith(typed.casefold())]
    matcher = difflib.SequenceMatcher(b=typed)
    alike = []
    for name in names:
        matcher.set_seq1(name)
        alike.append((matcher.ratio(), name))
    best = max((ratio for ratio, _ in alike), default=0.0)
    spelled = [name for ratio, name in sorted(alike, key=lambda pair: -pair[0])
               if ratio >= max(cutoff, best - SUGGESTION_SPREAD)]
    return list(dict.fromkeys(begun + spelled))[:NAME_SUGGESTIONS]


def did_you_mean(typed: str, known: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """'did you mean NAME? ' for the name a typed one stands for (meant_name), '' when none is near."""
    meant = meant_name(typed, known, aliases)
    return f"did you mean {meant}? " if meant else ""


def misspells(typed: str, name: str) -> bool:
    """Whether a typed name (a file's, a repo's) is a slip for name: alike with case folded and separators dropped,
    or one or two letters apart with the same numbers (Q4_K_S for Q4_K_M; not Q8_0 for Q4_1, nor 7b for 1B)."""
    def key(text: str) -> str:
        return re.sub(r"[-_. ]", "", text.casefold())

    typed_key, name_key = key(typed), key(name)
    if typed_key == name_key:
        return True
    return re.findall(r"\d+", typed_key) == re.findall(r"\d+", name_key) and edit_distance(typed_key, name_key) <= 2


def edit_distance(first: str, second: str) -> int:
    """The number of letters to insert, delete or change to turn first into second (Levenshtein)."""
    previous = list(range(len(second) + 1))
    for row, letter in enumerate(first, 1):
        current = [row]
        for column, other in enumerate(second, 1):
            current.append(min(previous[column] + 1, current[column - 1] + 1,
                               previous[column - 1] + (letter != other)))
        previous = current
    return previous[-1]
