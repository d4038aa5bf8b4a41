"""Read and validate GGUF headers in pure Python, from a file or from bytes, before llama.cpp ever opens them."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from localgen import gguf_checks
from localgen.errors import GGUFError, GGUFUnreadableError, NotGGUFError, os_reason
from localgen.gguf_cache import keep_header, kept_header
from localgen.gguf_cursor import HINT, HeaderCursor
from localgen.gguf_foreign import FOREIGN_HEAD_BYTES, describe_foreign
from localgen.gguf_format import (
    DEFAULT_ALIGNMENT,
    GGML_TYPES,
    GGUF_MAGIC,
    INT64_MAX,
    KEEP_NUMERIC_ARRAY_MAX,
    KEEP_STRING_ARRAY_MAX,
    MAX_ALIGNMENT,
    MAX_ARRAY_ELEMENTS,
    MAX_DIMS,
    MAX_KEY_BYTES,
    MAX_KVS,
    MAX_TENSOR_NAME_BYTES,
    MAX_TENSORS,
    MAX_VOCABULARY_TOKENS,
    MIN_ALIGNMENT,
    SCALAR_TYPES,
    SUPPORTED_VERSIONS,
    T_ARRAY,
    T_INT32,
    T_STRING,
    T_UINT32,
    TOKEN_TYPES_KEY,
    TOKENS_KEY,
    pad,
    value_type_name,
)
from localgen.gguf_info import ArraySummary, GGUFInfo, TensorInfo
from localgen.memory_limits import memory_limit_words, out_of_memory_hint
from localgen.units import counted

CONTROL_TOKEN_TYPES = (2, 3)  # llama.cpp's token types UNKNOWN and CONTROL: special only when parsed as such
USER_DEFINED_TOKEN_TYPE = 4  # always read as one token; llama.cpp turns a few (<end_of_turn>, ...) into CONTROL

# Minimum bytes one metadata entry and one tensor-info entry can occupy (for count sanity checks).
_MIN_KV_BYTES = 8 + 1 + 4 + 1
_MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8
HEADER_MIN_BYTES = 4 + 4 + 8 + 8  # magic, version, tensor count, metadata count
EMPTY_TOKEN_NAME = b"[EMPTY_%d]"  # llama.cpp's name for the empty token of that id
EMPTY_FILE_HINT = "an interrupted download or copy, or `touch`, leaves an empty file: download or copy the model again"

_RawTensor = tuple[str, tuple[int, ...], int, int, int]  # name, shape, ggml type, relative offset, nbytes


@dataclass
class _Vocabulary:
    """The raw token list and token types met while parsing, for the tokenizer checks."""

    tokens: list[bytes] | None = None
    token_types: bytes | None = None  # tokenizer.ggml.token_type, raw little-endian i32


def read_gguf(path: Path, *, check_tensors: bool = True, require_architecture: bool = True) -> GGUFInfo:
    """Parse and validate a GGUF file's header; require_architecture=False accepts a later shard of a split model.
    A whole check's header is kept by the file's identity, and read back while the file stays that version."""
    path = Path(path)
    label = path.name or str(path)
    st = _check_regular_file(path, label)
    whole = check_tensors and require_architecture
    info = kept_header(path, st) if whole else None
    if info is not None:
        return info
    with _only_gguf_errors(label), path.open("rb") as handle:
        info = _parse(HeaderCursor(handle, st.st_size, label), path, check_tensors=check_tensors,
                      require_architecture=require_architecture)
    if whole:
        keep_header(path, st, info)
    return info


def read_gguf_bytes(data: bytes, name: str, *, file_size: int | None = None) -> GGUFInfo:
    """Parse and validate a GGUF header from the first bytes of file name (GGUFTruncatedError: it goes on past them).

    file_size, the whole file's size when known, makes a count that cannot fit in the file a malformed header at
    once: GGUFTruncatedError then means that a longer read could succeed.
    """
    label = Path(name).name or name
    with _only_gguf_errors(label):
        cursor = HeaderCursor(io.BytesIO(data), len(data), label, file_size=file_size)
        return _parse(cursor, Path(name), check_tensors=False, require_architecture=True)


def _check_regular_file(path: Path, label: str) -> os.stat_result:
    """The status of path, failing unless it is a regular, readable file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise GGUFUnreadableError(f"{label}: file not found ({path})", hint="check the path") from None
    except OSError as exc:
        raise GGUFUnreadableError(f"{label}: cannot be read ({os_reason(exc)})", hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise GGUFError(f"{label}: not a regular file", hint="pass the path of a .gguf file")
    return st


@contextmanager
def _only_gguf_errors(label: str) -> Iterator[None]:
    """Let nothing but a GGUFError out: a hostile file must never surface as any other exception."""
    try:
        yield
    except GGUFError:
        raise
    except PermissionError as exc:
        raise GGUFUnreadableError(f"{label}: cannot be read ({os_reason(exc)})",
                        hint="check the file's permissions") from None
    except OSError as exc:
        raise GGUFUnreadableError(f"{label}: cannot be read ({os_reason(exc)})", hint=HINT) from None
    except MemoryError:
        if memory_limit_words() is not None:  # `ulimit -d` reached as a sound header is read
            raise GGUFUnreadableError(f"{label}: ran out of memory reading its header",
                                      hint=out_of_memory_hint()) from None
        raise GGUFUnreadableError(f"{label}: header too large to read into memory", hint=HINT) from None
    except Exception as exc:
        raise GGUFError(f"{label}: malformed GGUF ({type(exc).__name__}: {exc})", hint=HINT) from None


def _parse(p: HeaderCursor, path: Path, *, check_tensors: bool, require_architecture: bool) -> GGUFInfo:
    """Parse header, metadata and tensor table; then check the data section and the model's sanity."""
    version, n_tensors, n_kv = _parse_header(p)
    vocabulary = _Vocabulary()
    metadata, types = _parse_metadata(p, n_kv, vocabulary)
    alignment = _alignment(p, metadata, types)
    tensors_raw = _parse_tensor_infos(p, n_tensors)
    data_offset = pad(p.off, alignment) if n_tensors else p.off
    tensors = _place_tensors(p, tensors_raw, data_offset, alignment)
    if check_tensors:
        expected = max((t.offset + t.nbytes for t in tensors), default=data_offset)
        if p.size < expected:
            raise p.truncated(f"truncated: {p.size:,} of {expected:,} bytes")
    gguf_checks.check_model(metadata, types, vocabulary.tokens, vocabulary.token_types, p.fail,
                            require_architecture=require_architecture)
    return GGUFInfo(path=path, file_size=p.file_size, version=version, alignment=alignment,
                    data_offset=data_offset, metadata=MappingProxyType(metadata), tensors=tuple(tensors),
                    control_tokens=frozenset(text for _, text in _tokens_of_types(vocabulary, CONTROL_TOKEN_TYPES)),
                    user_defined_tokens=tuple(_tokens_of_types(vocabulary, (USER_DEFINED_TOKEN_TYPE,))),
                    longest_token=_longest_token(vocabulary.tokens or []))


def _tokens_of_types(vocabulary: _Vocabulary, kinds: tuple[int, ...]) -> list[tuple[int, str]]:
    """(id, text) of the tokens whose type is one of kinds (CONTROL_TOKEN_TYPES: what llama.cpp reads as control
    tokens only when it parses special tokens)."""
    if vocabulary.tokens is None or vocabulary.token_types is None:
        return []
    tokens = vocabulary.tokens
    return [(i, token_name(tokens, i).decode("utf-8", errors="replace"))
            for i in sorted(_positions(vocabulary.token_types, kinds)) if i < len(tokens)]


def token_name(tokens: list[bytes], index: int) -> bytes:
    """The name llama.cpp gives token index of tokens as _unique_tokens leaves them: [EMPTY_i] for an empty one."""
    return tokens[index] or EMPTY_TOKEN_NAME % index


def _longest_token(tokens: list[bytes]) -> int:
    """The byte length of the longest token name, an empty token's [EMPTY_i] counted (the last one's is longest)."""
    longest = max(map(len, tokens), default=0)
    if b"" not in tokens:
        return longest
    last_empty = len(tokens) - 1 - tokens[::-1].index(b"")
    return max(longest, len(EMPTY_TOKEN_NAME % last_empty))


def _positions(types: bytes, kinds: tuple[int, ...]) -> Iterator[int]:
    """The ids whose little-endian i32 in types is one of kinds, found by bytes.find (a vocabulary's types are
    mostly NORMAL, and a Python loop over them all took 2 ms per 50,000 tokens)."""
    for kind in set(kinds):
        pattern = kind.to_bytes(4, "little", signed=True)
        found = types.find(pattern)
        while found >= 0:
            if found % 4 == 0:
                yield found // 4
            found = types.find(pattern, found + 1)


def _parse_header(p: HeaderCursor) -> tuple[int, int, int]:
    """Magic, version and the two counts, each checked."""
    if p.file_size == 0:  # where only a prefix was read, no bytes of it is a short read
        raise NotGGUFError(f"{p.label}: empty file (0 bytes)", hint=EMPTY_FILE_HINT)
    p.need(min(p.size, FOREIGN_HEAD_BYTES), "header")
    if p.size < len(GGUF_MAGIC) and GGUF_MAGIC.startswith(p.buf):  # GGU: cut short, no text file
        raise p.truncated(f"truncated: {counted(p.size, 'byte')}, the start of a GGUF header, which takes "
                          f"{HEADER_MIN_BYTES} at least")
    if p.buf[:4] != GGUF_MAGIC:
        problem, hint = describe_foreign(p.buf[:FOREIGN_HEAD_BYTES])
        raise NotGGUFError(f"{p.label}: {problem}", hint=hint)
    p.off = 4
    version = p.u32("version")
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if version == 0:  # zeros where the version belongs: a damaged file, not a big-endian one
            raise p.fail("invalid GGUF version 0 (supported: 2, 3); the file is damaged")
        if swapped in SUPPORTED_VERSIONS or (version & 0xFFFF) == 0:
            raise p.fail(f"big-endian GGUF (version field {version:#010x}); "
                         "only little-endian files are supported")
        if version == 1:
            raise p.fail("GGUF version 1 is no longer supported; convert it to version 3")
        raise p.fail(f"unsupported GGUF version {version} (supported: 2, 3)")
    n_tensors = p.u64("tensor count")
    n_kv = p.u64("metadata count")
    if n_tensors > MAX_TENSORS:
        raise p.fail(f"tensor count {n_tensors:,} exceeds the limit of {MAX_TENSORS:,}")
    if n_kv > MAX_KVS:
        raise p.fail(f"metadata count {n_kv:,} exceeds the limit of {MAX_KVS:,}")
    needed = n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_INFO_BYTES
    if not p.fits(needed):
        raise p.beyond(p.off + needed, f"{n_kv:,} metadata entries and {n_tensors:,} tensors need at least "
                                       f"{needed:,} bytes from byte {p.off:,}, reaching")
    return version, n_tensors, n_kv


def _parse_metadata(p: HeaderCursor, n_kv: int,
                    vocabulary: _Vocabulary) -> tuple[dict[str, object], dict[str, int]]:
    """Read every key/value pair: keys strict UTF-8 and unique; values bounded before reading."""
    metadata: dict[str, object] = {}
    types: dict[str, int] = {}
    for index in range(n_kv):
        key = p.text(f"metadata key #{index}", MAX_KEY_BYTES, strict=True)
        if not key:
            raise p.fail(f"metadata key #{index} is empty")
        if key in metadata:
            raise p.fail(f"duplicate metadata key '{key}'")
        value_type = p.u32(f"type of '{key}'")
        metadata[key] = _parse_value(p, key, value_type, vocabulary)
        types[key] = value_type
    return metadata, types


def _parse_value(p: HeaderCursor, key: str, value_type: int, vocabulary: _Vocabulary) -> object:
    """Read one metadata value of value_type."""
    if value_type == T_STRING:
        return p.text(f"value of '{key}'")
    if value_type == T_ARRAY:
        return _parse_array(p, key, vocabulary)
    entry = SCALAR_TYPES.get(value_type)
    if entry is None:
        raise p.fail(f"metadata key '{key}' has invalid value type {value_type}")
    code, item_size, _ = entry
    return p.scalar(code, item_size, f"value of '{key}'")


def _parse_array(p: HeaderCursor, key: str, vocabulary: _Vocabulary) -> object:
    """Read an array: short ones as tuples, long ones skipped (bounds-checked) into an ArraySummary."""
    item_type = p.u32(f"item type of '{key}'")
    count = p.u64(f"length of '{key}'")
    if item_type == T_ARRAY:
        raise p.fail(f"metadata key '{key}' is a nested array, which llama.cpp cannot read")
    if item_type != T_STRING and item_type not in SCALAR_TYPES:
        raise p.fail(f"metadata key '{key}' has invalid array item type {item_type}")
    if count > MAX_ARRAY_ELEMENTS:
        raise p.fail(f"array '{key}' has {count:,} items (limit {MAX_ARRAY_ELEMENTS:,})")
    item_size = 8 if item_type == T_STRING else SCALAR_TYPES[item_type][1]
    if not p.fits(count * item_size):  # a count the file cannot hold fails here, before any read of its items
        raise p.beyond(p.off + count * item_size, f"array '{key}' of {count:,} items needs at least "
                                                  f"{count * item_size:,} bytes from byte {p.off:,}, reaching")
    if key == TOKENS_KEY and count > MAX_VOCABULARY_TOKENS:  # before any is read (or fetched from the Hub)
        raise p.fail(f"the vocabulary '{key}' has {count:,} tokens (limit {MAX_VOCABULARY_TOKENS:,}; real models "
                     "have at most a few hundred thousand)")
    if item_type == T_STRING:
        if count > KEEP_STRING_ARRAY_MAX:
            items = p.skip_strings(count, f"array '{key}'", collect=key == TOKENS_KEY)
            if items is not None:
                vocabulary.tokens = _unique_tokens(p, key, items)
            return ArraySummary(item_type, count)
        raw = [p.raw_string(f"item {i} of '{key}'") for i in range(count)]
        if key == TOKENS_KEY:
            vocabulary.tokens = _unique_tokens(p, key, raw)
        return tuple(text.decode("utf-8", errors="replace") for text in raw)
    nbytes = count * item_size
    p.need(p.off + nbytes, f"array '{key}'")
    if key == TOKEN_TYPES_KEY and item_type == T_INT32:
        vocabulary.token_types = p.buf[p.off:p.off + nbytes]
    if count > KEEP_NUMERIC_ARRAY_MAX:
        p.off += nbytes
        return ArraySummary(item_type, count)
    return p.scalars(SCALAR_TYPES[item_type][0], item_size, count, f"array '{key}'")


def _unique_tokens(p: HeaderCursor, key: str, items: list[bytes]) -> list[bytes]:
    """The tokens as llama.cpp names them, a NUL ending one (a copy of items where one does; an empty one stays empty
    here, for [EMPTY_i]: token_name); duplicates, which abort llama.cpp, are found without naming every empty one."""
    names = set(items)
    if b"\0" in b"".join(names):  # llama.cpp reads tokens as C strings
        items = [item.split(b"\0", 1)[0] if b"\0" in item else item for item in items]
        names = set(items)
    empty = items.count(b"")
    if len(names) - (b"" in names) + empty != len(items) or (empty and _names_an_empty_token(names, items)):
        raise p.fail(f"'{key}' contains duplicate tokens, which crash llama.cpp")
    return items


def _names_an_empty_token(names: set[bytes], tokens: list[bytes]) -> bool:
    """Whether one of the names is llama.cpp's [EMPTY_i] of an empty token i of tokens (which collide)."""
    for name in names:
        if name.startswith(b"[EMPTY_") and name.endswith(b"]") and name[7:-1].isdigit():
            index = int(name[7:-1])
            if index < len(tokens) and not tokens[index] and EMPTY_TOKEN_NAME % index == name:
                return True
    return False


def _alignment(p: HeaderCursor, metadata: Mapping[str, object], types: Mapping[str, int]) -> int:
    """general.alignment (default 32): a u32 power of two within MAX_ALIGNMENT."""
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    if types["general.alignment"] != T_UINT32 or not isinstance(value, int):
        raise p.fail(f"general.alignment must be a u32, not {value_type_name(types['general.alignment'])}")
    if value <= 0 or value & (value - 1) or value > MAX_ALIGNMENT:
        raise p.fail(f"general.alignment {value} is not a power of two up to {MAX_ALIGNMENT:,}")
    if value < MIN_ALIGNMENT:  # mmap'd tensors would break ggml's TENSOR_ALIGNMENT assert
        raise p.fail(f"general.alignment {value} is below the {MIN_ALIGNMENT} bytes llama.cpp needs")
    return value


def _parse_tensor_infos(p: HeaderCursor, n_tensors: int) -> list[_RawTensor]:
    """Read the tensor table: (name, shape, ggml type, relative offset, nbytes) per tensor."""
    seen: set[str] = set()
    infos = []
    for index in range(n_tensors):
        name = p.text(f"tensor #{index} name", MAX_TENSOR_NAME_BYTES, strict=True)
        if name in seen:
            raise p.fail(f"duplicate tensor name '{name}'")
        seen.add(name)
        n_dims = p.u32(f"dimension count of tensor '{name}'")
        if not 1 <= n_dims <= MAX_DIMS:
            raise p.fail(f"tensor '{name}' has {n_dims} dimensions (expected 1 to {MAX_DIMS})")
        shape = tuple(p.i64(f"shape of tensor '{name}'") for _ in range(n_dims))
        n_elements = 1
        for dim in shape:
            if dim < 1:
                raise p.fail(f"tensor '{name}' has invalid shape {list(shape)}")
            n_elements *= dim
            if n_elements > INT64_MAX:
                raise p.fail(f"tensor '{name}' shape {list(shape)} overflows 64 bits")
        ggml_type = p.i32(f"type of tensor '{name}'")
        entry = GGML_TYPES.get(ggml_type)
        if entry is None:
            raise p.fail(f"tensor '{name}' has invalid ggml type {ggml_type}")
        type_name, block, type_size = entry
        if shape[0] % block:
            raise p.fail(f"tensor '{name}' row of {shape[0]:,} elements is not a multiple of the "
                         f"{type_name} block size {block}")
        nbytes = n_elements // block * type_size
        if nbytes > INT64_MAX:
            raise p.fail(f"tensor '{name}' size overflows 64 bits")
        offset = p.u64(f"data offset of tensor '{name}'")
        infos.append((name, shape, ggml_type, offset, nbytes))
    return infos


def _place_tensors(p: HeaderCursor, infos: list[_RawTensor], data_offset: int, alignment: int) -> list[TensorInfo]:
    """Check each tensor's offset is aligned and packed like llama.cpp requires; make offsets absolute."""
    tensors = []
    expected = 0
    for name, shape, ggml_type, offset, nbytes in infos:
        if offset % alignment:
            raise p.fail(f"tensor '{name}' data offset {offset:,} is misaligned (alignment {alignment})")
        if offset != expected:
            raise p.fail(f"tensor '{name}' data offset {offset:,} is wrong (expected {expected:,}): "
                         "tensors overlap or leave gaps")
        expected = offset + pad(nbytes, alignment)
        tensors.append(TensorInfo(name=name, shape=shape, ggml_type=ggml_type, offset=data_offset + offset,
                                  nbytes=nbytes))
    return tensors
