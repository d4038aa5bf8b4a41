"""A stop request that native code reads without Python."""

from __future__ import annotations

import ctypes


class StopFlag:
    """A stop request that llama.cpp's abort callback can read in C, without taking Python's GIL (see
    StopOnFlag); calling it says whether it is set.

    It is a two-byte string, "" or "x", which C's strlen() reads as 0 or 1: the abort callback is strlen itself.
    """

    def __init__(self) -> None:
        self._text = ctypes.create_string_buffer(2)

    def set(self, stop: bool = True) -> None:
        """Ask for a stop (stop=False: withdraw the request)."""
        self._text.value = b"x" if stop else b""

    def __call__(self) -> bool:
        return self._text.value != b""

    @property
    def address(self) -> int:
        """Where the flag's bytes are, for the callback."""
        return ctypes.addressof(self._text)
