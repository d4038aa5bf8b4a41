"""The chat where it still fell short: a start under a low `ulimit -d`, and a Ctrl-D typed before it starts."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.chat_terminal import ESCAPE
from tests.conftest import REPO_ROOT, spawn_localgen

MIB = 1024 * 1024
needs_data_limit = pytest.mark.skipif(shutil.which("bash") is None or not sys.platform.startswith("linux"),
                                      reason="needs Linux's RLIMIT_DATA, which holds memory maps to, and bash")


def _chat_under_data_limit(home: Path, limit: int, *, afresh: bool = False) -> tuple[bool, int | None, str]:
    """Start `localgen chat` in a pty under `ulimit -d` of limit bytes, forked by tests/zygote.py (afresh: python
    started under bash's ulimit, its own start and imports held to the limit too): whether it reached its prompt
    (then left with Ctrl-D), its exit status (None: a signal ended it), and what it wrote, less escape sequences."""
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "PROMPT_TOOLKIT_NO_CPR": "1",
           "TERM": "xterm"}
    options = {"encoding": "utf-8", "codec_errors": "replace", "timeout": 90, "dimensions": (30, 200)}
    if afresh:
        command = shlex.join([sys.executable, "-m", "localgen", "chat", "-n", "4"])
        child = pexpect.spawn("bash", ["-c", f"ulimit -d {limit // 1024} && exec {command}"], env=env,
                              cwd=str(REPO_ROOT), **options)
    else:
        child = spawn_localgen("chat", "-n", "4", env=env, limits={"RLIMIT_DATA": limit}, **options)
    started = child.expect([pexpect.EOF, ">>>"]) == 1
    said = child.before
    if started:
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    child.close()
    return started, child.exitstatus, ESCAPE.sub("", said)


def _whole_context_kv_bytes() -> int:
    """The KV cache of the chat's whole context (the model's 8,192 tokens), which a start under a data limit
    allocates at once."""
    from localgen.estimate import allocated_context, kv_cache_bytes, read_shape
    from localgen.params import LoadOptions
    from tests.conftest import bundled_model_file

    options = LoadOptions(n_ctx=8192, n_threads=1, n_threads_batch=1)
    return kv_cache_bytes(read_shape(bundled_model_file()),
                          allocated_context(options.n_ctx, flash_attn=options.flash_attention), options.kv_type)


def _one_line_memory_error(said: str) -> bool:
    """Whether a start ended with one line of error that says what to do: a smaller --ctx-size, or a higher limit."""
    errors = [line for line in said.splitlines() if line.startswith("localgen: error:")]
    return len(errors) == 1 and ("--ctx-size" in said or "ulimit -d" in said) and "internal error" not in said and \
        "Traceback" not in said


@needs_data_limit
def test_a_chat_start_under_a_data_limit_that_holds_the_kv_cache_but_not_what_follows_it_ends_in_one_line(
        tmp_path: Path) -> None:
    """Under `ulimit -d` that holds the KV cache of the whole context but not the scheduler's context llama.cpp
    allocates next (some 42 MiB: ggml_init's GGML_ASSERT aborted the process, an internal error said), a chat's
    start ends with one line, exit 1, that names --ctx-size and the limit, as it does where the cache itself does
    not fit."""
    kv = _whole_context_kv_bytes()
    for limit in range(kv + 12 * MIB, kv + 145 * MIB, 12 * MIB):  # what Python and the weights map comes first
        started, status, said = _chat_under_data_limit(tmp_path / "home", limit)
        assert not started and status == 1 and _one_line_memory_error(said), (limit // MIB, status, said)


@needs_data_limit
def test_a_chat_start_that_runs_out_of_memory_once_the_model_is_loaded_ends_in_one_line(tmp_path: Path) -> None:
    """Under `ulimit -d` a little short of what a chat's start takes, the context made (reading the input history
    ran out), the start ends with one line, exit 1, that names the limit (an internal MemoryError, whose hint asked
    for a report)."""
    starts: dict[int, tuple[bool, int | None, str]] = {}  # each limit's start, made once: the search's are checked

    def start(limit: int) -> tuple[bool, int | None, str]:
        """The chat's start under limit (made once)."""
        if limit not in starts:
            starts[limit] = _chat_under_data_limit(tmp_path / "home", limit)
        return starts[limit]

    kv = _whole_context_kv_bytes()  # the least limit that starts the chat lies 4 MiB steps above, below 2 GiB
    low, high = 0, -(-(2048 * MIB - kv) // (4 * MIB))
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if start(kv + middle * 4 * MIB)[0] else (middle, high)
    high = kv + high * 4 * MIB
    for limit in range(high - 4 * MIB, high - 40 * MIB, -4 * MIB):
        started, status, said = start(limit)
        assert not started and status == 1 and _one_line_memory_error(said), (limit // MIB, status, said)


def _least_data_limit_starting_python() -> int:
    """The least `ulimit -d` (in whole MiB) under which Python starts and imports localgen on this machine."""
    low, high = 1 * MIB, 256 * MIB
    while high - low > MIB:
        middle = (low + high) // 2
        started = subprocess.run(["bash", "-c", f"ulimit -d {middle // 1024} && exec {sys.executable} -m localgen "
                                  "--version"], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                                 capture_output=True, timeout=60).returncode == 0
        low, high = (low, middle) if started else (middle, high)
    return high


@needs_data_limit
def test_a_model_whose_load_runs_out_of_memory_under_a_data_limit_is_not_said_to_be_damaged(tmp_path: Path) -> None:
    """Under `ulimit -d` too low for llama.cpp to read the model (its bad_alloc: just short of the least limit that
    gets the load as far as the context), the chat's start says llama.cpp ran out of memory loading it, naming the
    limit, where it said the file may be damaged; lower, down to where Python itself starts on this machine (below,
    what fails is not localgen's), no start says so either (the header read: a MemoryError)."""
    home = tmp_path / "home"
    assert _chat_under_data_limit(home, 4096 * MIB, afresh=True)[0], "a start with room checks the bundled file once"
    least = _least_data_limit_starting_python()
    short: dict[int, str] = {}  # what each start under a limit too low to reach the context said

    def reaches_context(limit: int) -> bool:
        """Whether the chat's start under limit gets the load as far as the context (else what it said is kept)."""
        started, _status, said = _chat_under_data_limit(home, limit, afresh=True)
        if not started and "could not create a context" not in said:
            short[limit] = said
        return limit not in short

    low = least  # up in 4 MiB steps, each a limit checked below, to the first that reaches the context; then halved
    while low + 4 * MIB < 1024 * MIB and not reaches_context(low + 4 * MIB):
        low += 4 * MIB
    high = min(low + 4 * MIB, 1024 * MIB)
    while high - low > MIB // 2:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches_context(middle) else (middle, high)
    loading = short[low] if low in short else _chat_under_data_limit(home, low, afresh=True)[2]
    assert "llama.cpp ran out of memory loading" in loading and "`ulimit -d` of" in loading, (low // MIB, loading)
    said = [short[limit] for limit in range(least + 4 * MIB, low, 4 * MIB)]
    wrong = [one for one in said if "damaged" in one or "internal error" in one]
    assert not wrong, wrong


def test_a_header_read_that_runs_out_of_memory_under_a_data_limit_is_not_said_to_be_damaged(tmp_path: Path) -> None:
    """Reading the bundled model's header under `ulimit -d` 2 MiB above what the process holds (its vocabulary does
    not fit: a MemoryError) says it ran out of memory, naming the limit, where it said the header was too large and
    the file perhaps damaged."""
    from tests.conftest import bundled_model_file

    script = ("import resource, sys\n"
              "from pathlib import Path\n"
              "from localgen.errors import LocalgenError\n"
              "from localgen.gguf_reader import read_gguf\n"
              "from localgen.memory_limits import data_in_use\n"
              "resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + 2 * 1024 * 1024, resource.RLIM_INFINITY))\n"
              "try:\n"
              "    read_gguf(Path(sys.argv[1]))\n"
              "except LocalgenError as exc:\n"
              "    print(exc.message, '|', exc.hint)\n")
    done = subprocess.run([sys.executable, "-c", script, str(bundled_model_file())], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home")},
                          timeout=60)
    assert "ran out of memory reading its header | `ulimit -d` of" in done.stdout, (done.stdout, done.stderr)
    assert "damaged" not in done.stdout


def _run_under_limit(home: Path, flag: str, limit: int, *args: str) -> tuple[int, str]:
    """`localgen run -n 1 hi` on the bundled model under `ulimit -<flag>` of limit bytes: its exit status (128 and
    more for a signal) and what it wrote to stderr."""
    from tests.conftest import bundled_model_file

    command = shlex.join([sys.executable, "-m", "localgen", "run", "-m", str(bundled_model_file()), "-n", "1",
                          "--temp", "0", *args, "hi"])
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_OFFLINE": "1"}
    done = subprocess.run(["bash", "-c", f"ulimit -{flag} {limit // 1024}; {command}"], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


def _said_as_out_of_memory(status: int, said: str) -> bool:
    """Whether a run ended with exit 1 and one line of error that says memory ran short, naming what to do."""
    return status == 1 and _one_line_memory_error(said) and "terminate called" not in said and (
        "out of memory" in said or "could not create a context" in said or "not enough memory is left" in said)


@needs_data_limit
def test_a_run_under_an_address_space_limit_too_low_for_its_context_ends_in_one_line(tmp_path: Path) -> None:
    """Under `ulimit -v` that holds the model and its KV cache but not the scheduler's context llama.cpp allocates
    next (340 to 400 MiB here: ggml_init's GGML_ASSERT aborted the process, exit 134, said as an internal error), the
    context is refused before it is made, in one line naming `ulimit -v` and --ctx-size, exit 1."""
    for limit in range(340 * MIB, 401 * MIB, 12 * MIB):
        status, said = _run_under_limit(tmp_path / "home", "v", limit)
        assert _said_as_out_of_memory(status, said) and "`ulimit -v`" in said, (limit // MIB, status, said)


@needs_data_limit
@pytest.mark.parametrize("args", [(), ("--kv-type", "q8_0")])
def test_a_run_under_a_data_limit_just_short_of_its_first_batch_ends_in_one_line(tmp_path: Path,
                                                                               args: tuple[str, ...]) -> None:
    """Under `ulimit -d` just short of the least that runs (where the context was made, and the first prefill's
    thread stack or ggml-cpu's work buffer threw a bad_alloc: `terminate called`, exit 134), the run ends in one line
    saying memory ran short, exit 1, or runs."""
    from tests.conftest import bundled_model_file, run_localgen

    runs: dict[int, tuple[int, str]] = {}  # each limit's run, made once: the search's are checked

    def run(limit: int) -> tuple[int, str]:
        """`localgen run -n 1 hi` under a data limit of limit bytes, as _run_under_limit runs it, forked by
        tests/zygote.py (made once)."""
        if limit not in runs:
            done = run_localgen("run", "-m", str(bundled_model_file()), "-n", "1", "--temperature", "0", *args, "hi",
                                env={"LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"},
                                limits={"RLIMIT_DATA": limit})
            runs[limit] = done.returncode, done.err
        return runs[limit]

    low, high = 64 * MIB, 1024 * MIB
    while high - low > MIB:
        middle = (low + high) // 2 // MIB * MIB
        low, high = (low, middle) if run(middle)[0] == 0 else (middle, high)
    for limit in range(high - MIB, high - 9 * MIB, -MIB):  # (what the process maps varies a little from run to run)
        status, said = run(limit)
        assert status == 0 or _said_as_out_of_memory(status, said), (limit // MIB, status, said)


@needs_data_limit
def test_a_refused_context_s_hint_names_only_what_would_change_something(tmp_path: Path) -> None:
    """A context refused under a memory limit with --kv-type q8_0 already set is not told to set it (it was told
    --kv-type q8_0 with --flash-attn on); with both `ulimit -d` and `ulimit -v` set, running out of memory says
    they hold the process ("holds" it said)."""
    status, said = _run_under_limit(tmp_path / "home", "d", 200 * MIB, "--kv-type", "q8_0")
    assert status == 1 and "could not create a context" in said and "--kv-type" not in said, said
    status, said = _run_under_limit(tmp_path / "home", "d", 200 * MIB, "--flash-attn", "on")
    assert status == 1 and "try a smaller --ctx-size, or --kv-type q8_0, or raise `ulimit -d`" in said, said
    done = subprocess.run(["bash", "-c", f"ulimit -v 4000000; ulimit -d 30000; {sys.executable} -c "
                           "'from localgen.memory_limits import out_of_memory_hint as h; print(h())'"],
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=60)
    assert "`ulimit -d` of 29.3 MiB and `ulimit -v` of 3.8 GiB hold this process: raise them" in done.stdout, done


def test_a_ctrl_d_typed_before_the_chat_takes_its_terminal_ends_the_chat_as_one_typed_later_does(
        tmp_path: Path) -> None:
    """A Ctrl-D typed while the terminal is still in line mode (before localgen runs: bash sleeps first), which Linux
    then holds as an end of input and gives the prompt as a NUL byte, ends the chat at its first prompt, exit 0, as
    a Ctrl-D typed once the chat runs does (it was read as Ctrl-@, and the chat went on)."""
    from tests.test_chat22 import chat_ended_by_keys_typed_ahead

    assert chat_ended_by_keys_typed_ahead(tmp_path / "home", "\x04") == 0
    assert not (tmp_path / "home" / "data" / "conversations").exists() or \
        not list((tmp_path / "home" / "data" / "conversations").glob("*.json"))


def test_a_line_and_a_ctrl_d_typed_ahead_outlive_a_suspension_as_the_chat_starts(tmp_path: Path) -> None:
    """A line and a Ctrl-D typed before the chat takes its terminal, then Ctrl-Z as the model loads and `fg`: the
    chat read them as it started, so they are its own: the line is sent and answered, then the chat ends, where the
    suspension dropped them (neither the chat nor the shell had them)."""
    from tests.conftest import bundled_model_file
    from tests.test_chat22 import _saved_turns

    home = tmp_path / "home"
    command = shlex.join([sys.executable, "-m", "localgen", "chat", "-m", str(bundled_model_file()), "-n", "4"])
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PYTHONPATH": str(REPO_ROOT),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "LOCALGEN_OFFLINE": "1", "PS1": "SH$ "}
    shell = pexpect.spawn("bash", ["--norc", "--noprofile", "-i"], env=env, cwd=str(REPO_ROOT), encoding="utf-8",
                          codec_errors="replace", timeout=60, dimensions=(30, 200))
    try:
        shell.expect_exact("SH$ ")
        shell.send(f"sleep 0.5; exec 2>&1; {command}\r")  # what follows lands in line mode before localgen runs
        time.sleep(0.2)
        shell.send("hello\r")
        shell.sendcontrol("d")
        shell.expect_exact("localgen chat with")
        shell.sendcontrol("z")
        shell.expect_exact("SH$ ", timeout=20)
        shell.send("fg\r")
        shell.expect_exact("SH$ ", timeout=60)  # answered, then ended by the Ctrl-D
    finally:
        shell.terminate(force=True)
    turns = _saved_turns(home)
    assert [turn["user"] for turn in turns] == ["hello"] and turns[0]["answer"], turns


@needs_data_limit
@pytest.mark.parametrize(("limit", "said"), [("ulimit -d 8388608", "localgen: error: out of memory (hint: `ulimit -d`"),
                                             ("true", "localgen: error: internal error: SystemError")],
                         ids=["under-a-limit", "no-limit"])
def test_a_system_error_under_a_memory_limit_is_said_as_out_of_memory(limit: str, said: str) -> None:
    """C code whose allocation failed under a memory limit returns an error with no exception set (a SystemError,
    met at a chat's start under a low `ulimit -d`): said as out of memory there, naming the limit, where it was an
    internal error; with no limit set it stays an internal error to report."""
    code = ("from localgen.cli_exit import without_traceback\n"
            "def work():\n    raise SystemError('error return without exception set')\n"
            "raise SystemExit(without_traceback(work))")
    done = subprocess.run(["bash", "-c", f"{limit} && exec {shlex.quote(sys.executable)} -c {shlex.quote(code)}"],
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and done.stderr.startswith(said), (done.returncode, done.stderr)
