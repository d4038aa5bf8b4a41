"""`localgen run` end to end: the real CLI, the real engine, the real bundled model."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from gguf_builders import copy_with_metadata, same_file_named

from localgen.errors import UsageError
from tests.conftest import (
    REPO_ROOT,
    bundled_model_file,
    popen_localgen,
    run_localgen,
    run_localgen_process,
    spawn_localgen,
    user_registry,
)

FOX = b"The quick brown fox jumps over the lazy dog.\n"
GREEDY = ("--temperature", "0", "--seed", "1")


def test_argument_prompt_streams_text_and_ends_with_one_newline() -> None:
    result = run_localgen("run", "Say hello in one short sentence.", *GREEDY)
    assert result.returncode == 0, result.err
    assert result.out.strip(), "no text generated"
    assert result.out.endswith("\n") and not result.out.endswith("\n\n")
    assert result.stderr == b"", "a default run must print nothing on a non-TTY stderr"
    assert "\x1b" not in result.out, "piped output must carry no ANSI codes"


def test_stdin_is_attached_before_the_instruction_and_output_is_deterministic() -> None:
    args = ("run", "Repeat the text exactly.", "-n", "20", *GREEDY)
    first = run_localgen(*args, stdin=FOX)
    second = run_localgen(*args, stdin=FOX)
    assert first.returncode == 0, first.err
    assert first.stdout == second.stdout
    assert "fox" in first.out.lower()


def _usage(*args: str, stdin: bytes | None = None) -> dict:
    result = run_localgen("run", *args, "--json", "-n", "1", *GREEDY, stdin=stdin)
    assert result.returncode == 0, result.err
    return json.loads(result.out)["usage"]


def test_prompt_stdin_and_files_all_reach_the_model(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("Alpha beta gamma delta epsilon zeta eta theta.\n")
    alone = _usage("Summarize.")["prompt_tokens"]
    with_stdin = _usage("Summarize.", stdin=FOX)["prompt_tokens"]
    with_file = _usage("Summarize.", "-f", str(doc))["prompt_tokens"]
    with_both = _usage("Summarize.", "-f", str(doc), stdin=FOX)["prompt_tokens"]
    only_stdin = _usage(stdin=FOX)["prompt_tokens"]
    assert alone < with_stdin < with_both
    assert alone < with_file < with_both
    assert only_stdin < with_stdin


def test_f_dash_puts_stdin_where_it_stands_among_the_files(tmp_path: Path) -> None:
    first, last = tmp_path / "first.txt", tmp_path / "last.txt"
    first.write_text("FIRST")
    last.write_text("LAST")
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    for args, expected in ((("-f", str(first), "-f", "-", "-f", str(last)), "FIRST\n\nPIPED\n\nLAST\n\nQ?"),
                           (("-f", str(first), "-f", str(last)), "FIRST\n\nLAST\n\nPIPED\n\nQ?")):
        result = run_localgen("run", *args, "--conversation", "order", "-n", "1", "Q?", stdin=b"PIPED", env=env)
        assert result.returncode == 0, result.err
        assert _conversation_file(tmp_path / "home", "order")["turns"][-1]["user"] == expected


def test_same_seed_same_output_with_sampling() -> None:
    args = ("run", "Write a short poem about the sea.", "-n", "12", "--seed", "42")
    first, second = run_localgen(*args, "--temperature", "0.9"), run_localgen(*args, "--temperature", "0.9")
    assert first.returncode == 0, first.err
    assert first.out == second.out and first.out.strip()
    greedy = run_localgen(*args, "--temperature", "0")
    assert greedy.returncode == 0 and greedy.out != first.out, "seed 42 at 0.9 must sample, not decode greedily"


def test_temperature_zero_is_greedy_whatever_the_seed() -> None:
    base = ("run", "Name three colors.", "-n", "8", "--temperature", "0")
    one, other = run_localgen(*base, "--seed", "1"), run_localgen(*base, "--seed", "999")
    assert one.returncode == other.returncode == 0, one.err + other.err
    assert one.out.strip() and one.out == other.out
    short = run_localgen("run", "Name three colors.", "-n", "8", "--temp", "0", "--seed", "7")
    assert short.returncode == 0 and short.out == one.out, "--temp is llama.cpp's name for --temperature"


def test_max_tokens_limit_is_reported() -> None:
    result = run_localgen("run", "Tell me a long story about dragons.", "-n", "5", "--json", *GREEDY)
    assert result.returncode == 0, result.err
    record = json.loads(result.out)
    assert record["usage"]["completion_tokens"] == 5
    assert record["finish_reason"] == "length"
    assert result.err == "", "with --json, finish_reason says it: stderr stays quiet"
    plain = run_localgen("run", "Tell me a long story about dragons.", "-n", "5", *GREEDY)
    assert plain.returncode == 0 and plain.err == "", "-n given: stopping there is what was asked, said to no one"
    stats = run_localgen("run", "Tell me a long story about dragons.", "-n", "5", "--stats", *GREEDY)
    assert stats.err.startswith("localgen: stopped at the limit of 5 tokens (-n/--max-tokens)\nprompt "), stats.err


def test_stop_string_ends_output_before_it() -> None:
    full = run_localgen("run", "Count from 1 to 20, separated by commas.", "-n", "20", *GREEDY).out
    assert "5" in full, full
    stopped = run_localgen("run", "Count from 1 to 20, separated by commas.", "-n", "20", "--stop", "5",
                           *GREEDY)
    assert stopped.returncode == 0
    assert stopped.out == full[: full.index("5")].rstrip("\n") + "\n"


@pytest.mark.parametrize(("args", "why"), [
    (("--stop", "Hello"), "the stop string 'Hello' (--stop) matched before any text"),  # was: ..., or the model ended
    (("--grammar", 'root ::= ""'), "the grammar of --grammar matches only the empty text"),
    (("--grammar", 'root ::= ""', "--stop", "Hello"), "the grammar of --grammar matches only the empty text"),
])
def test_an_empty_answer_is_said_on_stderr(args: tuple[str, ...], why: str) -> None:
    """stdout stays empty, as the answer is; stderr says so and why, where it said nothing at all."""
    result = run_localgen("run", "hi", "-n", "20", *args, *GREEDY)
    assert (result.returncode, result.out, result.err) == (0, "", f"localgen: the answer is empty: {why}\n")


@pytest.mark.parametrize("grammar", ['root ::= empty\nempty ::= "" | ""', 'root ::= "a"{0}'])
def test_an_empty_answer_of_a_grammar_of_only_the_empty_text_says_so(grammar: str) -> None:
    """It said the model ended the answer before any text: the grammar had allowed nothing else."""
    result = run_localgen("run", "hi", "-n", "20", "--grammar", grammar, *GREEDY)
    assert (result.returncode, result.out, result.err) == (
        0, "", "localgen: the answer is empty: the grammar of --grammar matches only the empty text\n")


@pytest.mark.parametrize("grammar", ['root ::= "" | "Hello"', "root ::= root"])
def test_a_grammar_that_allows_text_is_not_said_to_match_only_the_empty_text(grammar: str) -> None:
    from localgen.grammar_cost import matches_only_empty

    assert not matches_only_empty(grammar)


@pytest.mark.parametrize("grammar", [
    "root ::= a0\n" + "".join(f"a{k} ::= a{k + 1} a{k + 1}\n" for k in range(40)) + 'a40 ::= ""',
    "root ::= a0\n" + "".join(f"a{k} ::= a{k + 1}\n" for k in range(3000)) + 'a3000 ::= ""',
], ids=["shared-rules", "long-chain"])
def test_a_grammar_of_only_the_empty_text_is_read_in_its_size(grammar: str) -> None:
    """Each rule was followed once for each reference to it (two a rule: 40 rules took for ever, 20 six seconds),
    and a chain of thousands failed as an internal error."""
    from localgen.grammar_cost import matches_only_empty
    from tests.test_grammar import _failing_after

    with _failing_after(5):
        assert matches_only_empty(grammar)


def test_json_output_fields() -> None:
    result = run_localgen("run", "Hi", "-n", "3", "--json", *GREEDY)
    assert result.returncode == 0, result.err
    record = json.loads(result.out)
    assert set(record) == {"text", "finish_reason", "stop_string", "usage", "timings", "seed", "threads",
                           "decode_threads", "model", "model_path"}
    assert 1 <= record["decode_threads"] <= record["threads"]
    assert set(record["usage"]) == {"prompt_tokens", "cached_tokens", "prompt_cache_tokens", "completion_tokens",
                                    "total_tokens"}
    assert set(record["timings"]) == {"ttft_s", "prefill_s", "prefill_tokens_per_s", "decode_s",
                                      "decode_tokens_per_s"}
    assert record["finish_reason"] == "length", "-n 3 cuts a greedy answer to Hi"
    assert record["model"] == "smollm2-135m"
    assert record["usage"]["total_tokens"] == record["usage"]["prompt_tokens"] + 3
    assert result.out.count("\n") == 1


def test_json_gives_null_for_a_speed_with_nothing_to_measure() -> None:
    from localgen.engine.results import finished_event
    from localgen.events import DraftStats

    one_token = finished_event("Hi", "length", n_prompt=31, reused=31, prefilled=0, generated=1, started=0.0,
                               prefill_done=0.0, first_token_at=0.2, last_token_at=0.2,
                               draft=DraftStats(drafted=0, accepted=0, batches=0)).to_dict()
    assert one_token["timings"] == {"ttft_s": 0.2, "prefill_s": 0.0, "prefill_tokens_per_s": None, "decode_s": None,
                                    "decode_tokens_per_s": None}, "all of the prompt cached, one token: no speed"
    assert one_token["draft"] == {"drafted": 0, "accepted": 0, "batches": 0, "acceptance": None}
    none = finished_event("", "interrupted", n_prompt=31, reused=0, prefilled=0, generated=0, started=0.0,
                          prefill_done=0.1, first_token_at=None, last_token_at=0.1).to_dict()
    assert none["timings"]["ttft_s"] is none["timings"]["decode_s"] is none["timings"]["decode_tokens_per_s"] is None


def test_json_names_a_model_given_by_a_relative_path_by_its_absolute_path() -> None:
    bundled = bundled_model_file()
    relative = os.path.relpath(bundled, REPO_ROOT)  # run_localgen runs in the checkout
    result = run_localgen("run", "-m", relative, "Hi", "-n", "1", "--json", *GREEDY)
    assert result.returncode == 0, result.err
    assert (json.loads(result.out)["model"], json.loads(result.out)["model_path"]) == (relative, str(bundled))


COPY_TEXT = ("Copy this text: The old lighthouse keeper climbed the stairs every night, lit the lamp, and watched the "
             "ships pass by the rocky coast.")


def test_draft_lookup_reports_accepted_drafts_and_keeps_the_greedy_text() -> None:
    def record(*draft: str) -> dict:
        result = run_localgen("run", COPY_TEXT, *draft, "--json", "-n", "40", *GREEDY)
        assert result.returncode == 0, result.err
        return json.loads(result.out)

    plain, drafted = record("--flash-attn", "on"), record("--draft", "lookup")  # lookup turns auto's kernel on
    assert "draft" not in plain and "draft" in drafted, "the draft stats come with --draft lookup only"
    stats = drafted["draft"]
    assert set(stats) == {"drafted", "accepted", "batches", "acceptance"}
    assert 0 < stats["accepted"] <= stats["drafted"] and stats["batches"] > 0, stats
    assert stats["acceptance"] == pytest.approx(stats["accepted"] / stats["drafted"], abs=1e-4)
    assert drafted["text"] == plain["text"] and "lighthouse keeper" in plain["text"]
    assert drafted["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


def test_stats_line_on_stderr_only() -> None:
    result = run_localgen("run", "Hi", "-n", "8", "--stats", *GREEDY)
    assert result.returncode == 0
    assert re.search(r"prompt \d+ tok.*TTFT [\d,]+ ms.*prefill [\d.,]+ tok/s.*generated \d+ tok.*decode [\d.,]+ tok/s",
                     result.err), result.err
    assert "tok/s" not in result.out


@pytest.mark.parametrize("stdin", [None, b"", b"   \n"])
def test_empty_prompt_is_a_usage_error(stdin: bytes | None) -> None:
    result = run_localgen("run", stdin=stdin)
    assert result.returncode == 2
    said = "prompt is empty (hint: give a prompt" if stdin is None else \
        "prompt is empty, and so is stdin (hint: check what feeds stdin"  # /dev/null runs without stdin; a pipe is read
    assert said in result.err, result.err
    assert "Traceback" not in result.err


def test_an_empty_prompt_with_stdin_unread_does_not_blame_stdin() -> None:
    result = run_localgen("run", "", "--system-file", "-", stdin=b"Be brief.")  # --system-file - read stdin
    assert result.returncode == 2 and "localgen: error: nothing to send: the prompt is empty (hint:" in result.err


def test_prompt_longer_than_context_is_refused_with_both_counts() -> None:
    result = run_localgen("run", "Summarize.", "--ctx-size", "64", stdin=FOX * 20)
    assert result.returncode == 1
    assert re.search(r"prompt is [\d,]+ tokens with stdin and the prompt, but the context holds 64", result.err), \
        result.err
    assert "--ctx-size" in result.err
    assert result.stdout == b""


def test_run_warns_of_a_typed_escape_in_a_stop_string() -> None:
    """llama-cli reads --reverse-prompt '\\n' as a newline; here it is the two characters typed, said so."""
    answer = ("--grammar", 'root ::= "apple\\\\nbanana\\ncherry"', *GREEDY, "Fruits?")  # a backslash-n, then a newline
    typed = run_localgen("run", "--stop", "\\n", *answer)
    assert typed.returncode == 0 and typed.out == "apple\n", "stopped at the backslash and the n"
    assert typed.err.splitlines() == ["localgen: warning: --stop '\\n' holds \\n as a backslash and a letter, not a "
                                      "newline: stop strings are taken as typed (in bash or zsh, --stop $'\\n' turns "
                                      "\\n into a newline)"], typed.err
    newline = run_localgen("run", "--stop", "\n", *answer)
    assert newline.returncode == 0 and newline.out == "apple\\nbanana\n" and newline.err == "", newline.err


def test_output_stopped_by_context_end_is_flagged() -> None:
    result = run_localgen("run", "Write a very long essay about the history of Rome.", "--ctx", "48",  # as fit's
                          *GREEDY)
    assert result.returncode == 0, result.err
    assert "end of the context" in result.err


def test_broken_pipe_ends_quietly() -> None:
    cmd = (f"{sys.executable} -m localgen run 'Write a long story about a robot.' -n 200 --temperature 0 "
           "| head -c 20")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=120, cwd=REPO_ROOT,
                          stdin=subprocess.DEVNULL)
    assert len(proc.stdout) == 20
    assert proc.stderr == b"", proc.stderr.decode()


@pytest.mark.parametrize("command", [("models",), ("--version",), ("--help",), ("run", "--help"),
                                     ("run", "hi", "-n", "30", "--temperature", "0")])
def test_every_command_reports_a_closed_pipe_with_141(command: tuple[str, ...]) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before anything is written
    try:
        proc = run_localgen_process([sys.executable, "-m", "localgen", *command], stdout=writer, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT)
    finally:
        os.close(writer)
    assert proc.returncode == 141 and proc.stderr == b"", proc.stderr.decode()


@pytest.mark.parametrize("command", [("models",), ("--version",), ("run", "hi", "-n", "3", "--temperature", "0"),
                                     ("run", "hi", "-n", "3", "--json")])
def test_a_full_or_closed_stdout_is_a_one_line_error(command: tuple[str, ...]) -> None:
    with open("/dev/full", "wb") as full:
        proc = run_localgen_process([sys.executable, "-m", "localgen", *command], stdout=full, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "cannot write to stdout: No space left on device" in err, err
    assert "Traceback" not in err and "internal error" not in err
    closed = subprocess.run([sys.executable, "-m", "localgen", *command], stderr=subprocess.PIPE, timeout=120,
                            stdin=subprocess.DEVNULL, cwd=REPO_ROOT, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and "stdout is closed" in closed.stderr.decode()


def test_stdout_to_a_file_at_its_size_limit_names_the_limit_not_a_full_disk(tmp_path: Path) -> None:
    """`ulimit -f` (or FAT32's 4 GiB) stops the file, with EFBIG: freeing disk space would not help."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    with open(tmp_path / "answer.txt", "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "localgen", "run", "Write a long story.", "-n", "80",
                               "--temperature", "0", "--no-cache"], stdout=out, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT, preexec_fn=limited,
                              env={**os.environ, "LOCALGEN_HOME": str(tmp_path / "home")})
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "localgen: error: cannot write to stdout: File too large (hint: the file it goes " \
        "to has reached a size limit (`ulimit -f`" in err, err
    assert "free some space" not in err and (tmp_path / "answer.txt").stat().st_size == 64


@pytest.mark.parametrize("before", [b"", b"kept from before\n"])
def test_run_json_to_a_file_at_its_size_limit_leaves_no_part_of_its_record(tmp_path: Path, before: bytes) -> None:
    """`ulimit -f` (a full disk alike) stopped --json's one record part way, and the file kept that part: 512 bytes
    of JSON no reader can parse. The file is as it was before the run (appended to, `>>`, too)."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    answer = tmp_path / "answer.json"
    answer.write_bytes(before)
    with answer.open("ab" if before else "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "localgen", "run", "Write a long story.", "-n", "40", "--json",
                               "--temperature", "0", "--no-cache"], stdout=out, stderr=subprocess.PIPE,  # 717 bytes
                              stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT, preexec_fn=limited,
                              env={**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_NO_LAST_RUN": "1"})
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith("localgen: error: cannot write to stdout: File too large"), err
    assert answer.read_bytes() == before


SHARED_LOG = """
import io, os, resource, sys
from localgen.output_writes import write_record
from localgen.errors import LocalgenError
resource.setrlimit(resource.RLIMIT_FSIZE, (512, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
path = sys.argv[1]

class SharedLog(io.TextIOWrapper):
    flushes = 0

    def flush(self):
        super().flush()
        self.flushes += 1
        if self.flushes == 2:  # once the record's write has noted the file's end: another process appends a line
            with open(path, "ab") as other:
                other.write(b"another writer\\n")

try:
    write_record(SharedLog(open(path, "ab"), encoding="utf-8"), '{"text": "' + "x" * 1000 + '"}\\n')
except LocalgenError as exc:
    print(exc.message)
"""


def test_a_record_that_fills_a_file_another_process_writes_too_leaves_that_process_s_lines(tmp_path: Path) -> None:
    """A --json record that fails part way in a file another process appends to as well (a shared `>> log`): the
    file is left as it is and the error says it may end in part of the record, where cutting the record back off it
    cut away the other process's lines written meanwhile."""
    log = tmp_path / "log"
    log.write_bytes(b"kept from before\n")
    proc = subprocess.run([sys.executable, "-c", SHARED_LOG, str(log)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, cwd=REPO_ROOT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, "cannot write to stdout: File too large; the file may end in part of the record, as another process "
           "wrote to it too\n", ""), proc
    assert log.read_bytes() == (b"kept from before\nanother writer\n" + b'{"text": "' + b"x" * 1000)[:512]


@pytest.mark.parametrize("quiet", [(), ("-q",)], ids=["said", "quiet"])
def test_a_conversation_run_whose_stdout_and_file_hit_a_size_limit_says_the_answer_was_not_saved(
        tmp_path: Path, quiet: tuple[str, ...]) -> None:
    """`ulimit -f` stops stdout part way, and the conversation's file too: a warning says the answer so far is not
    saved (a chat saves it with its next change; a run has none), before the error; -q says it too, as its --help
    and README say, and nothing else but the error."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    home = tmp_path / "home"
    with open(tmp_path / "answer.txt", "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "localgen", "run", *quiet, "--conversation", "essay", "-n", "80",
                               "Write a long story.", "--temperature", "0", "--no-cache"], stdout=out,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT,
                              preexec_fn=limited, env={**os.environ, "LOCALGEN_HOME": str(home)})
    err = proc.stderr.decode()
    saved = home / "data" / "conversations" / "essay.json"
    assert proc.returncode == 1 and err.startswith(
        "localgen: warning: the answer so far was not saved in conversation 'essay': could not write "
        f"{saved}: File too large\nlocalgen: error: cannot write to stdout: File too large"), err
    assert not saved.exists()
    if quiet:
        assert err.count("\n") == 2 and err.endswith(" send the output elsewhere)\n"), err
        said = " ".join(run_localgen("run", "--help").out.split())
        assert "or that an answer an error cut short was not saved in it" in said


@pytest.mark.parametrize(("args", "name", "drop"), [(("-",), "'-'", "the '-'"),
                                                    (("-f", "-", "hi"), "'-'", "-f/--file '-'"),
                                                    (("--system-file", "-", "hi"), "'-'", "--system-file '-'"),
                                                    (("-f", "/dev/stdin", "hi"), "/dev/stdin", "-f/--file /dev/stdin"),
                                                    (("--system-file", "/dev/fd/0", "hi"), "/dev/fd/0",
                                                     "--system-file /dev/fd/0")])
def test_a_dash_or_stdin_s_file_with_stdin_closed_is_a_one_line_error(args: tuple[str, ...], name: str,
                                                                      drop: str) -> None:
    closed = subprocess.run([sys.executable, "-m", "localgen", "run", *args], capture_output=True, timeout=120,
                            cwd=REPO_ROOT, preexec_fn=lambda: os.close(0))
    err = closed.stderr.decode()
    assert closed.returncode == 2 and closed.stdout == b"", err
    assert err == f"localgen: error: stdin is closed, so {name} has nothing to read (hint: pipe text in, or drop " \
                  f"{drop})\n"


def test_a_prompt_that_is_not_utf8_is_repaired_with_a_warning() -> None:
    result = run_localgen("run", "caf\udce9 au lait?", "-s", "\udcff", "-n", "3", *GREEDY)
    assert result.returncode == 0, result.err
    assert "the prompt is not valid UTF-8" in result.err and "--system is not valid UTF-8" in result.err
    assert result.out.strip()


def test_output_is_utf8_on_a_pipe_whatever_the_locale(tmp_path: Path) -> None:
    grammar = tmp_path / "cafe.gbnf"
    grammar.write_text('root ::= "café 🎉"\n', encoding="utf-8")
    result = run_localgen("run", "--grammar", str(grammar), "Say it", *GREEDY, env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.err
    assert result.stdout == "café 🎉\n".encode()


def test_a_dash_reads_the_prompt_or_a_file_from_stdin() -> None:
    text = b"Name the capital of France."
    plain = json.loads(run_localgen("run", "--json", "-n", "8", *GREEDY, stdin=text).out)
    piped = run_localgen("run", "-", "--json", "-n", "8", *GREEDY, stdin=text)
    assert piped.err == "", "a pipe is read with no note: the note is for a terminal"
    dash = json.loads(piped.out)
    assert dash["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] and dash["text"] == plain["text"]
    as_file = run_localgen("run", "-f", "-", "Answer in one word.", "--json", "-n", "8", *GREEDY, stdin=text)
    assert as_file.returncode == 0, as_file.err
    assert json.loads(as_file.out)["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_or_sigterm_prints_partial_output_and_exits_with_its_code(signum: int, code: int) -> None:
    proc = popen_localgen(
        [sys.executable, "-m", "localgen", "run", "Write a very long story about a dragon.", "-n", "4000",
         "--temperature", "0.8", "--seed", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    first = proc.stdout.read(1)  # generation has started
    time.sleep(0.3)
    proc.send_signal(signum)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err.decode()
    assert len(first + rest) > 1
    assert b"Traceback" not in err


@pytest.mark.parametrize(
    ("args", "needle", "code"),
    [
        (("run", "hi", "--temperature", "-1"), "temperature", 2),
        (("run", "hi", "--top-p", "1.5"), "top-p", 2),
        (("run", "hi", "--min-p", "2"), "min-p", 2),
        (("run", "hi", "--presence-penalty", "3"), "presence penalty 3 is out of range", 2),
        (("run", "hi", "--frequency-penalty", "-2.5"), "frequency penalty -2.5 is out of range", 2),
        (("run", "hi", "--repeat-last-n", "-2"), "repeat-last-n -2 is out of range", 2),
        (("run", "hi", "-n", "-3"), "max tokens", 2),
        (("run", "hi", "-n", "999999999999"), "max tokens", 2),
        (("run", "hi", "--ctx-size", "0"), "context size", 2),
        (("run", "hi", "--ctx-size", "100000"), "beyond the model's maximum", 2),
        (("run", "hi", "--no-such-flag"), "no such option", 2),
        (("run", "hi", "-f", "/nonexistent/file.txt"), "no such file", 2),
        (("run", "hi", "-f", "/tmp"), "is a directory", 2),
        (("run", "hi", "-m", "no-such-model"), "unknown model", 1),
        (("run", "hi", "-m", "/nonexistent/model.gguf"), "no such model file", 1),
        (("run", "hi", "--continue", "--raw"), "no conversation to continue", 2),
        (("run", "hi", "--continue", "--conversation", "a"), "contradict each other", 2),
        (("run", "hi", "--conversation", "no/such"), "not a valid conversation name", 2),
        (("chat", "--ctx", "lots"), "invalid value for '--ctx-size' / '-c' / '--ctx'", 2),  # fit's name for it too
    ],
)
def test_bad_input_gets_one_line_error(args: tuple[str, ...], needle: str, code: int) -> None:
    result = run_localgen(*args)
    assert result.returncode == code, result.err
    assert needle in result.err.lower(), result.err
    assert "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err


def test_ollama_s_hidethinking_hides_the_reasoning_as_hide_thinking_does() -> None:
    """Ollama's spelling got "no such option: --hidethinking (hint: did you mean --hide-thinking?)"."""
    import typer

    from localgen.cli import app

    hidden = run_localgen("run", "--hidethinking", "--grammar", 'root ::= "<think>hm</think>Yes"', *GREEDY, "Is it?")
    assert (hidden.returncode, hidden.out, hidden.err) == (0, "Yes\n", "")
    chat = typer.main.get_command(app).commands["chat"]  # type: ignore[attr-defined]
    assert chat.make_context("chat", ["--hidethinking"]).params["hide_thinking"] is True


def test_llama_cli_s_until_the_context_fills_is_told_localgen_s_no_limit() -> None:
    """-n -2 got the range alone (use 1 to 10000000 tokens, or -1 for no limit), not that -1 is that here."""
    result = run_localgen("run", "-n", "-2", "hi")
    assert (result.returncode, result.out) == (2, "")
    assert result.err == ("localgen: error: max tokens -2 is out of range (hint: -1 is no limit here: the answer runs "
                          "until the model ends it or the context fills, as llama-cli's -2 does)\n")


@pytest.mark.parametrize("args", [("--conversation", ""), ("--conversation=",)])
def test_an_empty_conversation_name_is_named_as_such_with_what_a_name_may_be(args: tuple[str, ...]) -> None:
    result = run_localgen("run", *args, "hi")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == ("localgen: error: the name given to --conversation is empty (hint: give one: start with an "
                          "ASCII letter or digit, then use ASCII letters, digits, '.', '_' and '-' (up to 100 "
                          "characters), e.g. notes; `localgen conversations` lists the saved ones, --continue takes "
                          "the latest)\n")


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("run", "--temprature", "0", "hi"), "did you mean --temperature? see `localgen run --help`"),
        (("chat", "--modle", "x"), "did you mean --model? see `localgen chat --help`"),
        (("chat", "--kv", "q8_0"), "did you mean --kv-type? see `localgen chat --help`"),  # a prefix
        (("run", "--bogus", "hi"), "see `localgen run --help`"),  # click offered --no-gpu for this one
        (("run", "--n", "5", "hi"), "did you mean -n? see `localgen run --help`"),  # click offers long options only
        (("run", "-temp", "0", "hi"), "did you mean --temp? see `localgen run --help`"),  # was read as -t emp
    ],
)
def test_a_misspelt_option_gets_only_close_suggestions(args: tuple[str, ...], hint: str) -> None:
    result = run_localgen(*args)
    assert result.returncode == 2
    assert result.err == f"localgen: error: no such option: {args[1]} (hint: {hint})\n"


@pytest.mark.parametrize(("args", "error"), [
    (("run", "-seed", "1"), ("no such option: -seed", "did you mean --seed? see `localgen run --help`")),  # -s eed
    (("chat", "-n", "5", "-temperature=0"), ("no such option: -temperature",
                                             "did you mean --temperature? see `localgen chat --help`")),
    (("bench", "-repetitions", "2"), ("no such option: -repetitions",
                                      "did you mean --repetitions? see `localgen bench --help`")),
    (("models", "list", "-all"), ("no such option: -all", "did you mean --all? see `localgen models list --help`")),
    (("run", "-n5", "-t2", "-json", "hi"), ("no such option: -json", "did you mean --json? see `localgen run --help`")),
    (("run", "-n5", "-t2", "-ngl", "0", "-sysf", "s.txt", "hi"), None),  # short options, values attached or not
    (("run", "-s", "-seed", "hi"), None),  # a system prompt "-seed"
    (("run", "--", "-seed"), None),  # a prompt
])
def test_a_long_option_typed_with_one_dash_is_told_its_name(args: tuple[str, ...],
                                                            error: tuple[str, str] | None) -> None:
    """click read -temp as -t emp (--threads emp) and -seed 1 as -s eed (a system prompt, and a prompt "1")."""
    from localgen.cli import app
    from localgen.cli_usage import one_dash_error

    assert one_dash_error(app, list(args)) == error


@pytest.mark.parametrize(("args", "typed"), [(("fit", "-jf", "s.json", "x"), "-jf"),
                                            (("models", "list", "-xyz"), "-xyz"), (("run", "-z", "hi"), "-z")])
def test_an_unknown_short_option_is_named_as_typed(args: tuple[str, ...], typed: str) -> None:
    """click names the first unknown letter of -jf, -j, which no one typed."""
    result = run_localgen(*args)
    assert result.returncode == 2 and result.err.startswith(f"localgen: error: no such option: {typed} ("), result.err


@pytest.mark.parametrize(("args", "hint"), [(("list", "x"), "localgen models list"),
                                           (("rm", "x"), "localgen models rm x"), (("rm",), "localgen models rm NAME"),
                                           (("show", "my model"), "localgen models show 'my model'"),
                                           (("download", "org/repo"), "localgen pull org/repo"),
                                           (("rm", "-f", "x"), "localgen models rm NAME"),
                                           (("show", "x", "--modelfile"), "localgen models show x"),
                                           (("download", "org/repo", "--local-dir", "d"), "localgen pull org/repo"),
                                           (("download", "org/repo", "m.gguf"), "localgen pull org/repo/m.gguf"),
                                           (("show", "a", "b"), "localgen models show a"),
                                           (("rm", "a", "b"), "localgen models rm a b")])
def test_other_tools_commands_point_to_localgens(args: tuple[str, ...], hint: str) -> None:
    result = run_localgen(*args)
    assert result.returncode == 2
    assert result.err == f"localgen: error: no such command '{args[0]}' (hint: use `{hint}`)\n"


@pytest.mark.parametrize(("args", "hint"), [
    (("why is the sky blue",), "to ask the model, use `localgen run 'why is the sky blue'`"),
    (("hello",), "see `localgen --help`; to ask the model: localgen run hello"),
    (("modles",), "use `localgen models list`"),  # a misspelt command: the one click takes it for
    (("run", "smollm2-135m", "Say hi."), "the model goes after -m: `localgen run -m smollm2-135m 'Say hi.'`"),
    (("chat", "smollm2-135m:Q4_1"), "the model goes after -m: `localgen chat -m smollm2-135m:Q4_1`"),
    (("run", "-c", "hi"), "-c is --ctx-size; to continue the latest conversation use --continue: "
                          "`localgen run --continue hi`"),
    (("run", "-c"), "-c is --ctx-size; to continue the latest conversation use --continue: "
                    '`localgen run --continue "..."`'),
    (("run", "--ctx", "abc", "hi"), "--ctx takes the context size, a number of tokens: --ctx 4096"),  # not -c's hint
    (("chat", "-c"), "-c is --ctx-size; to continue the latest conversation use --continue: "
                     "`localgen chat --continue`"),
    (("chat", "-c", "work"), "-c is --ctx-size; to continue the latest conversation use --continue"),
    (("run", "-x is a flag"), 'a prompt that starts with "-" goes after --: `localgen run -- \'-x is a flag\'`'),
    (("run", "--temprature", "0", "Say hi."), "did you mean --temperature? see `localgen run --help`"),  # not after --
    (("run", "Say", "hi."), "quote the prompt: `localgen run 'Say hi.'`"),
    (("run", "--", "-v means", "-n", "3"), "options go before --, which ends them: `localgen run -n 3 -- '-v means'`"),
    (("run", "-n", "3", "--", "-v", "means"), "quote the prompt: `localgen run -n 3 -- '-v means'`"),
    (("run", "--", "-v", "means", "--stats", "-n", "3"),
     "options go before --, which ends them: `localgen run --stats -n 3 -- '-v means'`"),
    (("run", "--", "compute", "-5", "+", "3"), "quote the prompt: `localgen run -- 'compute -5 + 3'`"),
    (("run", "hello", "--", "world"), "quote the prompt: `localgen run 'hello world'`"),
    (("run", "-", "Summarize this."), "stdin comes before the prompt with -f -: "
                                      "`localgen run -f - 'Summarize this.'`"),
    (("run", "smollm2-135m", "Say", "hi."), "the model goes after -m: `localgen run -m smollm2-135m 'Say hi.'`"),
    (("run", "./m.gguf", "hi"), "the model goes after -m: `localgen run -m ./m.gguf hi`"),
    (("run", "org/Some-GGUF", "hi"), "the model goes after -m: `localgen run -m org/Some-GGUF hi`"),
    (("run", "smollm2-135m"), 'ask it with `localgen run -m smollm2-135m "..."`, or chat with '
                              "`localgen chat -m smollm2-135m` (`localgen run -- smollm2-135m` sends the name itself)"),
    (("run", "./m.gguf"), 'ask it with `localgen run -m ./m.gguf "..."`, or chat with `localgen chat -m ./m.gguf` '
                          "(`localgen run -- ./m.gguf` sends the name itself)"),
    (("run", "ollama.com/library/llama3.2:1b", "hi"),  # was: quote the prompt
     "localgen's name for it is llama3.2-1b (`localgen models list --all`)"),
    (("run", "hf.co/org/model"), 'ask it with `localgen run -m hf.co/org/model "..."`, or chat with '
                                 "`localgen chat -m hf.co/org/model` (`localgen run -- hf.co/org/model` sends the name "
                                 "itself)"),
])
def test_habits_from_other_tools_get_a_hint_that_fits(args: tuple[str, ...], hint: str) -> None:
    result = run_localgen(*args)
    assert result.returncode == 2 and result.err.endswith(f"(hint: {hint})\n"), result.err


@pytest.mark.parametrize(("args", "hint"), [
    (("run", "--ctx-size", "abc", "hi"), "--ctx-size takes the context size, a number of tokens: --ctx-size 4096"),
    (("chat", "--ctx=abc"), "--ctx takes the context size, a number of tokens: --ctx 4096"),
    (("chat", "-c", "8", "--ctx"), "--ctx takes the context size, a number of tokens: --ctx 4096"),  # the last typed
    (("fit", "-c", "abc"), "-c takes the context size, a number of tokens: -c 4096"),  # fit has no --continue
    (("chat", "-cabc"), "-c is --ctx-size; to continue the latest conversation use --continue"),
    (("run", "--ctx", "x", "-s", "-cx", "hi"), "--ctx takes the context size, a number of tokens: --ctx 4096"),  # -s's
])
def test_the_context_size_s_option_without_a_number_gets_the_hint_for_the_name_typed(
        args: tuple[str, ...], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--ctx abc got -c's hint, about --continue."""
    from localgen.cli import app
    from localgen.cli_exit import run_app

    assert run_app(app, list(args)) == 2
    assert capsys.readouterr().err.endswith(f"(hint: {hint})\n")


def test_llama_cpp_spellings_of_gpu_layers_and_no_limit_work(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    (tmp_path / "home" / "config").mkdir(parents=True)
    (tmp_path / "home" / "config" / "models.toml").write_text("[models.smollm2-135m]\nmax_tokens = 3\n")

    def record(*limit: str) -> dict:
        result = run_localgen("run", "Say hi.", "-ngl", "0", *limit, "--stop", ".", "--json", *GREEDY, env=env)
        assert result.returncode == 0, result.err
        return json.loads(result.out)

    bounded = record()
    assert bounded["usage"]["completion_tokens"] == 3 and bounded["finish_reason"] == "length", "the entry's bound"
    unbounded = record("-n", "-1")  # llama.cpp's "no limit" lifts the entry's max_tokens
    assert unbounded["finish_reason"] == "stop" and unbounded["usage"]["completion_tokens"] > 3, unbounded
    noted = run_localgen("run", "Say hi.", *GREEDY, env=env)
    assert noted.err == ("localgen: stopped at the limit of 3 tokens (max_tokens in models.toml; -n overrides it)\n"), \
        "the note names where a limit not given with -n came from"


def test_the_limit_note_names_the_conversation_whose_saved_max_tokens_stopped_the_answer(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    user_registry(tmp_path / "home", "[models.smollm2-135m]\nmax_tokens = 3\n")
    started = run_localgen("run", "--conversation", "k", "Tell me a long story.", *GREEDY, env=env)
    assert started.err == "localgen: stopped at the limit of 3 tokens (max_tokens in models.toml; -n overrides it)\n"
    (path,) = (tmp_path / "home").rglob("conversations/k.json")
    path.write_text(json.dumps(json.loads(path.read_text()) | {"settings": {"max_tokens": 4}}))
    saved = run_localgen("run", "--continue", "Go on.", *GREEDY, env=env)
    assert saved.err == ("localgen: stopped at the limit of 4 tokens (max_tokens of conversation 'k'; -n overrides "
                         "it)\n"), saved.err


def test_presence_and_frequency_penalties_reach_the_sampler_and_repeat_last_n_0_turns_them_off() -> None:
    prompt = "Repeat after me: apple apple apple apple apple apple"

    def answer(*options: str) -> str:
        result = run_localgen("run", prompt, "-n", "12", "--temperature", "0", *options)  # they part at the 9th
        assert result.returncode == 0, result.err
        return result.out

    plain = answer("--repeat-penalty", "1")
    assert answer("--frequency-penalty", "2", "--presence-penalty", "2", "--repeat-penalty", "1") != plain
    assert answer("--frequency-penalty", "2", "--presence-penalty", "2", "--repeat-last-n", "0") == plain
    whole = answer("--frequency-penalty", "2", "--repeat-last-n", "-1")  # llama.cpp's "the whole context"
    assert whole == answer("--frequency-penalty", "2", "--repeat-last-n", "4096") != plain


def test_a_model_entry_s_system_prompt_and_settings_apply_unless_given(tmp_path: Path) -> None:
    entry = {"LOCALGEN_HOME": str(tmp_path / "entry")}
    (tmp_path / "entry" / "config").mkdir(parents=True)
    (tmp_path / "entry" / "config" / "models.toml").write_text(
        '[models.smollm2-135m]\nsystem = "Answer in French."\ntemperature = 0\nmax_tokens = 5\n')

    def record(*args: str, env: dict[str, str] | None = None) -> dict:
        result = run_localgen("run", "Name a fruit.", "--json", *args, env=env)
        assert result.returncode == 0, result.err
        return json.loads(result.out)

    by_entry = record(env=entry)
    by_flags = record("-s", "Answer in French.", "--temperature", "0", "-n", "5")
    assert (by_entry["text"], by_entry["usage"]) == (by_flags["text"], by_flags["usage"])
    assert by_entry["usage"]["completion_tokens"] == 5
    given = record("-n", "7", "-s", "", env=entry)  # the command line wins
    assert given["usage"]["completion_tokens"] == 7 and given["usage"]["prompt_tokens"] < by_entry["usage"][
        "prompt_tokens"]
    raw = record("--raw", env=entry)
    assert raw["usage"]["prompt_tokens"] == record("--raw", "-n", "5")["usage"]["prompt_tokens"], \
        "--raw sends the text alone"
    (tmp_path / "entry" / "config" / "models.toml").write_text(
        '[defaults]\nsystem = "Answer in French."\ntemperature = 0\nmax_tokens = 4\n\n'
        '[models.smollm2-135m]\nmax_tokens = 5\n')
    assert record(env=entry)["usage"] == by_entry["usage"], "the entry's max_tokens wins over [defaults]'"
    by_path = record("-m", str(bundled_model_file()), env=entry)  # a path has no entry: [defaults] apply
    assert by_path["usage"]["completion_tokens"] == 4
    assert by_path["usage"]["prompt_tokens"] == by_entry["usage"]["prompt_tokens"], "[defaults]' system prompt"


def test_stop_strings_in_models_toml_end_the_answer_unless_stop_is_given(tmp_path: Path) -> None:
    """An entry's stop (or [defaults]') ends the answer before it, as --stop does; --stop given replaces them (--stop
    '' alone with none), an entry's win over [defaults]' ([] for none), and an empty answer names where its stop
    strings came from."""
    env = {"LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    registry = tmp_path / "home" / "config" / "models.toml"
    registry.parent.mkdir(parents=True)

    def answer(*args: str, toml: str = "") -> str:
        registry.write_text(toml)
        result = run_localgen("run", "Name a fruit.", "-n", "8", *GREEDY, *args, env=env)  # past "fruit"
        assert result.returncode == 0, result.err
        return result.out

    def cut(at: str) -> str:
        return full[:full.index(at)].rstrip("\n") + "\n"

    full = answer()
    assert 0 < full.index("versatile") < full.index("fruit"), full  # "The most iconic and versatile fruit is ..."
    entry = '[models.smollm2-135m]\nstop = ["fruit", "Durian"]\n'
    assert answer(toml=entry) == cut("fruit")
    assert answer("--stop", "versatile", toml=entry) == cut("versatile"), "--stop wins"
    assert answer("--stop", "", toml=entry) == full, "--stop '' alone is none"
    assert answer(toml='[defaults]\nstop = "versatile"\n') == cut("versatile")
    assert answer(toml=f'[defaults]\nstop = "versatile"\n\n{entry}') == cut("fruit"), "the entry's win"
    assert answer(toml='[defaults]\nstop = "versatile"\n[models.smollm2-135m]\nstop = []\n') == full
    registry.write_text('[models.smollm2-135m]\nstop = "The"\n')  # the answer's start
    empty = run_localgen("run", "Name a fruit.", "-n", "40", *GREEDY, env=env)
    assert (empty.out, empty.err) == ("", "localgen: the answer is empty: the stop string 'The' (stop in models.toml) "
                                          "matched before any text\n")


def test_mode_and_type_names_are_case_insensitive() -> None:
    result = run_localgen("run", "hi", "-n", "2", "--flash-attn", "ON", "--kv-type", "Q8_0", "--json", *GREEDY)
    assert result.returncode == 0, result.err


def test_invalid_utf8_stdin_is_replaced_with_a_warning() -> None:
    result = run_localgen("run", "Repeat.", "-n", "3", *GREEDY, stdin=b"caf\xe9 au lait\n")
    assert result.returncode == 0
    assert "not valid UTF-8" in result.err


def test_binary_stdin_is_refused() -> None:
    result = run_localgen("run", "Summarize.", stdin=b"\x7fELF\x00\x00\x01binary")
    assert result.returncode == 2
    assert "binary" in result.err


@pytest.fixture(scope="module")
def templateless(tmp_path_factory: pytest.TempPathFactory, bundled_model: Path) -> Path:
    """The bundled model without its chat template, written once for the tests that run it (94 MB apiece)."""
    return copy_with_metadata(bundled_model, tmp_path_factory.mktemp("templateless") / "base.gguf",
                              drop=["tokenizer.chat_template"])


def test_model_without_chat_template_runs_as_plain_completion(templateless: Path) -> None:
    base = templateless
    result = run_localgen("run", "-m", str(base), "The capital of France is", "-n", "8", *GREEDY)
    assert result.returncode == 0, result.err
    assert "no chat template" in result.err and "plain completion" in result.err
    assert result.out.strip()
    quiet = run_localgen("run", "-q", "-m", str(base), "The capital of France is", "-n", "8", *GREEDY)
    assert quiet.returncode == 0 and quiet.out == result.out and quiet.err == "", "-q: no note of either on a pipe"
    raw_result = run_localgen("run", "The capital of France is", "-n", "8", "--json", "--raw", *GREEDY)
    assert raw_result.returncode == 0 and "chat template" not in raw_result.err, raw_result.err
    chat_prompt = json.loads(run_localgen("run", "--print-prompt", "--json", "The capital of France is").out)
    assert json.loads(raw_result.out)["usage"]["prompt_tokens"] < chat_prompt["prompt_tokens"]
    no_system = run_localgen("run", "--print-prompt", "--raw", "-s", "", "The capital of France is")
    assert no_system.out == "The capital of France is", "-s '' adds nothing"
    code = run_localgen("run", "--print-prompt", "--raw", "-", stdin=b"def add(a, b):\n    ")
    assert code.out == "def add(a, b):\n    ", "a plain completion keeps the trailing newline and indentation"


def test_chat_template_file_gives_a_local_model_a_template(tmp_path: Path, templateless: Path) -> None:
    base = templateless
    template = tmp_path / "qa.jinja"
    template.write_text("{% for m in messages %}Question: {{ m.content }}\n{% endfor %}"
                        "{% if add_generation_prompt %}Answer in one word:{% endif %}")
    result = run_localgen("run", "-m", str(base), "--chat-template", str(template), "What is the capital of France?",
                          "-n", "4", "--json", *GREEDY)
    assert result.returncode == 0, result.err
    assert "no chat template" not in result.err
    record = json.loads(result.out)
    assert "Paris" in record["text"]
    question = "Question: What is the capital of France?\nAnswer in one word:"
    plain = run_localgen("run", "-m", str(base), "--raw", question, "-n", "4", "--json", *GREEDY)
    assert json.loads(plain.out)["text"] == record["text"]  # exactly the template's rendering was sent
    template.write_text("{% if false %}x{% endif %}")
    empty = run_localgen("run", "--chat-template", str(template), "hello", "-n", "2")
    assert empty.returncode == 1, "a template failure, like the others (not a usage error)"
    assert "the chat template turns the messages into no text" in empty.err


def test_a_chat_template_that_leaves_the_message_out_is_warned_about(tmp_path: Path, home: Path) -> None:
    template = tmp_path / "fixed.jinja"
    template.write_text("You are a calculator.{% if add_generation_prompt %} Answer:{% endif %}")
    printed = run_localgen("run", "--chat-template", str(template), "--print-prompt", "What is 2+2?")
    assert printed.returncode == 0, printed.err
    assert printed.out == "You are a calculator. Answer:", "a warning, not a refusal: the template may mean it"
    warning = f"{template}: the chat template left the message out of the prompt: the model does not see it"
    assert printed.err.count(warning) == 1 and f"(fix {template}," in printed.err, printed.err
    saved = run_localgen("run", "--chat-template", str(template), "--conversation", "calc", "What is 2+2?", "-n", "2")
    assert saved.returncode == 0 and saved.err.count(warning) == 1, saved.err
    template.write_text("{% for m in messages %}Q: {{ m.content | trim | upper }}{% endfor %}")
    rewritten = run_localgen("run", "--chat-template", str(template), "--print-prompt", "  What is 2+2?  ")
    assert rewritten.returncode == 0 and "WHAT IS 2+2?" in rewritten.out
    assert "left the message out" in rewritten.err, "upper-casing loses the text the model is asked"
    template.write_text("{% for m in messages %}Q: {{ m.content | trim }}\n{% endfor %}")
    trimmed = run_localgen("run", "--chat-template", str(template), "--print-prompt", "-s", "Be brief.", "\n hi \n")
    assert trimmed.returncode == 0 and trimmed.err == "", "a template that trims the message keeps its text"


def test_an_empty_attachment_is_warned_about(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = run_localgen("run", "-f", str(empty), "Say hi.", "-n", "3")
    assert result.returncode == 0, result.err
    assert f"warning: {empty} is empty" in result.err


def test_seed_minus_one_means_a_random_seed() -> None:
    from localgen.params import SamplingParams

    assert SamplingParams(seed=-1).seed is None and SamplingParams(seed=7).seed == 7


def _records(words: int) -> str:
    """A long, varied document (about 1.7 tokens per word)."""
    places = ["harbour", "market", "library", "station", "orchard", "bridge", "mill"]
    lines = [f"Record {i}: the cart left the {places[i % 7]} with {i * 13 % 97} crates." for i in range(words // 10)]
    return "\n".join(lines)


def test_closing_the_terminal_mid_answer_exits_129_like_its_sighup(tmp_path: Path) -> None:
    """Writes to a closed terminal fail with EIO, often before its SIGHUP arrives: that is the hangup, not an error
    to report (to nobody) with exit 1. A conversation keeps the text that was shown, as an interrupted answer."""
    import pexpect

    err = tmp_path / "err.txt"
    child = pexpect.spawn("/bin/sh", ["-c", f'exec "$0" "$@" 2>{err}', sys.executable, "-m", "localgen", "run",
                                      "--conversation", "story", "-n", "400", *GREEDY, "Write a long story."],
                          cwd=str(REPO_ROOT), env={**os.environ, "LOCALGEN_HOME": str(tmp_path)}, encoding="utf-8",
                          timeout=120, dimensions=(24, 100))
    shown = ""
    deadline = time.monotonic() + 120
    while sum(c.isalpha() for c in shown) < 40 and time.monotonic() < deadline:
        with contextlib.suppress(pexpect.TIMEOUT):
            shown += child.read_nonblocking(1000, timeout=0.2)
    child.ptyproc.fileobj.close()  # the terminal window is closed
    while child.isalive() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.close()
    assert child.exitstatus == 129 and err.read_text() == "", err.read_text()
    turn = json.loads((tmp_path / "data" / "conversations" / "story.json").read_text())["turns"][0]
    assert turn["interrupted"] is True and turn["answer"].split()[0] in shown


def test_a_run_that_cannot_be_kept_says_so_after_the_whole_answer(tmp_path: Path) -> None:
    """On one stream (a terminal, as 2>&1), the warning that the run is not kept for --continue follows the answer's
    last word and its newline, which the writer holds back while the answer streams."""
    (tmp_path / "data").symlink_to(tmp_path / "unmounted")  # a link to a folder not there, named as such
    child = spawn_localgen("run", "-n", "6", *GREEDY, "hi", env={**os.environ, "LOCALGEN_HOME": str(tmp_path),
                                                                 "TERM": "dumb"}, encoding="utf-8", timeout=120,
                           dimensions=(24, 400))
    raw = child.read()
    child.close()
    assert child.exitstatus == 0, raw
    answer, warned, rest = raw.partition("localgen: warning: this run is not kept for `localgen run --continue`")
    assert warned and answer.strip() and answer.endswith("\r\n"), raw
    said = " ".join(rest.split())  # the terminal wraps a long line (a long temporary folder's path)
    assert said.startswith(f": could not write {tmp_path}/data/last-run.json: {tmp_path}/data is a link to "
                           f"{tmp_path}/unmounted, which is not there (point the link at a folder that is "
                           "there, or remove it; LOCALGEN_NO_LAST_RUN=1 keeps none, and warns no more)"), raw


def test_a_run_that_cannot_be_kept_names_the_setting_that_keeps_none(tmp_path: Path) -> None:
    """Where the last run cannot be kept (a data folder that is a file, a read-only home), every plain run warns: the
    warning names LOCALGEN_NO_LAST_RUN=1, which keeps none and warns no more."""
    (tmp_path / "data").write_text("")
    env = {"LOCALGEN_HOME": str(tmp_path)}
    warned = run_localgen("run", "-n", "1", "hi", env=env)
    assert warned.returncode == 0 and warned.err.startswith(
        f"localgen: warning: this run is not kept for `localgen run --continue`: could not write {tmp_path}/data/"
        f"last-run.json: {tmp_path}/data is a file, where a folder should be (move that file out of the way; "
        "LOCALGEN_NO_LAST_RUN=1 keeps none, and warns no more)\n"), warned.err
    quiet = run_localgen("run", "-n", "1", "hi", env={**env, "LOCALGEN_NO_LAST_RUN": "1"})
    assert quiet.returncode == 0 and quiet.err == "", quiet.err


def test_a_long_prompt_shows_progress_on_a_terminal_then_erases_it(tmp_path: Path) -> None:
    import pyte

    doc = tmp_path / "records.txt"
    doc.write_text(_records(50))  # about 105 tokens: four chunks of 32
    args = ["run", "-f", str(doc), "-n", "3", "--temperature", "0", "--batch-size", "32", "--no-cache", "--stats",
            "Which record mentions the mill?"]
    child = spawn_localgen(*args, env={**os.environ, "TERM": "xterm"}, encoding="utf-8", timeout=120,
                           dimensions=(24, 100))
    raw = child.read()
    child.close()
    assert child.exitstatus == 0, raw
    assert re.search(r"reading the prompt: 0/[\d,]+ tokens \(0%\)", raw), "shown at once, not after a first chunk"
    assert re.search(r"reading the prompt: 32/[\d,]+ tokens \(\d+%\)", raw), raw
    screen = pyte.Screen(100, 24)
    pyte.Stream(screen).feed(raw)
    shown = "\n".join(screen.display)
    assert "reading the prompt" not in shown and "stopped at the limit of 3 tokens (-n/--max-tokens)" in shown, shown
    piped = run_localgen(*args)
    assert piped.returncode == 0 and "reading the prompt" not in piped.err, "pipes and files get no progress"


def test_no_arguments_on_a_terminal_print_the_help_once() -> None:
    child = spawn_localgen(env=dict(os.environ), encoding="utf-8", timeout=60)
    shown = child.read()
    child.wait()
    assert child.exitstatus == 0 and shown.count("Usage: localgen") == 1, shown


def test_no_command_typed_at_a_terminal_prints_the_help_into_a_pipe(tmp_path: Path) -> None:
    """`localgen | less`: stdin is the terminal, so nothing piped in is dropped; the help goes to the pager."""
    import pexpect

    out = tmp_path / "out.txt"
    child = pexpect.spawn("bash", ["-c", f"{sys.executable} -m localgen | cat > {out}; echo code=${{PIPESTATUS[0]}}"],
                          cwd=str(REPO_ROOT), dimensions=(24, 200),
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, encoding="utf-8", timeout=60)
    said = child.read()
    child.wait()
    assert said.strip() == "code=0" and out.read_text().count("Usage: localgen") == 1, said


def test_no_command_with_text_piped_in_is_refused_on_a_terminal_too() -> None:
    """`echo text | localgen`: what was piped in would be dropped, whatever stdout is."""
    import pexpect

    child = pexpect.spawn("bash", ["-c", f"echo text | {sys.executable} -m localgen"], cwd=str(REPO_ROOT),
                          dimensions=(24, 200),
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, encoding="utf-8", timeout=60)
    said = child.read()
    child.wait()
    assert child.exitstatus == 2 and "Usage:" not in said, said
    assert "no command given: localgen alone reads nothing from stdin" in said, said


@pytest.mark.parametrize("redirect", ["| localgen", "< notes.txt"], ids=["piped", "file"])
def test_no_command_with_text_sent_is_refused_with_the_run_that_answers(tmp_path: Path, redirect: str) -> None:
    """`echo text | localgen > out.txt` (run forgotten) wrote the help into out.txt and dropped what was piped in;
    stdout a terminal or not, stdin decides."""
    (tmp_path / "notes.txt").write_text("Summarize: text\n")
    command = f"{shlex.quote(sys.executable)} -m localgen"
    line = f"echo 'Summarize: text' | {command}" if redirect.startswith("|") else f"{command} < notes.txt"
    result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr == ("localgen: error: no command given: localgen alone reads nothing from stdin (hint: answer "
                             'a prompt with `... | localgen run "PROMPT"`; `localgen --help` lists the commands)\n'), \
        result.stderr


@pytest.mark.parametrize("redirect", ["</dev/null", "<&-", "< empty.txt"], ids=["dev-null", "closed", "empty-file"])
def test_no_command_with_nothing_on_stdin_shows_the_help(tmp_path: Path, redirect: str) -> None:
    """`localgen </dev/null` (as cron and loops give it) or with stdin closed sends no text: the help, as at a
    terminal."""
    (tmp_path / "empty.txt").write_text("")
    result = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m localgen {redirect}"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.count("Usage: localgen") == 1, result.stdout


def test_a_stderr_that_cannot_be_written_does_not_fail_the_run() -> None:
    with open("/dev/full", "w") as full:
        result = run_localgen_process([sys.executable, "-m", "localgen", "run", "hi", "-n", "3", *GREEDY],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=full, cwd=REPO_ROOT,
                                      timeout=120)
    assert result.returncode == 0 and result.stdout.strip(), "the answer was written; the -n note is best effort"


def test_an_empty_system_prompt_replaces_the_template_default() -> None:
    """`-s ""` asks for no system prompt; without -s the chat template adds its own default one."""
    counts = [json.loads(run_localgen("run", *system, "hi", "-n", "1", "--json", *GREEDY).out)["usage"]["prompt_tokens"]
              for system in ((), ("-s", ""))]
    assert counts[1] < counts[0]


def test_a_model_file_name_that_is_not_utf8_loads_and_its_json_gives_the_name_back(bundled_model: Path,
                                                                                    tmp_path: Path) -> None:
    """--json writes the byte as Python's surrogateescape \\udcff, where U+FFFD lost which file it was."""
    model = tmp_path / os.fsdecode(b"bad\xffname.gguf")
    same_file_named(bundled_model, model)
    result = run_localgen("run", "-m", str(model), "hi", "-n", "2", "--json", *GREEDY)
    assert result.returncode == 0, result.err
    assert "bad\\udcffname.gguf" in result.out and os.path.samefile(json.loads(result.out)["model_path"], model)
    fit = run_localgen("fit", str(model), "--json")
    assert fit.returncode == 0 and os.fsencode(json.loads(fit.out)["options"][0]["path"]) == os.fsencode(model), \
        fit.out
    table = run_localgen("fit", str(model))
    assert "bad\ufffdname.gguf: RAM" in table.err, "a status line shows U+FFFD, not a \\udcff escape"


def _conversation_file(home: Path, name: str) -> dict:
    (path,) = home.rglob(f"conversations/{name}.json")
    return json.loads(path.read_text())


def _saved_conversation(home: Path, name: str, *, updated: int, ctx_size: int | None = None) -> Path:
    """A conversation of one exchange saved under home as `run --conversation NAME Hi -n 2` saves one (with -c
    CTX_SIZE), its file last changed at updated (seconds since the epoch: --continue takes the latest)."""
    path = home / "data" / "conversations" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    when = datetime.fromtimestamp(updated, timezone.utc).isoformat(timespec="seconds")
    turn = {"user": "Hi", "answer": "Hello!", "interrupted": False, "finish_reason": "length", "model": "smollm2-135m",
            "prompt_tokens": 31, "completion_tokens": 2}
    path.write_text(json.dumps({"format": 1, "name": name, "system": None, "turns": [turn], "model": "smollm2-135m",
                                "settings": {}, "created": when, "updated": when, "context_start": 0,
                                "ctx_size": ctx_size}, indent=2))
    os.utime(path, (updated, updated))
    return path


def test_runs_go_on_with_a_saved_conversation(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    nothing = run_localgen("run", "--continue", "hi", env=env)
    assert nothing.returncode == 1 and "no saved conversation to continue" in nothing.err
    assert "run --conversation NAME" in nothing.err
    first = run_localgen("run", "--conversation", "notes", "My name is Ada.", "-n", "2", "--json", *GREEDY, env=env)
    assert first.returncode == 0, first.err
    second = run_localgen("run", "--continue", "What is my name?", "-n", "2", "--json", *GREEDY, env=env)
    assert second.returncode == 0, second.err
    one, two = json.loads(first.out), json.loads(second.out)
    assert one["conversation"] == two["conversation"] == "notes", "--json names the conversation --continue took"
    saved = _conversation_file(tmp_path / "home", "notes")
    assert [(t["user"], t["answer"]) for t in saved["turns"]] == [
        ("My name is Ada.", one["text"]), ("What is my name?", two["text"])]
    assert two["usage"]["prompt_tokens"] > one["usage"]["prompt_tokens"] + one["usage"]["completion_tokens"], \
        "the second prompt holds the first exchange"
    assert saved["settings"] == {} and saved["model"] == "smollm2-135m", "a run's options hold for that run only"
    again = run_localgen("run", "--conversation", "notes", "What is my name?", "-n", "2", "--json", *GREEDY,
                         "-s", "You are terse.", env=env)
    assert again.returncode == 0, again.err
    saved = _conversation_file(tmp_path / "home", "notes")
    assert len(saved["turns"]) == 3 and saved["system"] == "You are terse."


def test_a_conversation_run_whose_system_prompt_leaves_no_room_is_hinted_run_s_options(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    assert run_localgen("run", "-s", "Be terse.", "-n", "2", "hi", env=env).returncode == 0
    for args in (("--continue",), ("--conversation", "c1", "-s", "Be terse.")):
        result = run_localgen("run", *args, "-c", "19", "-n", "2", "more3", env=env)
        assert result.returncode == 1 and "but the system prompt with the chat template's markup takes" in result.err
        assert result.err.endswith('(hint: -s TEXT sets a shorter one, -s "" sets an empty one; --ctx-size 22 or '
                                   "more (up to 8,192 for this model; it is 19 now))\n"), "run's options, not /system"


def test_a_conversation_open_elsewhere_is_not_continued(tmp_path: Path) -> None:
    from localgen.conversation_lock import hold, release

    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    _saved_conversation(tmp_path / "home", "older", updated=int(time.time()) - 60)
    path = _saved_conversation(tmp_path / "home", "busy", updated=int(time.time()) - 30)
    before = path.read_bytes()
    assert hold(path.parent, "busy", hint="")
    try:
        result = run_localgen("run", "--conversation", "busy", "Hello again", "-n", "2", *GREEDY, env=env)
        latest = run_localgen("run", "--continue", "Hello again", "-n", "2", *GREEDY, env=env)
    finally:
        release(path.parent, "busy")
    for refused in (result, latest):  # --continue does not take an older conversation behind the busy one
        assert refused.returncode == 1 and "conversation 'busy' is in use by another localgen" in refused.err
        assert "(hint: wait for that one to end (a run is refused, not queued), or go on with another: " \
               "--conversation NAME)" in refused.err
        assert len(refused.err.strip().splitlines()) == 1 and path.read_bytes() == before
    assert hold(path.parent, "fresh", hint="")  # another run is starting conversation 'fresh'
    try:
        second = run_localgen("run", "--conversation", "fresh", "Hello", "-n", "2", *GREEDY, env=env)
    finally:
        release(path.parent, "fresh")
    assert second.returncode == 1 and "conversation 'fresh' is in use" in second.err
    assert sorted(p.name for p in path.parent.glob("*.json")) == ["busy.json", "older.json"], "nothing saved elsewhere"
    (path.parent / "newest.json").write_text("{not json")
    damaged = run_localgen("run", "--continue", "Hello", "-n", "2", *GREEDY, env=env)
    assert damaged.returncode == 1 and "newest.json is not a valid saved conversation" in damaged.err
    assert "`localgen conversations rm newest`), or go on with another: --conversation NAME" in damaged.err
    named = run_localgen("run", "--conversation", "newest", "Hello", "-n", "2", *GREEDY, env=env)
    assert named.returncode == 1 and "(`localgen conversations rm newest`)" in named.err, named.err
    assert path.read_bytes() == before, "--continue does not fall back on an older conversation"
    record = json.loads(path.read_text()) | {"ctx_size": 999_999}
    (path.parent / "big.json").write_text(json.dumps(record | {"name": "big"}))
    big = run_localgen("run", "--conversation", "big", "Hello", "-n", "2", *GREEDY, env=env)
    assert big.returncode == 2 and "conversation 'big' was started with --ctx-size 999999" in big.err, big.err
    (path.parent / "folder.json").mkdir()
    folder = run_localgen("run", "--conversation", "folder", "Hello", "-n", "2", *GREEDY, env=env)
    assert folder.returncode == 1 and "folder.json is not a saved conversation (not a file)" in folder.err
    (path.parent / "dangling.json").symlink_to(path.parent / "gone.json")
    dangling = run_localgen("run", "--conversation", "dangling", "Hello", "-n", "2", *GREEDY, env=env)
    assert dangling.returncode == 1 and "dangling.json is not a saved conversation (a link to " in dangling.err
    assert not (path.parent / "dangling-2.json").exists(), "never saved under another name"
    removed = run_localgen("conversations", "rm", "dangling", "-y", env=env)
    assert removed.returncode == 0 and not (path.parent / "dangling.json").is_symlink()
    folder_rm = run_localgen("conversations", "rm", "folder", "-y", env=env)
    assert folder_rm.returncode == 1 and "folder.json is a folder, not a saved conversation" in folder_rm.err


def test_a_run_says_when_the_model_no_longer_sees_a_conversation_s_first_exchanges(tmp_path: Path) -> None:
    """The first run's exchange fits; three more like it (written into the saved file, as runs would have saved them)
    leave the fifth run's context too small for the first ones."""
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    note = "no longer fit its context (the saved conversation keeps them)"

    def fact(number: int) -> str:
        result = run_localgen("run", "--conversation", "small", "-c", "112", "-n", "8", *GREEDY,
                              f"Tell me fact number {number} about the ocean.", env=env)
        assert result.returncode == 0, result.err
        return result.err

    assert note not in fact(1)
    saved = tmp_path / "home" / "data" / "conversations" / "small.json"
    record = json.loads(saved.read_text())
    record["turns"] += [{**record["turns"][0], "user": f"Tell me fact number {n} about the ocean."} for n in (2, 3, 4)]
    saved.write_text(json.dumps(record))
    err = fact(5)
    assert note in err, err
    assert re.search(r"the model sees (only the last one|the last \d+) of 4 earlier exchanges of conversation "
                     r"'small'", err), err
    assert len(_conversation_file(tmp_path / "home", "small")["turns"]) == 5


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("LOCALGEN_OFFLINE", "banana", "LOCALGEN_OFFLINE=banana is neither on nor off"),
    ("LOCALGEN_DEBUG", "maybe", "LOCALGEN_DEBUG=maybe is neither on nor off"),
    ("LOCALGEN_AMX", "sometimes", "LOCALGEN_AMX=sometimes is none of its values: auto, 1 or 0"),
    ("LOCALGEN_AMX", "yes", "LOCALGEN_AMX=yes is none of its values: auto, 1 or 0"),  # not AMX forced on: it crashes
    ("LOCALGEN_HOME", str(REPO_ROOT / "README.md"), "is not a directory"),
    ("HF_HOME", str(REPO_ROOT / "README.md"), "HF_HOME=" + str(REPO_ROOT / "README.md") + " is not a directory"),
    ("HF_HUB_CACHE", str(REPO_ROOT / "README.md"), "is not a directory"),
    ("HF_HUB_CACHE", str(REPO_ROOT / "README.md" / "hub"),
     f"HF_HUB_CACHE={REPO_ROOT / 'README.md' / 'hub'} is inside {REPO_ROOT / 'README.md'}, which is not a directory"),
])
def test_localgen_s_own_variables_must_make_sense(variable: str, value: str, message: str) -> None:
    result = run_localgen("run", "hi", "-n", "2", env={variable: value})
    assert result.returncode == 1 and message in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_bad_prompt_cache_bound_is_refused_before_the_model_loads() -> None:
    result = run_localgen("run", "--no-cache", "-n", "1", "hi", env={"LOCALGEN_PROMPT_CACHE_BYTES": "banana"})
    assert result.returncode == 1 and result.out == "", result.err
    assert result.err == "localgen: error: LOCALGEN_PROMPT_CACHE_BYTES='banana' is not a size (hint: use bytes or a " \
                         "size such as 512MiB or 4GiB; 0 turns the prompt cache off)\n"
    tiny = run_localgen("run", "--no-cache", "-n", "1", "hi", env={"LOCALGEN_PROMPT_CACHE_BYTES": "1"})
    assert tiny.returncode == 1 and tiny.out == "", tiny.err
    assert tiny.err.startswith("localgen: error: LOCALGEN_PROMPT_CACHE_BYTES='1' is 1 byte, too little to hold a "
                               "prompt's state (hint:") and len(tiny.err.splitlines()) == 1, tiny.err


def test_a_conversation_s_problems_are_named_as_its_own(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    (tmp_path / "home" / "data" / "conversations" / "folder.json").mkdir(parents=True)
    result = run_localgen("run", "--conversation", "folder", "-n", "1", "hi", env=env)
    assert result.returncode == 1 and "(hint: it was left untouched: move that folder away, or go on with " \
                                      "another: --conversation NAME)" in result.err, result.err
    _saved_conversation(tmp_path / "home", "small", updated=int(time.time()), ctx_size=256)
    big = tmp_path / "big.txt"
    big.write_text("word " * 9000)
    result = run_localgen("run", "--conversation", "small", "-f", str(big), "-n", "1", "hi", env=env)
    assert result.returncode == 1 and "the prompt is too long for --ctx-size 256: it takes at least 277 tokens " \
        f"with -f {big} and the prompt (conversation 'small' was started with that size)" in result.err, result.err


def test_an_empty_folder_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import config

    monkeypatch.setenv("HF_HOME", "")
    monkeypatch.setenv("HF_HUB_CACHE", "")
    config.check_environment()  # huggingface_hub would read HF_HOME="" as the current folder
    assert "HF_HOME" not in os.environ and "HF_HUB_CACHE" not in os.environ


def test_relative_base_directories_do_not_follow_the_working_directory(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    from localgen import config

    monkeypatch.delenv("LOCALGEN_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "~nosuchuser/elsewhere")  # quoted in a shell: relative, so ignored
    monkeypatch.setenv("XDG_DATA_HOME", "rel/data")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    monkeypatch.chdir(tmp_path)
    found = config.load_settings()
    assert found.cache_dir == tmp_path / ".cache" / "localgen"
    assert found.data_dir == tmp_path / ".local" / "share" / "localgen"
    assert found.config_dir == tmp_path / "conf" / "localgen"
    monkeypatch.setenv("LOCALGEN_HOME", "lg")  # relative: where localgen started, kept if it changes directory
    assert config.load_settings().data_dir == tmp_path / "lg" / "data"


def test_input_beyond_the_bound_is_refused_and_binary_input_from_its_first_block(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from localgen import inputs

    monkeypatch.setattr(inputs, "MAX_INPUT_BYTES", 200_000)
    text = tmp_path / "long.txt"
    text.write_text("word " * 50_000)  # 250,000 bytes of text: read past the first block, then refused
    with pytest.raises(UsageError, match=r"long\.txt is larger than"):
        inputs.read_file_input(text, [])
    text.write_text("word " * 30_000)
    assert inputs.read_file_input(text, []) == "word " * 30_000
    binary = tmp_path / "data.bin"
    binary.write_bytes(b"\0" * 300_000)
    with pytest.raises(UsageError, match=r"data\.bin looks like binary data"):
        inputs.read_file_input(binary, [])


def _read_a_slow_pipe(first: bytes, later: bytes, notes: list[str], note: str) -> str | None:
    """read_stdin_input of a pipe holding first at once and later after a pause, noting each waiting call."""
    from localgen import inputs

    read_end, write_end = os.pipe()
    os.write(write_end, first)

    def write_later() -> None:
        time.sleep(0.6)
        os.write(write_end, later)
        os.close(write_end)

    with os.fdopen(read_end, "rb") as stream:
        writer = threading.Thread(target=write_later)
        writer.start()
        text = inputs.read_stdin_input(stream, [], waiting=lambda: notes.append(note))
        writer.join()
    return text


def test_a_quiet_pipe_gets_a_note_on_a_terminal_and_its_text_still_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import inputs

    monkeypatch.setattr(inputs, "STDIN_QUIET_S", 0.2)
    notes: list[str] = []
    assert _read_a_slow_pipe(b"", b"late text", notes, "waiting") == "late text" and notes == ["waiting"]
    with open(REPO_ROOT / "README.md", "rb") as ready:  # a file is ready at once: no note
        assert inputs.read_stdin_input(ready, [], waiting=lambda: notes.append("again"))
    assert notes == ["waiting"]
    # a pipe that starts at once, then keeps quiet (`tail -f log |`)
    assert _read_a_slow_pipe(b"first ", b"then more", notes, "later") == "first then more"
    assert notes == ["waiting", "later"]


def test_a_named_pipe_given_with_f_is_waited_for_with_a_note_after_every_file_is_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import inputs

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # a bad file after the pipe is named at once, rather than after a writer that may never come
    missing = run_localgen("run", "-f", str(fifo), "-f", str(tmp_path / "missing"), "x", timeout=30)
    assert missing.returncode == 2 and f"no such file: {tmp_path / 'missing'}" in missing.err, missing.err
    monkeypatch.setattr(inputs, "STDIN_QUIET_S", 0.2)
    notes: list[str] = []

    def write_later() -> None:
        time.sleep(0.6)  # no writer at first: opening the pipe waits, and the note comes meanwhile
        fifo.write_text("piped words")

    writer = threading.Thread(target=write_later)
    writer.start()
    texts = inputs.read_attachments(inputs.attachment_files([str(fifo)]), None, [],
                                    waiting=lambda path, _: notes.append(str(path)))
    writer.join()
    assert texts == ["piped words"] and notes == [str(fifo)]


def test_a_byte_order_mark_and_windows_line_ends_do_not_reach_the_model(tmp_path: Path) -> None:
    plain, windows = tmp_path / "plain.txt", tmp_path / "windows.txt"
    plain.write_bytes(b"first line\nsecond line\n")
    windows.write_bytes(b"\xef\xbb\xbffirst line\r\nsecond line\r\n")

    def prompt(*args: str, stdin: bytes | None = None) -> str:
        result = run_localgen("run", "--print-prompt", *args, "Summarize.", stdin=stdin)
        assert result.returncode == 0, result.err
        return result.out

    expected = prompt("-f", str(plain))
    assert "\nfirst line\nsecond line\n\nSummarize." in expected, expected
    assert prompt("-f", str(windows)) == expected
    assert prompt(stdin=windows.read_bytes()) == expected


def test_a_stdin_that_cannot_be_read_is_a_one_line_error(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "wb") as write_only:
        result = run_localgen_process([sys.executable, "-m", "localgen", "run", "-n", "2", "hi"], stdin=write_only,
                                      capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert result.returncode == 2 and "cannot read stdin" in result.stderr and "internal error" not in result.stderr


def test_quiet_leaves_a_terminal_s_stderr_to_errors() -> None:
    """-q: no note of the wait for stdin, of -s 42 or of the -n limit on the terminal (stdout goes elsewhere). The
    note of the wait would come after QUICK_NOTE_S here, well within the 4 s stdin stays open (a start-up slowed by
    a busy machine included): after STDIN_QUIET_S (2 s), as it did, it would not come at all."""
    import pexpect

    from tests.test_run_waiting_note import quick_note_localgen

    run = f"{quick_note_localgen()} run -q -n 2 -s 42 --temperature 0 hi"
    child = pexpect.spawn("bash", ["-c", f"sleep 4 | {run} > /dev/null"], cwd=str(REPO_ROOT), timeout=60,
                          encoding="utf-8")
    shown = child.read()
    child.close()
    assert child.exitstatus == 0 and shown == "", shown


def test_an_empty_system_prompt_holds_in_a_conversation_as_outside_one() -> None:
    alone = _usage("-s", "", "hi")["prompt_tokens"]
    assert _usage("-s", "", "--conversation", "no-system", "hi")["prompt_tokens"] == alone
    assert _usage("hi")["prompt_tokens"] > alone, "without -s the template adds its default system prompt"


@pytest.mark.parametrize(("args", "code", "says"), [
    (("--threads", "0"), 2, "--threads 0 is out of range"),
    (("--kv-type", "q8_0", "--flash-attn", "off"), 2, "needs flash attention"),
    (("-m", "no-such-model"), 1, "unknown model 'no-such-model'"),
    (("-m", "./missing.gguf"), 1, "no such model file"),
    (("-c", "9000"), 2, "--ctx-size 9000 is beyond the model's maximum of 8,192"),
    (("-m", "./README.md"), 1, "README.md: not a GGUF file"),
    (("--offline", "-m", "qwen2.5-1.5b"), 1, "'qwen2.5-1.5b' is not downloaded and localgen is offline"),
])
def test_bad_loading_options_are_refused_before_piped_stdin_ends(args: tuple[str, ...], code: int, says: str) -> None:
    """`make 2>&1 | localgen run ...`: a mistake in the options, or a model that cannot load, is said at once, not
    after the whole build."""
    returncode, stderr = _run_with_stdin_open(*args, "why?")
    assert returncode == code and says in stderr, args


def test_a_chat_template_that_is_not_jinja_is_refused_before_piped_stdin_ends(tmp_path: Path) -> None:
    template = tmp_path / "broken.jinja"
    template.write_text("{% for m in messages %}{{ m.content }")
    returncode, stderr = _run_with_stdin_open("--chat-template", str(template), "why?")
    assert returncode == 1 and "broken.jinja: the chat template is not valid Jinja" in stderr


@pytest.mark.parametrize(("grammar", "says"), [
    ("root ::= undefined-rule", "--grammar: the grammar does not parse: Undefined rule identifier 'undefined-rule'"),
    ('root ::= root "a" | "a"', "--grammar: the grammar does not parse: unsupported grammar, left recursion"),
    ('root ::= "a" )', "--grammar: the grammar does not parse: expecting newline or end at )"),
])
def test_a_grammar_llama_cpp_cannot_parse_is_refused_before_piped_stdin_ends(grammar: str, says: str) -> None:
    """llama.cpp's parser needs no vocabulary for these: the mistake is said at once, not after the whole pipe."""
    returncode, stderr = _run_with_stdin_open("--grammar", grammar, "why?")
    assert returncode == 2 and says in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_a_grammar_naming_a_token_by_its_text_is_not_refused_early() -> None:
    """<|im_start|> is looked up in the model's vocabulary, so the grammar is parsed once the model is loaded."""
    from localgen.grammar import ConstraintSource, grammar_for

    grammar = 'root ::= <|im_start|> "yes"'
    assert grammar_for(ConstraintSource("--grammar", grammar), []) is not None
    result = run_localgen("run", "--grammar", grammar, "Say yes.", "-n", "4", "--temperature", "0")
    assert result.returncode == 0 and result.out.strip() == "<|im_start|>yes", result.err  # the grammar's text


def _run_with_stdin_open(*args: str) -> tuple[int, str]:
    """`localgen run ARGS` with a stdin pipe that never ends: its exit code and stderr, once it refused them."""
    child = popen_localgen([sys.executable, "-m", "localgen", "run", *args], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO_ROOT, text=True)
    assert child.stdin is not None and child.stderr is not None
    try:
        child.wait(timeout=30)  # stdin stays open (communicate() would close it): only an early refusal ends it
    except subprocess.TimeoutExpired:
        child.kill()
        raise AssertionError(f"{args} waited for stdin to end") from None
    finally:
        child.stdin.close()
    return child.returncode, child.stderr.read()


def test_more_threads_than_cpus_are_kept_with_one_warning() -> None:
    """llama.cpp's threads spin waiting for one another: more of them than CPUs decode many times slower."""
    from localgen.hardware import usable_cpus

    many, cpus = str(usable_cpus() + 1), usable_cpus()
    result = run_localgen("run", "--threads", many, "-n", "1", *GREEDY, "--json", "hi")
    assert result.returncode == 0 and json.loads(result.out)["threads"] == int(many), result.err
    assert result.err == (f"localgen: warning: --threads {many} is more than the {cpus} CPU{'s' if cpus > 1 else ''} "
                          f"this process may use; llama.cpp's threads wait for one another, so this is much slower "
                          "(leave --threads out to let localgen choose)\n"), result.err
    both = run_localgen("run", "--threads", many, "--threads-batch", many, "-n", "1", *GREEDY, "hi")
    assert both.err.count("warning") == 1 and f"--threads {many} and --threads-batch {many} are more" in both.err
    assert run_localgen("run", "--threads", many, "-q", "-n", "1", *GREEDY, "hi").err == "", "-q: errors only"
    # --raw: a prompt of one token, where the threads spin beside the other tests' processes
    assert run_localgen("run", "--threads", str(cpus), "--raw", "-n", "1", *GREEDY, "--json", "hi").err == ""


@pytest.mark.parametrize("quiet", [(), ("-q",)])
def test_a_ctrl_c_that_nothing_follows_on_the_terminal_ends_its_line(tmp_path: Path, quiet: tuple[str, ...]) -> None:
    """The answer goes to a file: the terminal shows the ^C alone, and the shell's prompt must not follow it on its
    line (as a Ctrl-C while the prompt is read in one chunk, or while the model loads); with -q too, which says
    nothing on stderr but keeps the terminal's lines whole."""
    import pexpect

    out = tmp_path / "answer.txt"
    run = f"{sys.executable} -m localgen run {' '.join(quiet)} -n 2000 --temperature 0 'Count from 1 to 1000.' > {out}"
    child = pexpect.spawn("bash", ["-c", run], cwd=str(REPO_ROOT), timeout=60, encoding="utf-8")
    deadline = time.monotonic() + 50
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.05)
    child.sendintr()
    shown = child.read()
    child.close()
    assert child.exitstatus == 130 and out.read_text().endswith("\n"), shown
    assert shown == "^C\r\n", "the ^C echo's line is ended"


def test_a_pipe_too_long_for_the_model_is_refused_once_its_size_shows_it(tmp_path: Path) -> None:
    """`yes | localgen run x` was read to 256 MiB before it was refused; a text that takes more tokens than the
    model's context however it tokenizes is refused as soon as that much of it is read."""
    import pexpect

    too_long = ("localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes at least "
                "8,193 tokens")
    for command in (f"yes | {sys.executable} -m localgen run -n 1 x",
                    f"{sys.executable} -m localgen run -n 1 -f <(yes) x",
                    f"{sys.executable} -m localgen chat -n 1 -f <(yes)",  # a chat's files as a run's
                    f"{sys.executable} -m localgen run -n 1 --system-file <(yes) x",  # and a system prompt's
                    f"{sys.executable} -m localgen chat -n 1 --system-file <(yes)"):
        shown = pexpect.run(f"bash -c {json.dumps(command)}", cwd=str(REPO_ROOT), timeout=60, encoding="utf-8",
                            env={**os.environ})
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)  # a chat turns bracketed paste on as it starts
        assert " ".join(plain.split()).startswith(too_long), shown
    fits = run_localgen("run", "--print-prompt", "--json", "x", stdin=b"-" * 120_000)  # read past its first block
    assert fits.returncode == 0 and json.loads(fits.out)["prompt"].count("-") == 120_000, fits.err


def test_text_denser_than_common_text_is_bounded_by_the_vocabulary_s_longest_token() -> None:
    """140,000 dashes take some 2,200 tokens (the bundled model's vocabulary has tokens of 64 dashes and of 80
    spaces): the size bound, which refused them as taking at least 8,750 tokens at 16 bytes a token, allows for the
    longest token the model has."""
    dense = run_localgen("run", "--print-prompt", "--json", "x", stdin=b"-" * 140_000)
    assert dense.returncode == 0, dense.err
    assert json.loads(dense.out)["prompt_tokens"] < 8_192


def test_a_file_given_twice_is_read_once(tmp_path: Path) -> None:
    """The prompt holds it once (attached once, with a warning): the bound that refuses a read counts it once, and a
    pipe's name given twice does not wait for a second writer that never comes."""
    import threading

    from localgen import inputs
    from localgen.input_text import TextBound

    def refuse(size: int) -> None:
        raise UsageError(f"{size} bytes")

    (tmp_path / "notes.txt").write_text("word " * 30_000)  # 150,000 bytes: once under the bound, twice over it
    files = inputs.attachment_files([str(tmp_path / "notes.txt")] * 2)
    texts = inputs.read_attachments(files, None, [], bound=TextBound(200_000, refuse))
    assert [len(text) for text in texts] == [150_000, 150_000]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    threading.Thread(target=fifo.write_text, args=("piped words",), daemon=True).start()
    read: list[list[str]] = []
    named_twice = [str(fifo), str(tmp_path / "." / "fifo")]  # one pipe, two names
    (tmp_path / "link").symlink_to(fifo)
    reader = threading.Thread(target=lambda: read.append(inputs.read_attachments(
        inputs.attachment_files([*named_twice, str(tmp_path / "link")]), None, [])), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert read == [["piped words"] * 3], "a second read of the pipe waited for a writer"


def test_a_size_bound_stops_a_read_only_where_its_text_is_certainly_too_long() -> None:
    """UTF-16 or UTF-32 text takes more bytes to send than its text counts: it is counted decoded."""
    import io

    from localgen import inputs
    from localgen.input_text import TextBound

    def refuse(size: int) -> None:
        raise UsageError(f"{size} bytes")

    bound = TextBound(100_000, refuse)
    stream = io.BytesIO(b"word " * 2_000_000)
    with pytest.raises(UsageError, match=r"^131072 bytes$"):  # the first check past the bound
        inputs._bounded_read(stream, "stdin", "", "", bound)
    assert stream.tell() == 131_072, "the other 9.9 MB were left unread"
    with pytest.raises(UsageError, match=r"^100000 bytes$"):
        inputs._bounded_read(io.BytesIO(b"x" * 100_000), "stdin", "", "", bound.beside("y" * 34_464))
    wide = ("word " * 20_000).encode("utf-32")  # 400,004 bytes sent, 100,000 of text
    assert inputs._bounded_read(io.BytesIO(wide), "stdin", "", "", bound.beside("y")) == wide, "read whole: the check" \
        " of the whole prompt, once it is read, refuses it"
    stream = io.BytesIO(wide * 4)
    with pytest.raises(UsageError, match=r"^1\d{5} bytes$"):
        inputs._bounded_read(stream, "stdin", "", "", bound)
    assert stream.tell() < len(wide * 4), "refused once the text decoded so far reached the bound"


def _run_to_a_pipe(args: tuple[str, ...], home: Path, *, reader_leaves_after: float | None) -> int:
    """`localgen run ARGS | reader`, where the reader is gone before the run starts (None), or leaves after so many
    seconds without reading; the run's exit status."""
    reader, writer = os.pipe()
    if reader_leaves_after is None:
        os.close(reader)
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", *args], stdout=writer,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                              env={**os.environ, "LOCALGEN_HOME": str(home)})
    finally:
        os.close(writer)
    if reader_leaves_after is not None:
        time.sleep(reader_leaves_after)
        os.close(reader)
    err = proc.communicate(timeout=300)[1].decode()
    assert err == "", err
    return proc.returncode


@pytest.mark.parametrize("json_output", [(), ("--json",)], ids=["text", "json"])
def test_a_reader_gone_before_the_answer_stops_the_run_before_any_token(tmp_path: Path,
                                                                        json_output: tuple[str, ...]) -> None:
    """`localgen run ... | true`: the prompt's reading stops as the reader is found gone, so no answer is kept as
    the last run (a written token, or a whole --json answer, would be)."""
    args = ("Write a long story about a robot.", "-n", "60", *GREEDY, *json_output)
    assert _run_to_a_pipe(args, tmp_path, reader_leaves_after=None) == 141
    assert not (tmp_path / "data" / "last-run.json").exists(), "an answer was generated for a reader that had gone"


def test_a_json_answer_stops_once_its_reader_leaves(tmp_path: Path) -> None:
    """`localgen run --json ... | slow_reader` with the reader gone after 2 s: the answer, which --json writes at its
    end, stops then, where it was generated whole (the grammar's 2,000 letters, some 430 tokens: 25 s here)."""
    args = ("--json", "--grammar", "root ::= [a-z ]{2000}", *GREEDY, "Write letters.")
    assert _run_to_a_pipe(args, tmp_path, reader_leaves_after=2) == 141
    last_run = tmp_path / "data" / "last-run.json"
    if last_run.exists():  # gone while the prompt was read on a busy machine: no answer, none kept
        answer = json.loads(last_run.read_text())["turns"][-1]
        assert answer["finish_reason"] == "interrupted", answer


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
def test_a_full_stdout_pipe_left_non_blocking_is_waited_on(unbuffered: bool) -> None:
    """A stdout pipe left non-blocking (as a Node.js parent leaves one), full as the answer comes: run waits in poll
    until its reader takes some, as on a blocking pipe, where it failed (cannot write to stdout: write could not
    complete without blocking) or, with PYTHONUNBUFFERED=1, tried the write again at full speed."""
    import fcntl

    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETFL, fcntl.fcntl(writer, fcntl.F_GETFL) | os.O_NONBLOCK)
    filled = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filled += os.write(writer, b"x" * 4096)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-q", "-n", "5", *GREEDY, "Say hi."],
                              stdout=writer, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                              env=env | ({"PYTHONUNBUFFERED": "1"} if unbuffered else {}))
    finally:
        os.close(writer)
    waited, deadline = False, time.monotonic() + 60
    while not waited and proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            waited = "poll" in Path(f"/proc/{proc.pid}/wchan").read_text()
        time.sleep(0.05)
    out = b""
    while chunk := os.read(reader, 65536):
        out += chunk
    os.close(reader)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == "", err
    assert out[:filled] == b"x" * filled and len(out) > filled + 1 and out.endswith(b"\n"), out[filled:]
    assert waited, "the full pipe was not waited on in poll"


def test_a_model_run_at_a_terminal_without_a_prompt_is_offered_a_chat_with_that_model() -> None:
    """`ollama run NAME` at a terminal chats with NAME: the hint names the model given, where it offered `localgen
    chat` (the default model) and a run without -m."""
    import pexpect

    child = spawn_localgen("run", "-m", "smollm2-135m", env=dict(os.environ), encoding="utf-8", timeout=60,
                           dimensions=(30, 300))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert " ".join(child.before.split()) == (
        'localgen: error: nothing to send: the prompt is empty (hint: give a prompt, e.g. localgen run -m '
        'smollm2-135m "Why is the sky blue?", or pipe text in; `localgen chat -m smollm2-135m` starts a conversation)')


def test_a_model_s_name_where_the_prompt_goes_is_refused_with_stdin_piped_too() -> None:
    """`cat notes.md | ollama run NAME` sends the notes to NAME: here the name went to the default model as the
    instruction under the piped text, and it answered."""
    result = run_localgen("run", "smollm2-135m", stdin=b"Bonjour, comment allez-vous ?")
    assert result.returncode == 2 and result.out == ""
    assert result.err == (
        "localgen: error: 'smollm2-135m' is the name of a model, not a prompt (hint: send it what is attached with "
        '`localgen run -m smollm2-135m`, and a prompt with `localgen run -m smollm2-135m "..."` (`localgen run -- '
        "smollm2-135m` sends the name itself))\n")
    sent = run_localgen("run", "--print-prompt", "--", "smollm2-135m", stdin=b"Bonjour")
    assert sent.returncode == 0 and "Bonjour\n\nsmollm2-135m<|im_end|>" in sent.out, sent.err
    code, err = _run_with_stdin_open("smollm2-135m")  # `make 2>&1 | localgen run NAME`: refused before the build ends
    assert code == 2 and "'smollm2-135m' is the name of a model, not a prompt (hint: send it what is attached" in err
