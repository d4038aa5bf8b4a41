"""The GGUF format: magic, value and tensor types, llama.cpp's structural rules, and the reader's safety limits."""

from __future__ import annotations

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MIN_ALIGNMENT = 32  # ggml's TENSOR_ALIGNMENT: llama.cpp aborts on tensor data mapped less aligned
MAX_TENSOR_NAME_BYTES = 63  # GGML_MAX_NAME (64) including the NUL byte
MAX_DIMS = 4
INT64_MAX = (1 << 63) - 1
TOKENS_KEY = "tokenizer.ggml.tokens"
TOKEN_TYPES_KEY = "tokenizer.ggml.token_type"

# Limits a header must stay within before anything is allocated for it (real headers are far below them).
MAX_TENSORS = 1_000_000
MAX_KVS = 1_000_000
MAX_STRING_BYTES = 64 * 1024 * 1024
MAX_KEY_BYTES = 64 * 1024
MAX_ARRAY_ELEMENTS = 100_000_000
MAX_VOCABULARY_TOKENS = 4_000_000  # real vocabularies hold at most a few hundred thousand (Gemma 3's: 262,144)
MAX_ALIGNMENT = 1 << 20
MAX_HEADER_BYTES = 256 * 1024 * 1024  # metadata + tensor table; real ones are a few MB
KEEP_NUMERIC_ARRAY_MAX = 1024  # longer numeric arrays are summarized, not stored
KEEP_STRING_ARRAY_MAX = 256  # longer string arrays are summarized, not stored

# GGUF metadata value types: id -> (struct code, item size, name).
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(8, 13)
SCALAR_TYPES: dict[int, tuple[str, int, str]] = {
    T_UINT8: ("B", 1, "u8"), T_INT8: ("b", 1, "i8"), T_UINT16: ("H", 2, "u16"), T_INT16: ("h", 2, "i16"),
    T_UINT32: ("I", 4, "u32"), T_INT32: ("i", 4, "i32"), T_FLOAT32: ("f", 4, "f32"), T_BOOL: ("?", 1, "bool"),
    T_UINT64: ("Q", 8, "u64"), T_INT64: ("q", 8, "i64"), T_FLOAT64: ("d", 8, "f64"),
}

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


def value_type_name(value_type: int) -> str:
    """The GGUF name of a metadata value type (u32, str, array, ...)."""
    if value_type == T_STRING:
        return "str"
    if value_type == T_ARRAY:
        return "array"
    entry = SCALAR_TYPES.get(value_type)
    return entry[2] if entry else f"type {value_type}"


def pad(offset: int, alignment: int) -> int:
    """offset rounded up to a multiple of alignment."""
    return offset + (-offset % alignment)
