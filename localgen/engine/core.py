"""The Engine: load a GGUF, prefill in chunks, decode on the low-level bindings, reuse the KV cache."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path

from localgen.engine import loading
from localgen.engine.abort import StopBetweenNodes, node_stopper
from localgen.engine.chunks import AHEAD_CHUNK, chunk_bounds
from localgen.engine.decoding import Decoding
from localgen.engine.facts import read_facts
from localgen.engine.growth import (
    batch_beyond_memory_limit,
    first_cells,
    largest_batch_bytes,
    physical_batches,
    shape_for_limits,
)
from localgen.engine.kv import KvCache
from localgen.engine.loading import load_weights, new_context, new_draft_batch
from localgen.engine.native import lc, library_build
from localgen.engine.prefix import PrefixCache, restore_prefix, save_prefix
from localgen.engine.results import DecodeResult, decode_failure, finished_event
from localgen.engine.sampling import build_sampler
from localgen.engine.threads import ThreadGovernor, ahead_threads, count_matters_from, load_started
from localgen.engine.vocab import Vocab
from localgen.errors import ContextOverflowError, LocalgenError, ModelLoadError, UsageError
from localgen.estimate import ModelShape, allocated_context
from localgen.events import Event, PrefillProgress
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.signals import deferred_signals
from localgen.speculative import PromptLookup, check_draft_mode

log = logging.getLogger("localgen.engine")

ABORTED = 2  # llama_decode's status when the abort callback stopped it (the aborted ubatch leaves the KV cache)


class Engine(Decoding):
    """One loaded model and context; streams generations and keeps the KV cache between them."""

    def __init__(self, path: Path, options: LoadOptions, shape: ModelShape | None = None) -> None:
        """Load the model at path with these options; shape is the model's where its header was read already (the
        memory checks of its contexts and batches use it), else it is read here."""
        self.path = path
        self.options = options
        self._model: lc.llama_model_p | None = None
        self._ctx: lc.llama_context_p | None = None
        self._draft_batch: lc.llama_batch | None = None
        self._full_cells = allocated_context(options.n_ctx, flash_attn=options.flash_attention)
        # read while memory allows: a limit may leave too little later
        self._shape = shape if shape is not None else shape_for_limits(path)
        self._cells = first_cells(options, self._full_cells, self._shape)
        adapt = options.adapt_threads and options.n_threads > 1
        self._repacked = loading.use_cpu_extra_buffers()  # repacked weights take other kernels: other sums
        before_load = load_started() if adapt else None  # the load's time tells the first prefill how busy CPUs are
        try:  # a failure or a Ctrl-C part way frees what was allocated (a model can hold gigabytes)
            with deferred_signals() as deferred:  # Ctrl-C lands once each pointer is stored, so it can be freed
                self._model = load_weights(path, options, stop=deferred.pending, repack=self._repacked)
                if not deferred.pending():
                    self._ctx = new_context(self._model, options, path, self._cells, self._shape)
                if not deferred.pending():
                    self._draft_batch = new_draft_batch()
            if deferred.pending():  # the handler in place did not raise (it only asked to stop): stop here
                raise KeyboardInterrupt
            self._vocab = Vocab(lc.llama_model_get_vocab(self._model))
            self._facts = read_facts(self._model, self._ctx, self._vocab, options.n_ctx,
                                     whole=self._cells == self._full_cells)
            self._kv = KvCache(self._ctx, rolls_back=self._facts.rolls_back)
            self._one_token = (lc.llama_token * 1)()
            self._one_batch = lc.llama_batch_get_one(self._one_token, 1)
            self._stop_requested = False
            self._batch_bytes_run = 0  # what the largest prompt batch run in this context mapped (growth.batch_bytes)
            self._last_use: object | None = None  # the generation that used the engine last (see generate())
            self._ahead_from: int | None = None  # where the prompt computed by prefill_ahead() begins
            exact_from = count_matters_from(options.flash_attention, options.key_type)
            self._governor = ThreadGovernor(options.n_threads, self._use_threads, since=before_load,
                                            exact_from=exact_from) if adapt else None
        except BaseException:
            self.close()
            raise

    def _make_room(self, tokens: int) -> None:
        """Let the KV cache hold this many tokens: a context started small moves, with the tokens it holds, into
        one of the whole context's size (the last logits are not kept: the caller evaluates a token next)."""
        if tokens <= self._cells or self._cells >= self._full_cells:
            return
        with deferred_signals():  # the context is replaced and its state moved before a Ctrl-C lands
            state = self._kv.save_state() if len(self._kv) else bytearray()
            old, self._ctx = self._ctx, None
            lc.llama_free(old)
            try:
                self._ctx = new_context(self._model, self.options, self.path, self._full_cells, self._shape)
            except ModelLoadError:
                try:
                    self._ctx = new_context(self._model, self.options, self.path, self._cells,
                                            self._shape)  # its memory was freed
                except ModelLoadError:
                    raise ModelLoadError("no memory is left for the model's context: the model was unloaded",
                                         hint=f"give a smaller --ctx-size (it is {self.n_ctx:,})") from None
                self._kv.move_to(self._ctx, state)
                raise ContextOverflowError(
                    f"the context could not grow past {self._cells:,} tokens: llama.cpp could not allocate "
                    f"{self.n_ctx:,}", hint=f"give a smaller --ctx-size (it is {self.n_ctx:,})") from None
            finally:
                if self._ctx is None:  # no context could be had: the model goes too (is_open is False)
                    self.close()
                elif self._governor is not None:  # a new context has the load's count
                    self._governor.reapply()
            self._cells = self._full_cells
            self._batch_bytes_run = 0  # the new context's work buffer is mapped afresh
            moved = self._kv.move_to(self._ctx, state)
        log.debug("the KV cache grew to %d cells for %d tokens", self._cells, tokens)
        if not moved:
            raise LocalgenError("llama.cpp could not move the KV cache into the larger context",
                                hint="run with LOCALGEN_DEBUG=1 for llama.cpp's log")

    def close(self) -> None:
        """Free the context and the model (what of them exists). Each pointer is dropped before its memory is
        freed, and a Ctrl-C waits until all are: one landing between the two would leave a freed context in use."""
        with deferred_signals():
            batch, ctx, model = self._draft_batch, self._ctx, self._model
            self._draft_batch = self._ctx = self._model = None
            if batch is not None:
                lc.llama_batch_free(batch)
            if ctx is not None:
                lc.llama_free(ctx)
            if model is not None:
                lc.llama_model_free(model)

    @property
    def decode_threads(self) -> int:
        """The threads decoding now: fewer than chosen at load while other processes keep the CPUs busy."""
        return self._governor.current if self._governor is not None else self.options.n_threads

    def _use_threads(self, count: int) -> None:
        """Decode with count threads, and prefill with as many unless --threads-batch set its own count."""
        lc.llama_set_n_threads(self._ctx, count, self._batch_threads(count))

    def _batch_threads(self, decode_threads: int) -> int:
        """The threads a prompt's batches take beside decode_threads decoding: as many, unless --threads-batch set
        its own count."""
        o = self.options
        return decode_threads if o.n_threads_batch == o.n_threads else o.n_threads_batch

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def kv_tokens(self) -> int:
        """How many tokens currently sit in the KV cache."""
        return len(self._kv)

    # --- generation ----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the running or next generation to stop at the next token or prefill chunk (signal-safe)."""
        self._stop_requested = True

    def clear_stop(self) -> None:
        """Withdraw a stop request that came after the generation it was meant for had ended."""
        self._stop_requested = False

    def reset(self) -> None:
        """Forget the KV cache."""
        self._check_context()
        self._last_use = None
        self._kv.clear()
        self._ahead_from = None

    def forget_after(self, keep: int) -> None:
        """Forget the KV cache past its first keep tokens (an answer the conversation does not keep)."""
        self._check_context()
        self._last_use = None  # a generation collected later leaves the cache as it is now
        if keep < len(self._kv):
            self._kv.truncate(keep)

    def check_fits(self, n_prompt: int, made_of: str = "") -> None:
        """Raise ContextOverflowError when a prompt leaves no room to generate (made_of: what it holds, named)."""
        self._facts.check_fits(n_prompt, made_of)

    def generate(self, prompt: Sequence[int], sampling: SamplingParams, limits: GenerationLimits | None = None,
                 *, draft: str = "none", prefix_cache: PrefixCache | None = None,
                 ignore_eog: bool = False) -> Iterator[Event]:
        """Stream a generation: prefill progress, text chunks, then one Finished.

        draft="lookup" turns on speculative decoding by prompt lookup; prefix_cache restores and saves
        the KV state of long prompts across processes (after a save, the KV cache keeps only the prompt);
        ignore_eog keeps decoding past end-of-generation tokens (for benchmarks). A stop requested before
        the generation starts (while the prompt was prepared) stops it before its first token. A generation
        left unfinished and collected once the engine has had another use leaves the engine's state alone.
        """
        limits = limits or GenerationLimits()
        sampling = sampling.with_drawn_seed()
        seed = sampling.seed if sampling.temperature > 0 else None  # greedy sampling uses none
        check_draft_mode(draft)
        self._check_context()
        if not prompt:
            raise UsageError("the prompt is 0 tokens: nothing to answer",
                             hint="give a prompt, or check the chat template (--chat-template)")
        self.check_fits(len(prompt))
        sampler = None
        started = time.perf_counter()
        self._last_use = this = object()
        try:
            with deferred_signals():  # a Ctrl-C lands once the sampler is stored, so the finally below frees it
                sampler = build_sampler(self._vocab.pointer, sampling, prompt, self.n_ctx,  # a bad grammar fails
                                        reasoning_open=sampling.grammar is not None and self._opens_thinking(prompt))
            self._make_room(len(prompt) + 1)
            if self._holds_with_logits(prompt):  # prefilled ahead: the first token can be sampled at once
                restored, reused = 0, len(prompt)
            else:
                restored = 0 if prefix_cache is None else \
                    restore_prefix(self._kv, prompt, prefix_cache, n_ctx=self.n_ctx, n_ubatch=self.n_ubatch,
                                   make_room=self._make_room)
                reused = self._kv.reuse(prompt, self.n_ubatch, self.n_batch)
                restored = min(restored, reused)
            ahead = 0 if self._ahead_from is None else max(0, reused - self._ahead_from)
            self._ahead_from = None
            if self._governor is not None and len(prompt) - reused > 1:
                self._governor.before_prefill()
            computing = yield from self._prefill(prompt, reused)  # prefill_s: its chunks' time alone
            prefill_done = time.perf_counter()
            if self._stop_requested:  # no token: no TTFT, and only the chunks evaluated count as prefilled
                yield finished_event("", "interrupted", len(prompt), reused, len(self._kv) - reused, 0,
                                     started, prefill_done, None, prefill_done, restored=restored, ahead=ahead,
                                     seed=seed, threads=(self.decode_threads, self.options.n_threads),
                                     computing_s=computing)
                return
            drafter = PromptLookup(prompt) if draft == "lookup" and self._facts.rolls_back else None
            grammar = sampling.grammar
            for event in self._decode(sampler, limits, ignore_eog, drafter, spelled=grammar is not None,
                                      json_value=grammar is not None and grammar.is_json_schema):
                if isinstance(event, DecodeResult):
                    finished = finished_event(event.text, event.finish, len(prompt), reused,
                                              len(prompt) - reused, event.generated, started, prefill_done,
                                              event.first_token_at, event.last_token_at,
                                              drafter.stats() if drafter else None, restored, ahead, seed,
                                              (self.decode_threads, self.options.n_threads), event.stop_string,
                                              computing, event.grammar_complete)
                    if prefix_cache is not None and event.finish != "interrupted":
                        save_prefix(self._kv, prefix_cache, len(prompt), len(prompt) - reused)
                    yield finished
                else:
                    yield event
        except BaseException:
            if self._last_use is this:
                self._kv.logits_current = False  # a signal may have left them penalized part way (Sampler.sample)
            raise
        finally:
            if sampler is not None:
                sampler.free()
            if self._last_use is this:  # not another generation's stop request, nor its KV cache part way
                self._last_use = None
                self._stop_requested = False
                if self._governor is not None:  # the next answer measures the free CPUs for its own count
                    self._governor.finish()
                if self._ctx is not None:
                    self._kv.resync()

    # --- KV state: save and restore ------------------------------------------------------------

    @property
    def state_signature(self) -> str:
        """What, besides the model file, a saved KV state depends on (library version and build, KV layout, the
        kernels the weights take: repacked for the CPU, as with AMX, or as stored)."""
        o = self.options
        attention = "on" if o.flash_attention else "off"  # what ran: auto's choice may differ from run to run
        weights = "repacked" if self._repacked else "as stored"
        return (f"{self.backend_version}; build {library_build()}; kv {o.kv_layout}; flash-attn {attention}; "
                f"gpu {o.n_gpu_layers}; ubatch {self.n_ubatch}; weights {weights}")

    def save_state(self) -> bytearray:
        """The KV cache state of the sequence (the tokens in kv_token_list) as bytes."""
        self._check_context()
        return self._kv.save_state()

    def load_state(self, tokens: Sequence[int], data: bytearray) -> bool:
        """Replace the KV cache with a saved state of these tokens; False (and an empty cache) if it fails."""
        self._check_context()
        self._last_use = None
        self._kv.clear()  # nothing held to move
        if len(tokens) <= self.n_ctx:
            self._make_room(len(tokens) + 1)
        return self._kv.load_state(tokens, data, self.n_ctx)

    @property
    def kv_token_list(self) -> list[int]:
        """A copy of the tokens currently in the KV cache."""
        return list(self._kv.tokens)

    # --- prefill ahead of a generation --------------------------------------------------------

    def prefill_ahead(self, prompt: Sequence[int], should_stop: Callable[[], bool]) -> int:
        """Compute the KV cache for a prompt before generate() is asked for it (a chat message as it is typed);
        return how many of its tokens the cache holds.

        Cached tokens past the shared prefix are dropped first; the last prompt token is computed again if need
        be, so that its logits are ready. should_stop is polled between chunks and, on backends that call
        llama.cpp's abort callback (the CPU's does), between graph nodes (in C where it is a StopFlag): a prefill
        no longer wanted ends within a millisecond or so there, keeping the chunks already done. Only one thread
        may use the engine at a time: the caller stops this before calling anything else.
        """
        self._check_context()
        self._last_use = None
        if not prompt or len(prompt) >= self.n_ctx or not self._facts.rolls_back:
            return 0
        self._make_room(len(prompt) + 1)
        if self._holds_with_logits(prompt):
            return len(prompt)
        common = self._kv.reuse(prompt, self.n_ubatch, self.n_batch, most=AHEAD_CHUNK)
        self._ahead_from = common if self._ahead_from is None else min(self._ahead_from, common)
        chunks = list(chunk_bounds(common, len(prompt), self.n_ubatch, self.n_batch, most=AHEAD_CHUNK))
        refused = self._batch_refusal(chunks) is not None  # the message's own prefill says so as it is sent
        try:
            with node_stopper(self._ctx, should_stop) as stopper:
                for begin, end in chunks:
                    if refused or should_stop():
                        break
                    self._before_chunk(begin, end)
                    lc.llama_set_n_threads(self._ctx, lc.llama_n_threads(self._ctx),
                                           ahead_threads(self._batch_threads(self.decode_threads)))
                    status = self._kv.evaluate(prompt[begin:end])
                    if status == 0:
                        self._note_batches_run(begin, end)
                    stopper.raise_caught()
                    if status != 0:
                        if status != ABORTED:
                            log.debug("prefill ahead stopped: llama_decode returned %d", status)
                        break
        finally:
            self._kv.resync()
            if self._governor is not None:  # the answer's prefill and decode take their own counts again
                self._governor.reapply()
            else:
                self._use_threads(self.options.n_threads)
        return self._kv.common_prefix(prompt)

    def _holds_with_logits(self, prompt: Sequence[int]) -> bool:
        """True when the KV cache holds exactly prompt and the context's logits are its last token's."""
        kv = self._kv
        return kv.logits_current and len(kv) == len(prompt) and kv.common_prefix(prompt) == len(prompt)

    # --- prefill --------------------------------------------------------------------------------

    def _prefill(self, prompt: Sequence[int], start: int) -> Generator[PrefillProgress, None, float]:
        """Evaluate prompt[start:] in chunks of up to n_batch, reporting progress before the first of several chunks
        (0 done: a long prompt says so at once) and after each; a stop request (Ctrl-C) ends a chunk part way too, where
        the backend polls the abort callback, which each llama_decode sets alone (none is held at a yield). Return the
        seconds the chunks took to compute, each timed from its llama_decode until llama_synchronize says its work is
        done (an async backend's llama_decode, CUDA's, returns before): neither the work before the first chunk (a
        prefix restored from disk, the sampler's grammar, the context's growth) nor the time the consumer of the
        progress takes counts."""
        total = len(prompt)
        chunks = list(chunk_bounds(start, total, self.n_ubatch, self.n_batch))
        computing = 0.0
        if chunks:
            refusal = self._batch_refusal(chunks)
            if refusal is not None:
                raise refusal
        if len(chunks) > 1:
            yield PrefillProgress(done=0, total=total - start, until=chunks[0][1] - start)
        for index, (begin, end) in enumerate(chunks):
            if self._stop_requested:
                break
            self._before_chunk(begin, end)
            began = time.perf_counter()
            with StopBetweenNodes(self._ctx, lambda: self._stop_requested) as stopper:
                status = self._kv.evaluate(prompt[begin:end])
            lc.llama_synchronize(self._ctx)
            if status == 0:
                self._note_batches_run(begin, end)
            computing += time.perf_counter() - began
            stopper.raise_caught()
            if status == ABORTED and self._stop_requested:
                break
            if status != 0:
                raise decode_failure(status)
            following = chunks[index + 1][1] if index + 1 < len(chunks) else end
            yield PrefillProgress(done=end - start, total=total - start, until=following - start)
        return computing

    def _batch_refusal(self, chunks: Sequence[tuple[int, int]]) -> LocalgenError | None:
        """The refusal of a prompt's chunks (each from begin to end) past a memory limit, where llama.cpp would abort
        the process on one of their batches (batch_beyond_memory_limit); None where they may run."""
        batches = list(physical_batches(chunks, self.n_ubatch))
        return batch_beyond_memory_limit(self.options, self._shape, batches, self._batch_bytes_run)

    def _note_batches_run(self, begin: int, end: int) -> None:
        """Count the batches of a chunk evaluated from begin to end (llama.cpp splits it into n_ubatch tokens from its
        start): the largest one's threads and work buffer are mapped."""
        if self._shape is not None:
            ran = largest_batch_bytes(self.options, self._shape, physical_batches([(begin, end)], self.n_ubatch))
            self._batch_bytes_run = max(self._batch_bytes_run, ran)

    def _before_chunk(self, begin: int, end: int) -> None:
        """Tell the thread governor of a prompt chunk whose last physical batch is one token (llama.cpp cuts a
        chunk into n_ubatch tokens from its start)."""
        if self._governor is not None and (self.n_ubatch == 1 or (end - begin) % self.n_ubatch == 1):
            self._governor.one_token_at(end - 1)
