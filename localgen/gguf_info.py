"""What a GGUF header says: metadata, tensor table, and the model properties read from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localgen.gguf_format import FILE_TYPES, GGML_TYPES


@dataclass(frozen=True)
class ArraySummary:
    """A metadata array too long to keep: its item type and length only."""

    item_type: int
    length: int


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
    control_tokens: frozenset[str] = frozenset()  # texts of the tokenizer's control tokens (<|im_end|>, ...)
    user_defined_tokens: tuple[tuple[int, str], ...] = ()  # (id, text): llama.cpp may make some control at load
    longest_token: int = 0  # bytes of the vocabulary's longest token as stored (0: no vocabulary read)

    def _arch_key(self, suffix: str) -> object:
        """The value of '{architecture}.{suffix}', or None."""
        return self.metadata.get(f"{self.architecture}.{suffix}")

    def _arch_int(self, suffix: str) -> int | None:
        """An integer hyperparameter (the largest entry of a per-layer array), or None."""
        return as_int(self._arch_key(suffix))

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
        return as_int(self.metadata.get("general.file_type"))

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
    def split_count(self) -> int:
        """split.count: how many shards the model has (1 when not split)."""
        return as_int(self.metadata.get("split.count")) or 1

    @property
    def split_no(self) -> int:
        """split.no: this shard's 0-based index (0 when not split)."""
        return as_int(self.metadata.get("split.no")) or 0


def as_int(value: object) -> int | None:
    """An int value, the largest item of a tuple of ints, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, tuple) and value and all(type(v) is int for v in value):
        return max(value)  # type: ignore[type-var]
    return None
