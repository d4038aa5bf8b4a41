"""The file format of a prompt cache entry: a fixed header (magic, format version, lengths), the cache identity, the
tokens the state holds, a sha256 of tokens and state, then the state bytes from llama.cpp. No pickle."""

from __future__ import annotations

import hashlib
import os
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from localgen.storage import regular_file_descriptor
from localgen.tokens import tokens_array

MAGIC = b"LGPC"
FORMAT_VERSION = 1
HEADER = struct.Struct("<4sIIIQ32s")  # magic, version, identity bytes, token count, state bytes, sha256
MAX_IDENTITY_BYTES = 4096
MAX_TOKENS = 10_000_000


@dataclass(frozen=True)
class EntryHeader:
    """The parsed header of an entry."""

    identity: str
    tokens: array
    state_size: int
    digest: bytes
    offset: int


def entry_parts(identity: str, tokens: Sequence[int],
                state: bytes | bytearray) -> tuple[bytes, bytes, bytes, memoryview]:
    """An entry's parts, in file order: header, identity, tokens, then the state (not copied)."""
    ident = identity.encode("utf-8")
    token_bytes = tokens_array(tokens).tobytes()
    digest = entry_digest(token_bytes, state)
    header = HEADER.pack(MAGIC, FORMAT_VERSION, len(ident), len(tokens), len(state), digest)
    return header, ident, token_bytes, memoryview(state)


def entry_digest(token_bytes: bytes, state: bytes | bytearray) -> bytes:
    """The checksum an entry's header keeps: SHA-256 of its tokens' bytes, then its state."""
    digest = hashlib.sha256(token_bytes)
    digest.update(state)
    return digest.digest()


class DamagedEntryError(ValueError):
    """An entry file that is not whole: truncated, overwritten or of the wrong size."""


def read_header(handle: BinaryIO, size: int) -> EntryHeader:
    """Parse and sanity-check an entry's header; raise ValueError when it is not a valid entry."""
    raw = handle.read(HEADER.size)
    if len(raw) != HEADER.size:
        raise DamagedEntryError("truncated header")
    magic, version, ident_len, n_tokens, state_size, digest = HEADER.unpack(raw)
    if magic != MAGIC:
        raise DamagedEntryError("not a prompt cache entry")
    if version != FORMAT_VERSION:  # another localgen version's entry: left for it
        raise ValueError(f"format version {version}, from another localgen version")
    if ident_len > MAX_IDENTITY_BYTES or n_tokens > MAX_TOKENS:
        raise DamagedEntryError("implausible header")
    offset = HEADER.size + ident_len + 4 * n_tokens
    if offset + state_size != size:
        raise DamagedEntryError(f"size {size} does not match the header ({offset + state_size})")
    identity = handle.read(ident_len).decode("utf-8", errors="replace")
    tokens = array("i")
    tokens.frombytes(handle.read(4 * n_tokens))
    return EntryHeader(identity, tokens, state_size, digest, offset)


def open_entry(path: Path) -> BinaryIO:
    """An entry file opened for reading; OSError where path is not a regular file (a FIFO put in an entry's place after
    the folder's scan would block the open, and its read, for a writer that never comes)."""
    fd = regular_file_descriptor(path)
    if fd is None:
        raise OSError("not a regular file")
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
