"""A bounds-checked cursor over a GGUF header, and the errors it raises."""

from __future__ import annotations

import struct
from typing import BinaryIO

from localgen.errors import GGUFError
from localgen.gguf_format import MAX_HEADER_BYTES, MAX_STRING_BYTES

HINT = "the file is damaged, incomplete or not a GGUF model"
HUB_COPY_HINT = ("the repository's own file is damaged or not a model this llama.cpp can load, so downloading it "
                 "(again) will not help: choose another quant or repository")
READ_CHUNK_BYTES = 1 << 20

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


class GGUFTruncatedError(GGUFError):
    """A GGUF header that runs past the end of the bytes there are: a short file, or a prefix a longer read may hold."""


class HeaderCursor:
    """A bounds-checked cursor over the first size bytes of a GGUF file of file_size bytes, read in growing chunks."""

    def __init__(self, handle: BinaryIO, size: int, label: str, file_size: int | None = None) -> None:
        self.handle = handle
        self.size = size
        self.file_size = size if file_size is None else max(size, file_size)  # more than size: a prefix is here
        self.label = label
        self.buf = b""
        self.off = 0

    def fail(self, problem: str) -> GGUFError:
        """A GGUFError naming the file and the problem."""
        return GGUFError(f"{self.label}: {problem}", hint=HINT)

    def truncated(self, problem: str) -> GGUFTruncatedError:
        """A GGUFTruncatedError naming the file and what runs past the end."""
        return GGUFTruncatedError(f"{self.label}: {problem}", hint=HINT)

    def beyond(self, end: int, claim: str) -> GGUFError:
        """The error for claim ('X at byte N runs') needing bytes up to end: truncated only if more bytes could do."""
        if self.size >= self.file_size and end > self.size:
            return self.truncated(f"truncated or corrupt: {claim} past the end of the file ({self.size:,} bytes)")
        if end > self.file_size:
            return self.fail(f"corrupt header: {claim} past the end of the file ({self.file_size:,} bytes)")
        if end > MAX_HEADER_BYTES:
            return self.fail(f"header larger than {MAX_HEADER_BYTES:,} bytes: {claim} past byte {MAX_HEADER_BYTES:,}")
        return self.truncated(f"truncated: {claim} past the first {self.size:,} bytes read (of {self.file_size:,})")

    def fits(self, nbytes: int) -> bool:
        """Whether nbytes more fit in the file and the header limit (past a prefix only: parse on, need() tells)."""
        end = self.off + nbytes
        return end <= self.file_size and end <= MAX_HEADER_BYTES

    def need(self, end: int, what: str) -> None:
        """Make sure bytes up to end are buffered, or fail because the file (or the prefix read of it) is too short."""
        if end <= len(self.buf):
            return
        if end > self.size or end > MAX_HEADER_BYTES:
            raise self.beyond(end, f"{what} at byte {self.off:,} runs")
        target = min(self.size, max(end, 2 * len(self.buf), READ_CHUNK_BYTES))
        self.handle.seek(len(self.buf))
        chunk = self.handle.read(target - len(self.buf))
        self.buf += chunk
        if len(self.buf) < end:
            raise self.truncated(f"truncated: the file shrank while being read ({len(self.buf):,} bytes)")

    def _unpack(self, layout: struct.Struct, what: str) -> int:
        """Read one integer of a precompiled little-endian layout."""
        self.need(self.off + layout.size, what)
        value: int = layout.unpack_from(self.buf, self.off)[0]
        self.off += layout.size
        return value

    def u32(self, what: str) -> int:
        """Read a little-endian uint32."""
        return self._unpack(_U32, what)

    def u64(self, what: str) -> int:
        """Read a little-endian uint64."""
        return self._unpack(_U64, what)

    def i32(self, what: str) -> int:
        """Read a little-endian int32."""
        return self._unpack(_I32, what)

    def i64(self, what: str) -> int:
        """Read a little-endian int64."""
        return self._unpack(_I64, what)

    def scalar(self, code: str, size: int, what: str) -> object:
        """Read one little-endian value of struct code (size bytes)."""
        self.need(self.off + size, what)
        value = struct.unpack_from("<" + code, self.buf, self.off)[0]
        self.off += size
        return value

    def scalars(self, code: str, size: int, count: int, what: str) -> tuple[object, ...]:
        """Read count little-endian values of struct code (size bytes each)."""
        self.need(self.off + count * size, what)
        values = struct.unpack_from(f"<{count}{code}", self.buf, self.off)
        self.off += count * size
        return values

    def raw(self, nbytes: int, what: str) -> bytes:
        """Read nbytes as they are."""
        self.need(self.off + nbytes, what)
        data = self.buf[self.off:self.off + nbytes]
        self.off += nbytes
        return data

    def raw_string(self, what: str, limit: int = MAX_STRING_BYTES) -> bytes:
        """Read a length-prefixed string's bytes, checking the length before reading."""
        length = self.u64(f"{what} length")
        if length > limit:
            raise self.fail(f"{what} is {length:,} bytes long (limit {limit:,})")
        return self.raw(length, what)

    def text(self, what: str, limit: int = MAX_STRING_BYTES, *, strict: bool = False) -> str:
        """Read a string as text: strictly UTF-8, or with bad bytes replaced."""
        data = self.raw_string(what, limit)
        if not strict:
            return data.decode("utf-8", errors="replace")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8: {data[:40]!r}") from None

    def skip_strings(self, count: int, what: str, *, collect: bool) -> list[bytes] | None:
        """Skip count strings, bounds-checking each against the file; collect their bytes when asked."""
        start = self.off
        items: list[bytes] | None = [] if collect else None
        unpack = _U64.unpack_from
        off, done = self.off, 0
        while done < count:
            buf = self.buf
            index = done
            try:  # a length field past the buffer's end raises struct.error: refill and go on
                if items is None:
                    for index in range(done, count):  # noqa: B007 (index is read after the loop)
                        off += 8 + unpack(buf, off)[0]
                    index = count
                else:
                    append, available = items.append, len(buf)
                    for index in range(done, count):  # noqa: B007 (index is read after the loop)
                        end = off + 8 + unpack(buf, off)[0]
                        if end > available:
                            break
                        append(buf[off + 8:end])
                        off = end
                    else:
                        index = count
            except struct.error:
                pass
            done = index
            if done < count:
                self.off = off
                self.need(off + 8, f"{what} item {done:,}")
                if items is not None:
                    self.need(off + 8 + unpack(self.buf, off)[0], f"{what} item {done:,}")
        self.off = off
        self.need(off, what)
        if off - start > MAX_STRING_BYTES:  # only then can one item exceed the limit: find it
            self._check_string_lengths(start, count, what)
        return items

    def _check_string_lengths(self, off: int, count: int, what: str) -> None:
        """Fail if any of count strings from off is longer than MAX_STRING_BYTES."""
        for index in range(count):
            length = _U64.unpack_from(self.buf, off)[0]
            if length > MAX_STRING_BYTES:
                raise self.fail(f"{what} item {index:,} is {length:,} bytes long "
                                f"(limit {MAX_STRING_BYTES:,})")
            off += 8 + length
