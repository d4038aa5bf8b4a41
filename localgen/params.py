"""Load, sampling and stopping parameters, validated before any of them reaches native code."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from localgen.config import (
    DEFAULT_CONTEXT_CAP,
    DEFAULT_MIN_P,
    DEFAULT_REPEAT_LAST_N,
    DEFAULT_REPEAT_PENALTY,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
)
from localgen.errors import UsageError

KV_TYPE_NAMES = ("f16", "q8_0", "q4_0")
MIN_CONTEXT = 16  # tokens
FLASH_ATTN_NAMES = ("auto", "on", "off")
MAX_TOKENS_LIMIT = 10_000_000
UNTIL_THE_CONTEXT_FILLS = -2  # llama-cli's -n -2; localgen's -1 stops there too
MAX_CONTEXT_LIMIT = 10_000_000
MAX_THREADS = 1024
MAX_TOP_K = 2**31 - 1  # llama.cpp takes an int32
MAX_SEED = 2**32 - 2
RANDOM_SEED = -1  # as a seed: a random one, as in llama.cpp
SCHEMA_SOURCE = "--json-schema"  # the source of a Grammar made from a JSON schema


def _check(ok: bool, message: str, hint: str) -> None:
    """Raise a UsageError unless ok."""
    if not ok:
        raise UsageError(message, hint=hint)


def number_text(value: object) -> str:
    """A number in its shortest form, as it is typed: 500 for 500.0, 0.1, 1e-05."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def _num(value: object) -> str:
    """A number for a message: integers with thousands separators, others in their shortest form."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else number_text(value)


def check_context_size(n_ctx: int) -> None:
    """A context holds at least 16 tokens (its upper bound is the model's, checked where the model is known)."""
    own = " (for llama-cli's -c 0, the model's own size: give that size, or leave -c out for localgen's choice)" \
        if n_ctx == 0 else ""
    _check(n_ctx >= MIN_CONTEXT, f"context size {_num(n_ctx)} is out of range",
           f"use --ctx-size of at least {MIN_CONTEXT} tokens, e.g. 4096{own}")


def check_context_bounds(n_ctx: int) -> None:
    """A context size within what any model could take: at least 16 tokens, at most MAX_CONTEXT_LIMIT."""
    check_context_size(n_ctx)
    _check(n_ctx <= MAX_CONTEXT_LIMIT, f"context size {_num(n_ctx)} is out of range",
           f"use --ctx-size of at most {MAX_CONTEXT_LIMIT} tokens")


def check_gpu_layers(n_gpu_layers: int) -> None:
    """GPU layers are -1 (all), 0 (none) or a count."""
    _check(n_gpu_layers >= -1, f"--gpu-layers {n_gpu_layers} is out of range", "use -1 (all), 0 or more")


def check_kv_type(kv_type: str) -> None:
    """The KV cache type is one llama.cpp takes here."""
    _check(kv_type in KV_TYPE_NAMES, f"unknown KV cache type '{kv_type}'", f"use one of {', '.join(KV_TYPE_NAMES)}")


@dataclass(frozen=True)
class Grammar:
    """GBNF text an answer must follow, and where it came from (for messages)."""

    text: str
    source: str  # "--grammar FILE" or SCHEMA_SOURCE
    is_json_schema: bool = False  # made from a JSON schema: its answer is one JSON value


@dataclass(frozen=True)
class SamplingParams:
    """Sampler settings; temperature 0 means greedy."""

    temperature: float = DEFAULT_TEMPERATURE
    top_k: int = DEFAULT_TOP_K
    top_p: float = DEFAULT_TOP_P
    min_p: float = DEFAULT_MIN_P
    repeat_penalty: float = DEFAULT_REPEAT_PENALTY
    repeat_last_n: int = DEFAULT_REPEAT_LAST_N
    presence_penalty: float = 0.0  # subtracted once from the logit of a token seen in the last repeat_last_n
    frequency_penalty: float = 0.0  # subtracted per time it was seen there
    seed: int | None = None
    grammar: Grammar | None = None  # what the answer must follow (--grammar, --json-schema); None: free text

    def __post_init__(self) -> None:
        _check(0.0 <= self.temperature <= 100.0, f"temperature {_num(self.temperature)} is out of range",
               "use 0 (greedy) to 100; useful values are up to about 2, typical is 0.7")
        _check(self.top_k >= 0, f"top-k {self.top_k} is negative", "use 0 (off) or a positive count, e.g. 40")
        _check(self.top_k <= MAX_TOP_K, f"top-k {_num(self.top_k)} is out of range", "use 0 (off) or a count, e.g. 40")
        _check(0.0 <= self.top_p <= 1.0, f"top-p {_num(self.top_p)} is out of range", "use a value from 0 to 1")
        _check(0.0 <= self.min_p <= 1.0, f"min-p {_num(self.min_p)} is out of range", "use a value from 0 to 1")
        _check(0.0 < self.repeat_penalty <= 10.0, f"repeat penalty {_num(self.repeat_penalty)} is out of range",
               "use a value above 0 and up to 10; 1 disables it, typical is 1.1")
        _check(-1 <= self.repeat_last_n <= MAX_CONTEXT_LIMIT,
               f"repeat-last-n {_num(self.repeat_last_n)} is out of range",
               f"use 0 (off), -1 (the whole context) or a token count up to {MAX_CONTEXT_LIMIT}, e.g. 64")
        for name, value in (("presence", self.presence_penalty), ("frequency", self.frequency_penalty)):
            _check(-2.0 <= value <= 2.0, f"{name} penalty {_num(value)} is out of range",
                   "use a value from -2 to 2; 0 disables it, typical is up to 0.5")
        if self.seed == RANDOM_SEED:
            object.__setattr__(self, "seed", None)  # frozen: normalised once, here
        _check(self.seed is None or 0 <= self.seed <= MAX_SEED, f"seed {self.seed} is out of range",
               f"use a seed from 0 to {MAX_SEED}, or -1 for a random one")

    def with_drawn_seed(self) -> SamplingParams:
        """These settings with a seed for random sampling: a random one drawn now when none is set, so that the
        answer it gives can be reproduced with --seed (greedy sampling needs none)."""
        if self.seed is not None or self.temperature <= 0:
            return self
        import secrets

        return self.with_value("seed", secrets.randbelow(MAX_SEED + 1))

    def with_value(self, name: str, value: object) -> SamplingParams:
        """A copy with one field changed (validated)."""
        names = {f.name for f in fields(self)}
        _check(name in names, f"unknown setting '{name}'", f"settings: {', '.join(sorted(names))}")
        return SamplingParams(**{**{f.name: getattr(self, f.name) for f in fields(self)}, name: value})


SETTINGS_THAT_MAY_BE_NONE = ("seed", "max_tokens")  # none (or -1) is a random seed, no token limit
NONE_GIVEN = -1  # what one of them is given as for none, as llama.cpp and Ollama take it
CHAT_SETTINGS: dict[str, type[int] | type[float]] = {  # what /set changes and a saved conversation keeps
    "temperature": float, "top_k": int, "top_p": float, "min_p": float, "repeat_penalty": float,
    "repeat_last_n": int, "presence_penalty": float, "frequency_penalty": float, "max_tokens": int, "seed": int,
}
SETTING_EXAMPLES = {"temperature": "0.7", "top_k": "40", "top_p": "0.9", "min_p": "0.05", "repeat_penalty": "1.1",
                    "repeat_last_n": "64", "presence_penalty": "0.5", "frequency_penalty": "0.5", "max_tokens": "512",
                    "seed": "42"}  # a typical value of each: the hint for one that is no number


def check_setting(key: str, value: object) -> None:
    """A UsageError when a chat setting's value is out of its range (max_tokens: -1 or None is no limit)."""
    if key == "max_tokens":
        GenerationLimits(max_tokens=token_budget(value))  # type: ignore[arg-type]
    else:
        SamplingParams().with_value(key, value)


def with_settings(sampling: SamplingParams, limits: GenerationLimits,
                  values: Mapping[str, object]) -> tuple[SamplingParams, GenerationLimits]:
    """Sampling settings and limits with these chat settings applied (max_tokens goes to the limits)."""
    for key, value in values.items():
        if key == "max_tokens":
            limits = replace(limits, max_tokens=token_budget(value))  # type: ignore[arg-type]
        else:
            sampling = sampling.with_value(key, value)
    return sampling, limits


STOP_SETTING = "stop"  # a saved conversation's stop strings, beside its CHAT_SETTINGS


def stored_setting(key: str, value: int | float | None) -> int | float | None:
    """A chat setting as a session keeps it: -1 for seed or max_tokens is none (a random seed, no token limit)."""
    return None if key in SETTINGS_THAT_MAY_BE_NONE and value == NONE_GIVEN else value


def setting_given(value: int | float | None) -> str:
    """A chat setting's value as an option gives it: in its shortest form, none (SETTINGS_THAT_MAY_BE_NONE's) as -1."""
    return number_text(NONE_GIVEN if value is None else value)


def token_budget(max_tokens: int | None) -> int | None:
    """An answer's token budget from -n: -1 (as llama.cpp and Ollama take it) means no limit, like leaving it out."""
    return None if max_tokens == NONE_GIVEN else max_tokens


@dataclass(frozen=True)
class GenerationLimits:
    """When to stop: a token budget and stop strings."""

    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    stops_in_answer_only: bool = False  # not inside <think> reasoning (--hide-thinking hides it)

    def __post_init__(self) -> None:
        _check(self.max_tokens is None or 1 <= self.max_tokens <= MAX_TOKENS_LIMIT,
               f"max tokens {_num(self.max_tokens)} is out of range",
               "-1 is no limit here: the answer runs until the model ends it or the context fills, as llama-cli's -2 "
               "does" if self.max_tokens == UNTIL_THE_CONTEXT_FILLS else
               f"use 1 to {MAX_TOKENS_LIMIT} tokens, or -1 for no limit")
        check_stop_strings(self.stop)


def check_stop_strings(stops: tuple[str, ...]) -> None:
    """Stop strings have some text each (--stop, /set stop and models.toml's stop alike)."""
    _check(all(stops), "a stop string is empty",
           "pass non-empty --stop strings; --stop '' alone turns them all off")


def flash_attention_on(mode: str, *, kv_type: str, gpu: bool, n_ctx: int | None) -> bool:
    """Whether llama.cpp runs flash attention: as asked with on or off. With auto, where it is needed or pays: a
    quantized KV cache, layers on a GPU, or a context past DEFAULT_CONTEXT_CAP (a batch's attention scores would
    take much memory without it); not on the CPU otherwise, where its kernel measured several times slower with a
    long context already in the cache (README, Performance)."""
    if mode != "auto":
        return mode == "on"
    return kv_type != "f16" or gpu or (n_ctx or 0) > DEFAULT_CONTEXT_CAP


@dataclass(frozen=True)
class LoadOptions:
    """How to load a model: context, threads, batches, offload and KV cache type."""

    n_ctx: int
    n_threads: int
    n_threads_batch: int
    n_batch: int = 512
    n_ubatch: int = 512
    n_gpu_layers: int = 0
    flash_attn: str = "auto"
    kv_type: str = "f16"
    adapt_threads: bool = False  # decode with fewer threads while other processes keep the CPUs busy
    expected_tokens: int = 0  # what the first prompt and its answer are expected to take (0 = unknown)
    keys_for_drafts: bool = False  # keys chosen for verifying drafts (--draft lookup without --kv-type): key_type

    def __post_init__(self) -> None:
        check_context_bounds(self.n_ctx)
        for name, value in (("threads", self.n_threads), ("threads-batch", self.n_threads_batch)):
            _check(1 <= value <= MAX_THREADS, f"--{name} {value} is out of range",
                   f"use 1 to {MAX_THREADS}; the default, the physical cores, is usually fastest")
        _check(1 <= self.n_batch <= 1 << 16, f"batch size {_num(self.n_batch)} is out of range",
               f"use 1 to {1 << 16}, e.g. 512")
        _check(1 <= self.n_ubatch <= 1 << 16, f"ubatch size {_num(self.n_ubatch)} is out of range",
               f"use 1 to {1 << 16}, e.g. 512")
        check_gpu_layers(self.n_gpu_layers)
        _check(self.flash_attn in FLASH_ATTN_NAMES, f"unknown flash-attn mode '{self.flash_attn}'",
               f"use one of {', '.join(FLASH_ATTN_NAMES)}")
        check_kv_type(self.kv_type)
        _check(self.kv_type == "f16" or self.flash_attn != "off",
               f"--kv-type {self.kv_type} needs flash attention", "use --flash-attn on or auto")

    @property
    def flash_attention(self) -> bool:
        """Whether this context runs flash attention (flash_attention_on for these options)."""
        return flash_attention_on(self.flash_attn, kv_type=self.kv_type, gpu=self.n_gpu_layers != 0,
                                  n_ctx=self.n_ctx)

    @property
    def key_type(self) -> str:
        """The KV cache's type for keys: kv_type's, but q8_0 for an f16 cache whose keys are chosen for verifying
        drafts, with flash attention on the CPU. There llama.cpp splits a one-token step's attention over 512 f16
        keys or more among the threads and sums it in another order than a verified batch's, so greedy lookup parted
        from plain decoding at near-ties; over q8_0 keys and f16 values (the split wants one type for both) one
        kernel serves both."""
        if self.keys_for_drafts and self.kv_type == "f16" and self.flash_attention and self.n_gpu_layers == 0:
            return "q8_0"
        return self.kv_type

    @property
    def kv_layout(self) -> str:
        """The KV cache's types as reports name them: "f16", or "f16 (q8_0 keys)" where the keys' differ."""
        return self.kv_type if self.key_type == self.kv_type else f"{self.kv_type} ({self.key_type} keys)"

    @property
    def attention_mode(self) -> str:
        """Flash attention as logs and reports name it: on or off, and "(auto)" when auto chose it."""
        chosen = "on" if self.flash_attention else "off"
        return f"{chosen} (auto)" if self.flash_attn == "auto" else chosen
