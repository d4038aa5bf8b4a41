"""Bad command-line and stdin input: every row of README's "Bad input" table, and more.

Each bad input gets exactly one line on stderr (the error and its hint), the documented exit code, no traceback,
and nothing on stdout. Most cases call `localgen.cli.main` in-process (the same entry point, error table and exit
codes as the installed command, and quick); a representative set runs the real `python -m localgen` in a subprocess.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from localgen import cli
from tests.conftest import bundled_model_file, run_localgen, run_localgen_process
from tests.gguf_builders import truncated_copy

USAGE, RUNTIME, OK = 2, 1, 0


@dataclass(frozen=True)
class Case:
    """A bad input: the arguments (with {placeholders} for prepared files), stdin, exit code and a phrase."""

    args: tuple[str, ...]
    code: int
    needle: str
    stdin: bytes | None = None


CASES: dict[str, Case] = {
    # flags
    "unknown-flag": Case(("run", "hi", "--no-such-flag"), USAGE, "no such option"),
    "unknown-short-flag": Case(("run", "hi", "-Z"), USAGE, "no such option"),
    "unknown-command": Case(("frobnicate",), USAGE, "no such command"),
    "extra-argument": Case(("run", "hi", "there"), USAGE, "unexpected extra argument"),
    "prompt-starting-with-a-dash": Case(("run", "-v means what?"), USAGE, 'starts with "-" goes after --'),
    "flag-without-value": Case(("run", "hi", "-f"), USAGE, "requires an argument"),
    "model-flag-without-value": Case(("run", "hi", "-m"), USAGE, "requires an argument"),
    "kv-type-needs-flash-attn": Case(("run", "hi", "--kv-type", "q8_0", "--flash-attn", "off"), USAGE,
                                     "needs flash attention"),
    "unknown-flash-attn": Case(("run", "hi", "--flash-attn", "maybe"), USAGE, "unknown flash-attn mode"),
    "unknown-draft": Case(("run", "hi", "--draft", "psychic"), USAGE, "unknown draft mode"),
    "empty-stop-beside-another": Case(("run", "hi", "--stop", "", "--stop", "###"), USAGE,
                                      "stop string is empty (hint: pass non-empty --stop strings; --stop '' alone"),
    "chat-template-missing": Case(("run", "hi", "--chat-template", "/nonexistent/t.jinja"), USAGE,
                                  "no such file"),
    "raw-with-chat-template": Case(("run", "hi", "--raw", "--chat-template", "{empty_file}"), USAGE,
                                   "--raw and --chat-template contradict each other"),
    "chat-template-empty": Case(("run", "hi", "--chat-template", "{empty_file}"), USAGE, "it is empty"),
    "chat-template-binary": Case(("run", "hi", "--chat-template", "{binary_file}"), USAGE, "binary data"),
    "chat-template-raises": Case(("run", "hi", "--chat-template", "{raising_template}"), RUNTIME,
                                 "raising.jinja: the chat template refused the messages: nope (hint: fix "),
    # -n
    "n-zero": Case(("run", "hi", "-n", "0"), USAGE, "max tokens 0 is out of range"),
    "n-negative": Case(("run", "hi", "-n", "-3"), USAGE, "max tokens -3 is out of range"),
    "n-absurd": Case(("run", "hi", "-n", "99999999999999999999999999"), USAGE, "is out of range"),
    "n-separators": Case(("run", "hi", "-n", "10000001"), USAGE, "max tokens 10,000,001 is out of range"),
    "n-not-a-number": Case(("run", "hi", "-n", "ten"), USAGE, "is not a valid int"),
    "n-float": Case(("run", "hi", "-n", "1e3"), USAGE, "is not a valid int"),
    # --ctx-size
    "ctx-zero": Case(("run", "hi", "--ctx-size", "0"), USAGE,
                     "context size 0 is out of range (hint: use --ctx-size of at least 16 tokens, e.g. 4096 (for "
                     "llama-cli's -c 0, the model's own size: give that size, or leave -c out for localgen's choice))"),
    "ctx-negative": Case(("run", "hi", "--ctx-size", "-5"), USAGE, "context size -5 is out of range"),
    "ctx-below-16": Case(("run", "hi", "-c", "15"), USAGE, "context size 15 is out of range"),
    "ctx-beyond-model": Case(("run", "hi", "--ctx-size", "100000"), USAGE, "beyond the model's maximum of 8,192"),
    "ctx-absurd": Case(("run", "hi", "-c", "99999999999999999999999"), USAGE, "beyond the model's maximum"),
    # sampling
    "temperature-negative": Case(("run", "hi", "--temperature", "-1"), USAGE, "temperature -1 is out of range"),
    "temperature-huge": Case(("run", "hi", "--temperature", "1000"), USAGE, "is out of range"),
    "temperature-nan": Case(("run", "hi", "--temperature", "nan"), USAGE, "temperature nan is out of range"),
    "temperature-inf": Case(("run", "hi", "--temperature", "inf"), USAGE, "temperature inf is out of range"),
    "temperature-text": Case(("run", "hi", "--temperature", "warm"), USAGE, "is not a valid float"),
    "temperature-underscore": Case(("run", "hi", "--temp", "0_5"), USAGE, "'0_5' is not a valid float"),
    "max-tokens-underscore": Case(("run", "hi", "-n", "1_0"), USAGE, "'1_0' is not a valid integer"),
    "max-tokens-full-width": Case(("run", "hi", "-n", "\uff13"), USAGE, "'\uff13' is not a valid integer"),
    "ctx-other-script": Case(("fit", "-c", "\u0663"), USAGE, "is not a valid integer"),  # an Arabic-Indic 3
    "top-p-above-1": Case(("run", "hi", "--top-p", "1.5"), USAGE, "top-p 1.5 is out of range"),
    "top-p-negative": Case(("run", "hi", "--top-p", "-0.1"), USAGE, "top-p -0.1 is out of range"),
    "top-p-nan": Case(("run", "hi", "--top-p", "nan"), USAGE, "top-p nan is out of range"),
    "min-p-above-1": Case(("run", "hi", "--min-p", "2"), USAGE, "min-p 2 is out of range"),
    "min-p-negative": Case(("run", "hi", "--min-p", "-1"), USAGE, "min-p -1 is out of range"),
    "top-k-negative": Case(("run", "hi", "--top-k", "-1"), USAGE, "top-k -1 is negative"),
    "top-k-beyond-int32": Case(("run", "hi", "--top-k", str(2**32 + 64)), USAGE, "top-k 4,294,967,360 is out of range"),
    "repeat-penalty-zero": Case(("run", "hi", "--repeat-penalty", "0"), USAGE, "repeat penalty 0 is out of range"),
    "seed-negative": Case(("run", "hi", "--seed", "-5"), USAGE, "seed -5 is out of range"),
    "seed-too-big": Case(("run", "hi", "--seed", str(2**32)), USAGE, "is out of range"),
    # threads and batches
    "threads-negative": Case(("run", "hi", "--threads", "-1"), USAGE, "--threads -1 is out of range"),
    "threads-absurd": Case(("run", "hi", "--threads", "100000"), USAGE,
                           "--threads 100000 is out of range (hint: use 1 to 1024;"),
    "threads-zero": Case(("run", "hi", "--threads", "0"), USAGE, "--threads 0 is out of range"),
    # checked before the model is resolved: no download for a typo, and not a network error offline
    "threads-zero-hub-model": Case(("run", "hi", "-m", "org/not-downloaded-GGUF", "--threads", "0"), USAGE,
                                   "--threads 0 is out of range"),
    "batch-zero-hub-model": Case(("run", "hi", "-m", "org/not-downloaded-GGUF", "--batch-size", "0"), USAGE,
                                 "batch size 0 is out of range"),
    "bench-threads-zero": Case(("bench", "--threads", "0"), USAGE, "--threads 0 is out of range"),
    "threads-batch-zero": Case(("run", "hi", "--threads-batch", "0"), USAGE, "--threads-batch 0 is out of range"),
    "threads-batch-absurd": Case(("run", "hi", "--threads-batch", "9999"), USAGE, "--threads-batch 9999 is out of"),
    "gpu-layers-negative": Case(("run", "hi", "--gpu-layers", "-5"), USAGE, "--gpu-layers -5 is out of range"),
    "gpu-layers-very-negative": Case(("run", "hi", "--gpu-layers", "-5000"), USAGE, "--gpu-layers -5000 is out of"),
    # an option's value, and one a hint gives to type, bare as typed (-p 1,000,000 is refused)
    "bench-n-prompt-absurd": Case(("bench", "-p", "2000000"), USAGE,
                                  "--n-prompt 2000000 is out of range (hint: use 0 to 1000000)"),
    "bench-n-gen-absurd": Case(("bench", "-n", "20000000"), USAGE,
                               "--n-gen 20000000 is out of range (hint: use 0 to 1000000)"),
    "max-tokens-absurd": Case(("run", "hi", "-n", "20000000"), USAGE, "(hint: use 1 to 10000000 tokens,"),
    "gpu-layers-and-no-gpu": Case(("run", "hi", "--no-gpu", "--gpu-layers", "3"), USAGE, "contradict each other"),
    "fit-ctx-beyond-the-model": Case(("fit", "{bundled}", "--ctx", "16384"), USAGE,
                                     "--ctx-size 16384 is beyond the model's maximum of 8,192"),
    "batch-zero": Case(("run", "hi", "--batch-size", "0"), USAGE, "batch size 0 is out of range"),
    "ubatch-negative": Case(("run", "hi", "--ubatch-size", "-1"), USAGE, "ubatch size -1 is out of range"),
    # prompt and stdin
    "empty-prompt": Case(("run", ""), USAGE, "the prompt is empty"),
    "no-prompt-no-stdin": Case(("run",), USAGE, "the prompt is empty"),
    "empty-stdin": Case(("run",), USAGE, "the prompt is empty", stdin=b""),
    "whitespace-only": Case(("run", "  \t "), USAGE, "the prompt is empty", stdin=b"\n\n  \n"),
    "binary-stdin": Case(("run", "Summarize."), USAGE, "stdin looks like binary data",
                         stdin=b"\x7fELF\x02\x01\x00\x00"),
    "utf16-stdin-without-mark": Case(("run", "Summarize."), USAGE, "binary data", stdin="hello".encode("utf-16-le")),
    "binary-file": Case(("run", "hi", "-f", "{binary_file}"), USAGE, "looks like binary data"),
    "prompt-larger-than-context": Case(("run", "Summarize.", "-c", "64", "-m", "{bundled}"), RUNTIME,
                                       "tokens with stdin and the prompt, but the context holds 64",
                                       stdin=b"The quick brown fox jumps over the lazy dog.\n" * 20),
    "prompt-far-beyond-the-model": Case(("run", "Summarize."), RUNTIME,
                                        "too long for the model's maximum of 8,192 tokens", stdin=b"word " * 400_000),
    "prompt-far-beyond-ctx-size": Case(("run", "Summarize.", "-c", "512"), RUNTIME,
                                       "too long for --ctx-size 512: it takes at least 617 tokens with stdin and the "
                                       "prompt (hint: try a "
                                       "larger --ctx-size (this model takes up to 8192)", stdin=b"word " * 20_000),
    "prompt-larger-than-the-model": Case(("run", "Summarize.", "-c", "8192", "-m", "{bundled}"), RUNTIME,
                                         "too long for the model's maximum of 8,192 tokens", stdin=b"word " * 9000),
    "prompt-larger-than-the-model-at-a-smaller-ctx": Case(("run", "Summarize.", "-c", "4096", "-m", "{bundled}"),
                                                          RUNTIME, "too long for the model's maximum of 8,192 tokens",
                                                          stdin=b"word " * 9000),  # a larger -c cannot help
    # -f
    "file-missing": Case(("run", "hi", "-f", "/nonexistent/notes.txt"), USAGE, "no such file"),
    "file-directory": Case(("run", "hi", "-f", "{dir}"), USAGE, "is a directory"),
    "file-unreadable": Case(("run", "hi", "-f", "/proc/self/mem"), USAGE, "cannot read /proc/self/mem"),
    "file-endless": Case(("run", "hi", "-f", "/dev/zero"), USAGE, "/dev/zero looks like binary data"),  # at once
    "file-name-too-long": Case(("run", "hi", "-f", "n" * 300), USAGE, "file name too long"),
    "file-name-empty": Case(("run", "hi", "-f", ""), USAGE, "the file name given to -f/--file is empty"),
    "file-slash-after-its-name": Case(("run", "hi", "-f", "{text_file}/"), USAGE,
                                      "notes.txt/: Not a directory (hint: "),
    "temperature-decimal-comma": Case(("run", "hi", "--temp", "0,7"), USAGE,
                                      "(hint: the decimal point is '.': --temp 0.7)"),
    "ctx-thousands-comma": Case(("run", "hi", "-c", "4,096"), USAGE, "(hint: write it without separators: -c 4096)"),
    "context-option": Case(("run", "hi", "--context", "4096"), USAGE, "did you mean -c/--ctx-size?"),
    "output-option": Case(("run", "hi", "--output", "a.txt"), USAGE, "`localgen run hi > a.txt`"),
    "conversation-name-empty": Case(("run", "hi", "--conversation", ""), USAGE,
                                    "the name given to --conversation is empty"),
    "file-name-not-utf8": Case(("run", "hi", "-f", "/nonexistent/bad\udcffname.txt"), USAGE,
                               "no such file: /nonexistent/bad\ufffdname.txt"),
    "chat-template-name-empty": Case(("run", "hi", "--chat-template", ""), USAGE,
                                     "the file name given to --chat-template is empty"),
    "yes-where-nothing-is-asked": Case(("models", "list", "-y"), USAGE,
                                      "(hint: `localgen models list` asks no question, so it takes no -y)"),
    # models
    "conversation-name-newline": Case(("run", "hi", "--conversation", "nl\n"), USAGE,
                                      "is not a valid conversation name"),
    "model-unknown-name": Case(("run", "hi", "-m", "no-such-model"), RUNTIME, "unknown model 'no-such-model'"),
    "model-close-name": Case(("run", "hi", "-m", "smollm2-135"), RUNTIME, "did you mean smollm2-135m"),
    "model-missing-path": Case(("run", "hi", "-m", "/nonexistent/model.gguf"), RUNTIME, "no such model file"),
    "model-directory": Case(("run", "hi", "-m", "{dir}"), RUNTIME, "is not a file"),
    "model-text-file": Case(("run", "hi", "-m", "{text_file}"), RUNTIME, "not a GGUF file"),
    "model-empty-file": Case(("run", "hi", "-m", "{empty_file}"), RUNTIME,
                              "empty file (0 bytes) (hint: an interrupted download or copy, or `touch`, leaves an "
                              "empty file: download or copy the model again)"),
    "model-empty-file-quiet": Case(("run", "-q", "hi", "-m", "{empty_file}"), RUNTIME, "empty file"),  # -q: errors
    "quiet-with-stats": Case(("run", "-q", "--stats", "hi"), USAGE, "-q/--quiet and --stats contradict each other"),
    "model-etc-passwd": Case(("run", "hi", "-m", "/etc/passwd"), RUNTIME,  # its start, not b'root'
                             "/etc/passwd: not a GGUF file (text: 'root:"),
    "model-truncated-1k": Case(("run", "hi", "-m", "{truncated_1k}"), RUNTIME, "truncated"),
    "model-truncated-1m": Case(("run", "hi", "-m", "{truncated_1m}"), RUNTIME, "truncated"),
    "model-empty-reference": Case(("run", "hi", "-m", ""), USAGE, "empty model reference"),
    "model-empty-quant": Case(("run", "hi", "-m", "smollm2-135m:"), USAGE, "empty quant"),
    "model-bad-name": Case(("run", "hi", "-m", "what?ever"), USAGE, "is not a model name, repo or path"),
    "model-name-too-long": Case(("run", "hi", "-m", "m" * 300), RUNTIME, "unknown model"),
    "model-path-too-long": Case(("run", "hi", "-m", f"./{'m' * 300}.gguf"), RUNTIME, "file name too long"),
    "model-missing-in-a-folder": Case(("run", "hi", "-m", "nosuchdir/model.gguf"), RUNTIME,
                                      "no such model file: nosuchdir/model.gguf"),
    "model-missing-here": Case(("run", "hi", "-m", "./nosuch.gguf"), RUNTIME, "no such model file: ./nosuch.gguf"),
    "model-a-folder-here": Case(("run", "hi", "-m", "./tests/"), RUNTIME, "./tests/ is not a file"),  # as typed
    "model-link-loop": Case(("run", "hi", "-m", "{link_loop}"), RUNTIME, "which leads into a loop of links"),
    "model-unknown-user": Case(("run", "hi", "-m", "~no-such-user-here/model.gguf"), USAGE, "no such user"),
    # references that try to leave the cache folder
    "ref-traversal-file": Case(("run", "hi", "-m", "org/repo/../../x.gguf"), USAGE, "unsafe file name '../../x.gguf'"),
    "ref-traversal-hub-prefix": Case(("run", "hi", "-m", "hf.co/org/repo/../x.gguf"), USAGE, "unsafe file name"),
    "ref-traversal-repo": Case(("run", "hi", "-m", "org/../repo/x.gguf"), USAGE, "not a valid Hugging Face repo"),
    "ref-backslash": Case(("run", "hi", "-m", "org/repo/..\\..\\x.gguf"), USAGE, "unsafe file name"),
    "ref-empty-part": Case(("run", "hi", "-m", "org/repo//etc/x.gguf"), USAGE, "unsafe file name"),
    "ref-drive-letter": Case(("run", "hi", "-m", "org/repo/C:x.gguf"), USAGE, "unsafe file name"),
    "ref-dot-repo": Case(("pull", "org/.."), USAGE, "not a valid Hugging Face repo"),
    "pull-traversal": Case(("pull", "org/repo/../../x.gguf"), USAGE, "unsafe file name"),
    "pull-a-text-file": Case(("pull", "{text_file}"), RUNTIME, "not a GGUF file"),
    "pull-empty-reference": Case(("pull", ""), USAGE, "empty model reference (hint: name a model: NAME,"),
    "rm-empty-reference": Case(("models", "rm", ""), USAGE, "empty model reference (hint: name a downloaded model: "
                               "NAME[:QUANT], ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf;"),  # no path, which rm refuses
    # a quant no file can carry is refused before the Hub is asked (or offline's refusal said)
    "model-quant-with-a-space": Case(("run", "hi", "-m", "org/repo:q 8"), USAGE,
                                     "'org/repo:q 8' has 'q 8' after ':', which is no quant (hint: a quant holds no "),
    "pull-quant-with-a-slash": Case(("pull", "org/repo:Q8_0/x"), USAGE, "has 'Q8_0/x' after ':', which is no quant"),
    "show-quant-with-a-star": Case(("models", "show", "smollm2-135m:q*"), USAGE,
                                   "has 'q*' after ':', which is no quant"),
    "json-before-a-subcommand": Case(("models", "--json", "show", "smollm2-135m"), USAGE,
                                     "--json before `show` would be ignored"),
    "json-for-a-subcommand-without-it": Case(("cache", "--json", "clear"), USAGE,
                                             "`localgen cache clear` has no JSON output"),
    "show-traversal": Case(("models", "show", "org/repo/sub/../../../x.gguf"), USAGE, "unsafe file name"),
}

SUBPROCESS = ["unknown-flag", "n-negative", "ctx-zero", "temperature-nan", "empty-stdin", "binary-stdin",
              "file-directory", "model-text-file", "ref-traversal-file", "prompt-larger-than-context"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The prepared bad files the cases name in {placeholders}."""
    folder = tmp_path_factory.mktemp("bad-input")
    (folder / "notes.txt").write_text("hello, I am not a model\n")
    (folder / "empty.gguf").write_bytes(b"")
    (folder / "binary.bin").write_bytes(b"\x00\x01\x02\x03" * 64)
    (folder / "raising.jinja").write_text('{{ raise_exception("nope") }}')
    (folder / "loop-a.gguf").symlink_to("loop-b.gguf")
    (folder / "loop-b.gguf").symlink_to("loop-a.gguf")
    bundled = bundled_model_file()
    return {
        "link_loop": str(folder / "loop-a.gguf"),
        "dir": str(folder), "text_file": str(folder / "notes.txt"), "empty_file": str(folder / "empty.gguf"),
        "binary_file": str(folder / "binary.bin"), "bundled": str(bundled),
        "raising_template": str(folder / "raising.jinja"),
        "truncated_1k": str(truncated_copy(bundled, folder / "t1k.gguf", keep_bytes=1024)),
        "truncated_1m": str(truncated_copy(bundled, folder / "t1m.gguf", keep_bytes=1 << 20)),
    }


@dataclass(frozen=True)
class Outcome:
    """What one `localgen` invocation did."""

    code: int
    out: str
    err: str


@pytest.fixture
def main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """Call localgen.cli.main in-process with stdin from bytes (or an empty pipe, like /dev/null)."""
    logger = logging.getLogger("localgen")
    handlers, propagate = logger.handlers[:], logger.propagate

    def call(args: tuple[str, ...], stdin: bytes | None) -> Outcome:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8"))
        with pytest.raises(SystemExit) as info:
            cli.main(list(args))
        captured = capsys.readouterr()
        return Outcome(int(info.value.code or 0), captured.out, captured.err)

    yield call
    logger.handlers[:], logger.propagate = handlers, propagate


def _args(case: Case, files: dict[str, str]) -> tuple[str, ...]:
    return tuple(a.format(**files) if a.startswith("{") else a for a in case.args)


def _check(outcome: Outcome, case: Case) -> None:
    lines = outcome.err.strip().splitlines()
    assert outcome.code == case.code, outcome.err
    assert len(lines) == 1, outcome.err
    assert lines[0].startswith("localgen: error: ") and "(hint: " in lines[0], lines[0]
    assert case.needle.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in outcome.err
    assert outcome.out == ""


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_gets_one_line_and_the_documented_exit_code(name: str, main, files: dict[str, str]) -> None:
    case = CASES[name]
    _check(main(_args(case, files), case.stdin), case)


def test_the_real_command_behaves_the_same(files: dict[str, str]) -> None:
    def one(name: str) -> tuple[str, Outcome]:
        case = CASES[name]
        result = run_localgen(*_args(case, files), stdin=case.stdin, timeout=120)
        return name, Outcome(result.returncode, result.out, result.err)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for name, outcome in pool.map(one, SUBPROCESS):
            _check(outcome, CASES[name])


def test_a_file_named_like_a_model_does_not_take_its_name_over(main, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").mkdir()
    (tmp_path / "no-such-model").write_text("")
    shown = main(("models", "show", "smollm2-135m"), None)
    assert (shown.code, shown.err) == (0, ""), shown.err
    outcome = main(("run", "hi", "-m", "no-such-model"), None)
    _check(outcome, Case((), RUNTIME, "unknown model 'no-such-model'"))
    assert "(hint: for the file of that name here, use ./no-such-model; or " in outcome.err


@pytest.mark.parametrize(("args", "folder"), [(("cache",), "prompts"), (("cache", "clear"), "prompts"),
                                             (("conversations",), "conversations"),
                                             (("run", "--continue", "hi"), "conversations")])
def test_a_folder_that_cannot_be_read_is_an_error_not_an_empty_listing(main, monkeypatch: pytest.MonkeyPatch,
                                                                       args: tuple[str, ...], folder: str) -> None:
    from localgen import storage
    from localgen.config import settings

    for path in (settings().cache_dir / "prompts", settings().data_dir / "conversations"):
        path.mkdir(parents=True, exist_ok=True)
    real_access = os.access
    monkeypatch.setattr(storage.os, "access", lambda path, mode: not str(path).endswith(folder)
                        and real_access(path, mode))  # root reads a chmod-000 folder anyway
    _check(main(args, None), Case((), RUNTIME, f"/{folder}, which holds"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads chmod-000 files anyway; file-unreadable uses "
                                              "/proc/self/mem, which fails to read even for root")
def test_chmod_000_file_is_refused(main, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden")
    secret.chmod(0)
    _check(main(("run", "hi", "-f", str(secret)), None), Case((), USAGE, "cannot read"))


def test_invalid_utf8_is_decoded_with_a_warning_and_repeated_flags_take_the_last_value(
        main, files: dict[str, str], tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("na\xefve caf\xe9\n".encode("latin-1"))
    outcome = main(("run", "Repeat.", "-f", str(latin1), "-n", "50", "-n", "2", "--json", "--temperature", "0",
                    "-c", "256", "-m", files["bundled"]), b"caf\xe9 au lait\n")
    assert outcome.code == OK, outcome.err
    warnings = [line for line in outcome.err.splitlines() if "warning" in line]
    assert len(warnings) == 2, outcome.err
    assert all("not valid UTF-8" in w and "U+FFFD" in w for w in warnings)
    assert str(latin1) in warnings[0] and "stdin" in warnings[1]
    assert '"completion_tokens": 2' in outcome.out


def test_unknown_kv_type_is_a_usage_error(main) -> None:
    _check(main(("run", "hi", "--kv-type", "q3_weird"), None), Case((), USAGE, "unknown KV cache type"))


def test_control_characters_in_names_stay_on_one_line(main) -> None:
    outcome = main(("run", "hi", "-f", "/nonexistent/a\nb\x1b[2J"), None)
    _check(outcome, Case((), USAGE, "no such file"))
    assert "\x1b" not in outcome.err


@pytest.mark.parametrize("command", ["chat", "run"])
def test_a_closed_stdin_is_handled(command: str) -> None:
    result = subprocess.run([sys.executable, "-m", "localgen", command, *(["hi", "-n", "2"] * (command == "run"))],
                            capture_output=True, timeout=120, preexec_fn=lambda: os.close(0))
    err = result.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err
    if command == "chat":
        assert result.returncode == USAGE and "needs a terminal" in err
    else:
        assert result.returncode == 0 and result.stdout.strip()


def _with_a_terminal_on_stdin(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run `localgen ARGS` with stdin a pseudo-terminal and stdout and stderr pipes."""
    master, slave = os.openpty()
    try:
        return run_localgen_process([sys.executable, "-m", "localgen", *args], stdin=slave, capture_output=True,
                                    timeout=60)
    finally:
        os.close(slave)
        os.close(master)


def test_chat_with_stdout_piped_is_refused() -> None:
    """`localgen chat | tee log` would garble the screen and fill the log with terminal controls."""
    result = _with_a_terminal_on_stdin("chat")
    assert result.returncode == USAGE and result.stdout == b""
    assert result.stderr.decode().startswith("localgen: error: localgen chat needs a terminal on stdout too")


def test_chat_with_stdin_piped_points_to_run_and_its_conversations() -> None:
    """`printf 'hi\\n/exit\\n' | localgen chat`: a script's exchanges are run's, one after another in a conversation."""
    result = run_localgen("chat", stdin=b"hi\n/exit\n")
    assert result.returncode == USAGE and result.out == ""
    assert result.err == ("localgen: error: localgen chat needs a terminal (hint: for pipes and scripts use `localgen "
                          'run "..."`, and `localgen run --conversation NAME "..."` for one exchange after another)\n')


def test_run_without_a_prompt_on_a_terminal_points_to_chat() -> None:
    result = _with_a_terminal_on_stdin("run")
    assert result.returncode == USAGE
    assert result.stderr.decode().rstrip().endswith("or pipe text in; `localgen chat` starts a conversation)")


def test_a_pipe_a_terminal_or_a_device_is_refused_by_its_type_where_reading_it_would_wait(tmp_path: Path) -> None:
    import pty
    import socket

    from localgen.errors import UsageError
    from localgen.inputs import refuse_special_file

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="fifo is a pipe, not a file"):
        refuse_special_file(fifo)  # without blocking on a writer
    refuse_special_file(fifo, pipes=True)  # chat -f <(cmd): waited for
    leader, follower = pty.openpty()
    try:
        with pytest.raises(UsageError, match="is a terminal, not a file"):
            refuse_special_file(Path(os.ttyname(follower)))
    finally:
        os.close(leader)
        os.close(follower)
    with pytest.raises(UsageError, match="/dev/null is a device, not a file") as refused:
        refuse_special_file(Path("/dev/null"), pipes=True)  # as /dev/kmsg, whose reading waits for news
    assert refused.value.hint == "attach a file, or paste the text"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(tmp_path / "sock"))
        with pytest.raises(UsageError, match="sock is a socket, not a file"):
            refuse_special_file(tmp_path / "sock", pipes=True)
    (tmp_path / "plain.txt").write_text("text")
    for plain in (tmp_path / "plain.txt", tmp_path / "missing", tmp_path):
        refuse_special_file(plain)  # left for read_file_input to judge


def test_the_largest_context_a_hint_gives_is_written_as_it_is_typed() -> None:
    """`use --ctx-size of at most 10,000,000 tokens` gave a value that -c refuses as typed."""
    from localgen.errors import UsageError
    from localgen.params import MAX_CONTEXT_LIMIT, check_context_bounds

    with pytest.raises(UsageError) as caught:
        check_context_bounds(MAX_CONTEXT_LIMIT + 1)
    assert caught.value.hint == "use --ctx-size of at most 10000000 tokens", caught.value.hint
