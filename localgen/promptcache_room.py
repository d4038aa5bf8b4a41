"""Whether a cached prompt's state fits in the memory a limit leaves (`ulimit -d`, `ulimit -v`): where it does not,
the prompt is read without it, said in one line on stderr, and the answer is the same, only slower."""

from __future__ import annotations

from typing import BinaryIO

from localgen.memory_limits import NEAR_THE_LIMIT_BYTES, MemoryRoom, limit_short_of, memory_limit_words
from localgen.promptcache_format import DamagedEntryError
from localgen.units import binary_size


def room_for_state(size: int) -> bool:
    """Whether the memory limits set leave room for a cached prompt's state of size bytes and NEAR_THE_LIMIT_BYTES
    besides (True where none is set, or /proc does not tell)."""
    return limit_short_of(size) is None


def read_state(handle: BinaryIO, size: int) -> bytearray | None:
    """The cached prompt's state of size bytes read from handle; None where the memory limits set leave no room for it
    and NEAR_THE_LIMIT_BYTES besides, or its allocation fails (said: say_unrestored); DamagedEntryError where the file
    holds less."""
    short = limit_short_of(size)
    if short is not None:
        say_unrestored(size, short)
        return None
    try:
        state = bytearray(size)
    except MemoryError:  # more was mapped than /proc told of
        say_unrestored(size)
        return None
    if handle.readinto(state) != size:
        raise DamagedEntryError("the state is cut short")
    return state


def say_unrestored(size: int, room: MemoryRoom | None = None) -> None:
    """Say on stderr that a cached prompt's state of size bytes did not fit in memory (room: the limit that leaves too
    little for it and NEAR_THE_LIMIT_BYTES besides, where it is known), so the prompt is read as if none were
    cached."""
    from localgen import console

    if room is not None:
        why = (f"needs {room.needs(size + NEAR_THE_LIMIT_BYTES)} with what else a run maps, and {room.leaves()}")
    else:
        why = f"did not fit in memory ({memory_limit_words() or 'the memory left'})"
    console.say(f"localgen: the cached prompt's state ({binary_size(size)}) {why}: reading the prompt without it")
