"""llama.cpp engine: load a GGUF, prefill in chunks, decode on the low-level bindings, reuse the KV cache."""

from __future__ import annotations

import codecs
import ctypes
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import llama_cpp as lc

from localgen.errors import ContextOverflowError, LocalgenError, ModelLoadError
from localgen.events import Completion, Event, PrefillProgress, TextChunk, Timings, Usage
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.stopping import StopMatcher

log = logging.getLogger("localgen.engine")
native_log = logging.getLogger("localgen.llama")

RANDOM_SEED = 0xFFFFFFFF
KV_TYPES = {"f16": lc.GGML_TYPE_F16, "q8_0": lc.GGML_TYPE_Q8_0, "q4_0": lc.GGML_TYPE_Q4_0}
FLASH_ATTN = {
    "auto": lc.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": lc.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": lc.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}
PIECE_BUFFER_BYTES = 256


@lc.llama_log_callback
def _route_native_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    """Send llama.cpp's log lines to localgen's debug log instead of the terminal."""
    if native_log.isEnabledFor(logging.DEBUG):
        native_log.debug(text.decode("utf-8", errors="replace").rstrip())


lc.llama_log_set(_route_native_log, ctypes.c_void_p(0))


def supports_gpu_offload() -> bool:
    """True when this llama.cpp build can offload layers to a GPU."""
    return bool(lc.llama_supports_gpu_offload())


def model_context_length(path: Path) -> int:
    """The training context length stored in a GGUF (0 when unknown), without loading weights."""
    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        return 0
    try:
        return int(lc.llama_model_n_ctx_train(model))
    finally:
        lc.llama_model_free(model)


class Engine:
    """One loaded model and context; streams generations and keeps the KV cache between them."""

    def __init__(self, path: Path, options: LoadOptions) -> None:
        self.path = path
        self.options = options
        self._model = self._load_model(path, options)
        self._vocab = lc.llama_model_get_vocab(self._model)
        self._ctx = self._new_context(options)
        self._memory = lc.llama_get_memory(self._ctx)
        self._kv_tokens: list[int] = []
        self._pieces: dict[int, bytes] = {}
        self._piece_buf = ctypes.create_string_buffer(PIECE_BUFFER_BYTES)
        self._one_token = (lc.llama_token * 1)()
        self._stop_requested = False

    # --- loading -------------------------------------------------------------------------------

    @staticmethod
    def _load_model(path: Path, options: LoadOptions) -> lc.llama_model_p:
        """Load the weights or raise ModelLoadError."""
        params = lc.llama_model_default_params()
        params.n_gpu_layers = options.n_gpu_layers
        model = lc.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise ModelLoadError(
                f"llama.cpp could not load {path}",
                hint="the file may be damaged or of an architecture this build does not know; "
                "run with LOCALGEN_DEBUG=1 for llama.cpp's log",
            )
        return model

    def _new_context(self, options: LoadOptions) -> lc.llama_context_p:
        """Create the inference context (KV cache and compute buffers)."""
        params = lc.llama_context_default_params()
        params.n_ctx = options.n_ctx
        params.n_batch = options.n_batch
        params.n_ubatch = min(options.n_ubatch, options.n_batch)
        params.n_seq_max = 1
        params.n_threads = options.n_threads
        params.n_threads_batch = options.n_threads_batch
        params.flash_attn_type = FLASH_ATTN[options.flash_attn]
        params.type_k = KV_TYPES[options.kv_type]
        params.type_v = KV_TYPES[options.kv_type]
        params.no_perf = True
        ctx = lc.llama_init_from_model(self._model, params)
        if not ctx:
            lc.llama_model_free(self._model)
            raise ModelLoadError(
                f"could not create a context of {options.n_ctx} tokens for {self.path.name}",
                hint="try a smaller --ctx-size, or --kv-type q8_0 with --flash-attn on",
            )
        return ctx

    def close(self) -> None:
        """Free the context and the model."""
        if getattr(self, "_ctx", None):
            lc.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            lc.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- model facts ---------------------------------------------------------------------------

    @property
    def n_ctx(self) -> int:
        """The usable context size: what was asked for, within what llama.cpp allocated."""
        return min(self.options.n_ctx, int(lc.llama_n_ctx(self._ctx)))

    @property
    def n_batch(self) -> int:
        """The prefill chunk size llama.cpp accepts (it caps n_batch at the context size)."""
        return int(lc.llama_n_batch(self._ctx))

    @property
    def n_ctx_train(self) -> int:
        """The context length the model was trained with."""
        return int(lc.llama_model_n_ctx_train(self._model))

    @property
    def kv_tokens(self) -> int:
        """How many tokens currently sit in the KV cache."""
        return len(self._kv_tokens)

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as a string, or None."""
        size = lc.llama_model_meta_val_str(self._model, key.encode(), None, 0)
        if size < 0:
            return None
        buf = ctypes.create_string_buffer(size + 1)
        lc.llama_model_meta_val_str(self._model, key.encode(), buf, size + 1)
        return buf.value.decode("utf-8", errors="replace")

    def chat_template(self) -> str | None:
        """The model's own Jinja chat template, if it has one."""
        template = lc.llama_model_chat_template(self._model, None)
        return template.decode("utf-8", errors="replace") if template else None

    def token_text(self, token: int) -> str:
        """The text of a (special) token, e.g. the BOS token's '<s>'."""
        if token < 0:
            return ""
        return self._piece(token, special=True).decode("utf-8", errors="replace")

    @property
    def bos_text(self) -> str:
        """The BOS token as text ('' when the model has none)."""
        return self.token_text(lc.llama_vocab_bos(self._vocab))

    @property
    def eos_text(self) -> str:
        """The EOS token as text ('' when the model has none)."""
        return self.token_text(lc.llama_vocab_eos(self._vocab))

    @property
    def adds_bos(self) -> bool:
        """True when the model expects a BOS token at the start of a prompt."""
        return bool(lc.llama_vocab_get_add_bos(self._vocab))

    # --- tokens --------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        """Turn text into token ids (special tokens such as <|im_start|> parsed when asked)."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        tokens = (lc.llama_token * capacity)()
        count = lc.llama_tokenize(self._vocab, data, len(data), tokens, capacity, add_special, parse_special)
        if count < 0:
            capacity = -count
            tokens = (lc.llama_token * capacity)()
            count = lc.llama_tokenize(self._vocab, data, len(data), tokens, capacity, add_special,
                                      parse_special)
        return list(tokens[:count])

    def _piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token decodes to (cached per token)."""
        key = token if not special else -token - 1
        piece = self._pieces.get(key)
        if piece is None:
            n = lc.llama_token_to_piece(self._vocab, token, self._piece_buf, PIECE_BUFFER_BYTES, 0, special)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = lc.llama_token_to_piece(self._vocab, token, buf, -n, 0, special)
                piece = buf.raw[:n]
            else:
                piece = self._piece_buf.raw[:n]
            self._pieces[key] = piece
        return piece

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Turn token ids back into text (not used per token while decoding)."""
        return b"".join(self._piece(t) for t in tokens).decode("utf-8", errors="replace")

    # --- generation ----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the running generation to stop at the next token or prefill chunk (signal-safe)."""
        self._stop_requested = True

    def reset(self) -> None:
        """Forget the KV cache."""
        lc.llama_memory_clear(self._memory, True)
        self._kv_tokens = []

    def check_fits(self, n_prompt: int) -> None:
        """Raise ContextOverflowError when a prompt leaves no room to generate."""
        if n_prompt + 1 > self.n_ctx:
            raise ContextOverflowError(
                f"the prompt is {n_prompt:,} tokens but the context holds {self.n_ctx:,}",
                hint=f"raise --ctx-size (the model was trained for {self.n_ctx_train:,}) or shorten the input",
            )

    def generate(self, prompt: Sequence[int], sampling: SamplingParams,
                 limits: GenerationLimits | None = None) -> Iterator[Event]:
        """Stream a generation: prefill progress, text chunks, then one Completion."""
        limits = limits or GenerationLimits()
        self.check_fits(len(prompt))
        self._stop_requested = False
        started = time.perf_counter()
        try:
            reused = self._reuse_prefix(prompt)
            yield from self._prefill(prompt, reused)
            prefill_done = time.perf_counter()
            if self._stop_requested:
                yield self._completion("", "interrupted", len(prompt), reused, 0,
                                       started, prefill_done, prefill_done, prefill_done)
                return
            yield from self._decode(prompt, reused, sampling, limits, started, prefill_done)
        finally:
            self._resync_kv()

    def _reuse_prefix(self, prompt: Sequence[int]) -> int:
        """Keep the cached tokens shared with prompt, drop the rest; return how many were kept."""
        common = 0
        for cached, new in zip(self._kv_tokens, prompt, strict=False):
            if cached != new:
                break
            common += 1
        common = min(common, len(prompt) - 1)  # the last prompt token must be evaluated for logits
        if common < len(self._kv_tokens):
            if not lc.llama_memory_seq_rm(self._memory, 0, common, -1):
                lc.llama_memory_clear(self._memory, True)
                common = 0
            del self._kv_tokens[common:]
        return common

    def _prefill(self, prompt: Sequence[int], start: int) -> Iterator[PrefillProgress]:
        """Evaluate prompt[start:] in n_batch chunks, reporting progress between chunks."""
        n_batch = self.n_batch
        total = len(prompt)
        for begin in range(start, total, n_batch):
            if self._stop_requested:
                return
            chunk = prompt[begin:begin + n_batch]
            array = (lc.llama_token * len(chunk))(*chunk)
            self._decode_batch(lc.llama_batch_get_one(array, len(chunk)))
            self._kv_tokens.extend(chunk)
            yield PrefillProgress(done=begin + len(chunk) - start, total=total - start)

    def _decode_batch(self, batch: lc.llama_batch) -> None:
        """Run llama_decode and turn failures into errors."""
        status = lc.llama_decode(self._ctx, batch)
        if status != 0:
            raise LocalgenError(f"llama.cpp failed to evaluate the batch (llama_decode returned {status})",
                                hint="the context may be full; try a larger --ctx-size")

    def _sampler(self, sampling: SamplingParams, prompt: Sequence[int]) -> lc.llama_sampler_p:
        """Build llama.cpp's native sampler chain for these settings."""
        chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        add = lc.llama_sampler_chain_add
        if sampling.repeat_penalty != 1.0 and sampling.repeat_last_n != 0:
            add(chain, lc.llama_sampler_init_penalties(
                lc.llama_vocab_n_tokens(self._vocab), sampling.repeat_last_n, sampling.repeat_penalty, 0.0, 0.0))
        if sampling.temperature <= 0:
            add(chain, lc.llama_sampler_init_greedy())
        else:
            if sampling.top_k > 0:
                add(chain, lc.llama_sampler_init_top_k(sampling.top_k))
            add(chain, lc.llama_sampler_init_top_p(sampling.top_p, 1))
            add(chain, lc.llama_sampler_init_min_p(sampling.min_p, 1))
            add(chain, lc.llama_sampler_init_temp(sampling.temperature))
            seed = RANDOM_SEED if sampling.seed is None else sampling.seed & 0xFFFFFFFF
            add(chain, lc.llama_sampler_init_dist(seed))
        for token in prompt[-sampling.repeat_last_n:] if sampling.repeat_last_n > 0 else ():
            lc.llama_sampler_accept(chain, token)
        return chain

    def _decode(self, prompt: Sequence[int], reused: int, sampling: SamplingParams,
                limits: GenerationLimits, started: float, prefill_done: float) -> Iterator[Event]:
        """The decode loop: sample, emit text, feed the token back, until a stop condition."""
        chain = self._sampler(sampling, prompt)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stops = StopMatcher(limits.stop)
        max_tokens = limits.max_tokens if limits.max_tokens is not None else -1
        n_ctx = self.n_ctx
        vocab, ctx, one = self._vocab, self._ctx, self._one_token
        parts: list[str] = []
        generated = 0
        first_token_at = last_token_at = prefill_done
        finish = "stop"
        try:
            while True:
                if self._stop_requested:
                    finish = "interrupted"
                    break
                if generated == max_tokens:
                    finish = "length"
                    break
                token = lc.llama_sampler_sample(chain, ctx, -1)
                last_token_at = time.perf_counter()
                if generated == 0:
                    first_token_at = last_token_at
                generated += 1
                if lc.llama_vocab_is_eog(vocab, token):
                    break
                text = stops.feed(decoder.decode(self._piece(token)))
                if text:
                    parts.append(text)
                    yield TextChunk(text)
                if stops.matched is not None:
                    break
                if len(self._kv_tokens) >= n_ctx:
                    finish = "context"
                    break
                one[0] = token
                self._decode_batch(lc.llama_batch_get_one(one, 1))
                self._kv_tokens.append(token)
        finally:
            lc.llama_sampler_free(chain)
        tail = "" if stops.matched is not None else stops.flush()  # a character cut off by a limit is dropped
        if tail:
            parts.append(tail)
            yield TextChunk(tail)
        yield self._completion("".join(parts), finish, len(prompt), reused, generated,
                               started, prefill_done, first_token_at, last_token_at)

    def _completion(self, text: str, finish: str, n_prompt: int, reused: int, generated: int,
                    started: float, prefill_done: float, first_token_at: float,
                    last_token_at: float) -> Completion:
        """Fold the measurements of one generation into its final event."""
        prefill_s = prefill_done - started
        decode_s = last_token_at - first_token_at
        prefilled = n_prompt - reused
        return Completion(
            text=text,
            finish_reason=finish,
            usage=Usage(prompt_tokens=n_prompt, cached_tokens=reused, completion_tokens=generated),
            timings=Timings(
                ttft_s=first_token_at - started,
                prefill_s=prefill_s,
                prefill_tokens_per_s=prefilled / prefill_s if prefill_s > 0 else 0.0,
                decode_s=decode_s,
                decode_tokens_per_s=(generated - 1) / decode_s if generated > 1 and decode_s > 0 else 0.0,
            ),
        )

    def _resync_kv(self) -> None:
        """Make the token list match what the KV cache really holds (after errors or interrupts)."""
        if self._ctx is None:
            return
        held = int(lc.llama_memory_seq_pos_max(self._memory, 0)) + 1
        if held < len(self._kv_tokens):
            del self._kv_tokens[held:]
        elif held > len(self._kv_tokens):
            lc.llama_memory_seq_rm(self._memory, 0, len(self._kv_tokens), -1)
