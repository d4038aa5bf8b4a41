"""A chat's later turns under a memory limit (`ulimit -d`) on the real bundled model: their batches are checked as
large as they are, beside the largest batch that ran in the context, and one stopped part way counts for none."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from localgen.memory_limits import MemoryRoom
from localgen.units import binary_size_up
from tests.conftest import REPO_ROOT

_SHORT_TURNS = """
import resource, sys
from pathlib import Path
from localgen.engine import Engine
from localgen.errors import LocalgenError
from localgen.memory_limits import data_in_use
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
for flash in ("off", "on"):
    options = LoadOptions(n_ctx=512, n_batch=512, n_ubatch=512, n_threads=1, n_threads_batch=1, flash_attn=flash)
    with Engine(Path(sys.argv[1]), options) as engine:
        for tokens, left_mib in ((100, None), (200, None), (300, None), (350, 9), (360, 4)):
            if left_mib is not None:
                resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + left_mib * 2**20, resource.RLIM_INFINITY))
            try:
                *_, done = engine.generate(list(range(1000, 1000 + tokens)), SamplingParams(temperature=0.0),
                                           GenerationLimits(max_tokens=1))
                print(flash, tokens, "answered", flush=True)
            except LocalgenError as exc:
                print(flash, tokens, exc.message, flush=True)
        resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
"""


def _run(script: str, *args: str) -> list[str]:
    """The lines a script run in its own process prints (a memory limit set there holds it alone)."""
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120,
                            cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


def test_short_turns_under_a_limit_are_checked_as_large_as_they_are(bundled_model: Path) -> None:
    """Turns shorter than --ubatch-size (100 tokens each) ran batches no check counted, so a 50-token turn under a
    limit leaving 9 MiB was checked as a fresh batch of 512 tokens seeing the whole context (12.5 MiB without flash
    attention, 9.5 MiB with it) and refused, where it maps nothing more than the turns before it: it is answered. The
    8 MiB kept for what else a batch maps still holds: a turn under 4 MiB is refused, saying it is that margin a
    message needs, not a batch that maps nothing new."""
    lines = _run(_SHORT_TURNS, str(bundled_model))
    refused = "not enough memory is left to answer: a message needs 8.0 MiB free, and `ulimit -d` of "
    for flash in ("off", "on"):
        turns = [line.split(" ", 2)[2] for line in lines if line.startswith(f"{flash} ")]
        assert turns[:4] == ["answered"] * 4 and turns[4].startswith(refused), lines
        assert turns[4].endswith(" leaves 4.0 MiB"), lines


_STOPPED_PART_WAY = """
import itertools, resource, sys
from pathlib import Path
from localgen.engine import Engine, core
from localgen.errors import LocalgenError
from localgen.memory_limits import data_in_use
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
polls = itertools.count()
stop_after = [10**9]
class CountedStop(core.StopBetweenNodes):
    def __init__(self, ctx, should_stop):
        def stop():
            if next(polls) >= stop_after[0]:
                engine.request_stop()  # as Ctrl-C asks
            return should_stop()
        super().__init__(ctx, stop)
core.StopBetweenNodes = CountedStop
options = LoadOptions(n_ctx=1024, n_batch=512, n_ubatch=128, n_threads=1, n_threads_batch=1, flash_attn="off")
prompt = list(range(1000, 1512))
with Engine(Path(sys.argv[1]), options) as engine:
    *_, done = engine.generate(prompt[:128], SamplingParams(temperature=0.0), GenerationLimits(max_tokens=1))
    one_batch = next(polls)  # the graph nodes of one batch, each polled once
    engine.reset()
    stop_after[0] = next(polls) + one_batch + one_batch // 2  # part way through the chunk's second batch
    *_, done = engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=1))
    print(done.finish_reason, engine.kv_tokens, flush=True)
    stop_after[0] = 10**9
    resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + int(8.3 * 2**20), resource.RLIM_INFINITY))
    try:
        *_, done = engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=1))
        print("answered", flush=True)
    except LocalgenError as exc:
        print(exc.message, flush=True)
"""


def test_a_chunk_stopped_part_way_counts_none_of_its_batches_as_run(bundled_model: Path) -> None:
    """A 512-token chunk of four batches stopped in its second (as Ctrl-C stops it) was counted as run to its end, so
    the prompt sent again under a limit leaving 8.3 MiB went unchecked (the 8 MiB margin alone fits), its later
    batches (seeing 512 cells) mapping more than any that ran: they are refused before they run."""
    stopped, again = _run(_STOPPED_PART_WAY, str(bundled_model))
    assert stopped == "interrupted 128", stopped
    assert again.startswith("not enough memory is left to evaluate the prompt: its largest batch takes "), again


def test_an_amount_needed_never_reads_as_the_room_short_of_it() -> None:
    """34.0 MiB and one byte needed where 34.0 MiB is left read '34.0 MiB' both: the amount needed is rounded up, and
    where what is left rounds up to the same figure, it reads one step more."""
    mib = 2**20
    assert binary_size_up(34 * mib + 1) == "34.1 MiB"
    assert binary_size_up(34 * mib) == "34.0 MiB"
    room = MemoryRoom("ulimit -d", 400 * mib, int(33.97 * mib))
    assert room.needs(int(33.98 * mib)) == "34.1 MiB"
    assert room.leaves() == "`ulimit -d` of 400.0 MiB leaves 34.0 MiB"


_LATER_BATCHES = """
import resource, sys
from pathlib import Path
from localgen.engine import Engine
from localgen.errors import LocalgenError
from localgen.memory_limits import data_in_use
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
options = LoadOptions(n_ctx=1024, n_batch=256, n_ubatch=256, n_threads=1, n_threads_batch=1, flash_attn="off")
with Engine(Path(sys.argv[1]), options) as engine:
    for tokens, left_mib in ((512, 10), (256, None), (512, 4), (512, 12)):
        limit = resource.RLIM_INFINITY if left_mib is None else data_in_use() + left_mib * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.RLIM_INFINITY))
        try:
            *_, done = engine.generate(list(range(1000, 1000 + tokens)), SamplingParams(temperature=0.0),
                                       GenerationLimits(max_tokens=1))
            print(tokens, left_mib, "answered", flush=True)
        except LocalgenError as exc:
            print(tokens, left_mib, exc.message, flush=True)
"""


def test_a_prompt_s_later_batches_that_see_more_cells_are_checked_before_the_first(bundled_model: Path) -> None:
    """Without flash attention a batch's work buffer grows with the cells it sees: a 512-token prompt's second batch
    of 256 (2.25 MiB, seeing 512 cells) maps twice its first's. A limit leaving 10 MiB, which the first fits with
    the 8 MiB kept for what else a batch maps, is refused before the first runs; a turn taking a context that holds
    256 tokens on to 512 under 4 MiB is refused for what its batch maps beyond the one that ran; with room enough
    (12 MiB) the prompt is answered."""
    whole, first_turn, next_turn, roomy = _run(_LATER_BATCHES, str(bundled_model))
    assert whole.startswith("512 10 not enough memory is left to evaluate the prompt: its last batch takes 10.3 MiB "
                            "or more, and `ulimit -d` of "), whole
    assert whole.endswith(" leaves 10.0 MiB"), whole
    assert first_turn == "256 None answered" and roomy == "512 12 answered", (first_turn, roomy)
    assert next_turn.startswith("512 4 not enough memory is left to evaluate the prompt: its first batch takes 9.2 "
                                "MiB or more beyond what the batches before it mapped, and `ulimit -d` of "), next_turn


_CACHED_PROMPT = """
import resource, sys
from pathlib import Path
from localgen.engine import Engine
from localgen.memory_limits import data_in_use
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.promptcache import PromptCache
cache = PromptCache(Path(sys.argv[2]), "model", max_bytes=1 << 30, min_new_tokens=64)
prompt = list(range(1000, 1130))
options = LoadOptions(n_ctx=256, n_batch=128, n_ubatch=128, n_threads=1, n_threads_batch=1)
with Engine(Path(sys.argv[1]), options) as engine:
    for left_mib in (None, 10, 32):
        if left_mib is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + left_mib * 2**20, resource.RLIM_INFINITY))
        engine.reset()
        *_, done = engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=16),
                                   prefix_cache=cache)
        print(left_mib, repr(done.text), done.restored_tokens, flush=True)
"""


def test_a_cached_prompt_the_memory_left_cannot_hold_says_what_it_needs_in_all(bundled_model: Path,
                                                                              tmp_path: Path) -> None:
    """A cached prompt's state (2.9 MiB) under a limit leaving 10 MiB, short of it and the 8 MiB kept for what else a
    run maps, was said not to fit in figures that seemed to: what it needs in all is said, and the prompt read
    without it gives the same 16-token greedy answer as with the cache and without it."""
    result = subprocess.run([sys.executable, "-c", _CACHED_PROMPT, str(bundled_model), str(tmp_path)],
                            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    cold, short, roomy = (line.split(" ", 1)[1].rsplit(" ", 1) for line in result.stdout.splitlines())
    assert cold[1] == short[1] == "0" and int(roomy[1]) > 100, result.stdout
    assert cold[0] == short[0] == roomy[0] and len(cold[0]) > 20, result.stdout
    assert re.fullmatch(r"localgen: the cached prompt's state \(2\.9 MiB\) needs 10\.9 MiB with what else a run maps, "
                        r"and `ulimit -d` of [\d.]+ MiB leaves (9|10)\.\d MiB: reading the prompt without it\n",
                        result.stderr), result.stderr


_SHORTER_CACHED_PROMPT = """
import resource, sys
from pathlib import Path
from localgen.engine import Engine
from localgen.memory_limits import data_in_use
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.promptcache import PromptCache
cache = PromptCache(Path(sys.argv[2]), "model", max_bytes=1 << 30, min_new_tokens=64)
shared = list(range(1000, 1400))
options = LoadOptions(n_ctx=512, n_batch=128, n_ubatch=128, n_threads=1, n_threads_batch=1)
with Engine(Path(sys.argv[1]), options) as engine:
    for prompt in (shared[:100] + list(range(3000, 3030)), shared):  # one sharing 100 tokens, one sharing 400
        engine.reset()
        *_, done = engine.generate(prompt, SamplingParams(temperature=0.0), GenerationLimits(max_tokens=1),
                                   prefix_cache=cache)
    resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + 14 * 2**20, resource.RLIM_INFINITY))
    engine.reset()
    *_, done = engine.generate(shared + list(range(4000, 4020)), SamplingParams(temperature=0.0),
                               GenerationLimits(max_tokens=1), prefix_cache=cache)
    print(done.restored_tokens, flush=True)
"""


def test_a_cached_prompt_too_large_for_the_memory_left_gives_way_to_a_shorter_one(bundled_model: Path,
                                                                                  tmp_path: Path) -> None:
    """Under a limit leaving 14 MiB, the entry sharing 400 tokens with the prompt (a state of 8.8 MiB, and 8 MiB for
    what else a run maps) does not fit, and the prompt was read without any: the entry sharing 100 tokens (2.9 MiB),
    which fits, is restored instead, and nothing is said."""
    result = subprocess.run([sys.executable, "-c", _SHORTER_CACHED_PROMPT, str(bundled_model), str(tmp_path)],
                            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 64 <= int(result.stdout) <= 100 and result.stderr == "", (result.stdout, result.stderr)
