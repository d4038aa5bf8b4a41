"""Build random-weight GGUF models of a chosen architecture and size, for memory-fit tests and measurements.

The files are real, loadable llama.cpp models (a byte-level BPE vocabulary padded to n_vocab tokens, a ChatML
template) whose weights are noise: good for measuring memory and speed, useless for text.

    python scripts/fit_models.py OUT.gguf --arch qwen2 --embd 768 --layers 12 --heads 12 --kv-heads 4 \
        --ff 2048 --vocab 32000 --ctx 8192 --type q8_0
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_VOCAB = [chr(c) for c in range(ord("!"), ord("~") + 1)] + ["Ġ", "Ċ", "Ġt", "he", "Ġthe"]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
ARCHITECTURES = ("llama", "qwen2", "gemma2")
WEIGHT_TYPES = ("f16", "q8_0", "q5_0", "q4_1", "q4_0")
FILE_TYPES = {"f16": 1, "q8_0": 7, "q5_0": 8, "q4_1": 3, "q4_0": 2}  # general.file_type (llama_ftype)


@dataclass(frozen=True)
class ModelSize:
    """The hyperparameters of a model to build."""

    arch: str = "llama"
    n_vocab: int = 1024
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx: int = 2048
    weight_type: str = "q8_0"
    sliding_window: int | None = None
    seed: int = 0
    name: str = "fit-test-model"

    @property
    def head_dim(self) -> int:
        """The per-head key/value size."""
        return self.n_embd // self.n_head


def vocabulary(n_vocab: int) -> list[str]:
    """A byte-level BPE vocabulary of exactly n_vocab unique tokens (special tokens last)."""
    base = BASE_VOCAB[: max(n_vocab - len(SPECIAL), 1)]
    fillers = [f"Ġw{i}" for i in range(max(n_vocab - len(base) - len(SPECIAL), 0))]
    return base + fillers + SPECIAL


def build_model(dst: Path, size: ModelSize) -> Path:
    """Write a random-weight model with gguf.GGUFWriter; llama.cpp can load and run it."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    if size.arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {size.arch}; use one of {', '.join(ARCHITECTURES)}")
    rng = np.random.default_rng(size.seed)
    tokens = vocabulary(size.n_vocab)
    writer = gguf.GGUFWriter(str(dst), size.arch)
    _add_metadata(writer, size, tokens)
    qtype = getattr(gguf.GGMLQuantizationType, size.weight_type.upper())

    def add(name: str, shape: tuple[int, ...], kind: str = "w") -> None:
        """A random tensor (numpy order, ggml's reversed): F32 norms and biases, weights in the chosen type."""
        values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        if kind == "f32":
            writer.add_tensor(name, values)
        elif size.weight_type == "f16" or kind == "f16":
            writer.add_tensor(name, values.astype(np.float16))
        else:
            data = quantize(values, qtype)
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)

    _add_tensors(add, size)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(dst)


def _add_metadata(w: Any, size: ModelSize, tokens: list[str]) -> None:
    """Hyperparameters, tokenizer and chat template."""
    w.add_name(size.name)
    w.add_file_type(FILE_TYPES[size.weight_type])
    w.add_context_length(size.n_ctx)
    w.add_embedding_length(size.n_embd)
    w.add_block_count(size.n_layer)
    w.add_feed_forward_length(size.n_ff)
    w.add_head_count(size.n_head)
    w.add_head_count_kv(size.n_head_kv)
    w.add_key_length(size.head_dim)
    w.add_value_length(size.head_dim)
    w.add_rope_dimension_count(size.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(len(tokens))
    if size.arch == "gemma2":
        w.add_sliding_window(size.sliding_window or 4096)
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
    elif size.sliding_window:
        w.add_sliding_window(size.sliding_window)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    w.add_token_merges(MERGES)
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)


def _add_tensors(add: Callable[..., None], size: ModelSize) -> None:
    """The architecture's tensors: embeddings, blocks, output."""
    e, ff, kv = size.n_embd, size.n_ff, size.head_dim * size.n_head_kv
    add("token_embd.weight", (size.n_vocab, e))
    for layer in range(size.n_layer):
        p = f"blk.{layer}."
        add(p + "attn_norm.weight", (e,), "f32")
        add(p + "attn_q.weight", (size.head_dim * size.n_head, e))
        add(p + "attn_k.weight", (kv, e))
        add(p + "attn_v.weight", (kv, e))
        if size.arch == "qwen2":
            add(p + "attn_q.bias", (size.head_dim * size.n_head,), "f32")
            add(p + "attn_k.bias", (kv,), "f32")
            add(p + "attn_v.bias", (kv,), "f32")
        add(p + "attn_output.weight", (e, size.head_dim * size.n_head))
        if size.arch == "gemma2":
            add(p + "post_attention_norm.weight", (e,), "f32")
        add(p + "ffn_norm.weight", (e,), "f32")
        add(p + "ffn_gate.weight", (ff, e))
        add(p + "ffn_up.weight", (ff, e))
        add(p + "ffn_down.weight", (e, ff))
        if size.arch == "gemma2":
            add(p + "post_ffw_norm.weight", (e,), "f32")
    add("output_norm.weight", (e,), "f32")
    if size.arch != "gemma2":  # gemma ties the output to the embeddings
        add("output.weight", (size.n_vocab, e))


def main() -> None:
    """Command line: build one model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--arch", default="llama", choices=ARCHITECTURES)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--embd", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ff", type=int, default=1536)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--type", default="q8_0", choices=WEIGHT_TYPES)
    parser.add_argument("--sliding-window", type=int, default=None)
    args = parser.parse_args()
    size = ModelSize(arch=args.arch, n_vocab=args.vocab, n_embd=args.embd, n_layer=args.layers, n_head=args.heads,
                     n_head_kv=args.kv_heads, n_ff=args.ff, n_ctx=args.ctx, weight_type=args.type,
                     sliding_window=args.sliding_window)
    print(build_model(args.out, size))


if __name__ == "__main__":
    main()
