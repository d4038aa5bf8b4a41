"""Model sanity checks on parsed GGUF metadata that keep hostile files from crashing llama.cpp."""

from __future__ import annotations

import array
import math
import sys
from collections.abc import Callable, Mapping, Sequence

from localgen.errors import GGUFError
from localgen.gguf_format import T_INT32, T_UINT16, value_type_name
from localgen.gguf_info import ArraySummary, as_int

Fail = Callable[[str], GGUFError]  # the error to raise for a problem, naming the file

MAX_LAYERS = 512  # LLAMA_MAX_LAYERS: more aborts llama.cpp (GGML_ASSERT)
MAX_EXPERTS = 1024  # LLAMA_MAX_EXPERTS
HPARAM_LIMIT = 1 << 24  # embedding, head and vocabulary sizes: llama.cpp multiplies these in 32 bits
ROPE_SCALING_TYPES = frozenset({"none", "linear", "yarn", "longrope"})
TOKEN_TYPE_BYTE = 6  # LLAMA_TOKEN_TYPE_BYTE
# tokenizer.ggml.model -> default (bos, eos, sep) ids and whether llama.cpp adds (bos, eos, sep) when asked
# for special tokens; llama.cpp aborts (GGML_ASSERT) when one it adds is missing. From src/llama-vocab.cpp
# of llama-cpp-python 0.3.36. BPE's add_bos depends on the pre-tokenizer: assume it may be added.
TOKENIZERS: dict[str, tuple[tuple[int | None, ...], tuple[bool, ...]]] = {
    "llama": ((1, 2, None), (True, False, False)),
    "bert": ((101, None, 102), (True, False, True)),
    "gpt2": ((11, 11, None), (True, False, False)),
    "hybriddna": ((11, 11, None), (True, False, False)),
    "whitespace": ((11, 11, None), (True, False, False)),
    "gemma4": ((None, None, None), (True, False, False)),
    "t5": ((None, 1, None), (False, True, False)),
    "rwkv": ((None, None, None), (False, False, False)),
    "plamo2": ((1, 2, None), (False, False, False)),
    "test": ((None, None, None), (False, False, False)),
}
_SPECIAL_KEYS = ("bos", "eos", "sep")
_ALWAYS_ADDED = {("bert", "bos"), ("bert", "sep"), ("gemma4", "bos")}  # whatever add_*_token says

# LLM_ARCH_NAMES in vendor/llama.cpp/src/llama-arch.cpp of llama-cpp-python 0.3.36, less "clip"
# (a vision projector that llama.cpp refuses as a main model) and "(unknown)".
KNOWN_ARCHITECTURES: frozenset[str] = frozenset({
    "llama", "llama4", "deci", "falcon", "grok", "gpt2", "gptj", "gptneox", "mpt", "baichuan", "starcoder",
    "refact", "bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2",
    "jina-bert-v3", "eurobert", "bloom", "stablelm", "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3",
    "qwen3moe", "qwen3next", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen4exp", "phi2", "phi3",
    "phimoe", "plamo", "plamo2", "plamo3", "codeshell", "orion", "internlm2", "minicpm", "minicpm3",
    "gemma", "gemma2", "gemma3", "gemma3n", "gemma4", "gemma4-assistant", "gemma-embedding", "starcoder2",
    "mamba", "mamba2", "maple", "jamba", "falcon-h1", "xverse", "command-r", "cohere2", "cohere2moe",
    "dbrx", "olmo", "olmo2", "olmoe", "muse-glimmer", "openelm", "arctic", "deepseek", "deepseek2",
    "deepseek2-ocr", "deepseek32", "deepseek4", "chatglm", "glm4", "glm4moe", "glm-dsa", "bitnet", "t5",
    "t5encoder", "jais", "jais2", "nemotron", "nemotron_h", "nemotron_h_moe", "exaone", "exaone4",
    "exaone-moe", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "granite", "granitemoe", "granitehybrid",
    "graniteswitch", "granite_swa", "chameleon", "wavtokenizer-dec", "plm", "bailingmoe", "bailingmoe2",
    "bailingmoe3", "dots1", "dots3note", "arcee", "afmoe", "laguna", "ernie4_5", "ernie4_5-moe",
    "hunyuan-moe", "hunyuan-dense", "hunyuan_vl", "hy_v3", "hy_v4", "smollm3", "gpt-oss", "lfm2",
    "lfm2moe", "dream", "smallthinker", "llada", "llada-moe", "seed_oss", "grovemoe", "apertus",
    "minimax-01", "hrm_text", "minimax-m2", "minimax-m3", "cogvlm", "rnd1", "pangu-embedded", "mistral3",
    "eagle3", "dflash", "mistral4", "paddleocr", "mimo2", "step35", "spark2_5", "llama-embed", "maincoder",
    "kimi-linear", "kimi-k3", "glm5-next", "talkie", "mellum", "nanbeige", "qwen3tts", "pockettts",
})

_SPLIT_KEY_TYPES = {"split.no": T_UINT16, "split.count": T_UINT16, "split.tensors.count": T_INT32}


def check_model(metadata: Mapping[str, object], types: Mapping[str, int], tokens: Sequence[bytes] | None,
                token_types: bytes | None, fail: Fail, *, require_architecture: bool = True) -> None:
    """Every check below on a parsed header; require_architecture=False lets a later split shard go without one."""
    check_split_keys(metadata, types, fail)
    if require_architecture or "general.architecture" in metadata:
        check_architecture(metadata, fail)
    check_hyperparameters(metadata, fail)
    check_tokenizer(metadata, tokens, token_types, fail)


def check_split_keys(metadata: Mapping[str, object], types: Mapping[str, int], fail: Fail) -> None:
    """split.no (u16), split.count (u16) and split.tensors.count (i32), when present, are consistent."""
    for key, expected in _SPLIT_KEY_TYPES.items():
        if key in types and types[key] != expected:  # llama.cpp aborts on a mistyped split.no
            raise fail(f"{key} must be a {value_type_name(expected)}, not {value_type_name(types[key])}")
    if "split.count" not in metadata and "split.no" not in metadata:
        return
    count, number = metadata.get("split.count"), metadata.get("split.no", 0)
    tensors = metadata.get("split.tensors.count", 0)
    if not (isinstance(count, int) and isinstance(number, int) and isinstance(tensors, int)):
        raise fail("split.no is present without split.count")
    if count < 1 or not 0 <= number < count or tensors < 0:
        raise fail(f"invalid split metadata: split.no={number}, split.count={count}, "
                     f"split.tensors.count={tensors}")


def open_the_first_shard(first: str) -> str:
    """The hint for a later shard of a split model given where its first (named first) is meant."""
    return f"open the first shard ({first}); llama.cpp loads the others from beside it"


def check_architecture(metadata: Mapping[str, object], fail: Fail) -> None:
    """general.architecture is present and known to this llama.cpp build."""
    arch = metadata.get("general.architecture")
    if arch is None:
        split_no = metadata.get("split.no")
        if isinstance(split_no, int) and split_no > 0:  # the file may be fine: the hint is not the damaged file's
            count = metadata.get("split.count")
            first = f"…-00001-of-{count:05d}.gguf" if isinstance(count, int) else "its -00001-of- file"
            shard = fail(f"this is shard {split_no + 1} of a split model, not its first")
            raise GGUFError(shard.message, hint=open_the_first_shard(first))
        raise fail("no general.architecture in the metadata")
    if not isinstance(arch, str):
        raise fail("general.architecture is not a string")
    if arch == "clip":
        projector = fail("a CLIP vision projector (mmproj), not a language model")
        raise GGUFError(projector.message, hint="use the repository's language-model file (localgen does not use "
                                                "projectors)")
    if arch not in KNOWN_ARCHITECTURES:  # the file may be fine: the hint is not the damaged file's
        unknown = fail(f"architecture '{arch[:80]}' is not supported by this llama.cpp build (llama-cpp-python 0.3.36)")
        raise GGUFError(unknown.message, hint="use a model of another architecture, or a llama-cpp-python release "
                                              "that supports this one")


def check_hyperparameters(metadata: Mapping[str, object], fail: Fail) -> None:
    """Reject hyperparameters that make llama.cpp abort (GGML_ASSERT) instead of failing cleanly."""
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        return
    for suffix in ("context_length", "block_count", "embedding_length", "attention.head_count",
                   "attention.head_count_kv", "attention.key_length", "attention.value_length",
                   "attention.sliding_window", "expert_count", "expert_used_count", "expert_group_count",
                   "expert_group_used_count", "nextn_predict_layers"):
        key = f"{arch}.{suffix}"
        value = metadata.get(key)
        if value is not None and not isinstance(value, ArraySummary) and as_int(value) is None:
            raise fail(f"'{key}' must be an integer, not {value!r:.60}")
        smallest = min(value) if isinstance(value, tuple) else value  # type: ignore[type-var]
        if isinstance(smallest, int) and smallest < 0:
            raise fail(f"'{key}' is negative")
    _check_attention_sizes(arch, metadata, fail)
    _check_float_hyperparameters(arch, metadata, fail)
    layers = as_int(metadata.get(f"{arch}.block_count"))
    if layers is not None and not 1 <= layers <= MAX_LAYERS:
        raise fail(f"{arch}.block_count is {layers} (llama.cpp supports 1 to {MAX_LAYERS})")
    nextn = as_int(metadata.get(f"{arch}.nextn_predict_layers")) or 0
    if layers is not None and nextn > layers:
        raise fail(f"{arch}.nextn_predict_layers ({nextn}) exceeds block_count ({layers})")
    for sub in ("posnet.block_count", "convnext.block_count"):
        sub_layers = as_int(metadata.get(f"{arch}.{sub}"))
        if sub_layers is not None and layers is not None and not 0 <= sub_layers <= layers:
            raise fail(f"{arch}.{sub} ({sub_layers}) exceeds block_count ({layers})")
    _check_experts(arch, metadata, fail)
    scaling = metadata.get(f"{arch}.rope.scaling.type")
    if scaling is not None and scaling not in ROPE_SCALING_TYPES:
        known = ", ".join(sorted(ROPE_SCALING_TYPES))
        raise fail(f"{arch}.rope.scaling.type {scaling!r:.40} is not one of {known}")


def check_tokenizer(metadata: Mapping[str, object], tokens: Sequence[bytes] | None, token_types: bytes | None,
                    fail: Fail) -> None:
    """Reject vocabularies that load but make llama.cpp abort when it tokenizes or detokenizes."""
    model = metadata.get("tokenizer.ggml.model")
    if model is None or tokens is None:
        return  # llama.cpp refuses such a file cleanly
    if model in ("none", "no_vocab"):
        raise fail("the model has no tokenizer (tokenizer.ggml.model = 'none')")
    if not isinstance(model, str) or model not in TOKENIZERS:
        raise fail(f"unknown tokenizer.ggml.model {model!r:.40}")
    n_vocab = len(tokens)
    defaults, adds = TOKENIZERS[model]
    for name, default, added in zip(_SPECIAL_KEYS, defaults, adds, strict=True):
        flag = metadata.get(f"tokenizer.ggml.add_{name}_token")
        if isinstance(flag, bool) and (model, name) not in _ALWAYS_ADDED:
            added = flag
        if added and _special_token(metadata, name, default, n_vocab) is None:
            raise fail(f"the tokenizer adds a {name.upper()} token but has none in its {n_vocab}-token "
                         "vocabulary (llama.cpp aborts on that)")
    if model == "llama":
        present = set(tokens)
        missing = [b for b in range(256) if b"<0x%02X>" % b not in present and bytes([b]) not in present]
        if missing:
            raise fail(f"the SentencePiece vocabulary has no byte-fallback token for {len(missing)} of 256 "
                         f"bytes (e.g. <0x{missing[0]:02X}>), which crashes llama.cpp on such input")
    if model == "rwkv":
        single = {text for text in map(_rwkv_unescape, tokens) if len(text) == 1}
        if len(single) < 256:  # its tokenizer loops forever on text that no token's first byte matches
            raise fail(f"the RWKV vocabulary covers only {len(single)} of 256 single bytes, which makes "
                         "llama.cpp's tokenizer loop and crash")
    if model == "bert" and token_types is not None and _has_byte_tokens(token_types):
        raise fail("a WordPiece vocabulary with byte tokens, which crashes llama.cpp")


def _special_token(metadata: Mapping[str, object], name: str, default: int | None,
                   n_vocab: int) -> int | None:
    """The id llama.cpp ends up using for a special token: the metadata id if in range, else the default."""
    token = default if default is not None and default < n_vocab else None
    value = metadata.get(f"tokenizer.ggml.{'seperator' if name == 'sep' else name}_token_id")
    if type(value) is int and 0 <= value < n_vocab:
        token = value
    return token


def _rwkv_unescape(text: bytes) -> bytes:
    """An RWKV token's bytes, unescaped exactly as llama.cpp's llama_unescape_rwkv_token does."""
    if b"\\" not in text:
        return text
    out = bytearray()
    escaping, hex_remaining, acc = False, 0, 0
    for c in text:
        if hex_remaining:
            acc = ((acc << 4) + (c - 87 if c >= 97 else c - 48)) & 0xFF
            hex_remaining -= 1
            if not hex_remaining:
                out.append(acc)
                acc = 0
        elif escaping:
            if c == 120:  # x
                hex_remaining = 2
            else:
                out.append({116: 9, 110: 10, 114: 13}.get(c, c))
            escaping = False
        elif c == 92:  # backslash
            escaping = True
        else:
            out.append(c)
    return bytes(out)


def _has_byte_tokens(token_types: bytes) -> bool:
    """True when any token type is BYTE."""
    values = array.array("i", token_types)
    if sys.byteorder == "big":
        values.byteswap()
    return TOKEN_TYPE_BYTE in values


def _check_float_hyperparameters(arch: str, metadata: Mapping[str, object], fail: Fail) -> None:
    """Float hyperparameters are finite, and epsilons not negative (ggml asserts eps >= 0 mid-inference)."""
    prefix = f"{arch}."
    for key, value in metadata.items():
        if not key.startswith(prefix):
            continue
        floats = [v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, float)]
        for number in floats:
            if not math.isfinite(number):
                raise fail(f"{key} is {number}")
            if number < 0 and "eps" in key.rsplit(".", 1)[-1]:
                raise fail(f"{key} is negative ({number})")


def _check_attention_sizes(arch: str, metadata: Mapping[str, object], fail: Fail) -> None:
    """Sizes llama.cpp multiplies in 32 bits stay far from overflow (wrapped products abort later)."""
    sizes = {name: as_int(metadata.get(f"{arch}.{name}")) or 0 for name in (
        "embedding_length", "feed_forward_length", "attention.head_count", "attention.head_count_kv",
        "attention.key_length", "attention.value_length", "rope.dimension_count", "vocab_size")}
    for name, value in sizes.items():
        if value >= HPARAM_LIMIT:
            raise fail(f"{arch}.{name} is {value:,} (limit {HPARAM_LIMIT:,})")
    heads = max(sizes["attention.head_count"], sizes["attention.head_count_kv"])
    head_size = max(sizes["attention.key_length"], sizes["attention.value_length"])
    if not head_size and sizes["attention.head_count"]:
        head_size = sizes["embedding_length"] // sizes["attention.head_count"]
    if heads * head_size >= HPARAM_LIMIT:
        raise fail(f"{arch} attention of {heads:,} heads of {head_size:,} overflows")


def _check_experts(arch: str, metadata: Mapping[str, object], fail: Fail) -> None:
    """Mixture-of-experts counts in the relations llama.cpp asserts."""
    experts = as_int(metadata.get(f"{arch}.expert_count")) or 0
    used = as_int(metadata.get(f"{arch}.expert_used_count")) or 0
    groups = as_int(metadata.get(f"{arch}.expert_group_count")) or 0
    group_used = as_int(metadata.get(f"{arch}.expert_group_used_count")) or 0
    if arch in ("hunyuan_vl", "hunyuan-dense") and experts <= 1:
        return
    problem = None
    if experts > MAX_EXPERTS:
        problem = f"expert_count {experts} exceeds {MAX_EXPERTS}"
    elif used > experts:
        problem = f"expert_used_count {used} exceeds expert_count {experts}"
    elif experts > 0 and (used == 0 or groups >= experts):
        problem = f"expert_used_count {used} / expert_group_count {groups} invalid for {experts} experts"
    elif experts > 0 and groups > 1 and (experts % groups or not 0 < group_used < groups):
        problem = f"expert groups ({groups}, {group_used} used) invalid for {experts} experts"
    elif experts == 0 and groups:
        problem = f"expert_group_count {groups} without experts"
    if problem:
        raise fail(f"invalid mixture-of-experts metadata: {problem}")
