"""The limits on this process's memory that make an allocation fail (`ulimit -d`, `ulimit -v`), and what they leave."""

from __future__ import annotations

import errno
import resource
from dataclasses import dataclass
from pathlib import Path

from localgen.units import binary_size, binary_size_up

# `ulimit -d`, which Linux holds private writable mappings to (llama.cpp's buffers, thread stacks), and `ulimit -v`,
# which holds every mapping (the model's mapped file too); each with Linux's count of what it holds
MEMORY_LIMITS = {resource.RLIMIT_DATA: ("ulimit -d", "VmData:"), resource.RLIMIT_AS: ("ulimit -v", "VmSize:")}
NEAR_THE_LIMIT_BYTES = 8 * 1024 * 1024  # an error met with less than this left under a memory limit: memory ran out
ODD_ERRORS_OF_FAILED_ALLOCATIONS = (TypeError, AttributeError, NameError)  # what Python raises where its own fail
THREAD_STACK_BYTES = 8 * 1024 * 1024  # a thread's stack where `ulimit -s` sets none (glibc's default)


@dataclass(frozen=True)
class MemoryRoom:
    """A memory limit set on this process and what it leaves."""

    name: str  # as a shell sets it: ulimit -d
    limit: int
    free: int

    def needs(self, needed: int) -> str:
        """An amount needed that this room falls short of, rounded up so that it never reads as what leaves() says."""
        return binary_size_up(needed, above=max(self.free, 0))

    def leaves(self) -> str:
        """The limit and what it leaves, as messages say it: `ulimit -d` of 400.0 MiB leaves 39.4 MiB."""
        return f"`{self.name}` of {binary_size(self.limit)} leaves {binary_size(max(self.free, 0))}"


def data_limit() -> int | None:
    """`ulimit -d` in bytes; None where there is none."""
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def data_in_use() -> int:
    """The bytes `ulimit -d` counts as mapped by this process (Linux's VmData); OSError or ValueError where /proc does
    not tell."""
    return _in_use("VmData:")


def _in_use(field: str) -> int:
    """A size in /proc/self/status, in bytes; OSError or ValueError where /proc does not tell."""
    status = Path("/proc/self/status").read_text()
    fields = next((line.split() for line in status.splitlines() if line.startswith(field)), None)
    if fields is None or len(fields) < 2:
        raise ValueError(f"no {field} in /proc/self/status")
    return int(fields[1]) * 1024


def least_room() -> MemoryRoom | None:
    """The memory limit set on this process that leaves the least room; None where none is set; OSError or
    ValueError where /proc does not tell what is in use."""
    rooms = [MemoryRoom(name, limit, limit - _in_use(field)) for which, (name, field) in MEMORY_LIMITS.items()
             if (limit := resource.getrlimit(which)[0]) != resource.RLIM_INFINITY]
    return min(rooms, key=lambda room: room.free, default=None)


def thread_stacks_bytes(threads: int) -> int:
    """What the stacks of threads more than the main one map (`ulimit -s` sets their size)."""
    size = resource.getrlimit(resource.RLIMIT_STACK)[0]
    return max(threads - 1, 0) * (THREAD_STACK_BYTES if size == resource.RLIM_INFINITY else size)


def room_for_a_thread() -> bool:
    """Whether the memory limits set leave room for one more thread's stack and NEAR_THE_LIMIT_BYTES besides (True
    where none is set, or /proc does not tell)."""
    return limit_short_of(thread_stacks_bytes(2)) is None


def limit_short_of(size: int) -> MemoryRoom | None:
    """The memory limit set on this process that leaves less than size bytes and NEAR_THE_LIMIT_BYTES besides; None
    where each leaves room, none is set, or /proc does not tell."""
    try:
        room = least_room()
    except (OSError, ValueError):
        return None
    return room if room is not None and room.free < size + NEAR_THE_LIMIT_BYTES else None


def memory_limit_words() -> str | None:
    """The memory limits set on this process, as a hint names them (`ulimit -d` of 254.0 MiB); None where none is."""
    words = [f"`{name}` of {binary_size(limit)}" for which, (name, _field) in MEMORY_LIMITS.items()
             if (limit := resource.getrlimit(which)[0]) != resource.RLIM_INFINITY]
    return " and ".join(words) or None


def out_of_memory_hint() -> str:
    """What to do where an allocation failed: raise the limit set on this process, or ask for less memory."""
    limits = memory_limit_words()
    if limits:
        verb, it = ("hold", "them") if " and " in limits else ("holds", "it")
        return f"{limits} {verb} this process: raise {it}, or try a smaller --ctx-size or model"
    return "free some memory, or try a smaller --ctx-size or model"


def ran_out_of_memory(exc: BaseException) -> bool:
    """Whether exc is memory running out: a MemoryError, an OSError of ENOMEM, or, under a memory limit, a
    SystemError (C code whose allocation failed returning an error with no exception set), or a TypeError,
    AttributeError or NameError met with less than NEAR_THE_LIMIT_BYTES left (Python's own code, its allocations
    failing, raises the oddest: 'frame' object is not callable)."""
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        return True
    if memory_limit_words() is None:
        return False
    if isinstance(exc, SystemError):
        return True
    if not isinstance(exc, ODD_ERRORS_OF_FAILED_ALLOCATIONS):
        return False
    try:
        room = least_room()
    except MemoryError:
        return True
    except (OSError, ValueError):  # /proc does not tell
        return False
    return room is not None and room.free < NEAR_THE_LIMIT_BYTES
