"""The KV cache of the one sequence an Engine runs: the tokens it holds, kept in step with llama.cpp's memory."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from localgen.engine.chunks import resume_point
from localgen.engine.native import lc
from localgen.engine.results import decode_failure
from localgen.errors import LocalgenError
from localgen.tokens import common_prefix

if TYPE_CHECKING:
    from localgen.engine.sampling import Sampler

log = logging.getLogger("localgen.engine")


class KvCache:
    """llama.cpp's KV memory for sequence 0 and the list of tokens it holds, which every change keeps equal."""

    def __init__(self, ctx: lc.llama_context_p, *, rolls_back: bool) -> None:
        """rolls_back: the memory can drop a tail of tokens (ModelFacts.rolls_back)."""
        self._ctx = ctx
        self._rolls_back = rolls_back
        self.memory = lc.llama_get_memory(ctx)
        self.tokens: list[int] = []  # the decode loop appends to it directly
        self.logits_current = False  # the context's last logits are those of the last token held (see Engine)

    def __len__(self) -> int:
        return len(self.tokens)

    def clear(self) -> None:
        """Forget everything."""
        lc.llama_memory_clear(self.memory, True)
        self.tokens = []
        self.logits_current = False

    def common_prefix(self, prompt: Sequence[int]) -> int:
        """How many leading prompt tokens the cache already holds."""
        return common_prefix(self.tokens, prompt)

    def reuse(self, prompt: Sequence[int], n_ubatch: int, n_batch: int, most: int | None = None) -> int:
        """Keep the cached tokens shared with prompt where the rest prefills as cold (chunks.resume_point), drop
        the others; return how many were kept."""
        common = min(self.common_prefix(prompt), len(prompt) - 1)  # the last prompt token must be evaluated
        common = resume_point(common, len(prompt), n_ubatch, n_batch, most)
        if common < len(self.tokens):
            common = self.truncate(common)
        return common

    def truncate(self, keep: int) -> int:
        """Drop the cached tokens from position keep on; return how many stay.

        Memory that cannot drop a tail (recurrent and hybrid models) is cleared instead, so the token list
        always matches what the cache holds.
        """
        if keep < len(self.tokens):
            self.logits_current = False
        if not lc.llama_memory_seq_rm(self.memory, 0, keep, -1):
            lc.llama_memory_clear(self.memory, True)
            keep = 0
        del self.tokens[keep:]
        return keep

    def drop_last(self, count: int) -> None:
        """Drop the last count tokens (accepted drafts past a stop, an answer)."""
        if count > 0:
            self.truncate(len(self.tokens) - count)

    def resync(self) -> None:
        """Make the token list match what the memory really holds (after errors or interrupts)."""
        held = self.held()
        if held < len(self.tokens):
            del self.tokens[held:]
        elif held > len(self.tokens):
            self.truncate(len(self.tokens))
        else:
            return
        self.logits_current = False  # the last decode's tokens were not all kept

    def held(self) -> int:
        """How many positions llama.cpp's memory holds for the sequence."""
        return int(lc.llama_memory_seq_pos_max(self.memory, 0)) + 1

    def evaluate(self, chunk: Sequence[int]) -> int:
        """Evaluate prompt tokens after those held, adding them to the list when that succeeds, and where it fails
        or is stopped, those of the physical batches it finished (llama.cpp drops only the batch it was in, from
        memory that can drop a tail); return llama_decode's status."""
        array = (lc.llama_token * len(chunk))(*chunk)
        self.logits_current = False
        status = lc.llama_decode(self._ctx, lc.llama_batch_get_one(array, len(chunk)))
        if status == 0:
            self.tokens.extend(chunk)
            self.logits_current = True
        elif self._rolls_back:
            done = self.held() - len(self.tokens)
            if 0 < done < len(chunk):
                self.tokens.extend(chunk[:done])
        return status

    def decode(self, batch: lc.llama_batch) -> None:
        """Run llama_decode and turn failures into errors; on success the logits are the batch's last token's,
        and the caller adds its tokens to the list."""
        self.logits_current = False
        status = lc.llama_decode(self._ctx, batch)
        if status != 0:
            raise decode_failure(status)
        self.logits_current = True

    def verify(self, batch: lc.llama_batch, sampler: Sampler, token: int, drafts: Sequence[int]) -> list[int]:
        """Feed token and the drafted guesses after it in one batch; return the tokens sampled at their positions
        up to the first that differs from its guess or that the sampler cut (or one past the last guess), keeping
        only the agreed ones before it: a cut token is always the last sampled (Sampler.cut)."""
        base = len(self.tokens)
        for i, t in enumerate((token, *drafts)):
            batch.token[i] = t
            batch.pos[i] = base + i
        batch.n_tokens = len(drafts) + 1
        self.decode(batch)
        sampled: list[int] = []
        for i, guess in enumerate(drafts):
            sampled.append(sampler.sample(self._ctx, i))
            if sampled[-1] != guess or sampler.cut is not None:
                break
        else:
            sampled.append(sampler.sample(self._ctx, len(drafts)))
        accepted = len(sampled) - 1
        self.tokens.append(token)
        self.tokens.extend(drafts[:accepted])
        self.logits_current = accepted == len(drafts)
        if accepted < len(drafts) and not lc.llama_memory_seq_rm(self.memory, 0, len(self.tokens), -1):
            raise LocalgenError("llama.cpp could not drop rejected draft tokens from the KV cache",
                                hint="run without --draft lookup")
        return sampled

    def state_size(self) -> int:
        """The bytes save_state takes."""
        return int(lc.llama_state_seq_get_size(self._ctx, 0))

    def save_state(self) -> bytearray:
        """The state of the cached tokens as bytes."""
        size = self.state_size()
        data = bytearray(size)
        written = int(lc.llama_state_seq_get_data(self._ctx, (ctypes.c_uint8 * size).from_buffer(data), size, 0))
        del data[written:]
        return data

    def move_to(self, ctx: lc.llama_context_p, state: bytearray) -> bool:
        """Use another context, putting into it the saved state of the tokens held (the same list object, which
        the decode loop holds); False, and an empty cache, when llama.cpp refuses the state."""
        self._ctx, self.memory = ctx, lc.llama_get_memory(ctx)
        self.logits_current = False
        if not self.tokens:
            return True
        loaded = lc.llama_state_seq_set_data(ctx, (ctypes.c_uint8 * len(state)).from_buffer(state), len(state), 0)
        if loaded and self.held() == len(self.tokens):
            return True
        log.debug("KV state rejected by llama.cpp in the new context (loaded %s bytes)", loaded)
        lc.llama_memory_clear(self.memory, True)
        self.tokens.clear()
        return False

    def load_state(self, tokens: Sequence[int], data: bytearray, n_ctx: int) -> bool:
        """Replace the cache with a saved state of these tokens; False (and an empty cache) if it fails."""
        self.clear()
        if not data or len(tokens) > n_ctx:
            return False
        loaded = lc.llama_state_seq_set_data(self._ctx, (ctypes.c_uint8 * len(data)).from_buffer(data), len(data), 0)
        held = self.held()
        if not loaded or held != len(tokens):
            log.debug("KV state rejected by llama.cpp (loaded %s bytes, %d of %d tokens)", loaded, held, len(tokens))
            lc.llama_memory_clear(self.memory, True)
            return False
        self.tokens = list(tokens)
        return True
