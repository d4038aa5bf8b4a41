"""How a generation ends: the decode loop's result, the Finished event it folds into, a failed llama_decode's error."""

from __future__ import annotations

from dataclasses import dataclass

from localgen.errors import LocalgenError
from localgen.events import DraftStats, Finished, Timings, Usage


@dataclass(frozen=True)
class DecodeResult:
    """The decode loop's result, folded into a Finished by Engine.generate()."""

    text: str
    finish: str
    generated: int
    first_token_at: float
    last_token_at: float
    stop_string: str | None = None  # the stop string that ended it (None: the model did, or another reason)
    grammar_complete: bool | None = None  # whether the grammar could end where it stopped (None: no grammar, or a
    # stop string cut the text)


LOG_HINT = "run with LOCALGEN_DEBUG=1 for llama.cpp's log"


class DecodeFailure(LocalgenError):
    """A llama_decode that failed: its status (llama.h) says why."""

    def __init__(self, message: str, hint: str, status: int) -> None:
        super().__init__(message, hint)
        self.status = status


def decode_failure(status: int) -> DecodeFailure:
    """The error for a llama_decode that failed, by its status (llama.h): 1 no KV slot for the batch, -1 an invalid
    batch, -2 compute buffers it could not allocate, other negatives a backend's failure."""
    returned = f"(llama_decode returned {status})"
    message = {1: f"llama.cpp found no room in the KV cache for the batch {returned}",
               -1: f"llama.cpp refused the batch as invalid {returned}",
               -2: f"llama.cpp could not allocate the memory to evaluate the batch {returned}"}.get(
        status, f"llama.cpp failed to evaluate the batch {returned}")
    return DecodeFailure(message, decode_hint(status), status)


def decode_hint(status: int, *, sized_by: str | None = None) -> str:
    """What to do about a llama_decode that failed with status; sized_by: the option whose size sizes the context
    where no --ctx-size is taken (bench's test's -p or -n, its context made with room for the test)."""
    if status == 1:
        return "the context may be full; try a larger --ctx-size" if sized_by is None else \
            f"the context is sized from {sized_by} with room to spare: {LOG_HINT}, which says why, and report it"
    if status == -1:
        return f"{LOG_HINT}, which says why, and report it"
    if status == -2:
        return f"try a smaller --batch-size, fewer --gpu-layers or a smaller {sized_by or '--ctx-size'}"
    return f"{LOG_HINT}; where a GPU ran out of memory, try fewer --gpu-layers"


def finished_event(text: str, finish: str, n_prompt: int, reused: int, prefilled: int, generated: int,
                   started: float, prefill_done: float, first_token_at: float | None, last_token_at: float,
                   draft: DraftStats | None = None, restored: int = 0, ahead: int = 0, seed: int | None = None,
                   threads: tuple[int, int] = (0, 0), stop_string: str | None = None,
                   computing_s: float | None = None, grammar_complete: bool | None = None) -> Finished:
    """Fold the measurements of one generation into its final event (first_token_at None: no token came; threads:
    those decoding at the end, then those chosen at load; stop_string: the stop string that ended it; computing_s:
    the seconds the prompt's chunks took to compute, prefill_s, else the time from started to prefill_done); a
    speed with nothing to measure is None."""
    prefill_s = prefill_done - started if computing_s is None else computing_s
    decode_s = last_token_at - first_token_at if first_token_at is not None and generated > 1 else None
    return Finished(
        text=text,
        finish_reason=finish,
        usage=Usage(prompt_tokens=n_prompt, cached_tokens=reused, completion_tokens=generated),
        timings=Timings(
            ttft_s=first_token_at - started if first_token_at is not None else None,
            prefill_s=prefill_s,
            prefill_tokens_per_s=prefilled / prefill_s if prefilled and prefill_s > 0 else None,
            decode_s=decode_s,
            decode_tokens_per_s=(generated - 1) / decode_s if decode_s else None,
        ),
        draft=draft,
        restored_tokens=restored,
        ahead_tokens=ahead,
        seed=seed,
        decode_threads=threads[0],
        threads=threads[1],
        stop_string=stop_string,
        grammar_complete=grammar_complete,
    )
