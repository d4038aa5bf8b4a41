"""Stopping a llama_decode part way: llama.cpp's abort callback, polled between the nodes of its graph."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Callable
from functools import lru_cache

from localgen.engine.native import lc
from localgen.stop_flag import StopFlag


@lru_cache(maxsize=1)
def _strlen_callback() -> ctypes._CFuncPtr | None:
    """C's strlen as a ggml abort callback (returning 0 or 1 for a StopFlag's bytes, read as false or true), or
    None where the C library cannot be had (a Python callback then reads the flag)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.cdll.msvcrt if sys.platform == "win32" else ctypes.CDLL(None)
        return ctypes.cast(libc.strlen, lc.ggml_abort_callback)
    return None


class StopOnFlag:
    """llama.cpp's abort callback for the llama_decode calls of a with block, reading a StopFlag in C between graph
    nodes: a prefill on another thread (while the user types) then never waits for the GIL at each node, which the
    chat's thread holds as it draws the prompt (beside a busy Python thread, 144.5 tok/s against 30.4 with a Python
    callback: `python scripts/bench_features.py typing`)."""

    def __init__(self, ctx: lc.llama_context_p, flag: StopFlag, callback: ctypes._CFuncPtr) -> None:
        self._ctx, self._flag, self._callback = ctx, flag, callback

    def raise_caught(self) -> None:
        """Nothing to raise: no Python runs in the callback."""

    def __enter__(self) -> StopOnFlag:
        lc.llama_set_abort_callback(self._ctx, self._callback, ctypes.c_void_p(self._flag.address))
        return self

    def __exit__(self, *_: object) -> None:
        lc.llama_set_abort_callback(self._ctx, lc.ggml_abort_callback(), None)


def node_stopper(ctx: lc.llama_context_p, should_stop: Callable[[], bool]) -> StopOnFlag | StopBetweenNodes:
    """The abort callback for should_stop: read in C for a StopFlag (where C's strlen can be had), else a Python
    callback polling it."""
    callback = _strlen_callback() if isinstance(should_stop, StopFlag) else None
    if callback is not None:
        return StopOnFlag(ctx, should_stop, callback)  # type: ignore[arg-type]
    return StopBetweenNodes(ctx, should_stop)


class StopBetweenNodes:
    """llama.cpp's abort callback for the llama_decode calls of a with block, polling should_stop after every
    graph node (on backends that call it, as the CPU's does).

    On the main thread the CPU backend calls it where Python runs the signal handlers that arrived meanwhile. A
    handler that raises (a second Ctrl-C, SIGTERM) raises inside the callback, where ctypes could only print the
    exception: it is kept instead, the computation ends, and raise_caught() raises it after llama_decode.
    """

    def __init__(self, ctx: lc.llama_context_p, should_stop: Callable[[], bool]) -> None:
        self._ctx, self._should_stop = ctx, should_stop
        self._caught: BaseException | None = None
        self._callback = lc.ggml_abort_callback(self._poll)
        self._hook = sys.unraisablehook

    def _poll(self, _data: ctypes.c_void_p) -> bool:
        """Whether to abort: a stop was asked for, or a signal handler raised."""
        return self._caught is not None or bool(self._should_stop())

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        """Keep an exception raised in the callback (by a signal handler) to raise after llama_decode."""
        if unraisable.object != self._poll or unraisable.exc_value is None:  # a bound method: equal, not the same
            self._hook(unraisable)
            return
        self._caught = self._caught or unraisable.exc_value

    def raise_caught(self) -> None:
        """Raise the exception a signal handler raised during llama_decode, if any."""
        caught, self._caught = self._caught, None
        if caught is not None:
            raise caught

    def __enter__(self) -> StopBetweenNodes:
        sys.unraisablehook = self._unraisable
        lc.llama_set_abort_callback(self._ctx, self._callback, None)
        return self

    def __exit__(self, *_: object) -> None:
        lc.llama_set_abort_callback(self._ctx, lc.ggml_abort_callback(), None)
        sys.unraisablehook = self._hook
