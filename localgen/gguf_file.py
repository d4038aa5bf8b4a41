"""Read and validate GGUF files in pure Python, before llama.cpp ever opens them."""

from __future__ import annotations

import stat
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

from localgen.errors import GGUFError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32

MAX_TENSORS = 1_000_000
MAX_KVS = 1_000_000
MAX_STRING_BYTES = 64 * 1024 * 1024
MAX_KEY_BYTES = 64 * 1024
MAX_ARRAY_ELEMENTS = 100_000_000
MAX_ALIGNMENT = 1 << 20
MAX_HEADER_BYTES = 256 * 1024 * 1024  # metadata + tensor table; real ones are a few MB
MIN_ALIGNMENT = 32  # ggml's TENSOR_ALIGNMENT: llama.cpp aborts on tensor data mapped less aligned
MAX_TENSOR_NAME_BYTES = 63  # GGML_MAX_NAME (64) including the NUL byte
MAX_DIMS = 4
INT64_MAX = (1 << 63) - 1
KEEP_NUMERIC_ARRAY_MAX = 1024  # longer numeric arrays are summarized, not stored
KEEP_STRING_ARRAY_MAX = 256  # longer string arrays are summarized, not stored
READ_CHUNK_BYTES = 1 << 20
TOKENS_KEY = "tokenizer.ggml.tokens"
TOKEN_TYPES_KEY = "tokenizer.ggml.token_type"
HINT = "the file is damaged, incomplete or not a GGUF model"

# Minimum bytes one metadata entry and one tensor-info entry can occupy (for count sanity checks).
_MIN_KV_BYTES = 8 + 1 + 4 + 1
_MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8

# GGUF metadata value types: id -> (struct code, item size, name).
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(8, 13)
_SCALAR_TYPES: dict[int, tuple[str, int, str]] = {
    T_UINT8: ("B", 1, "u8"), T_INT8: ("b", 1, "i8"), T_UINT16: ("H", 2, "u16"), T_INT16: ("h", 2, "i16"),
    T_UINT32: ("I", 4, "u32"), T_INT32: ("i", 4, "i32"), T_FLOAT32: ("f", 4, "f32"), T_BOOL: ("?", 1, "bool"),
    T_UINT64: ("Q", 8, "u64"), T_INT64: ("q", 8, "i64"), T_FLOAT64: ("d", 8, "f64"),
}
_INTEGER_TYPES = frozenset({T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_UINT64, T_INT64})

# ggml tensor types: id -> (name, block size, bytes per block); from ggml/include/ggml.h and
# ggml/src/ggml.c of the llama.cpp vendored in llama-cpp-python 0.3.36 (removed types left out).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
    42: ("Q2_0", 64, 18),
}

# general.file_type (enum llama_ftype in include/llama.h, llama-cpp-python 0.3.36) -> quant name.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


@dataclass(frozen=True)
class ArraySummary:
    """A metadata array too long to keep: its item type and length only."""

    item_type: int
    length: int

    @property
    def item_type_name(self) -> str:
        """The GGUF name of the item type (u32, str, ...)."""
        return _type_name(self.item_type)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's header entry; offset is absolute (from the start of the file)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int
    nbytes: int

    @property
    def type_name(self) -> str:
        """The ggml type's name, e.g. Q4_1."""
        return GGML_TYPES[self.ggml_type][0]

    @property
    def n_elements(self) -> int:
        """The number of elements (product of the shape)."""
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class GGUFInfo:
    """A validated GGUF header: metadata, tensor table and where the data lies."""

    path: Path
    file_size: int
    version: int
    alignment: int
    data_offset: int
    metadata: Mapping[str, object] = field(hash=False)
    tensors: tuple[TensorInfo, ...]

    def _arch_key(self, suffix: str) -> object:
        """The value of '{architecture}.{suffix}', or None."""
        return self.metadata.get(f"{self.architecture}.{suffix}")

    def _arch_int(self, suffix: str) -> int | None:
        """An integer hyperparameter (the largest entry of a per-layer array), or None."""
        return _as_int(self._arch_key(suffix))

    @property
    def architecture(self) -> str:
        """general.architecture, e.g. 'llama' ('' for a non-first split shard)."""
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else ""

    @property
    def name(self) -> str | None:
        """general.name, the model's display name."""
        value = self.metadata.get("general.name")
        return value if isinstance(value, str) else None

    @property
    def context_length(self) -> int | None:
        """The context length the model was trained for."""
        return self._arch_int("context_length")

    @property
    def block_count(self) -> int | None:
        """The number of transformer blocks (layers)."""
        return self._arch_int("block_count")

    @property
    def embedding_length(self) -> int | None:
        """The embedding (hidden) size."""
        return self._arch_int("embedding_length")

    @property
    def head_count(self) -> int | None:
        """The number of attention heads (largest over layers)."""
        return self._arch_int("attention.head_count")

    @property
    def head_count_kv(self) -> int | None:
        """The number of key/value heads (largest over layers), defaulting to head_count."""
        value = self._arch_int("attention.head_count_kv")
        return value if value is not None else self.head_count

    @property
    def key_length(self) -> int | None:
        """The per-head key size, defaulting to embedding_length / head_count."""
        value = self._arch_int("attention.key_length")
        return value if value is not None else self._default_head_size()

    @property
    def value_length(self) -> int | None:
        """The per-head value size, defaulting to embedding_length / head_count."""
        value = self._arch_int("attention.value_length")
        return value if value is not None else self._default_head_size()

    def _default_head_size(self) -> int | None:
        """embedding_length // head_count when both are known and nonzero."""
        embd, heads = self.embedding_length, self.head_count
        return embd // heads if embd and heads else None

    @property
    def sliding_window(self) -> int | None:
        """The sliding-window attention size, or None for full attention."""
        return self._arch_int("attention.sliding_window") or None

    @property
    def chat_template(self) -> str | None:
        """tokenizer.chat_template, the Jinja chat template shipped with the model."""
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None

    @property
    def file_type(self) -> int | None:
        """general.file_type (llama_ftype), or None."""
        return _as_int(self.metadata.get("general.file_type"))

    @property
    def quant(self) -> str | None:
        """The quantization name (e.g. Q4_1), from general.file_type or the dominant tensor type."""
        named = FILE_TYPES.get(self.file_type) if self.file_type is not None else None
        if named is not None:
            return named
        weights: dict[str, int] = {}
        for tensor in self.tensors:
            if len(tensor.shape) >= 2:
                weights[tensor.type_name] = weights.get(tensor.type_name, 0) + tensor.n_elements
        return max(weights, key=weights.__getitem__) if weights else None

    @property
    def parameter_count(self) -> int:
        """The number of parameters in this file (sum of tensor element counts)."""
        return sum(tensor.n_elements for tensor in self.tensors)

    @property
    def tensor_bytes(self) -> int:
        """The bytes of tensor data in this file."""
        return sum(tensor.nbytes for tensor in self.tensors)

    @property
    def split_count(self) -> int:
        """split.count: how many shards the model has (1 when not split)."""
        return _as_int(self.metadata.get("split.count")) or 1

    @property
    def split_no(self) -> int:
        """split.no: this shard's 0-based index (0 when not split)."""
        return _as_int(self.metadata.get("split.no")) or 0


def _as_int(value: object) -> int | None:
    """An int value, the largest item of a tuple of ints, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, tuple) and value and all(type(v) is int for v in value):
        return max(value)  # type: ignore[type-var]
    return None


def _type_name(value_type: int) -> str:
    """The GGUF name of a metadata value type."""
    if value_type == T_STRING:
        return "str"
    if value_type == T_ARRAY:
        return "array"
    entry = _SCALAR_TYPES.get(value_type)
    return entry[2] if entry else f"type {value_type}"


def _pad(offset: int, alignment: int) -> int:
    """offset rounded up to a multiple of alignment."""
    return offset + (-offset % alignment)


class _Parser:
    """A bounds-checked cursor over a GGUF file's header, reading the file in growing chunks."""

    def __init__(self, handle: BinaryIO, size: int, label: str) -> None:
        self.handle = handle
        self.size = size
        self.label = label
        self.buf = b""
        self.off = 0
        self.tokens: list[bytes] | None = None  # tokenizer.ggml.tokens, raw, when present
        self.token_types: bytes | None = None  # tokenizer.ggml.token_type, raw little-endian i32

    def fail(self, problem: str) -> GGUFError:
        """A GGUFError naming the file and the problem."""
        return GGUFError(f"{self.label}: {problem}", hint=HINT)

    def need(self, end: int, what: str) -> None:
        """Make sure bytes up to end are buffered, or fail because the file is too short."""
        if end <= len(self.buf):
            return
        if end > self.size:
            raise self.fail(f"truncated or corrupt: {what} at byte {self.off:,} runs past the end of the "
                            f"file ({self.size:,} bytes)")
        if end > MAX_HEADER_BYTES:
            raise self.fail(f"header larger than {MAX_HEADER_BYTES:,} bytes ({what} at byte {self.off:,})")
        target = min(self.size, max(end, 2 * len(self.buf), READ_CHUNK_BYTES))
        self.handle.seek(len(self.buf))
        chunk = self.handle.read(target - len(self.buf))
        self.buf += chunk
        if len(self.buf) < end:
            raise self.fail(f"truncated: the file shrank while being read ({len(self.buf):,} bytes)")

    def u32(self, what: str) -> int:
        """Read a little-endian uint32."""
        self.need(self.off + 4, what)
        value = _U32.unpack_from(self.buf, self.off)[0]
        self.off += 4
        return value

    def u64(self, what: str) -> int:
        """Read a little-endian uint64."""
        self.need(self.off + 8, what)
        value = _U64.unpack_from(self.buf, self.off)[0]
        self.off += 8
        return value

    def i32(self, what: str) -> int:
        """Read a little-endian int32."""
        self.need(self.off + 4, what)
        value = _I32.unpack_from(self.buf, self.off)[0]
        self.off += 4
        return value

    def i64(self, what: str) -> int:
        """Read a little-endian int64."""
        self.need(self.off + 8, what)
        value = _I64.unpack_from(self.buf, self.off)[0]
        self.off += 8
        return value

    def raw_string(self, what: str, limit: int = MAX_STRING_BYTES) -> bytes:
        """Read a length-prefixed string's bytes, checking the length before reading."""
        length = self.u64(f"{what} length")
        if length > limit:
            raise self.fail(f"{what} is {length:,} bytes long (limit {limit:,})")
        self.need(self.off + length, what)
        data = self.buf[self.off:self.off + length]
        self.off += length
        return data

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


def _check_regular_file(path: Path, label: str) -> int:
    """The size of path, failing unless it is a regular, readable file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise GGUFError(f"{label}: file not found ({path})", hint="check the path") from None
    except OSError as exc:
        raise GGUFError(f"{label}: cannot be read ({exc.strerror or exc})", hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise GGUFError(f"{label}: not a regular file", hint="pass the path of a .gguf file")
    return st.st_size


def read_gguf(path: Path, *, check_tensors: bool = True) -> GGUFInfo:
    """Parse and validate a GGUF file's header; check_tensors=False skips the data-size check."""
    return _read(Path(path), check_tensors=check_tensors, require_architecture=True)


def _read(path: Path, *, check_tensors: bool, require_architecture: bool) -> GGUFInfo:
    """read_gguf, optionally accepting a non-first split shard without general.architecture."""
    label = path.name or str(path)
    size = _check_regular_file(path, label)
    try:
        with path.open("rb") as handle:
            return _parse(_Parser(handle, size, label), path, check_tensors, require_architecture)
    except GGUFError:
        raise
    except OSError as exc:
        raise GGUFError(f"{label}: cannot be read ({exc.strerror or exc})", hint=HINT) from None
    except MemoryError:
        raise GGUFError(f"{label}: header too large to read into memory", hint=HINT) from None
    except Exception as exc:  # never let a hostile file surface as anything but a GGUFError
        raise GGUFError(f"{label}: malformed GGUF ({type(exc).__name__}: {exc})", hint=HINT) from None


def _parse(p: _Parser, path: Path, check_tensors: bool, require_architecture: bool) -> GGUFInfo:
    """Parse header, metadata and tensor table; then check the data section and hyperparameters."""
    version, n_tensors, n_kv = _parse_header(p)
    metadata, types = _parse_metadata(p, n_kv)
    alignment = _alignment(p, metadata, types)
    tensors_raw = _parse_tensor_infos(p, n_tensors)
    data_offset = _pad(p.off, alignment) if n_tensors else p.off
    tensors = _place_tensors(p, tensors_raw, data_offset, alignment)
    if check_tensors:
        expected = max((t.offset + t.nbytes for t in tensors), default=data_offset)
        if p.size < expected:
            raise p.fail(f"truncated: {p.size:,} of {expected:,} bytes")
    from localgen import gguf_checks  # imported here: gguf_checks imports this module

    gguf_checks.check_split_keys(p, metadata, types)
    if require_architecture or "general.architecture" in metadata:
        gguf_checks.check_architecture(p, metadata)
    gguf_checks.check_hyperparameters(p, metadata)
    gguf_checks.check_tokenizer(p, metadata)
    return GGUFInfo(path=path, file_size=p.size, version=version, alignment=alignment,
                    data_offset=data_offset, metadata=MappingProxyType(metadata), tensors=tuple(tensors))


def _describe_foreign(head: bytes) -> str:
    """A short guess at what a non-GGUF file is, from its first bytes."""
    stripped = head.lstrip()
    if head[:4] in (b"lmgg", b"fmgg", b"tjgg"):
        return "an old GGML/GGJT model, not GGUF; convert it with llama.cpp's tools"
    if stripped.startswith(b"version https://git-lfs"):
        return "a Git LFS pointer file, not the model itself"
    if stripped[:1] in (b"<", b"{", b"["):
        return "text (an HTML or JSON error page?), not a GGUF model"
    return f"not a GGUF file (magic {head[:4]!r}, expected b'GGUF')"


def _parse_header(p: _Parser) -> tuple[int, int, int]:
    """Magic, version and the two counts, each checked."""
    if p.size == 0:
        raise p.fail("empty file (0 bytes)")
    p.need(min(p.size, 64), "header")
    if p.buf[:4] != GGUF_MAGIC:
        raise p.fail(_describe_foreign(p.buf[:64]))
    p.off = 4
    version = p.u32("version")
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
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
    if needed > p.size - p.off:
        raise p.fail(f"truncated or corrupt: {n_kv:,} metadata entries and {n_tensors:,} tensors need at "
                     f"least {needed:,} bytes but only {p.size - p.off:,} remain")
    return version, n_tensors, n_kv


def _parse_metadata(p: _Parser, n_kv: int) -> tuple[dict[str, object], dict[str, int]]:
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
        metadata[key] = _parse_value(p, key, value_type)
        types[key] = value_type
    return metadata, types


def _parse_value(p: _Parser, key: str, value_type: int) -> object:
    """Read one metadata value of value_type."""
    if value_type == T_STRING:
        return p.text(f"value of '{key}'")
    if value_type == T_ARRAY:
        return _parse_array(p, key)
    entry = _SCALAR_TYPES.get(value_type)
    if entry is None:
        raise p.fail(f"metadata key '{key}' has invalid value type {value_type}")
    code, item_size, _ = entry
    p.need(p.off + item_size, f"value of '{key}'")
    value = struct.unpack_from("<" + code, p.buf, p.off)[0]
    p.off += item_size
    return value


def _parse_array(p: _Parser, key: str) -> object:
    """Read an array: short ones as tuples, long ones skipped (bounds-checked) into an ArraySummary."""
    item_type = p.u32(f"item type of '{key}'")
    count = p.u64(f"length of '{key}'")
    if item_type == T_ARRAY:
        raise p.fail(f"metadata key '{key}' is a nested array, which llama.cpp cannot read")
    if item_type != T_STRING and item_type not in _SCALAR_TYPES:
        raise p.fail(f"metadata key '{key}' has invalid array item type {item_type}")
    if count > MAX_ARRAY_ELEMENTS:
        raise p.fail(f"array '{key}' has {count:,} items (limit {MAX_ARRAY_ELEMENTS:,})")
    item_size = 8 if item_type == T_STRING else _SCALAR_TYPES[item_type][1]
    if count * item_size > p.size - p.off:
        raise p.fail(f"truncated or corrupt: array '{key}' of {count:,} items needs at least "
                     f"{count * item_size:,} bytes but only {p.size - p.off:,} remain")
    if item_type == T_STRING:
        if count > KEEP_STRING_ARRAY_MAX:
            items = p.skip_strings(count, f"array '{key}'", collect=key == TOKENS_KEY)
            if key == TOKENS_KEY:
                _check_unique_tokens(p, key, items)
            return ArraySummary(item_type, count)
        raw = [p.raw_string(f"item {i} of '{key}'") for i in range(count)]
        if key == TOKENS_KEY:
            _check_unique_tokens(p, key, raw)
        return tuple(text.decode("utf-8", errors="replace") for text in raw)
    p.need(p.off + count * item_size, f"array '{key}'")
    if key == TOKEN_TYPES_KEY and item_type == T_INT32:
        p.token_types = p.buf[p.off:p.off + count * item_size]
    if count > KEEP_NUMERIC_ARRAY_MAX:
        p.off += count * item_size
        return ArraySummary(item_type, count)
    values = struct.unpack_from(f"<{count}{_SCALAR_TYPES[item_type][0]}", p.buf, p.off)
    p.off += count * item_size
    return values


def _check_unique_tokens(p: _Parser, key: str, items: list[bytes] | None) -> None:
    """The token list has no duplicates (llama.cpp aborts on them); an empty token counts as [EMPTY_i]."""
    if items is None:
        return
    unique = set(items)
    if b"" in unique or b"\0".join(items).count(b"\0") != len(items) - 1:
        # llama.cpp reads tokens as C strings and renames empty ones [EMPTY_i]
        items = [item.split(b"\0", 1)[0] or b"[EMPTY_%d]" % i for i, item in enumerate(items)]
        unique = set(items)
    if len(unique) != len(items):
        raise p.fail(f"'{key}' contains duplicate tokens, which crash llama.cpp")
    p.tokens = items


def _alignment(p: _Parser, metadata: Mapping[str, object], types: Mapping[str, int]) -> int:
    """general.alignment (default 32): a u32 power of two within MAX_ALIGNMENT."""
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    if types["general.alignment"] != T_UINT32 or not isinstance(value, int):
        raise p.fail(f"general.alignment must be a u32, not {_type_name(types['general.alignment'])}")
    if value <= 0 or value & (value - 1) or value > MAX_ALIGNMENT:
        raise p.fail(f"general.alignment {value} is not a power of two up to {MAX_ALIGNMENT:,}")
    if value < MIN_ALIGNMENT:  # mmap'd tensors would break ggml's TENSOR_ALIGNMENT assert
        raise p.fail(f"general.alignment {value} is below the {MIN_ALIGNMENT} bytes llama.cpp needs")
    return value


def _parse_tensor_infos(p: _Parser, n_tensors: int) -> list[tuple[str, tuple[int, ...], int, int, int]]:
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


def _place_tensors(p: _Parser, infos: list[tuple[str, tuple[int, ...], int, int, int]], data_offset: int,
                   alignment: int) -> list[TensorInfo]:
    """Check each tensor's offset is aligned and packed like llama.cpp requires; make offsets absolute."""
    tensors = []
    expected = 0
    for name, shape, ggml_type, offset, nbytes in infos:
        if offset % alignment:
            raise p.fail(f"tensor '{name}' data offset {offset:,} is misaligned (alignment {alignment})")
        if offset != expected:
            raise p.fail(f"tensor '{name}' data offset {offset:,} is wrong (expected {expected:,}): "
                         "tensors overlap or leave gaps")
        expected = offset + _pad(nbytes, alignment)
        tensors.append(TensorInfo(name=name, shape=shape, ggml_type=ggml_type, offset=data_offset + offset,
                                  nbytes=nbytes))
    return tensors
