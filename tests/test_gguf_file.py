"""The GGUF reader: the real model reads right; broken, hostile and split files are judged right."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import gguf_builders as gb
import pytest

from localgen.errors import GGUFError, GGUFUnreadableError, LocalgenError, ModelNotFoundError, NotGGUFError
from localgen.gguf_checks import KNOWN_ARCHITECTURES
from localgen.gguf_cursor import HINT, GGUFTruncatedError
from localgen.gguf_format import GGML_TYPES
from localgen.gguf_info import ArraySummary, GGUFInfo, TensorInfo
from localgen.gguf_reader import EMPTY_FILE_HINT, read_gguf, read_gguf_bytes
from localgen.gguf_split import validate_split
from tests.conftest import bundled_model_file, run_localgen

if TYPE_CHECKING:
    from gguf import GGUFReader

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Examples per run of the property test (raise with LOCALGEN_FUZZ_EXAMPLES for a long local fuzz).
FUZZ_EXAMPLES = int(os.environ.get("LOCALGEN_FUZZ_EXAMPLES", "400"))
# At most this many accepted mutants per run are then loaded by llama.cpp, in one subprocess.
FUZZ_LLAMA_LOADS = int(os.environ.get("LOCALGEN_FUZZ_LOADS", "40"))
FUZZ_EXAMPLE_SECONDS = 10.0  # per-example deadline: a read_gguf call taking longer counts as a hang
FUZZ_RANDOM = bool(os.environ.get("LOCALGEN_FUZZ_RANDOM"))  # explore new examples instead of the fixed ones

BUNDLED_PARAMETERS = 134_515_008
BUNDLED_DATA_OFFSET = 1_785_664


def _has_llama_cpp() -> bool:
    """True when llama_cpp imports in a fresh interpreter."""
    probe = subprocess.run([sys.executable, "-c", "import llama_cpp"], capture_output=True, timeout=120)
    return probe.returncode == 0


needs_llama = pytest.mark.skipif(not _has_llama_cpp(), reason="llama_cpp is not installed")


@pytest.fixture(scope="module")
def bundled() -> Path:
    """The real SmolLM2-135M Q4_1 model."""
    try:
        return bundled_model_file()
    except ModelNotFoundError as exc:
        pytest.skip(exc.message)


@pytest.fixture(scope="module")
def bundled_by_gguf(bundled: Path) -> GGUFReader:
    """The gguf package's reading of the bundled model, made once for the tests that compare with it (3 s each)."""
    gguf = pytest.importorskip("gguf")
    return gguf.GGUFReader(str(bundled))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny, complete llama model written by gguf.GGUFWriter."""
    return gb.tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="module")
def tiny_spm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny llama model with a SentencePiece vocabulary (all 256 byte tokens)."""
    return gb.tiny_model(tmp_path_factory.mktemp("tiny_spm") / "tiny_spm.gguf", tokenizer="llama")


def _error(path: Path, **kwargs: bool) -> GGUFError:
    """The GGUFError read_gguf raises for path (failing the test if it raises nothing or anything else)."""
    with pytest.raises(GGUFError) as caught:
        read_gguf(path, **kwargs)
    assert type(caught.value) in (GGUFError, GGUFTruncatedError, GGUFUnreadableError, NotGGUFError)
    assert caught.value.message.startswith(f"{path.name}: "), caught.value.message
    assert "\n" not in caught.value.message
    assert caught.value.hint
    return caught.value


# ---------------------------------------------------------------- the real model


def test_bundled_model_reads_with_the_right_properties(bundled: Path) -> None:
    info = read_gguf(bundled)
    assert isinstance(info, GGUFInfo)
    assert info.path == bundled
    assert info.file_size == gb.BUNDLED_SIZE == bundled.stat().st_size
    assert info.version == 3
    assert info.alignment == 32
    assert info.data_offset == BUNDLED_DATA_OFFSET
    assert info.architecture == "llama"
    assert info.name == "Smollm2 135M 8k Lc100K Mix1 Ep2"
    assert info.context_length == 8192
    assert info.block_count == 30
    assert info.embedding_length == 576
    assert info.head_count == 9
    assert info.key_length == info.value_length == 64
    assert info.sliding_window is None
    assert info.chat_template is not None and "im_start" in info.chat_template
    assert info.file_type == 3
    assert info.quant == "Q4_1"
    assert info.parameter_count == BUNDLED_PARAMETERS
    assert len(info.tensors) == 272
    assert info.split_count == 1 and info.split_no == 0
    assert info.metadata["tokenizer.ggml.tokens"] == ArraySummary(item_type=8, length=49152)
    assert info.metadata["tokenizer.ggml.merges"] == ArraySummary(item_type=8, length=48900)
    assert info.metadata["general.languages"] == ("en",)
    assert info.metadata["tokenizer.ggml.eos_token_id"] == 2
    last = info.tensors[-1]
    assert last.offset + last.nbytes == info.file_size
    assert sum(t.nbytes for t in info.tensors) < info.file_size
    embd = info.tensors[0]
    q8_bytes = 576 * 49152 // 32 * 34
    assert embd == TensorInfo("token_embd.weight", (576, 49152), 8, BUNDLED_DATA_OFFSET, q8_bytes)
    with pytest.raises(TypeError):
        info.metadata["general.name"] = "x"  # type: ignore[index]


def test_tensor_table_agrees_with_the_gguf_package(bundled: Path, bundled_by_gguf: GGUFReader) -> None:
    reader = bundled_by_gguf
    info = read_gguf(bundled)
    assert [t.name for t in info.tensors] == [t.name for t in reader.tensors]
    for mine, theirs in zip(info.tensors, reader.tensors, strict=True):
        assert mine.shape == tuple(int(d) for d in theirs.shape)
        assert mine.ggml_type == int(theirs.tensor_type)
        assert mine.offset == int(theirs.data_offset)
        assert mine.nbytes == int(theirs.n_bytes)
        assert mine.n_elements == int(theirs.n_elements)


def test_the_longest_token_agrees_with_the_gguf_package(bundled: Path, bundled_by_gguf: GGUFReader) -> None:
    """The bytes of the vocabulary's longest token as stored, which bound the bytes of text one token stands for."""
    field = bundled_by_gguf.fields["tokenizer.ggml.tokens"]
    assert read_gguf(bundled).longest_token == max(len(field.parts[index]) for index in field.data) == 162


def test_the_control_tokens_agree_with_the_gguf_package(bundled: Path, bundled_by_gguf: GGUFReader) -> None:
    """The texts of the tokens typed CONTROL (3) or UNKNOWN (2), as the gguf package reads the vocabulary."""
    fields = bundled_by_gguf.fields
    tokens, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    expected = {bytes(tokens.parts[t]).decode() for t, k in zip(tokens.data, types.data, strict=True)
                if int(types.parts[k][0]) in (2, 3)}
    assert read_gguf(bundled).control_tokens == expected and "<|im_end|>" in expected


def test_a_vocabulary_of_millions_of_tokens_is_refused_before_they_are_read(tmp_path: Path) -> None:
    """A header that claims more tokens than any real vocabulary (4,000,001 empty ones, 32 MB of zeros that take no
    disk) is refused on its count, where reading and naming each of them took seconds and gigabytes at 30 million."""
    from localgen.gguf_format import MAX_VOCABULARY_TOKENS

    path = gb.empty_tokens_header(tmp_path / "vast.gguf", MAX_VOCABULARY_TOKENS + 1)
    assert _error(path).message == (f"vast.gguf: the vocabulary 'tokenizer.ggml.tokens' has "
                                    f"{MAX_VOCABULARY_TOKENS + 1:,} tokens (limit {MAX_VOCABULARY_TOKENS:,}; real "
                                    "models have at most a few hundred thousand)")


def test_empty_tokens_are_named_as_llama_cpp_names_them(tiny: Path, tmp_path: Path) -> None:
    """An empty token is llama.cpp's [EMPTY_i], a control token so named among the control tokens; empty tokens that
    collide with no other name are no duplicates."""
    vocab = ["", *gb.TINY_VOCAB[1:-1], ""]  # the last, <|endoftext|>, is a control token
    info = read_gguf(gb.copy_with_metadata(tiny, tmp_path / "empty.gguf", set_values={"tokenizer.ggml.tokens": vocab}))
    assert info.control_tokens == {"<|im_start|>", "<|im_end|>", f"[EMPTY_{len(vocab) - 1}]"}
    assert info.longest_token == len("<|im_start|>")


def test_ggml_type_sizes_agree_with_the_gguf_package() -> None:
    gguf = pytest.importorskip("gguf")
    checked = 0
    for type_id, (name, block, size) in GGML_TYPES.items():
        try:
            quant = gguf.GGMLQuantizationType(type_id)
        except ValueError:
            continue  # newer than the gguf package
        assert quant.name == name
        assert gguf.GGML_QUANT_SIZES[quant] == (block, size)
        checked += 1
    assert checked >= 30


def test_known_architectures_come_from_the_vendored_llama_cpp() -> None:
    expected = {"llama", "qwen2", "qwen3", "gemma3", "phi3", "mistral3", "gpt-oss", "smollm3"}
    assert expected <= KNOWN_ARCHITECTURES
    assert "clip" not in KNOWN_ARCHITECTURES and "(unknown)" not in KNOWN_ARCHITECTURES
    assert len(KNOWN_ARCHITECTURES) == 152  # 154 names in LLM_ARCH_NAMES, less clip and (unknown)


def test_reading_the_bundled_model_reads_its_header_alone_in_bounded_work(bundled: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """read_gguf reads the metadata, vocabulary and tensor infos (2 MiB of the 94 MiB file), not the weights, in about
    160,000 Python calls (~20 ms on the reference machine): counted, where a clock on a loaded machine is not (the
    header read afresh, not the one kept in the cache)."""
    import cProfile
    import pstats

    import localgen.gguf_reader

    monkeypatch.setattr(localgen.gguf_reader, "kept_header", lambda path, st: None)
    monkeypatch.setattr(localgen.gguf_reader, "keep_header", lambda path, st, info: None)  # nor kept for others
    read_gguf(bundled)
    before = _bytes_read()
    read_gguf(bundled)
    assert _bytes_read() - before < 4 << 20
    profile = cProfile.Profile()
    profile.runcall(read_gguf, bundled)
    assert pstats.Stats(profile).total_calls < 320_000  # type: ignore[attr-defined]


def _bytes_read() -> int:
    """The bytes this process has read from files and pipes (Linux's /proc/self/io rchar)."""
    line = next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:"))
    return int(line.split()[1])


def test_tiny_model_reads(tiny: Path) -> None:
    info = read_gguf(tiny)
    assert info.architecture == "llama"
    assert (info.block_count, info.embedding_length, info.head_count) == (2, 64, 4)
    assert info.key_length == 16
    assert info.quant == "Q8_0"
    assert info.metadata["tokenizer.ggml.tokens"] == tuple(gb.TINY_VOCAB)
    assert info.chat_template == gb.TINY_TEMPLATE


def test_header_only_prefix_reads_without_the_tensor_check(bundled: Path, tmp_path: Path) -> None:
    prefix = gb.truncated_copy(bundled, tmp_path / "prefix.gguf", keep_bytes=BUNDLED_DATA_OFFSET)
    info = read_gguf(prefix, check_tensors=False)
    assert info.parameter_count == BUNDLED_PARAMETERS
    error = _error(prefix)
    assert f"truncated: {BUNDLED_DATA_OFFSET:,} of {gb.BUNDLED_SIZE:,} bytes" in error.message


def test_header_bytes_read_like_the_file(bundled: Path) -> None:
    head = bundled.read_bytes()[:BUNDLED_DATA_OFFSET]
    info = read_gguf_bytes(head, "org/repo/model.gguf")
    whole = read_gguf(bundled)
    assert info.path == Path("org/repo/model.gguf") and info.file_size == BUNDLED_DATA_OFFSET
    assert (info.version, info.alignment, info.data_offset) == (whole.version, whole.alignment, whole.data_offset)
    assert info.metadata == whole.metadata and info.tensors == whole.tensors


def test_header_bytes_cut_short_are_truncated_and_other_problems_are_not(bundled: Path, tmp_path: Path) -> None:
    head = bundled.read_bytes()[:BUNDLED_DATA_OFFSET]
    for cut in (3, 20, 1024, 1 << 20, BUNDLED_DATA_OFFSET - 1):  # 3: 'GGU', no text file
        with pytest.raises(GGUFTruncatedError) as caught:
            read_gguf_bytes(head[:cut], "sub/model.gguf")
        assert caught.value.message.startswith("model.gguf: ") and caught.value.hint
    odd = gb.copy_with_metadata(bundled, tmp_path / "odd.gguf", set_values={"general.architecture": "notanarch"})
    with pytest.raises(GGUFError, match="architecture 'notanarch' is not supported") as caught:
        read_gguf_bytes(odd.read_bytes()[:4 << 20], odd.name)
    assert type(caught.value) is GGUFError
    assert caught.value.hint == "use a model of another architecture, or a llama-cpp-python release that supports " \
                                "this one", "the file itself may be fine"
    projector = gb.copy_with_metadata(bundled, tmp_path / "mmproj.gguf", set_values={"general.architecture": "clip"})
    with pytest.raises(GGUFError, match="a CLIP vision projector") as caught:
        read_gguf_bytes(projector.read_bytes()[:4 << 20], projector.name)
    assert caught.value.hint == "use the repository's language-model file (localgen does not use projectors)"


def test_header_bytes_with_the_file_size_tell_a_corrupt_count_from_a_short_read(tiny: Path, tmp_path: Path) -> None:
    key = "tokenizer.ggml.merges"
    cut, size = gb.length_field_end(tiny, key) + 16, tiny.stat().st_size
    corrupt = gb.huge_array_length(tiny, tmp_path / "corrupt.gguf", key=key, length=10_000_000)
    with pytest.raises(GGUFTruncatedError):  # without the file's size, a longer read might hold it
        read_gguf_bytes(corrupt.read_bytes()[:cut], "model.gguf")
    with pytest.raises(GGUFError) as caught:
        read_gguf_bytes(corrupt.read_bytes()[:cut], "model.gguf", file_size=size)
    assert type(caught.value) is GGUFError and caught.value.hint
    assert caught.value.message == (f"model.gguf: corrupt header: array '{key}' of 10,000,000 items needs at least "
                                    f"80,000,000 bytes from byte {cut - 16:,}, reaching past the end of the file "
                                    f"({size:,} bytes)")
    with pytest.raises(GGUFTruncatedError, match=f"past the first {cut:,} bytes read \\(of {size:,}\\)"):
        read_gguf_bytes(tiny.read_bytes()[:cut], "model.gguf", file_size=size)
    header = tiny.read_bytes()[:gb.read_layout(tiny).data_offset]
    assert read_gguf_bytes(header, "model.gguf", file_size=size).file_size == size
    with pytest.raises(GGUFTruncatedError, match="truncated: 0 bytes"):  # none read yet of a file that has some
        read_gguf_bytes(b"", "model.gguf", file_size=size)
    with pytest.raises(GGUFError, match=r"^model.gguf: empty file \(0 bytes\)$") as caught:
        read_gguf_bytes(b"", "model.gguf")  # as the Hub lists a file of 0 bytes, or as read_gguf finds one
    assert type(caught.value) is NotGGUFError and caught.value.hint == EMPTY_FILE_HINT


def test_a_count_past_the_header_limit_fails_where_it_is_read(tiny: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import gguf_cursor

    key = "tokenizer.ggml.merges"
    path = gb.huge_array_length(tiny, tmp_path / "model.gguf", key=key, length=5_000)  # 40 kB: fits in the file
    monkeypatch.setattr(gguf_cursor, "MAX_HEADER_BYTES", 8192)
    error = _error(path)
    assert type(error) is GGUFError
    assert error.message.startswith(f"model.gguf: header larger than 8,192 bytes: array '{key}' of 5,000 items")


# ---------------------------------------------------------------- builders produce what llama.cpp loads


def test_copy_without_changes_is_byte_identical(bundled: Path, tmp_path: Path) -> None:
    copy = gb.copy_with_metadata(bundled, tmp_path / "copy.gguf")
    assert _sha256(copy) == _sha256(bundled)


def _sha256(path: Path) -> str:
    """The sha256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_llama
def test_copy_with_metadata_changes_loads_in_llama_cpp(bundled: Path, tmp_path: Path) -> None:
    template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    copy = gb.copy_with_metadata(bundled, tmp_path / "retemplated.gguf", drop=["general.license"],
                                 set_values={"tokenizer.chat_template": template, "general.name": "renamed"})
    info = read_gguf(copy)
    assert info.chat_template == template and info.name == "renamed"
    assert "general.license" not in info.metadata
    assert info.tensors == tuple(
        TensorInfo(t.name, t.shape, t.ggml_type, t.offset + info.data_offset - BUNDLED_DATA_OFFSET, t.nbytes)
        for t in read_gguf(bundled).tensors)
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(copy), vocab_only=True, verbose=False)
    assert llm.metadata["tokenizer.chat_template"] == template
    assert llm.metadata["general.name"] == "renamed"


@needs_llama
def test_tiny_model_loads_and_runs_in_llama_cpp(tiny: Path) -> None:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(tiny), n_ctx=64, verbose=False)
    assert llm.tokenize(b"the", add_bos=False) == [gb.TINY_VOCAB.index("t"), gb.TINY_VOCAB.index("he")]
    assert llm.tokenize(b" the", add_bos=False) == [gb.TINY_VOCAB.index("\u0120the")]
    out = llm("the", max_tokens=3, temperature=0)
    assert out["usage"]["completion_tokens"] >= 1


@needs_llama
def test_tiny_sentencepiece_model_reads_and_runs(tiny_spm: Path) -> None:
    info = read_gguf(tiny_spm)
    assert info.metadata["tokenizer.ggml.model"] == "llama"
    assert info.metadata["tokenizer.ggml.tokens"] == ArraySummary(8, len(gb.TINY_SPM_VOCAB))
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(tiny_spm), n_ctx=64, verbose=False)
    text = "the he \n\t \u03a9 \U0001f600".encode()
    tokens = llm.tokenize(text, add_bos=True, special=True)
    assert tokens[:2] == [1, gb.TINY_SPM_VOCAB.index("\u2581the")]
    assert llm.detokenize(tokens[1:]) == b" " + text  # byte fallback covers what the vocabulary lacks
    llm.eval(tokens[:8])


# ---------------------------------------------------------------- broken and hostile files


def _set(values: dict[str, object], drop: tuple[str, ...] = ()) -> Builder:
    """A builder that copies its source with metadata values set (and keys dropped)."""
    return lambda s, d: gb.copy_with_metadata(s, d, set_values=values, drop=drop)


Builder = Callable[[Path, Path], object]

# (case id, source model, builder(src, dst), words the message must contain)
BROKEN: list[tuple[str, str, Builder, tuple[str, ...]]] = [
    ("empty", "tiny", lambda s, d: d.write_bytes(b""), ("empty",)),
    ("three-bytes", "tiny", lambda s, d: d.write_bytes(b"GGU"),  # was 'not a GGUF file (text: 'GGU')'
     ("truncated: 3 bytes, the start of a GGUF header, which takes 24 at least",)),
    ("one-byte", "tiny", lambda s, d: d.write_bytes(b"G"), ("truncated: 1 byte, the start of a GGUF header",)),
    ("four-bytes-not-gguf", "tiny", lambda s, d: d.write_bytes(b"GGUX"), ("not a GGUF file (text: 'GGUX')",)),
    ("truncated-1KB", "bundled", lambda s, d: gb.truncated_copy(s, d, keep_bytes=1024), ("truncated",)),
    ("truncated-1MB", "bundled", lambda s, d: gb.truncated_copy(s, d, keep_bytes=1 << 20), ("truncated",)),
    ("truncated-99%", "bundled", lambda s, d: gb.truncated_copy(s, d, keep_bytes=gb.BUNDLED_SIZE * 99 // 100),
     ("truncated:", f"{gb.BUNDLED_SIZE * 99 // 100:,} of {gb.BUNDLED_SIZE:,} bytes")),
    ("truncated-in-counts", "tiny", lambda s, d: gb.truncated_copy(s, d, keep_bytes=20), ("truncated",)),
    ("truncated-last-byte", "tiny", lambda s, d: gb.truncated_copy(s, d, keep_bytes=s.stat().st_size - 1),
     ("truncated:",)),
    ("wrong-magic", "tiny", lambda s, d: gb.wrong_magic(s, d), ("not a GGUF", "GGML")),
    ("old-ggjt", "tiny", lambda s, d: gb.wrong_magic(s, d, b"tjgg"), ("GGJT",)),
    ("html-page", "tiny", lambda s, d: d.write_bytes(b"<!DOCTYPE html><html>Not found</html>"), ("HTML",)),
    ("lfs-pointer", "tiny", lambda s, d: d.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid "),
     ("Git LFS",)),
    ("version-1", "tiny", lambda s, d: gb.with_version(s, d, 1), ("version 1",)),
    ("version-4", "tiny", lambda s, d: gb.with_version(s, d, 4), ("unsupported GGUF version 4",)),
    ("version-max", "tiny", lambda s, d: gb.with_version(s, d, 0xFFFFFFFF), ("unsupported GGUF version",)),
    ("big-endian", "tiny", lambda s, d: gb.big_endian_header(s, d), ("big-endian",)),
    ("version-0", "tiny", lambda s, d: gb.with_version(s, d, 0), ("invalid GGUF version 0", "damaged")),
    ("zeros-after-magic", "tiny", lambda s, d: d.write_bytes(b"GGUF" + bytes(100_000)), ("invalid GGUF version 0",)),
    ("tensor-count-huge", "tiny", lambda s, d: gb.with_counts(s, d, n_tensors=1 << 40), ("tensor count",)),
    ("kv-count-huge", "tiny", lambda s, d: gb.with_counts(s, d, n_kv=(1 << 64) - 1), ("metadata count",)),
    ("kv-count-beyond-file", "tiny", lambda s, d: gb.with_counts(s, d, n_kv=100_000), ("need at least",)),
    ("kv-count-one-more", "tiny", lambda s, d: gb.with_counts(s, d, n_kv=len(gb.read_layout(s).kvs) + 1), ()),
    ("tensor-count-one-more", "tiny",
     lambda s, d: gb.with_counts(s, d, n_tensors=len(gb.read_layout(s).tensors) + 1), ()),
    ("string-length-huge", "bundled", lambda s, d: gb.huge_string_length(s, d), ("bytes long", "limit")),
    ("string-length-past-eof", "tiny", lambda s, d: gb.huge_string_length(s, d, length=10_000_000),
     ("truncated or corrupt", "general.name")),
    ("key-length-huge", "tiny", lambda s, d: gb.huge_key_length(s, d), ("metadata key #0", "limit")),
    ("array-length-huge", "bundled", lambda s, d: gb.huge_array_length(s, d), ("items (limit",)),
    ("array-length-past-eof", "bundled", lambda s, d: gb.huge_array_length(s, d, length=50_000_000),
     ("truncated or corrupt", "tokenizer.ggml.tokens")),
    ("token-types-past-eof", "bundled",
     lambda s, d: gb.huge_array_length(s, d, key="tokenizer.ggml.token_type", length=90_000_000),
     ("truncated or corrupt",)),
    ("array-item-type", "bundled", lambda s, d: gb.bad_array_item_type(s, d),
     ("invalid array item type 99",)),
    ("value-type", "tiny", lambda s, d: gb.bad_value_type(s, d), ("invalid value type 77",)),
    ("nested-array", "tiny", lambda s, d: gb.with_raw_entries(s, d, [("x.nested", gb.nested_array_value(3))]),
     ("nested array",)),
    ("tensor-type-99", "tiny", lambda s, d: gb.bad_tensor_type(s, d), ("invalid ggml type 99",)),
    ("tensor-type-removed", "tiny", lambda s, d: gb.bad_tensor_type(s, d, ggml_type=4),
     ("invalid ggml type 4",)),
    ("tensor-type-negative", "tiny", lambda s, d: gb.bad_tensor_type(s, d, ggml_type=-1), ("ggml type -1",)),
    ("tensor-misaligned", "bundled", lambda s, d: gb.shifted_tensor_offset(s, d), ("misaligned",)),
    ("tensor-gap", "tiny", lambda s, d: gb.shifted_tensor_offset(s, d, delta=32), ("gaps",)),
    ("tensor-overlap", "tiny", lambda s, d: gb.shifted_tensor_offset(s, d, delta=-32), ("overlap",)),
    ("tensor-dims-7", "tiny", lambda s, d: gb.bad_tensor_dims(s, d), ("7 dimensions",)),
    ("tensor-dims-0", "tiny", lambda s, d: gb.bad_tensor_dims(s, d, n_dims=0), ("0 dimensions",)),
    ("tensor-dim-negative", "tiny", lambda s, d: gb.bad_tensor_shape(s, d), ("invalid shape",)),
    ("tensor-dim-zero", "tiny", lambda s, d: gb.bad_tensor_shape(s, d, value=0), ("invalid shape",)),
    ("tensor-dims-overflow", "tiny",
     lambda s, d: gb.bad_tensor_shape(gb.bad_tensor_shape(s, d, dim=1, value=1 << 62), d, value=1 << 40),
     ("overflows",)),
    ("tensor-past-eof", "tiny", lambda s, d: gb.bad_tensor_shape(s, d, index=-1, dim=1, value=1 << 30),
     ("truncated",)),
    ("tensor-row-not-block-multiple", "tiny", lambda s, d: gb.bad_tensor_shape(s, d, index=2, value=48),
     ("block size 32",)),
    ("tensor-duplicate-name", "tiny", lambda s, d: gb.renamed_tensor(s, d, index=3, same_as=2),
     ("duplicate tensor name 'blk.0.attn_q.weight'",)),
    ("tensor-name-too-long", "tiny", lambda s, d: _write_renamed(s, d, {"output.weight": "x" * 64}),
     ("64 bytes long (limit 63)",)),
    ("tensor-name-not-utf8", "tiny",
     lambda s, d: gb.patched_copy(s, d, {gb.read_layout(s).tensors[0].info_offset + 8: b"\xff"}),
     ("not valid UTF-8",)),
    ("key-not-utf8", "tiny", lambda s, d: gb.with_raw_entries(s, d, [(b"bad\xff", gb.encode_value(1))]),
     ("not valid UTF-8",)),
    ("key-empty", "tiny", lambda s, d: gb.with_raw_entries(s, d, [("", gb.encode_value(1))]), ("is empty",)),
    ("key-duplicate", "tiny", lambda s, d: gb.duplicate_key(s, d),
     ("duplicate metadata key 'general.name'",)),
    ("alignment-48", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.alignment": gb.Typed(gb.UINT32, 48)}),
     ("power of two",)),
    ("alignment-0", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.alignment": gb.Typed(gb.UINT32, 0)}),
     ("power of two",)),
    ("alignment-16", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.alignment": gb.Typed(gb.UINT32, 16)}),
     ("below the 32 bytes",)),
    ("alignment-u64", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.alignment": gb.Typed(gb.UINT64, 32)}),
     ("must be a u32",)),
    ("architecture-unknown", "bundled",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.architecture": "notanarch"}),
     ("architecture 'notanarch' is not supported",)),
    ("architecture-clip", "tiny", lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.architecture":
                                                                                        "clip"}), ("CLIP",)),
    ("architecture-missing", "tiny", lambda s, d: gb.copy_with_metadata(s, d, drop=["general.architecture"]),
     ("no general.architecture",)),
    ("architecture-not-string", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"general.architecture": 7}), ("not a string",)),
    ("block-count-0", "tiny", lambda s, d: gb.copy_with_metadata(s, d, set_values={"llama.block_count": 0}),
     ("block_count is 0",)),
    ("block-count-huge", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"llama.block_count": 100_000}), ("block_count",)),
    ("context-length-string", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"llama.context_length": "8k"}),
     ("must be an integer",)),
    ("experts-too-many", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"llama.expert_count": 5000}),
     ("mixture-of-experts",)),
    ("experts-used-too-many", "tiny", lambda s, d: gb.copy_with_metadata(
        s, d, set_values={"llama.expert_count": 4, "llama.expert_used_count": 8}), ("expert_used_count 8",)),
    ("rope-scaling-unknown", "tiny",
     lambda s, d: gb.copy_with_metadata(s, d, set_values={"llama.rope.scaling.type": "bogus"}),
     ("rope.scaling.type",)),
    ("tokens-duplicate", "tiny", lambda s, d: gb.copy_with_metadata(
        s, d, set_values={"tokenizer.ggml.tokens": [*gb.TINY_VOCAB[:-1], "a"]}), ("duplicate tokens",)),
    ("tokens-empty-collides", "tiny", lambda s, d: gb.copy_with_metadata(
        s, d, set_values={"tokenizer.ggml.tokens": ["", *gb.TINY_VOCAB[1:-1], "[EMPTY_0]"]}),
     ("duplicate tokens",)),
    ("tokens-duplicate-long", "bundled", lambda s, d: gb.patched_copy(s, d, _duplicate_token_patch(s)),
     ("duplicate tokens",)),
    ("tokenizer-none", "tiny", _set({"tokenizer.ggml.model": "none"}), ("no tokenizer",)),
    ("tokenizer-unknown", "tiny", _set({"tokenizer.ggml.model": "wordpiece9"}), ("unknown tokenizer",)),
    ("spm-missing-byte-tokens", "tiny_spm",
     _set({"tokenizer.ggml.tokens": [t if t != "<0x41>" else "zz" for t in gb.TINY_SPM_VOCAB]}),
     ("byte-fallback token for 1 of 256", "<0x41>")),
    ("gemma4-without-bos", "tiny",
     _set({"tokenizer.ggml.model": "gemma4"}, drop=("tokenizer.ggml.bos_token_id",)), ("adds a BOS token",)),
    ("bert-without-sep", "tiny", _set({"tokenizer.ggml.model": "bert"}), ("adds a SEP token",)),
    ("bert-byte-tokens", "tiny", _set({
        "tokenizer.ggml.model": "bert", "tokenizer.ggml.seperator_token_id": gb.Typed(gb.UINT32, 5),
        "tokenizer.ggml.token_type": gb.Typed(gb.INT32, [1] * 101 + [6])}), ("byte tokens",)),
    ("rwkv-without-all-bytes", "tiny", _set({"tokenizer.ggml.model": "rwkv"}), ("covers only",)),
    ("tokens-nul-collision", "tiny",
     _set({"tokenizer.ggml.tokens": [*gb.TINY_VOCAB[:-1], "a\x00z"]}), ("duplicate tokens",)),
    ("epsilon-negative", "tiny", _set({"llama.attention.layer_norm_rms_epsilon": -1.0}), ("negative",)),
    ("rope-freq-nan", "tiny", _set({"llama.rope.freq_base": float("nan")}), ("freq_base is nan",)),
    ("head-count-kv-wraps", "tiny", _set({"llama.attention.head_count_kv": gb.Typed(gb.UINT32, 0xFFFFFFFF)}),
     ("head_count_kv is 4,294,967,295",)),
    ("attention-overflows", "tiny",
     _set({"llama.attention.head_count_kv": 4096, "llama.attention.key_length": 8192}), ("overflows",)),
    ("split-no-wrong-type", "tiny", lambda s, d: gb.copy_with_metadata(
        s, d, set_values={"split.no": gb.Typed(gb.UINT32, 0), "split.count": gb.Typed(gb.UINT16, 1)}),
     ("split.no must be a u16",)),
    ("split-no-beyond-count", "tiny", lambda s, d: gb.copy_with_metadata(
        s, d, set_values={"split.no": gb.Typed(gb.UINT16, 3), "split.count": gb.Typed(gb.UINT16, 2)}),
     ("invalid split metadata",)),
]


def _write_renamed(src: Path, dst: Path, mapping: dict[str, str]) -> Path:
    """src rewritten with some tensors renamed."""
    layout = gb.read_layout(src)
    kvs = [(e.key, e.raw) for e in layout.kvs]
    return gb.write_gguf(dst, kvs=kvs, tensors=gb.tensors_renamed(layout, mapping), source=layout)


def _duplicate_token_patch(src: Path) -> dict[int, bytes]:
    """Bytes that turn token 300 of the bundled model into a copy of token 301 (same length, far past the
    first megabyte read, so the long-array path is what catches it)."""
    layout = gb.read_layout(src)
    entry = layout.kv("tokenizer.ggml.tokens")
    off = entry.offset + 8 + len(entry.key) + 4 + 12
    data = src.read_bytes()[:BUNDLED_DATA_OFFSET]
    tokens = []
    for _ in range(49152):
        (length,) = struct.unpack_from("<Q", data, off)
        tokens.append((off + 8, data[off + 8:off + 8 + length]))
        off += 8 + length
    index = next(i for i in range(40000, 49151) if len(tokens[i][1]) == len(tokens[i + 1][1]))
    return {tokens[index][0]: tokens[index + 1][1]}


@pytest.mark.parametrize(("source", "build", "words"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_file_gives_a_clear_gguf_error(source: str, build: Builder, words: tuple[str, ...],
                                               request: pytest.FixtureRequest, tmp_path: Path) -> None:
    src = request.getfixturevalue(source)
    path = tmp_path / "model.gguf"
    build(src, path)
    error = _error(path)
    for word in words:
        assert word in error.message, error.message
    assert isinstance(error, LocalgenError)
    assert isinstance(error, GGUFTruncatedError) == ("truncated" in error.message), error.message


_SAFETENSORS_HEADER = b'{"__metadata__": {"format": "pt"}}'
_CONVERT = "convert it to GGUF with llama.cpp's convert_hf_to_gguf.py, or find a GGUF repo of the model on Hugging Face"


@pytest.mark.parametrize(("head", "problem", "hint"), [
    (b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1", "text: 'root:x:0:0:root:/root:/b…'",
     "check the path: this is a text file; localgen loads GGUF model files, usually ending in .gguf"),
    (b"# Notes\r\n\tship\x1bv2", "it starts '# No', where a GGUF file starts 'GGUF'", HINT),  # no raw escape
    (b"\x7fELF\x02\x01\x01" + bytes(60), "it starts with the bytes 7f 45 4c 46, where a GGUF file starts 'GGUF'",
     HINT),
    (struct.pack("<Q", len(_SAFETENSORS_HEADER)) + _SAFETENSORS_HEADER, "a safetensors model", _CONVERT),
    (b"PK\x03\x04" + bytes(60), "a zip archive, as a PyTorch checkpoint is", _CONVERT),
    (b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P", "a Python pickle, as an older PyTorch checkpoint is", _CONVERT),
    (b"\n<!doctype html>\n<html lang=en><head><title>Hugging Face", "an HTML page: '<!doctype html> <html la…'",
     "the download saved a web page, not the model: localgen downloads ORG/REPO/FILE.gguf itself"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 9", "a Git LFS pointer, not the model itself",
     "the clone holds the pointer, not the model: localgen downloads ORG/REPO/FILE.gguf itself, or `git lfs pull` "
     "fetches it"),
    (("a" + "é" * 40).encode(), "text: 'a" + "é" * 23 + "…'", None),  # its 64th byte cuts an é
    (b"\n \n\t\n", "text: blank", None),
])
def test_a_file_of_another_kind_is_named_for_what_it_is(head: bytes, problem: str, hint: str | None,
                                                        tmp_path: Path) -> None:
    """Not 'magic b'root', expected b'GGUF'': what the file is, where its first bytes tell, and what to do."""
    path = tmp_path / "model.gguf"
    path.write_bytes(head)
    error = _error(path)
    assert error.message == f"model.gguf: not a GGUF file ({problem})"
    assert hint is None or error.hint == hint, error.hint


def test_a_zeroed_version_is_not_called_big_endian(tiny: Path, tmp_path: Path) -> None:
    zeroed = _error(gb.with_version(tiny, tmp_path / "zeroed.gguf", 0)).message
    assert "big-endian" not in zeroed and "version 0" in zeroed
    assert "big-endian" in _error(gb.big_endian_header(tiny, tmp_path / "big.gguf")).message


def test_missing_file_directory_and_fifo_are_gguf_errors(tmp_path: Path) -> None:
    assert "not found" in _error(tmp_path / "absent.gguf").message
    assert type(_error(tmp_path / "absent.gguf")) is GGUFUnreadableError  # listed as unreadable, not as no GGUF
    (tmp_path / "dir.gguf").mkdir()
    assert "not a regular file" in _error(tmp_path / "dir.gguf").message
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    assert "not a regular file" in _error(fifo).message  # and it did not block opening the pipe


def test_header_size_is_capped(home: Path, bundled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(In a home of its own: a header another test kept in the cache is read back, not parsed under this cap.)"""
    from localgen import gguf_cursor

    monkeypatch.setattr(gguf_cursor, "MAX_HEADER_BYTES", 1 << 20)
    assert "header larger than 1,048,576 bytes" in _error(bundled).message


def test_hostile_lengths_are_rejected_before_allocating(bundled: Path, tmp_path: Path) -> None:
    import tracemalloc

    path = gb.huge_array_length(bundled, tmp_path / "model.gguf", length=99_000_000)
    tracemalloc.start()
    try:
        _error(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20


# ---------------------------------------------------------------- split models


@pytest.fixture(scope="module")
def shards(bundled: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The bundled model split into 3 shards, llama.cpp gguf-split style."""
    return gb.write_split(bundled, tmp_path_factory.mktemp("split"), 3, prefix="smol")


def test_split_shards_are_accepted_in_order(shards: list[Path], bundled: Path) -> None:
    assert [p.name for p in shards] == [f"smol-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    first, paths = validate_split(shards[0])
    assert paths == shards
    assert first == read_gguf(shards[0])
    assert (first.split_count, first.split_no, first.architecture) == (3, 0, "llama")
    assert first.metadata["split.tensors.count"] == 272
    whole = read_gguf(bundled)
    parts = [first.tensors] + [_shard_tensors(p) for p in shards[1:]]
    assert sum(len(t) for t in parts) == 272
    assert sum(t.n_elements for ts in parts for t in ts) == whole.parameter_count


def _shard_tensors(path: Path) -> tuple[TensorInfo, ...]:
    """The tensors of a non-first shard (read_gguf refuses those: they carry no architecture)."""
    error = _error(path)
    assert error.message.endswith(f"this is shard {path.name[9]} of a split model, not its first")
    assert error.hint == ("open the first shard (…-00001-of-00003.gguf); llama.cpp loads the others from beside it")
    return read_gguf(path, require_architecture=False).tensors


def test_models_show_gives_a_split_model_s_whole_size(shards: list[Path], bundled: Path, tmp_path: Path) -> None:
    shown = run_localgen("models", "show", str(shards[0]), "--json", env={"LOCALGEN_HOME": str(tmp_path)})
    facts = json.loads(shown.out)
    assert facts["shards"] == 3 and facts["size"] == sum(p.stat().st_size for p in shards), shown.err
    assert facts["parameters"] == read_gguf(bundled).parameter_count


def test_a_split_model_with_a_shard_missing_says_so_in_show_and_fit(shards: list[Path], tmp_path: Path) -> None:
    copies = _copy_all(shards, tmp_path / "split")
    copies[2].unlink()
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    shown = run_localgen("models", "show", str(copies[0]), env=env)
    assert "(in 2 of 3 shards)" in shown.out, shown.err
    fit = run_localgen("fit", str(copies[0]), env=env)
    row = fit.out.splitlines()[1].split("\t")  # a row that cannot fit, as for a model too big for this machine
    assert row[-2:] == ["no", "1 shard of 3 missing (smol-00003-of-00003.gguf first)"], fit.out


def test_split_with_a_missing_shard_is_rejected(shards: list[Path], tmp_path: Path) -> None:
    copies = _copy_all(shards, tmp_path)
    copies[1].unlink()
    with pytest.raises(GGUFError, match="missing shard 2 of 3"):
        validate_split(copies[0])


def test_split_with_a_shard_from_another_model_is_rejected(shards: list[Path], tiny: Path,
                                                           tmp_path: Path) -> None:
    other = gb.write_split(tiny, tmp_path / "other", 3, prefix="smol")
    copies = _copy_all(shards, tmp_path / "mixed")
    copies[2].write_bytes(other[2].read_bytes())
    with pytest.raises(GGUFError, match=r"split\.tensors\.count"):
        validate_split(copies[0])


def test_split_with_shards_swapped_is_rejected(shards: list[Path], tmp_path: Path) -> None:
    copies = _copy_all(shards, tmp_path)
    copies[1].write_bytes(shards[2].read_bytes())
    copies[2].write_bytes(shards[1].read_bytes())
    with pytest.raises(GGUFError, match="metadata says shard 3 of 3, expected 2 of 3"):
        validate_split(copies[0])


def test_split_from_a_later_shard_or_unsplit_file(shards: list[Path], bundled: Path) -> None:
    with pytest.raises(GGUFError, match="of a split model, not its first"):
        validate_split(shards[1])
    assert validate_split(bundled) == (read_gguf(bundled), [bundled])


def test_a_later_shard_that_names_its_architecture_is_told_its_first_shard(tmp_path: Path) -> None:
    from hub_server import make_gguf_bytes

    later = tmp_path / "m-Q4_K_M-00002-of-00003.gguf"
    later.write_bytes(make_gguf_bytes("two", shard=(2, 3)))  # unlike llama.cpp's, its metadata says what it is
    with pytest.raises(GGUFError, match=r"m-Q4_K_M-00002-of-00003\.gguf: not the first shard") as info:
        validate_split(later)
    assert info.value.hint == ("open the first shard (m-Q4_K_M-00001-of-00003.gguf); llama.cpp loads the others from "
                               "beside it")


def test_run_checks_every_shard_before_llama_cpp_opens_them(shards: list[Path], tmp_path: Path) -> None:
    ok = run_localgen("run", "-m", str(shards[0]), "-n", "3", "--temperature", "0", "Say hi.")
    assert ok.returncode == 0 and ok.out.strip(), ok.err
    copies = _copy_all(shards, tmp_path / "missing")
    copies[1].unlink()
    missing = run_localgen("run", "-m", str(copies[0]), "-n", "3", "Say hi.")
    assert missing.returncode == 1 and "missing shard 2 of 3" in missing.err, missing.err
    damaged = _copy_all(shards, tmp_path / "damaged")
    damaged[2].write_bytes(damaged[2].read_bytes()[:4096])
    cut = run_localgen("pull", str(damaged[0]))
    assert cut.returncode == 1 and "truncated" in cut.err and len(cut.err.strip().splitlines()) == 1, cut.err


def _copy_all(paths: list[Path], directory: Path) -> list[Path]:
    """Copies of paths in directory, same names."""
    directory.mkdir(parents=True, exist_ok=True)
    copies = []
    for path in paths:
        copy = directory / path.name
        copy.write_bytes(path.read_bytes())
        copies.append(copy)
    return copies


@needs_llama
def test_llama_cpp_loads_the_split_model(shards: list[Path]) -> None:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(shards[0]), n_ctx=128, verbose=False)
    assert llm.n_vocab() == 49152
    out = llm("The capital of France is", max_tokens=4, temperature=0)
    assert "Paris" in out["choices"][0]["text"]


# ---------------------------------------------------------------- property test: mutated headers


class _Hang(BaseException):
    """Raised by the watchdog; a BaseException so read_gguf's own handlers cannot swallow it."""


def _on_alarm(signum: int, frame: object) -> None:
    """The per-example watchdog fired."""
    raise _Hang(f"read_gguf ran for more than {FUZZ_EXAMPLE_SECONDS} s")


INTERESTING_U64 = [0, 1, 2, 3, 31, 32, 33, 63, 64, 255, 256, 4096, 65535, 65536, (1 << 31) - 1, 1 << 31,
                   (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
# Metadata keys of the tiny model whose values the semantic mutations replace.
HYPERPARAMETER_KEYS = [
    "llama.context_length", "llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
    "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.dimension_count",
    "llama.vocab_size", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "llama.expert_count",
    "llama.expert_used_count", "llama.attention.key_length", "llama.attention.value_length",
    "llama.attention.sliding_window", "general.file_type", "general.alignment",
]


def _byte_mutation(base: str, header_len: int) -> st.SearchStrategy:
    """Overwrite a few header bytes, or one 4/8-byte field with an interesting value, or truncate."""
    position = st.integers(0, header_len - 1)
    flips = st.lists(st.tuples(position, st.integers(0, 255)), min_size=1, max_size=8).map(
        lambda pairs: ("bytes", base, pairs))
    field = st.tuples(position, st.sampled_from([4, 8]), st.sampled_from(INTERESTING_U64)).map(
        lambda t: ("field", base, t))
    cut = st.integers(0, header_len + 64).map(lambda n: ("cut", base, n))
    return st.one_of(flips, field, cut)


def _semantic_mutation(base: str, vocab: list[str]) -> st.SearchStrategy:
    """Replace hyperparameters or tokenizer fields of base with hostile but well-formed values."""
    number = st.one_of(st.sampled_from(INTERESTING_U64), st.integers(0, 1100))
    value = st.one_of(
        number.map(lambda v: gb.Typed(gb.UINT32, v & 0xFFFFFFFF)),  # the type llama.cpp expects
        number.map(lambda v: gb.Typed(gb.UINT64, v)),
        st.integers(-(1 << 31), (1 << 31) - 1).map(lambda v: gb.Typed(gb.INT32, v)),
        st.floats(width=32).map(lambda v: gb.Typed(gb.FLOAT32, v)),
        st.text(max_size=8),
        st.lists(st.integers(0, 600), max_size=6).map(lambda v: gb.Typed(gb.UINT32, v)),
    )
    changes = st.dictionaries(st.sampled_from(HYPERPARAMETER_KEYS), value, min_size=1, max_size=3)
    tokens = st.one_of(
        st.lists(st.text(max_size=3), min_size=len(vocab), max_size=len(vocab), unique=True),
        st.lists(st.tuples(st.integers(0, len(vocab) - 1), st.text(max_size=6)), min_size=1, max_size=4).map(
            lambda edits: _edit_vocab(vocab, edits)),
    )
    tokenizer = st.fixed_dictionaries({
        "tokenizer.ggml.model": st.sampled_from(["llama", "bert", "gpt2", "t5", "rwkv", "plamo2", "gemma4",
                                                 "whitespace", "hybriddna", "test", "unknown"]),
    }, optional={
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": st.lists(st.integers(-2, 8), min_size=len(vocab),
                                              max_size=len(vocab)).map(lambda v: gb.Typed(gb.INT32, v)),
        "tokenizer.ggml.add_bos_token": st.booleans(),
        "tokenizer.ggml.add_eos_token": st.booleans(),
        "tokenizer.ggml.add_sep_token": st.booleans(),
        "tokenizer.ggml.bos_token_id": number.map(lambda v: gb.Typed(gb.UINT32, v & 0xFFFFFFFF)),
        "tokenizer.ggml.eos_token_id": number.map(lambda v: gb.Typed(gb.UINT32, v & 0xFFFFFFFF)),
        "tokenizer.ggml.seperator_token_id": number.map(lambda v: gb.Typed(gb.UINT32, v & 0xFFFFFFFF)),
        "tokenizer.ggml.pre": st.sampled_from(["smollm", "llama3", "default", "gemma4", "qwen2", "x"]),
        "tokenizer.ggml.merges": st.lists(st.text(max_size=5), max_size=8),
        "tokenizer.chat_template": st.text(max_size=40),
    })
    return st.one_of(changes.map(lambda c: ("meta", base, c)), tokenizer.map(lambda c: ("meta", base, c)))


def _edit_vocab(vocab: list[str], edits: list[tuple[int, str]]) -> list[str]:
    """vocab with some tokens replaced (duplicates possible)."""
    tokens = list(vocab)
    for index, text in edits:
        tokens[index] = text
    return tokens


def _apply(mutation: tuple[str, str, object], bases: dict[str, Path], dst: Path) -> None:
    """Write the mutated file to dst."""
    kind, base, arg = mutation
    if kind == "meta":
        try:
            gb.copy_with_metadata(bases[base], dst, set_values=arg)  # type: ignore[arg-type]
        except (struct.error, OverflowError):
            dst.write_bytes(bases[base].read_bytes())  # a value the type cannot hold: nothing to test
        return
    data = bytearray(bases[base].read_bytes())
    if kind == "bytes":
        for pos, byte in arg:  # type: ignore[union-attr]
            data[pos] = byte
    elif kind == "field":
        pos, width, value = arg  # type: ignore[misc]
        data[pos:pos + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    else:
        del data[arg:]  # type: ignore[misc]
    dst.write_bytes(bytes(data))


LOADER = textwrap.dedent("""
    import sys
    import llama_cpp
    TEXT = "the he \\n\\t \u03a9 \U0001f600 <|im_start|>x <|im_end|>".encode() + b" \\x00 \\xff\\xfe"
    for path in sys.argv[1:]:
        print("LOADING", path, flush=True)
        try:
            llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_batch=64, verbose=True)
            tokens = llm.tokenize(TEXT, add_bos=True, special=True)
            llm.tokenize(TEXT, add_bos=False, special=False)
            llm.detokenize(list(range(llm.n_vocab())), special=True)
            llm.eval(tokens[:8])
        except Exception as exc:
            print("ERROR", type(exc).__name__, str(exc)[:200], flush=True)
        else:
            print("OK", flush=True)
""")


def _abort_lines(stderr: str) -> str:
    """The lines of llama.cpp's stderr that say why it aborted."""
    lines = [line for line in stderr.splitlines() if "GGML_ASSERT" in line or "what()" in line
             or "terminate" in line or "error" in line.lower()]
    return "\n".join(lines[-10:])


def test_mutated_headers_raise_only_gguf_error_and_accepted_ones_do_not_crash_llama_cpp(
        tiny: Path, tiny_spm: Path, tmp_path: Path) -> None:
    bases = {"tiny": tiny, "tiny_spm": tiny_spm}
    originals = {_sha256(path) for path in bases.values()}
    mutations_of = st.one_of(
        _byte_mutation("tiny", gb.read_layout(tiny).data_offset),
        _byte_mutation("tiny_spm", gb.read_layout(tiny_spm).data_offset),
        _semantic_mutation("tiny", gb.TINY_VOCAB),
        _semantic_mutation("tiny_spm", gb.TINY_SPM_VOCAB),
    )
    target = tmp_path / "mutant.gguf"
    accepted_dir = tmp_path / "accepted"
    accepted_dir.mkdir()
    accepted: dict[str, tuple[Path, str]] = {}
    outcomes = {"rejected": 0, "accepted": 0}

    # The SIGALRM watchdog is the deadline: hypothesis's own would also time file writes on a busy machine.
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              derandomize=not FUZZ_RANDOM, suppress_health_check=list(HealthCheck))
    @given(mutation=mutations_of)
    def check(mutation: tuple[str, str, object]) -> None:
        _apply(mutation, bases, target)
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, FUZZ_EXAMPLE_SECONDS)
        try:
            read_gguf(target)
        except GGUFError as exc:
            assert exc.message.startswith("mutant.gguf: ")
            outcomes["rejected"] += 1
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        outcomes["accepted"] += 1
        digest = _sha256(target)
        if digest not in originals and len(accepted) < FUZZ_LLAMA_LOADS and digest not in accepted:
            path = accepted_dir / f"{len(accepted):03d}.gguf"
            path.write_bytes(target.read_bytes())
            accepted[digest] = (path, repr(mutation)[:3000])

    check()
    assert outcomes["rejected"] > FUZZ_EXAMPLES // 4, outcomes
    assert outcomes["accepted"] > 0, outcomes
    if not accepted or not _has_llama_cpp():
        return
    from localgen.engine import bare_llama_prelude

    paths = [str(path) for path, _ in accepted.values()]
    mutations = {str(path): text for path, text in accepted.values()}
    run = subprocess.run([sys.executable, "-c", bare_llama_prelude() + LOADER, *paths], capture_output=True, text=True,
                         timeout=300)
    loading = [line for line in run.stdout.splitlines() if line.startswith("LOADING")]
    crashed = loading[-1].split(" ", 1)[1] if loading else "?"
    assert run.returncode == 0, (f"llama.cpp died (rc {run.returncode}) on a file read_gguf accepted: "
                                 f"{crashed}\nmutation: {mutations.get(crashed)}\n{_abort_lines(run.stderr)}")
    assert len(loading) == len(paths)
    loaded = sum(line == "OK" for line in run.stdout.splitlines())
    print(f"fuzz: {outcomes}, llama.cpp loads: {len(paths)}, loaded and ran: {loaded}")
    assert loaded > 0  # some accepted mutants got all the way through load, tokenize and eval


def test_a_file_that_may_not_be_read_gets_a_permissions_hint(bundled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)  # root reads a chmod-000 file anyway
    with pytest.raises(GGUFError) as info:
        read_gguf(bundled)
    assert info.value.message.endswith(": cannot be read (Permission denied)")
    assert info.value.hint == "check the file's permissions"


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.binary(max_size=3), max_size=12),
       types=st.lists(st.sampled_from([1, 2, 3, 4, 6, 0x200, 0x300_0000, 0x400, -3]), max_size=14))
def test_the_tokens_of_given_types_are_those_a_token_by_token_reading_of_the_types_finds(tokens: list[bytes],
                                                                                       types: list[int]) -> None:
    """Each id whose little-endian i32 type is one of the kinds, in order, if it names a token (an empty one by
    llama.cpp's name for it, [EMPTY_i]); a kind's bytes that straddle two types (0x200 then 0x300_0000 hold 02 00 00 00
    across them) are no type of it."""
    from localgen.gguf_reader import CONTROL_TOKEN_TYPES, USER_DEFINED_TOKEN_TYPE, _tokens_of_types, _Vocabulary

    raw = b"".join(kind.to_bytes(4, "little", signed=True) for kind in types)
    vocabulary = _Vocabulary(tokens=tokens, token_types=raw + b"\x03\x00")  # a partial i32 at the end is no type
    for kinds in (CONTROL_TOKEN_TYPES, (USER_DEFINED_TOKEN_TYPE,)):
        expected = [(i, (tokens[i] or b"[EMPTY_%d]" % i).decode("utf-8", errors="replace"))
                    for i, kind in enumerate(types) if kind in kinds and i < len(tokens)]
        assert _tokens_of_types(vocabulary, kinds) == expected


# ---------------------------------------------------------------- headers kept in the cache


def _parse_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any parse of a header fail the test: what read_gguf returns then came from the cache."""
    import localgen.gguf_reader

    def refused(*args: object, **kwargs: object) -> GGUFInfo:
        raise AssertionError("the header was parsed again")

    monkeypatch.setattr(localgen.gguf_reader, "_parse", refused)


def _old_copy(src: Path, dst: Path, age_s: float = 3600) -> Path:
    """A copy of src whose modification time is age_s in the past."""
    dst.write_bytes(src.read_bytes())
    then = os.stat(dst).st_mtime - age_s
    os.utime(dst, (then, then))
    return dst


@pytest.fixture
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files the test writes count as settled at once (a file changed in the last 2 s is not kept)."""
    from localgen import file_versions

    monkeypatch.setattr(file_versions, "SETTLED_S", 0)


def test_a_header_checked_once_is_read_back_from_the_cache(home: Path, bundled: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled model's header (27 ms of CPU to read and check) is kept by the file's identity in the cache
    folder, and read back whole while the file stays that version."""
    first = read_gguf(bundled)
    assert len(list((home / "cache" / "headers").glob("*.json"))) == 1
    _parse_refused(monkeypatch)
    again = read_gguf(bundled)
    assert again == first and dict(again.metadata) == dict(first.metadata)
    assert {k: type(v) for k, v in again.metadata.items()} == {k: type(v) for k, v in first.metadata.items()}
    assert isinstance(again.metadata["tokenizer.ggml.tokens"], ArraySummary)
    assert (again.control_tokens, again.user_defined_tokens, again.longest_token) == (
        first.control_tokens, first.user_defined_tokens, first.longest_token)


def test_a_file_changed_just_now_is_not_kept(home: Path, tiny: Path, tmp_path: Path) -> None:
    """A file written in the last 2 s (whose next change within the clock's tick would go unseen) is read afresh
    each time, even with an old modification time set (its change time is new)."""
    read_gguf(_old_copy(tiny, tmp_path / "fresh.gguf"))
    assert not list((home / "cache" / "headers").glob("*.json"))


def test_a_header_kept_is_not_used_for_another_version_of_the_file(home: Path, tiny: Path, tmp_path: Path,
                                                                   settled_at_once: None) -> None:
    """A file rewritten in place with the same size and its old modification time put back (`cp -p` over it,
    `rsync --inplace -t`) is read afresh, its change time being another; a damaged entry is ignored and replaced."""
    from localgen.gguf_cache import CACHE_FORMAT

    model = _old_copy(tiny, tmp_path / "model.gguf")
    assert read_gguf(model).chat_template == gb.TINY_TEMPLATE
    entries = list((home / "cache" / "headers").glob("*.json"))
    assert len(entries) == 1
    changed = gb.copy_with_metadata(tiny, tmp_path / "changed.gguf",
                                    set_values={"tokenizer.chat_template": gb.TINY_TEMPLATE.swapcase()})
    assert changed.stat().st_size == model.stat().st_size
    before = model.stat()
    model.write_bytes(changed.read_bytes())
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (model.stat().st_size, model.stat().st_mtime_ns, model.stat().st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)
    assert read_gguf(model).chat_template == gb.TINY_TEMPLATE.swapcase()
    entries[0].write_text('{"format": 1, "checks": "')
    assert read_gguf(model).chat_template == gb.TINY_TEMPLATE.swapcase()
    assert json.loads(entries[0].read_text())["format"] == CACHE_FORMAT


def test_headers_of_files_gone_are_dropped(home: Path, tiny: Path, tmp_path: Path, settled_at_once: None) -> None:
    """The header of a file deleted by hand, and the temp file of a write a killed process left (no lock held), are
    dropped as the next process keeps a header (once a process), and models rm's forgetting of a file it deleted
    drops its header: the folder holds one entry a model file at most."""
    from localgen import gguf_cache
    from localgen.catalog import forget_model_file
    from localgen.file_locks import try_flock
    from localgen.storage import temp_name

    first, second, third = (_old_copy(tiny, tmp_path / f"{name}.gguf") for name in ("first", "second", "third"))
    read_gguf(first)
    read_gguf(second)
    folder = home / "cache" / "headers"
    assert len(list(folder.glob("*.json"))) == 2
    first.unlink()
    killed, writing = (folder / temp_name(folder / f"{'0' * 32}.json") for _ in range(2))
    yours = folder / ".todo.txt.deadbeef.tmp"  # a file of its shape, but of no entry's write
    for temp in (killed, writing, yours):
        temp.write_text("{")
    held = os.open(writing, os.O_RDONLY)
    assert try_flock(held), "a write under way holds its temp file's lock"
    read_gguf(third)
    assert len(list(folder.glob("*.json"))) == 3, "a process looks for files gone once, at its first keep"
    gguf_cache._forget_gone_files.cache_clear()  # as a new process
    read_gguf(_old_copy(tiny, tmp_path / "fourth.gguf"))
    assert len(list(folder.glob("*.json"))) == 3, "first's header dropped, fourth's kept"
    assert (killed.exists(), writing.exists(), yours.exists()) == (False, True, True)
    os.close(held)
    second.unlink()
    forget_model_file(second)
    kept = sorted(json.loads(entry.read_text())["path"] for entry in folder.glob("*.json"))
    assert kept == [os.path.realpath(tmp_path / "fourth.gguf"), os.path.realpath(third)]


def test_a_header_that_fails_its_check_is_never_kept(home: Path, tiny: Path, tmp_path: Path,
                                                    settled_at_once: None) -> None:
    """A file whose check fails leaves no entry: it fails again at the next read, as llama.cpp would crash on it."""
    broken = _old_copy(gb.copy_with_metadata(tiny, tmp_path / "broken.gguf",
                                                 set_values={"general.architecture": "no-such-arch"}),
                           tmp_path / "settled.gguf")
    for _ in range(2):
        assert "no-such-arch" in _error(broken).message
    assert not list((home / "cache" / "headers").glob("*.json"))
