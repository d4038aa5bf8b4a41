"""Build real, rewritten, split and deliberately broken GGUF files for tests.

This module parses GGUF on its own (it does not use localgen.gguf_reader), so tests of the validator
do not check it against itself. Rewrites work at the byte level: the metadata section is re-encoded,
the padding before the aligned data section recomputed, and tensor data copied verbatim.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

BUNDLED_SIZE = 98_362_432

# GGUF value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR_FORMATS = {
    UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I", INT32: "i", FLOAT32: "f", BOOL: "?",
    UINT64: "Q", INT64: "q", FLOAT64: "d",
}
# ggml types this module needs to size tensors: id -> (block size, bytes per block).
_GGML_SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
               10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}


@dataclass(frozen=True)
class Typed:
    """A metadata value with an explicit GGUF type (array item type for lists)."""

    value_type: int
    value: object


@dataclass(frozen=True)
class RawKV:
    """One metadata entry: its key, the raw bytes of its type and value, where the type field sits."""

    key: str
    raw: bytes
    offset: int = -1

    @property
    def value_type(self) -> int:
        """The GGUF value type."""
        return struct.unpack_from("<I", self.raw)[0]


@dataclass(frozen=True)
class RawTensor:
    """One tensor-info entry, with where its fields sit in the source file."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the data section
    nbytes: int
    info_offset: int = -1  # absolute offset of the name length field
    type_field: int = -1  # absolute offset of the ggml type field
    offset_field: int = -1  # absolute offset of the data offset field


@dataclass(frozen=True)
class Layout:
    """A GGUF file's structure as parsed by this module."""

    path: Path
    version: int
    kvs: tuple[RawKV, ...]
    tensors: tuple[RawTensor, ...]
    alignment: int
    header_end: int  # end of the tensor-info table
    data_offset: int

    def kv(self, key: str) -> RawKV:
        """The entry for key."""
        for entry in self.kvs:
            if entry.key == key:
                return entry
        raise KeyError(key)

    def tensor(self, name: str) -> RawTensor:
        """The tensor named name."""
        for tensor in self.tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(name)


def _tensor_nbytes(shape: Sequence[int], ggml_type: int) -> int:
    """Bytes of a tensor of shape and ggml_type."""
    try:
        block, size = _GGML_SIZES[ggml_type]
    except KeyError:
        import gguf  # only for types this module does not list

        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ggml_type)]
    count = 1
    for dim in shape:
        count *= dim
    return count // block * size


def _skip_value(data: bytes, off: int, value_type: int) -> int:
    """The offset just past one value of value_type at off."""
    if value_type == STRING:
        return off + 8 + struct.unpack_from("<Q", data, off)[0]
    if value_type == ARRAY:
        item_type, count = struct.unpack_from("<IQ", data, off)
        off += 12
        if item_type == STRING:
            for _ in range(count):
                off += 8 + struct.unpack_from("<Q", data, off)[0]
            return off
        return off + count * struct.calcsize(_SCALAR_FORMATS[item_type])
    return off + struct.calcsize(_SCALAR_FORMATS[value_type])


def read_layout(path: Path) -> Layout:
    """Parse a well-formed GGUF file's header into raw entries (no validation)."""
    with open(path, "rb") as handle:
        data = handle.read(1 << 20)
        while True:
            try:
                return _parse_layout(Path(path), data)
            except struct.error:
                more = handle.read(len(data))
                if not more:
                    raise
                data += more


def _parse_layout(path: Path, data: bytes) -> Layout:
    """read_layout on a buffer that must hold the whole header."""
    assert data[:4] == b"GGUF", f"{path}: not GGUF"
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    off = 24
    kvs = []
    for _ in range(n_kv):
        start = off
        (key_len,) = struct.unpack_from("<Q", data, off)
        key = data[off + 8:off + 8 + key_len].decode()
        off += 8 + key_len
        value_start = off
        (value_type,) = struct.unpack_from("<I", data, off)
        off = _skip_value(data, off + 4, value_type)
        if off > len(data):
            raise struct.error("short buffer")
        kvs.append(RawKV(key=key, raw=data[value_start:off], offset=start))
    alignment = 32
    for entry in kvs:
        if entry.key == "general.alignment":
            alignment = struct.unpack_from("<I", entry.raw, 4)[0]
    tensors = []
    for _ in range(n_tensors):
        start = off
        (name_len,) = struct.unpack_from("<Q", data, off)
        name = data[off + 8:off + 8 + name_len].decode()
        off += 8 + name_len
        (n_dims,) = struct.unpack_from("<I", data, off)
        shape = struct.unpack_from(f"<{n_dims}q", data, off + 4)
        off += 4 + 8 * n_dims
        type_field = off
        ggml_type, offset = struct.unpack_from("<iQ", data, off)
        off += 12
        tensors.append(RawTensor(name=name, shape=tuple(shape), ggml_type=ggml_type, offset=offset,
                                 nbytes=_tensor_nbytes(shape, ggml_type), info_offset=start,
                                 type_field=type_field, offset_field=type_field + 4))
    header_end = off
    data_offset = header_end + (-header_end % alignment) if n_tensors else header_end
    return Layout(path=path, version=version, kvs=tuple(kvs), tensors=tuple(tensors), alignment=alignment,
                  header_end=header_end, data_offset=data_offset)


def _pack_string(text: str | bytes) -> bytes:
    """A GGUF string: u64 length and bytes."""
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _infer_type(value: object) -> int:
    """The GGUF type a plain Python value is written as."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return UINT32 if 0 <= value < 1 << 32 else INT64
    if isinstance(value, float):
        return FLOAT32
    if isinstance(value, str | bytes):
        return STRING
    raise TypeError(f"cannot infer a GGUF type for {value!r}")


def encode_value(value: object) -> bytes:
    """The raw bytes (type field, then value) of a metadata value.

    str -> string, bool -> bool, int -> u32 (i64 when out of range), float -> f32, list -> array of the
    first item's type, Typed(type, value) -> that exact type (for lists: the array's item type).
    """
    if isinstance(value, Typed):
        if isinstance(value.value, list | tuple):
            return struct.pack("<I", ARRAY) + _encode_array(value.value_type, value.value)
        return struct.pack("<I", value.value_type) + _encode_scalar(value.value_type, value.value)
    if isinstance(value, list | tuple):
        item_type = _infer_type(value[0]) if value else INT32
        return struct.pack("<I", ARRAY) + _encode_array(item_type, value)
    value_type = _infer_type(value)
    return struct.pack("<I", value_type) + _encode_scalar(value_type, value)


def _encode_scalar(value_type: int, value: object) -> bytes:
    """One scalar value's bytes."""
    if value_type == STRING:
        assert isinstance(value, str | bytes)
        return _pack_string(value)
    return struct.pack("<" + _SCALAR_FORMATS[value_type], value)


def _encode_array(item_type: int, items: Sequence[object]) -> bytes:
    """An array's item type, length and items."""
    body = b"".join(_encode_scalar(item_type, item) for item in items)
    return struct.pack("<IQ", item_type, len(items)) + body


def _copy_range(src, dst, offset: int, length: int) -> None:
    """Copy length bytes at offset of the open file src to the open file dst."""
    src.seek(offset)
    remaining = length
    while remaining:
        chunk = src.read(min(remaining, 8 << 20))
        if not chunk:
            raise EOFError(f"source ends {remaining} bytes early")
        dst.write(chunk)
        remaining -= len(chunk)


def write_gguf(dst: Path, *, kvs: Iterable[tuple[str, bytes]], tensors: Sequence[RawTensor],
               source: Layout | None, alignment: int = 32, version: int = 3, magic: bytes = b"GGUF") -> Path:
    """Write a GGUF file: kvs are (key, raw value bytes); tensor data is copied from source, packed anew."""
    kv_list = list(kvs)
    parts = [magic, struct.pack("<IQQ", version, len(tensors), len(kv_list))]
    parts += [_pack_string(key) + raw for key, raw in kv_list]
    offset = 0
    placed = []
    for tensor in tensors:
        dims = struct.pack(f"<I{len(tensor.shape)}q", len(tensor.shape), *tensor.shape)
        parts.append(_pack_string(tensor.name) + dims + struct.pack("<iQ", tensor.ggml_type, offset))
        placed.append((tensor, offset))
        offset += tensor.nbytes + (-tensor.nbytes % alignment)
    header = b"".join(parts)
    if tensors:
        header += b"\0" * (-len(header) % alignment)
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(dst, "wb") as out:
        out.write(header)
        if tensors:
            assert source is not None
            with open(source.path, "rb") as src:
                for index, (tensor, _) in enumerate(placed):
                    _copy_range(src, out, source.data_offset + tensor.offset, tensor.nbytes)
                    if index + 1 < len(placed):
                        out.write(b"\0" * (-tensor.nbytes % alignment))
    return dst


def copy_with_metadata(src: Path, dst: Path, *, drop: Iterable[str] = (),
                       set_values: Mapping[str, object] | None = None) -> Path:
    """Copy src to dst with the same tensors (real data) but metadata keys dropped or replaced/added."""
    layout = read_layout(src)
    return _rewrite(layout, dst, drop=drop, set_values=set_values or {})


def _rewrite(layout: Layout, dst: Path, *, drop: Iterable[str] = (), set_values: Mapping[str, object],
             tensors: Sequence[RawTensor] | None = None, extra: Sequence[tuple[str, bytes]] = ()) -> Path:
    """Rewrite layout's file with metadata changes, optionally another tensor list and extra raw entries."""
    dropped = set(drop)
    pending = dict(set_values)
    kvs = []
    for entry in layout.kvs:
        if entry.key in dropped:
            continue
        if entry.key in pending:
            kvs.append((entry.key, encode_value(pending.pop(entry.key))))
        else:
            kvs.append((entry.key, entry.raw))
    kvs += [(key, encode_value(value)) for key, value in pending.items()]
    kvs += list(extra)
    alignment = layout.alignment
    for key, raw in kvs:
        if key == "general.alignment" and raw[:4] == struct.pack("<I", UINT32):
            value = struct.unpack_from("<I", raw, 4)[0]
            alignment = value if value > 0 and not value & (value - 1) else alignment
    return write_gguf(dst, kvs=kvs, tensors=layout.tensors if tensors is None else tensors, source=layout,
                      alignment=alignment, version=layout.version)


# ---------------------------------------------------------------- split models (llama.cpp gguf-split layout)

def split_name(prefix: str, number: int, count: int) -> str:
    """The file name of shard number (1-based) of count: PREFIX-0000N-of-0000M.gguf."""
    return f"{prefix}-{number:05d}-of-{count:05d}.gguf"


def write_split(src: Path, out_dir: Path, n: int, *, prefix: str | None = None) -> list[Path]:
    """Split src into n shards like llama.cpp's gguf-split does.

    Shard 1 carries all metadata; tensors are shared out in order by size; every shard has split.no
    (u16, 0-based), split.count (u16) and split.tensors.count (i32).
    """
    layout = read_layout(src)
    if not 1 <= n <= len(layout.tensors):
        raise ValueError(f"cannot split {len(layout.tensors)} tensors into {n} shards")
    groups = _partition(layout.tensors, n)
    prefix = prefix or Path(src).name.removesuffix(".gguf")
    paths = []
    for index, group in enumerate(groups):
        split_kvs = [("split.no", encode_value(Typed(UINT16, index))),
                     ("split.count", encode_value(Typed(UINT16, n))),
                     ("split.tensors.count", encode_value(Typed(INT32, len(layout.tensors))))]
        kvs = [(e.key, e.raw) for e in layout.kvs if not e.key.startswith("split.")] if index == 0 else []
        path = Path(out_dir) / split_name(prefix, index + 1, n)
        alignment = layout.alignment if index == 0 else 32
        paths.append(write_gguf(path, kvs=kvs + split_kvs, tensors=group, source=layout, alignment=alignment,
                                version=layout.version))
    return paths


def _partition(tensors: Sequence[RawTensor], n: int) -> list[list[RawTensor]]:
    """Tensors in order, cut into n non-empty runs of roughly equal bytes."""
    total = sum(t.nbytes for t in tensors)
    groups: list[list[RawTensor]] = [[]]
    filled = 0
    for index, tensor in enumerate(tensors):
        to_open = n - len(groups)
        if groups[-1] and to_open and (len(tensors) - index == to_open or filled * n >= total * len(groups)):
            groups.append([])
        groups[-1].append(tensor)
        filled += tensor.nbytes
    assert len(groups) == n
    return groups


def same_file_named(src: Path, dst: Path) -> Path:
    """src's bytes under another name, in a file of their own: a hard link made or removed would move src's change
    time, which keys the prompt cache entries of every other test's runs of it (the bundled model)."""
    shutil.copyfile(src, dst)
    return Path(dst)


# ---------------------------------------------------------------- broken and hostile files

def truncated_copy(src: Path, dst: Path, *, keep_bytes: int) -> Path:
    """The first keep_bytes bytes of src."""
    with open(src, "rb") as inp, open(dst, "wb") as out:
        _copy_range(inp, out, 0, keep_bytes)
    return Path(dst)


def patched_copy(src: Path, dst: Path, patches: Mapping[int, bytes]) -> Path:
    """A copy of src with bytes overwritten at the given absolute offsets."""
    if Path(src).resolve() != Path(dst).resolve():
        shutil.copyfile(src, dst)
    with open(dst, "r+b") as out:
        for offset, data in patches.items():
            out.seek(offset)
            out.write(data)
    return Path(dst)


def wrong_magic(src: Path, dst: Path, magic: bytes = b"GGML") -> Path:
    """src with its magic replaced."""
    return patched_copy(src, dst, {0: magic})


def with_version(src: Path, dst: Path, version: int) -> Path:
    """src with the version field set (e.g. 1, 4, 0xFFFFFFFF)."""
    return patched_copy(src, dst, {4: struct.pack("<I", version)})


def big_endian_header(src: Path, dst: Path) -> Path:
    """src with its version and counts byte-swapped, as a big-endian GGUF file starts."""
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", Path(src).read_bytes()[:24], 4)
    return patched_copy(src, dst, {4: struct.pack(">IQQ", version, n_tensors, n_kv)})


def with_counts(src: Path, dst: Path, *, n_tensors: int | None = None, n_kv: int | None = None) -> Path:
    """src with the tensor and/or metadata counts overwritten."""
    patches = {}
    if n_tensors is not None:
        patches[8] = struct.pack("<Q", n_tensors)
    if n_kv is not None:
        patches[16] = struct.pack("<Q", n_kv)
    return patched_copy(src, dst, patches)


def huge_string_length(src: Path, dst: Path, *, key: str = "general.name", length: int = 1 << 62) -> Path:
    """src with the length field of key's string value overwritten."""
    entry = read_layout(src).kv(key)
    assert entry.value_type == STRING, key
    value_offset = entry.offset + 8 + len(key.encode()) + 4
    return patched_copy(src, dst, {value_offset: struct.pack("<Q", length)})


def huge_key_length(src: Path, dst: Path, *, index: int = 0, length: int = 1 << 40) -> Path:
    """src with the length field of metadata key number index overwritten."""
    entry = read_layout(src).kvs[index]
    return patched_copy(src, dst, {entry.offset: struct.pack("<Q", length)})


def huge_array_length(src: Path, dst: Path, *, key: str = "tokenizer.ggml.tokens",
                      length: int = 1 << 40) -> Path:
    """src with the element count of key's array overwritten."""
    entry = read_layout(src).kv(key)
    assert entry.value_type == ARRAY, key
    count_offset = entry.offset + 8 + len(key.encode()) + 4 + 4
    return patched_copy(src, dst, {count_offset: struct.pack("<Q", length)})


def length_field_end(src: Path, key: str) -> int:
    """The offset just past the length field of key's string value or the count field of its array value."""
    entry = read_layout(src).kv(key)
    assert entry.value_type in (STRING, ARRAY), key
    return entry.offset + 8 + len(key.encode()) + 4 + (4 if entry.value_type == ARRAY else 0) + 8


def bad_array_item_type(src: Path, dst: Path, *, key: str = "general.languages", item_type: int = 99) -> Path:
    """src with the item type of key's array overwritten."""
    entry = read_layout(src).kv(key)
    assert entry.value_type == ARRAY, key
    return patched_copy(src, dst, {entry.offset + 8 + len(key.encode()) + 4: struct.pack("<I", item_type)})


def bad_value_type(src: Path, dst: Path, *, key: str = "general.name", value_type: int = 77) -> Path:
    """src with the value type field of key overwritten."""
    entry = read_layout(src).kv(key)
    return patched_copy(src, dst, {entry.offset + 8 + len(key.encode()): struct.pack("<I", value_type)})


def bad_tensor_type(src: Path, dst: Path, *, index: int = 0, ggml_type: int = 99) -> Path:
    """src with tensor number index given an invalid ggml type."""
    tensor = read_layout(src).tensors[index]
    return patched_copy(src, dst, {tensor.type_field: struct.pack("<i", ggml_type)})


def shifted_tensor_offset(src: Path, dst: Path, *, index: int = 1, delta: int = 1) -> Path:
    """src with tensor number index's data offset moved by delta bytes (delta=1: misaligned)."""
    tensor = read_layout(src).tensors[index]
    return patched_copy(src, dst, {tensor.offset_field: struct.pack("<Q", tensor.offset + delta)})


def bad_tensor_dims(src: Path, dst: Path, *, index: int = 0, n_dims: int = 7) -> Path:
    """src with tensor number index's dimension count overwritten."""
    tensor = read_layout(src).tensors[index]
    field = tensor.info_offset + 8 + len(tensor.name.encode())
    return patched_copy(src, dst, {field: struct.pack("<I", n_dims)})


def bad_tensor_shape(src: Path, dst: Path, *, index: int = 0, dim: int = 0, value: int = -1) -> Path:
    """src with one dimension of tensor number index overwritten (0, negative or huge)."""
    tensor = read_layout(src).tensors[index]
    field = tensor.info_offset + 8 + len(tensor.name.encode()) + 4 + 8 * dim
    return patched_copy(src, dst, {field: struct.pack("<q", value)})


def renamed_tensor(src: Path, dst: Path, *, index: int, same_as: int) -> Path:
    """src with tensor number index renamed to tensor number same_as's name (lengths must match)."""
    layout = read_layout(src)
    tensor, other = layout.tensors[index], layout.tensors[same_as]
    assert len(tensor.name) == len(other.name), "names of equal length needed"
    return patched_copy(src, dst, {tensor.info_offset + 8: other.name.encode()})


def duplicate_key(src: Path, dst: Path, *, key: str = "general.name", value: object = "again") -> Path:
    """src with a second entry for key appended to the metadata."""
    return _rewrite(read_layout(src), dst, set_values={}, extra=[(key, encode_value(value))])


def with_raw_entries(src: Path, dst: Path, entries: Sequence[tuple[str, bytes]]) -> Path:
    """src with raw (key, type+value bytes) entries appended to the metadata, for hostile values."""
    return _rewrite(read_layout(src), dst, set_values={}, extra=entries)


def empty_tokens_header(dst: Path, count: int) -> Path:
    """A header of an architecture and a vocabulary of count empty tokens and nothing more: a sparse file of zeros
    (8 bytes a token on disk's length, none of it written), as a hostile file claims a vast vocabulary cheaply."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + _pack_string("general.architecture")
    head += struct.pack("<I", STRING) + _pack_string("llama")
    head += _pack_string("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, count)
    with dst.open("wb") as out:
        out.write(head)
        out.truncate(len(head) + 8 * count)  # count zero lengths: count empty strings
    return dst


def nested_array_value(depth: int = 2) -> bytes:
    """The raw bytes of an array of arrays nested depth levels (llama.cpp cannot read these)."""
    inner = struct.pack("<I", ARRAY) + struct.pack("<IQ", INT32, 1) + struct.pack("<i", 7)
    for _ in range(depth - 1):
        inner = struct.pack("<I", ARRAY) + struct.pack("<IQ", ARRAY, 1) + inner[4:]
    return inner


def tensors_renamed(layout: Layout, mapping: Mapping[str, str]) -> list[RawTensor]:
    """layout's tensors with some names changed."""
    return [replace(t, name=mapping.get(t.name, t.name)) for t in layout.tensors]


# ---------------------------------------------------------------- a tiny, complete, loadable model

TINY_VOCAB = [chr(c) for c in range(ord("!"), ord("~") + 1)] + ["Ġ", "Ċ", "Ġt", "he", "Ġthe", "<|im_start|>",
                                                                   "<|im_end|>", "<|endoftext|>"]
TINY_MERGES = ["Ġ t", "h e", "Ġt he"]
TINY_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


TINY_SPM_VOCAB = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), "\u2581", "t", "h", "e",
                  "\u2581t", "he", "\u2581the"]


def tiny_model(dst: Path, *, n_embd: int = 64, n_head: int = 4, n_head_kv: int = 2, n_layer: int = 2,
               n_ff: int = 128, n_ctx: int = 256, architecture: str = "llama", seed: int = 0,
               tokenizer: str = "gpt2", spm_controls: tuple[str, ...] = (), scale: float = 0.05) -> Path:
    """Write a tiny random-weight llama model with gguf.GGUFWriter that llama.cpp can fully load and run.

    tokenizer="gpt2": a byte-level BPE vocabulary of 102 tokens (TINY_VOCAB); tokenizer="llama": a
    SentencePiece one of 266 tokens with all 256 byte tokens (TINY_SPM_VOCAB), and spm_controls added as control
    tokens (a chat template's). A ChatML template, F32 norms, F16 and Q8_0 weights, of a normal distribution's
    values times scale (the larger, the more its answers hang on each token it attends to and where).
    """
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = TINY_VOCAB if tokenizer == "gpt2" else [*TINY_SPM_VOCAB, *spm_controls]
    n_vocab = len(vocab)
    head_dim = n_embd // n_head
    writer = gguf.GGUFWriter(str(dst), architecture)
    writer.add_name("tiny-test-model")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_tokenizer_model(tokenizer)
    writer.add_token_list(vocab)
    if tokenizer == "gpt2":
        writer.add_tokenizer_pre("smollm")
        writer.add_token_types([3 if t.startswith("<|") else 1 for t in vocab])
        writer.add_token_merges(TINY_MERGES)
        writer.add_bos_token_id(vocab.index("<|im_start|>"))
        writer.add_eos_token_id(vocab.index("<|im_end|>"))
        writer.add_add_bos_token(False)
    else:
        normal = len(TINY_SPM_VOCAB) - 259
        writer.add_token_types([2, 3, 3, *([6] * 256), *([1] * normal), *([3] * len(spm_controls))])
        writer.add_token_scores([0.0] * 259 + [-float(len(t)) for t in vocab[259:]])
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    writer.add_chat_template(TINY_TEMPLATE)

    _write_tiny_weights(writer, rng, n_vocab=n_vocab, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                        n_layer=n_layer, n_ff=n_ff, scale=scale)
    return Path(dst)


def _write_tiny_weights(writer, rng, *, n_vocab: int, n_embd: int, n_head: int, n_head_kv: int, n_layer: int,
                        n_ff: int, scale: float = 0.05) -> None:
    """Add a tiny llama model's random tensors to writer and write the file out."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    head_dim = n_embd // n_head

    def add(name: str, shape: tuple[int, ...], kind: str) -> None:
        """Add a random tensor; shape is numpy order (ggml's reversed)."""
        values = (rng.standard_normal(shape) * scale).astype(np.float32)
        if kind == "f32":
            writer.add_tensor(name, values)
        elif kind == "f16":
            writer.add_tensor(name, values.astype(np.float16))
        else:
            data = quantize(values, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    add("token_embd.weight", (n_vocab, n_embd), "f16")
    for layer in range(n_layer):
        p = f"blk.{layer}."
        add(p + "attn_norm.weight", (n_embd,), "f32")
        add(p + "attn_q.weight", (n_embd, n_embd), "q8")
        add(p + "attn_k.weight", (head_dim * n_head_kv, n_embd), "q8")
        add(p + "attn_v.weight", (head_dim * n_head_kv, n_embd), "q8")
        add(p + "attn_output.weight", (n_embd, n_embd), "q8")
        add(p + "ffn_norm.weight", (n_embd,), "f32")
        add(p + "ffn_gate.weight", (n_ff, n_embd), "q8")
        add(p + "ffn_up.weight", (n_ff, n_embd), "q8")
        add(p + "ffn_down.weight", (n_embd, n_ff), "f16")
    add("output_norm.weight", (n_embd,), "f32")
    add("output.weight", (n_vocab, n_embd), "f16")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def tiny_family_model(dst: Path, *, specials: Sequence[str], template: str, eos: str, bos: str | None = None,
                      add_bos: bool = False, user_defined: Sequence[str] = ()) -> Path:
    """Write a tiny random-weight llama model with one model family's chat template and special tokens: TINY_VOCAB's
    byte-level tokens, then specials, typed control (user_defined ones user-defined, as the family's file types
    them; llama.cpp may type them otherwise at load)."""
    import gguf
    import numpy as np

    vocab = [t for t in TINY_VOCAB if not t.startswith("<|")] + list(specials)
    writer = gguf.GGUFWriter(str(dst), "llama")
    writer.add_name(Path(dst).stem)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(512)
    writer.add_embedding_length(64)
    writer.add_block_count(2)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_rope_dimension_count(16)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(vocab))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(vocab)
    writer.add_token_types([(4 if t in user_defined else 3) if t in specials else 1 for t in vocab])
    writer.add_token_merges(TINY_MERGES)
    if bos is not None:
        writer.add_bos_token_id(vocab.index(bos))
    writer.add_eos_token_id(vocab.index(eos))
    writer.add_add_bos_token(add_bos)
    writer.add_chat_template(template)
    _write_tiny_weights(writer, np.random.default_rng(0), n_vocab=len(vocab), n_embd=64, n_head=4, n_head_kv=2,
                        n_layer=2, n_ff=128)
    return Path(dst)
