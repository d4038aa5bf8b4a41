"""Warnings said once in a process, however often what they warn of recurs (a chat loads a model again on /model)."""

from __future__ import annotations

_SAID: set[str] = set()


def first_time(message: str | None) -> str | None:
    """message the first time this process asks for it, else None (and None for None)."""
    if message is None or message in _SAID:
        return None
    _SAID.add(message)
    return message
