"""The KV cache starts small and moves into the whole context when a prompt or an answer needs it (Engine), on the
real bundled model or a tiny one: the cells llama.cpp holds, the tokens kept, the greedy text unchanged."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from localgen.engine import Engine, core, growth, lc
from localgen.errors import ContextOverflowError, ModelLoadError
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from tests.conftest import chat_prompt
from tests.gguf_builders import tiny_model
from tests.test_engine import _collect
from tests.test_threads import busy_machine_governs

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)


def _growing_engine(path: Path, monkeypatch: pytest.MonkeyPatch, *, expected: int = 0, threads: int = 1,
                    adapt: bool = False) -> Engine:
    """An engine whose 512-token context starts with a KV cache of 256 cells, unless more is expected (one thread:
    llama.cpp's threads spin while they wait for each other, which stalls them beside other tests' processes)."""
    monkeypatch.setattr(growth, "FIRST_TOKENS", 64)
    return Engine(path, LoadOptions(n_ctx=512, n_threads=threads, n_threads_batch=threads, n_batch=64, n_ubatch=64,
                                    expected_tokens=expected, adapt_threads=adapt))


@pytest.fixture(scope="module")
def tiny_512(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight model of a 512-token context, which reads a few hundred tokens in milliseconds ("word "
    is 5 of its tokens), its weights large enough that its greedy text changes where a token's cell or place does."""
    return tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf", n_ctx=512, scale=0.5)


@pytest.mark.parametrize("outgrown_by", ["answer", "prompt", "prompt prefilled ahead", "a turn's prompt"])
def test_a_kv_cache_started_small_grows_once_keeping_its_tokens_and_the_greedy_text(
        tiny_512: Path, monkeypatch: pytest.MonkeyPatch, outgrown_by: str) -> None:
    """Allocating a context's KV cache writes all of it: a short prompt does not wait for a long context's. The
    cache moves into the whole context when an answer or a prompt needs more, and nothing it computed changes."""
    # the 256 cells are outgrown by a prompt of 267 tokens, or by an answer of 24 past its 9th token after one of 247
    question = "word " * {"answer": 44, "a turn's prompt": 0}.get(outgrown_by, 48) + "Count them."
    limits = GenerationLimits(max_tokens=24 if outgrown_by == "answer" else 8)
    texts, cells = [], []
    for expected in (0, 512):
        with _growing_engine(tiny_512, monkeypatch, expected=expected) as eng:
            cells.append(lc.llama_n_ctx(eng._ctx))
            prompt = chat_prompt(eng, question)
            if outgrown_by == "a turn's prompt":  # the cache holds a first turn as the second's prompt outgrows it
                _collect(eng.generate(prompt, GREEDY, limits))
                held = eng.kv_token_list
                prompt = held + eng.tokenize("word " * 50, add_special=False)
            if outgrown_by == "prompt prefilled ahead":
                assert eng.prefill_ahead(prompt, lambda: False) == len(prompt)
            _, done, _ = _collect(eng.generate(prompt, GREEDY, limits, ignore_eog=True))
            if outgrown_by == "a turn's prompt":
                assert done.usage.cached_tokens == len(held)  # the first turn moved with the cache
            cells.append(lc.llama_n_ctx(eng._ctx))
            follow_up = eng.kv_token_list[:-2]
            _, again, _ = _collect(eng.generate(follow_up, GREEDY, GenerationLimits(max_tokens=8)))
            texts.append((done.text, again.text))
            assert eng.n_ctx == 512
            assert again.usage.cached_tokens == len(follow_up) - 2  # the moved cache is reused (chunks.resume_point)
    assert cells == [256, 512, 512, 512]
    assert texts[0] == texts[1]


def _short_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp cannot allocate a context of more than 256 cells from here on."""
    real = core.new_context

    def short_of_memory(model: object, options: LoadOptions, path: Path, cells: int, shape: object) -> object:
        if cells > 256:
            raise ModelLoadError("could not create a context")
        return real(model, options, path, cells, shape)

    monkeypatch.setattr(core, "new_context", short_of_memory)


def test_a_kv_cache_that_cannot_grow_says_so_and_keeps_what_it_held(bundled_model: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with _growing_engine(bundled_model, monkeypatch) as eng:
        prompt = chat_prompt(eng, "Hello there.")
        _, first, _ = _collect(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=4)))
        _short_of_memory(monkeypatch)
        held = eng.kv_token_list
        with pytest.raises(ContextOverflowError, match=r"could not grow past 256 tokens.*allocate 512"):
            _collect(eng.generate([*held, *eng.tokenize("word " * 300, add_special=False)], GREEDY))
        assert lc.llama_n_ctx(eng._ctx) == 256 and eng.kv_token_list == held
        _, again, _ = _collect(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=4)))
        assert again.text == first.text and again.usage.cached_tokens == len(prompt) - 2


def test_a_kv_cache_that_cannot_grow_keeps_decoding_with_the_threads_the_busy_cpus_allow(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The context made again at the small size starts with the load's thread count: the governor's is applied."""
    busy_machine_governs(monkeypatch)
    with _growing_engine(bundled_model, monkeypatch, threads=2, adapt=True) as eng:
        prompt = chat_prompt(eng, "Hello there.")
        _collect(eng.generate(prompt, GREEDY, GenerationLimits(max_tokens=2)))
        assert eng.decode_threads == 1 == lc.llama_n_threads(eng._ctx)
        _short_of_memory(monkeypatch)
        with pytest.raises(ContextOverflowError):
            _collect(eng.generate([*eng.kv_token_list, *eng.tokenize("word " * 300, add_special=False)], GREEDY))
        assert lc.llama_n_ctx(eng._ctx) == 256
        assert (lc.llama_n_threads(eng._ctx), lc.llama_n_threads_batch(eng._ctx)) == (1, 1) == (eng.decode_threads,) * 2


def test_a_context_that_cannot_be_made_again_unloads_the_model(bundled_model: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with _growing_engine(bundled_model, monkeypatch) as eng:
        def no_memory(model: object, options: LoadOptions, path: Path, cells: int, shape: object) -> object:
            raise ModelLoadError("could not create a context")

        monkeypatch.setattr(core, "new_context", no_memory)
        with pytest.raises(ModelLoadError, match="no memory is left for the model's context: the model was unloaded"):
            _collect(eng.generate(chat_prompt(eng, "word " * 300), GREEDY))
        assert not eng.is_open


def test_batches_larger_than_the_first_room_get_the_whole_context_at_once(bundled_model: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp caps a context's batches at its size: one started small would prefill in smaller batches."""
    monkeypatch.setattr(growth, "FIRST_TOKENS", 64)
    with Engine(bundled_model, LoadOptions(n_ctx=512, n_threads=1, n_threads_batch=1)) as eng:
        assert (lc.llama_n_ctx(eng._ctx), eng.n_batch, eng.n_ubatch) == (512, 512, 512)


def test_under_an_address_space_limit_the_whole_context_is_allocated_at_load(bundled_model: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `ulimit -v`, allocations can fail (llama.cpp refuses the context, or even aborts building its graph):
    that shows when the model loads, not part way through an answer."""
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1 << 40, resource.RLIM_INFINITY)
                        if which == resource.RLIMIT_AS else real(which))
    with _growing_engine(bundled_model, monkeypatch) as eng:
        assert lc.llama_n_ctx(eng._ctx) == 512


def test_a_run_s_engine_takes_the_shape_its_plan_read_and_reads_no_header_again(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run reads its model's header once, to plan the load: the engine's memory checks take that shape, where the
    engine read the header again as it loaded, which every run waited for."""
    from localgen.estimate import read_shape
    from localgen.runner import ModelOptions, load_model

    read_again: list[Path] = []
    monkeypatch.setattr(core, "shape_for_limits", read_again.append)
    loaded = load_model(ModelOptions(model=str(bundled_model), ctx_size=512, threads=1))
    try:
        assert read_again == []
        assert loaded.engine._shape == read_shape(bundled_model)
    finally:
        loaded.close()


_FIRST_BATCH_BEYOND_LIMIT = """
import resource, sys
from pathlib import Path
from localgen.engine import Engine
from localgen.errors import LocalgenError
from localgen.memory_limits import data_in_use
from localgen.params import LoadOptions, SamplingParams
n_ctx, n_batch, prompt_tokens, ahead_before, ahead_after, threads = map(int, sys.argv[2:5] + sys.argv[6:])
left_mib = float(sys.argv[5])
engine = Engine(Path(sys.argv[1]), LoadOptions(n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=threads,
                                               n_threads_batch=threads))
if ahead_before:
    print("ahead", engine.prefill_ahead(list(range(1000, 1000 + ahead_before)), lambda: False))
resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + int(left_mib * 2**20), resource.RLIM_INFINITY))
if ahead_after:
    print("ahead", engine.prefill_ahead(list(range(1000, 1000 + ahead_after)), lambda: False))
try:
    for _ in engine.generate(list(range(1000, 1000 + prompt_tokens)), SamplingParams(temperature=0.0)):
        break
    print("answered")
except LocalgenError as exc:
    print(exc.message, "|", exc.hint)
"""


def _first_batch_under_data_limit(model: Path, n_ctx: int, n_batch: int, prompt_tokens: int, left_mib: float,
                                  ahead_before: int = 0, ahead_after: int = 0, threads: int = 2) -> str:
    """What a first batch of prompt_tokens prints with left_mib MiB left under `ulimit -d` after its context loads,
    with the first tokens of it prefilled ahead (as a chat message is typed) before the limit (ahead_before) or
    after it (ahead_after), on this many threads."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    args = [str(model), *map(str, (n_ctx, n_batch, prompt_tokens, left_mib, ahead_before, ahead_after, threads))]
    result = subprocess.run([sys.executable, "-c", _FIRST_BATCH_BEYOND_LIMIT, *args], capture_output=True, text=True,
                            timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_a_first_batch_beyond_the_memory_left_is_refused_not_aborted(bundled_model: Path) -> None:
    """Memory taken after the context was made (4 MiB left under `ulimit -d`) left too little for the first batch's
    work buffer and threads: llama.cpp's bad_alloc aborted the process (status 134) with no word of localgen's."""
    stdout = _first_batch_under_data_limit(bundled_model, 1024, 512, 400, 4)
    assert stdout.startswith("not enough memory is left to evaluate the prompt: its first batch takes "), stdout
    assert stdout.endswith("leaves 4.0 MiB | try a smaller --batch-size or --ubatch-size, fewer "
                           "--threads/--threads-batch, or raise `ulimit -d`\n"), stdout


def test_a_first_batch_counts_the_attention_scores_it_converts(bundled_model: Path) -> None:
    """Without flash attention a 250-token batch converts its attention scores (9 heads of 256 cells for each token,
    1.1 MiB, where its feed-forward input takes 0.73 MiB) for their product with V: 8.9 MiB left, which the
    feed-forward input and the 8 MiB kept for what else a batch maps fit, is refused, and the room the check asks for
    is enough. (At 2,000 tokens the scores take 70 MiB, and llama.cpp aborted the process with 40 MiB left.)"""
    stdout = _first_batch_under_data_limit(bundled_model, 256, 256, 250, 8.9, threads=1)
    assert stdout.startswith("not enough memory is left to evaluate the prompt: its first batch takes 9.1 MiB or more, "
                             "and `ulimit -d` of "), stdout
    assert _first_batch_under_data_limit(bundled_model, 256, 256, 250, 10, threads=1) == "answered\n"


def test_a_prefill_ahead_beyond_the_memory_left_stops_and_the_message_is_refused(bundled_model: Path) -> None:
    """A chat message prefilled as it is typed ran its first batch unchecked, where llama.cpp aborted the process:
    it stops quietly, and the message's own prefill says why as it is sent."""
    stdout = _first_batch_under_data_limit(bundled_model, 1024, 512, 400, 4, ahead_after=400)
    assert stdout.startswith("ahead 0\nnot enough memory is left to evaluate the prompt"), stdout


def test_a_short_prefill_ahead_leaves_the_first_full_batch_checked(bundled_model: Path) -> None:
    """A few tokens prefilled ahead map a small work buffer only: the message's first full batch, under a limit set
    since, is still looked at, where it ran unchecked and llama.cpp aborted the process."""
    stdout = _first_batch_under_data_limit(bundled_model, 1024, 512, 400, 4, ahead_before=10)
    assert stdout.startswith("ahead 10\nnot enough memory is left to evaluate the prompt"), stdout

