"""What `run` (and `chat`) read besides the prompt: --system-file, pipes given to the options that take a file, and
--print-prompt, which shows the prompt all of it makes, on the real bundled model."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pexpect
import pytest

from localgen.inputs import BINARY_SNIFF_BYTES
from tests.conftest import REPO_ROOT, run_localgen, run_localgen_process, spawn_localgen
from tests.test_repl import Chat, spawn_chat
from tests.test_run_waiting_note import quick_note_localgen

GREEDY = ("--temperature", "0", "--seed", "1")
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # SmolLM2's template's own


def chatml(user: str, system: str | None = DEFAULT_SYSTEM) -> str:
    """The bundled model's prompt (its ChatML template) for one message."""
    head = "" if system is None else f"<|im_start|>system\n{system}<|im_end|>\n"
    return f"{head}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def printed_prompt(*args: str, stdin: bytes | None = None) -> str:
    """What `run --print-prompt ARGS` prints, checked to have generated nothing and said nothing on stderr."""
    result = run_localgen("run", "--print-prompt", *args, stdin=stdin)
    assert result.returncode == 0 and result.err == "", result.err
    return result.out


def prompt_tokens(*args: str, stdin: bytes | None = None) -> int:
    """The prompt tokens of a real run of ARGS (one token generated)."""
    result = run_localgen("run", "--json", "-n", "1", *GREEDY, *args, stdin=stdin)
    assert result.returncode == 0, result.err
    return json.loads(result.out)["usage"]["prompt_tokens"]


# --- --system-file ---------------------------------------------------------------------------------------------------

def test_a_system_file_is_the_system_prompt_read_as_attachments_are(tmp_path: Path) -> None:
    system = tmp_path / "system.txt"
    system.write_bytes(b"\xef\xbb\xbfBe terse.\r\nAnswer in English.\r\n\r\n")  # a BOM, CRLF, trailing newlines
    expected = chatml("Hi there", system="Be terse.\nAnswer in English.")
    assert printed_prompt("--system-file", str(system), "Hi there") == expected
    assert printed_prompt("-sysf", str(system), "Hi there") == expected, "llama-cli's spelling"
    as_text = run_localgen("run", "--json", "-n", "2", *GREEDY, "-s", "Be terse.\nAnswer in English.", "Hi there")
    from_file = run_localgen("run", "--json", "-n", "2", *GREEDY, "--system-file", str(system), "Hi there")
    assert as_text.returncode == from_file.returncode == 0, as_text.err + from_file.err
    assert json.loads(from_file.out)["usage"] == json.loads(as_text.out)["usage"]
    assert json.loads(from_file.out)["text"] == json.loads(as_text.out)["text"]


def test_a_prompt_and_a_system_prompt_from_a_windows_file_have_plain_newlines_as_the_file_would(tmp_path: Path) -> None:
    """`localgen run -s "$(cat system.txt)" "$(cat question.txt)"` of Windows files (CRLF, the last line's CR left
    where $() took its newline): the model's prompt has plain newlines and no CR, as with --system-file and -f, where
    it kept every CR; --raw keeps the prompt exactly as given."""
    system, question = tmp_path / "system.txt", tmp_path / "question.txt"
    system.write_bytes(b"Be terse.\r\nAnswer in English.\r\n")
    question.write_bytes(b"Fix this:\r\nx = 1\r\n")
    as_files = printed_prompt("--system-file", str(system), "-f", str(question), "Fix it.")
    as_arguments = printed_prompt("-s", "Be terse.\r\nAnswer in English.\r", "Fix this:\r\nx = 1\r\n\r\nFix it.\r")
    assert as_arguments == as_files == chatml("Fix this:\nx = 1\n\nFix it.", system="Be terse.\nAnswer in English.")
    assert printed_prompt("--raw", "Fix this:\r\nx = 1\r") == "Fix this:\r\nx = 1\r"


def test_a_system_file_of_dash_reads_stdin_which_is_then_no_attachment() -> None:
    assert printed_prompt("--system-file", "-", "Q?", stdin=b"From stdin.\r\n") == chatml("Q?", system="From stdin.")
    assert printed_prompt("-f", "-", "Q?", stdin=b"From stdin.\r\n") == chatml("From stdin.\n\nQ?")


def test_an_empty_system_file_is_an_empty_system_prompt_with_a_warning(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = run_localgen("run", "--print-prompt", "--system-file", str(empty), "hi")
    assert result.returncode == 0 and result.err == f"localgen: warning: {empty} is empty\n", result.err
    assert result.out == printed_prompt("-s", "", "hi"), "like -s '': the template's default is left out"


@pytest.mark.parametrize("option", ["--system-file", "-f"])
def test_a_file_of_whitespace_is_warned_about_as_such_not_as_empty(tmp_path: Path, option: str) -> None:
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    result = run_localgen("run", "--print-prompt", option, str(blank), "hi")
    assert result.returncode == 0 and result.err == f"localgen: warning: {blank} holds only whitespace\n", result.err


def test_a_text_attached_twice_is_attached_once_with_a_warning_as_in_chat(tmp_path: Path) -> None:
    notes, copy = tmp_path / "notes.txt", tmp_path / "copy.txt"
    notes.write_text("Eggs boil in 7 minutes.\n")
    copy.write_text("Eggs boil in 7 minutes.\n")
    result = run_localgen("run", "--print-prompt", "-f", str(notes), "-f", str(notes), "-f", str(copy), "-f", "-",
                          "When?", stdin=b"Eggs boil in 7 minutes.\n")
    assert result.returncode == 0, result.err
    assert result.out == chatml("Eggs boil in 7 minutes.\n\nWhen?")
    again = "it is not attached again"
    assert result.err == f"localgen: warning: {notes} was given twice: it is attached once\n" \
                         f"localgen: warning: {copy} has the same text as {notes}: {again}\n" \
                         f"localgen: warning: stdin has the same text as {notes}: {again}\n", result.err
    other = run_localgen("run", "--print-prompt", "-f", str(notes), "When?", stdin=b"Tea takes 3.\n")
    assert other.err == "" and other.out == chatml("Eggs boil in 7 minutes.\n\nTea takes 3.\n\nWhen?"), other.err


def test_a_file_given_many_times_is_warned_about_in_one_line_that_counts_them(tmp_path: Path) -> None:
    """-f a.txt given 300 times printed 299 lines alike; one line now says how often it was given, and a file given
    again with the text of another is said to be left out for that one, not to be attached once."""
    notes, other, copy = tmp_path / "notes.txt", tmp_path / "other.txt", tmp_path / "copy.txt"
    notes.write_text("Eggs boil in 7 minutes.\n")
    other.write_text("Tea takes 3.\n")
    copy.write_text("Eggs boil in 7 minutes.\n")
    result = run_localgen("run", "--print-prompt", *["-f", str(notes)] * 300, "-f", str(other), "-f", str(other),
                          *["-f", str(copy)] * 3, "When?")
    assert result.returncode == 0 and result.out == chatml("Eggs boil in 7 minutes.\n\nTea takes 3.\n\nWhen?")
    assert result.err == (f"localgen: warning: {notes} was given 300 times: it is attached once\n"
                          f"localgen: warning: {other} was given twice: it is attached once\n"
                          f"localgen: warning: {copy} has the same text as {notes}: it is not attached again\n"), \
        result.err


def test_a_file_given_again_under_another_path_is_counted_as_chat_s_file_counts_it(tmp_path: Path) -> None:
    """-f n.txt -f ./n.txt said n.txt had the same text as ./n.txt, where /file says a file given again so: it is one
    file, given twice; counted under the path first given, where it named ./n.txt, typed once, given 3 times."""
    notes = tmp_path / "notes.txt"
    notes.write_text("Eggs boil in 7 minutes.\n")
    (tmp_path / "link.txt").symlink_to(notes)
    again = f"{tmp_path}/./notes.txt"
    result = run_localgen("run", "--print-prompt", "-f", str(notes), "-f", again, "-f", str(tmp_path / "link.txt"),
                          "When?")
    assert result.returncode == 0 and result.out == chatml("Eggs boil in 7 minutes.\n\nWhen?"), result.err
    assert result.err == f"localgen: warning: {notes} was given 3 times: it is attached once\n", result.err


def test_a_prompt_of_many_files_too_long_names_three_and_counts_the_rest(tmp_path: Path) -> None:
    """A prompt too long for the model, of 1,500 -f files, named every one of them in one line of 20 KB."""
    files = [tmp_path / f"f{number}.txt" for number in range(1, 1501)]
    for number, path in enumerate(files, 1):
        path.write_text(f"Some words in file number {number} about the harbour and the market.\n")
    result = run_localgen("run", "-n", "2", *(arg for path in files for arg in ("-f", str(path))), "hi")
    assert result.returncode == 1 and result.out == "" and result.err.count("\n") == 1, result.err
    assert re.fullmatch(rf"localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes "
                        rf"[\d,]+ tokens with -f {files[0]}, -f {files[1]}, -f {files[2]}, 1,497 more files and the "
                        r"prompt \(hint: shorten the input, or split it and ask about each part\)\n", result.err), \
        result.err
    four = [*files[:3], tmp_path / "big.txt"]
    four[3].write_text("word " * 9000)
    named = run_localgen("run", "-n", "2", *(arg for path in four for arg in ("-f", str(path))), "hi")
    assert f"with -f {four[0]}, -f {four[1]}, -f {four[2]}, -f {four[3]} and the prompt (hint:" in named.err, \
        named.err  # a fourth file is named: its name is no longer than its count


def test_a_file_given_twice_is_warned_about_once_for_its_encoding_or_emptiness(tmp_path: Path) -> None:
    latin, empty = tmp_path / "latin.txt", tmp_path / "empty.txt"
    latin.write_bytes(b"Caf\xe9 au lait.\n")
    empty.write_text("")
    result = run_localgen("run", "--print-prompt", "-f", str(latin), "-f", str(empty), "-f", str(latin), "-f",
                          str(empty), "q")
    assert result.returncode == 0 and result.out == chatml("Caf\ufffd au lait.\n\nq"), result.err
    assert result.err == (f"localgen: warning: {latin} is not valid UTF-8; undecodable bytes were replaced with "
                          "U+FFFD\n"
                          f"localgen: warning: {empty} is empty\n"
                          f"localgen: warning: {latin} was given twice: it is attached once\n"), result.err


@pytest.mark.parametrize("command", [("fit",), ("pull",), ("bench", "-m"), ("models", "show")])
def test_other_commands_name_a_model_file_as_typed_too(command: tuple[str, ...]) -> None:
    result = run_localgen(*command, "./README.md")
    assert result.returncode == 1 and result.out == "", result.err
    assert result.err.startswith("localgen: error: ./README.md: not a GGUF file") and result.err.count("\n") == 1, \
        result.err


@pytest.mark.parametrize(("stdin", "warning"), [(None, "is empty"), (b"\n \n", "holds only whitespace")])
def test_stdin_attached_with_f_dash_is_warned_about_when_empty_as_a_file_is(stdin: bytes | None,
                                                                            warning: str) -> None:
    result = run_localgen("run", "--print-prompt", "-f", "-", "hi", stdin=stdin)
    assert result.returncode == 0 and result.err == f"localgen: warning: stdin (-f -) {warning}\n", result.err
    assert run_localgen("run", "--print-prompt", "hi").err == "", "stdin /dev/null, not asked for: no warning"


def test_utf_16_and_utf_32_text_with_its_byte_order_mark_is_read_as_text(tmp_path: Path) -> None:
    """Windows' "Unicode" text files were refused as binary data (their ASCII letters have NUL bytes)."""
    notes = tmp_path / "notes.txt"
    notes.write_bytes("Café at 3.\r\n".encode("utf-32"))
    piped = "Tea at 4 ☕".encode("utf-16")
    assert printed_prompt("-f", str(notes), "When?", stdin=piped) == chatml("Café at 3.\n\nTea at 4 ☕\n\nWhen?")
    big_endian = printed_prompt("-", stdin=b"\xfe\xff" + "Hi there".encode("utf-16-be"))
    assert big_endian == chatml("Hi there")
    nul = run_localgen("run", "--print-prompt", "-", stdin="a\x00b".encode("utf-16"))
    assert nul.returncode == 2 and nul.err.startswith("localgen: error: stdin looks like binary data (it contains "
                                                      "NUL characters)"), nul.err
    odd = run_localgen("run", "--print-prompt", "-", stdin=b"\xff\xfeh\x00i")  # a byte left over
    assert odd.returncode == 0 and chatml("h\ufffd") in odd.out, odd.out
    assert odd.err == "localgen: warning: stdin is not valid UTF-16; undecodable bytes were replaced with U+FFFD\n"


@pytest.mark.parametrize(("args", "message"), [
    (("-f", "./no-such-file.txt"), "no such file: ./no-such-file.txt (hint: check the path given to -f/--file)"),
    (("--grammar", "./no-such.gbnf"), "no such file: ./no-such.gbnf (hint: check the path given to --grammar)"),
    (("--system-file", "./localgen"), "./localgen is a directory (hint: pass a file to --system-file)"),
    (("-m", "./README.md"), "./README.md: not a GGUF file"),
])
def test_errors_name_a_path_as_it_was_typed(args: tuple[str, ...], message: str) -> None:
    for stdin in (None, b"piped"):  # checked as the run goes, or all before the pipe is read
        result = run_localgen("run", *args, "hi", stdin=stdin)
        assert result.returncode in (1, 2) and result.out == "", result.err
        assert result.err.startswith(f"localgen: error: {message}") and result.err.count("\n") == 1, result.err


@pytest.mark.parametrize(("args", "message"), [
    (("-s", "Be terse.", "--system-file", "{sys}", "hi"),
     "-s/--system and --system-file both give the system prompt (hint: give one of them: -s TEXT or "
     "--system-file FILE)"),
    (("--system-file", "{missing}", "hi"), "no such file: {missing} (hint: check the path given to --system-file)"),
    (("--system-file", "{dir}", "hi"), "{dir} is a directory (hint: pass a file to --system-file)"),
    (("--system-file", "-", "-f", "-", "hi"), "--system-file - cannot read stdin: -f - reads it"),
    (("--system-file", "-", "-"), "--system-file - cannot read stdin: the prompt - reads it"),
    (("--system-prompt-file", "{sys}", "hi"),
     "--system-prompt-file is llama-cli's option for a system prompt file (hint: localgen's is --system-file FILE, "
     "or -sysf FILE)"),
])
def test_a_bad_system_file_is_a_one_line_error(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "sys.txt").write_text("Be terse.")
    names = {"sys": tmp_path / "sys.txt", "missing": tmp_path / "missing.txt", "dir": tmp_path}
    result = run_localgen("run", *(arg.format(**names) for arg in args), stdin=b"piped")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err.startswith(f"localgen: error: {message.format(**names)}") and result.err.count("\n") == 1, \
        result.err


def test_a_socket_or_a_device_that_cannot_be_read_is_named_with_a_hint_that_fits(tmp_path: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        result = run_localgen("run", "-f", str(tmp_path / "sock"), "hi")
    assert result.returncode == 2 and result.err == (f"localgen: error: {tmp_path / 'sock'} is a socket, not a file "
                                                     "(hint: pass a file or a pipe to -f/--file)\n")
    result = run_localgen("run", "-f", "/proc/self/mem", "hi")
    assert result.returncode == 2 and result.err == ("localgen: error: cannot read /proc/self/mem: Input/output error "
                                                     "(hint: pass a file or a pipe to -f/--file)\n")


@pytest.mark.parametrize(("option", "name", "stream", "written"), [
    ("-f/--file", "/dev/stdout", "stdout", "the answer"),
    ("--system-file", "/proc/self/fd/1", "stdout", "the answer"),
    ("--grammar", "/dev/stderr", "stderr", "its messages"),
])
def test_a_file_option_given_the_pipe_of_stdout_or_stderr_is_refused_rather_than_read_forever(
        option: str, name: str, stream: str, written: str) -> None:
    result = run_localgen("run", option.split("/")[0], name, "hi", timeout=20)
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == (f"localgen: error: {name} is {stream}, the pipe this run writes {written} to, so reading it "
                          f"would never end (hint: pass a file, or the pipe the text comes from, to {option})\n")


@pytest.mark.parametrize(("args", "message"), [
    (("-f", "-", "-f", "-", "hi"), "-f - is given twice, but stdin is read once (hint: give -f - once)"),
    (("-f", "-", "-"), "-f - and the prompt - both read stdin, which is read once (hint: drop one: -f - attaches "
                       "stdin before the prompt; a prompt of - is stdin itself)"),
])
def test_stdin_asked_for_twice_is_a_one_line_error(args: tuple[str, ...], message: str) -> None:
    result = run_localgen("run", "--print-prompt", *args, stdin=b"piped")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == f"localgen: error: {message}\n"


def test_a_name_reaching_stdin_through_dev_fd_s_parent_is_stdin_as_the_kernel_opens_it() -> None:
    """/dev/fd links to /proc/self/fd, so /dev/fd/../../self/fd/0 opens stdin: with -f - too it was read twice."""
    result = run_localgen("run", "--print-prompt", "-f", "/dev/fd/../../self/fd/0", "-f", "-", "hi", stdin=b"piped")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == ("localgen: error: -f /dev/fd/../../self/fd/0 and -f - both read stdin, which is read once "
                          "(hint: give one of them)\n")


def test_dev_fd_s_parent_s_stdin_is_no_file_even_with_stdin_closed() -> None:
    """/dev/fd/../stdin is /proc/self/stdin, no file: it was said to have nothing to read as stdin is closed."""
    closed = subprocess.run([sys.executable, "-m", "localgen", "run", "-f", "/dev/fd/../stdin", "hi"],
                            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, preexec_fn=lambda: os.close(0))
    assert closed.returncode == 2 and closed.stdout == "", closed.stderr
    assert closed.stderr == ("localgen: error: no such file: /dev/fd/../stdin (hint: check the path given to "
                             "-f/--file)\n")


def test_chat_takes_its_system_prompt_from_a_file_even_a_slow_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "system.fifo"
    os.mkfifo(fifo)
    chat = Chat(tmp_path / "home", "--system-file", str(fifo), "--no-markdown", "-n", "5", *GREEDY,
                wait_for_prompt=False)
    try:
        # no writer at first: opening the pipe waits, and the note comes meanwhile, however long startup took
        chat.expect_words(f"waiting for {fifo}")
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # the chat has the pipe open for reading: no wait here
        try:
            os.write(writer, b"Be terse.\r\n")
        finally:
            os.close(writer)
        chat.sync()
        shown = " ".join(chat.transcript.getvalue().split())
        assert f"waiting for {fifo} (a pipe given with --system-file: it is read once a writer has opened it" in shown
        assert chat.ask("Hi.")["system"] == "Be terse."
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    refused = spawn_localgen("chat", "--system-file", "-", env=dict(os.environ), encoding="utf-8", timeout=60,
                             dimensions=(30, 200))
    refused.expect(pexpect.EOF)
    refused.close()
    assert refused.exitstatus == 2
    assert "--system-file - cannot read stdin: chat reads its messages from the terminal" in refused.before


@pytest.mark.parametrize(("args", "what"), [
    (("-",), "the prompt"),
    (("-f", "-", "Summarize it."), "the text -f - attaches"),
    (("--system-file", "-", "hi"), "the system prompt (--system-file -)"),
    (("-f", "/dev/stdin", "Summarize it."), "the text -f /dev/stdin attaches"),
    (("-f", "/dev/tty", "Summarize it."), "the text -f /dev/tty attaches"),
    (("--system-file", "/dev/tty", "hi"), "/dev/tty (--system-file)"),
])
def test_a_dash_reading_a_terminal_says_so_and_how_to_end_it(args: tuple[str, ...], what: str) -> None:
    """`localgen run -` at a terminal waits for what is typed there: a note says so, where it waited silently (and so
    for a file given by name that is the terminal)."""
    child = spawn_localgen("run", "--print-prompt", *args, env=dict(os.environ), encoding="utf-8", timeout=60,
                           dimensions=(30, 200))
    child.expect_exact(f"localgen: reading {what} from the terminal; Ctrl-D at the start of a line ends it")
    child.sendline("Typed at the terminal.")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "Typed at the terminal." in child.before, child.before


@pytest.mark.parametrize("args", [("-",), ("-f", "-", "Summarize it."), ("-f", "/dev/stdin", "Summarize it."),
                                  ("--system-file", "-", "hi")])
def test_a_terminal_left_non_blocking_is_read_to_its_ctrl_d(args: tuple[str, ...]) -> None:
    """A terminal whose stdin a program before left non-blocking: its first read found nothing typed yet, and the
    run ended with an internal error (TypeError), where it waits for the lines typed, as on a blocking one."""
    child = pexpect.spawn(sys.executable, ["-m", "localgen", "run", "--print-prompt", *args], env=dict(os.environ),
                          cwd=str(REPO_ROOT), encoding="utf-8", timeout=60, dimensions=(30, 200),
                          preexec_fn=lambda: os.set_blocking(0, False))
    child.expect_exact("Ctrl-D at the start of a line ends it")
    child.sendline("Typed at the terminal.")
    child.expect_exact("Typed at the terminal.")  # the echo: a read found it, and the next finds nothing yet
    child.sendline("A second line.")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "Typed at the terminal.\r\nA second line." in child.before.split("<|im_start|>", 1)[-1], child.before


@pytest.mark.parametrize("args", [("-",), ("-q", "-"), ("-f", "/dev/tty", "Say it back.")])
def test_a_prompt_ended_mid_line_with_ctrl_d_is_answered_on_a_line_of_its_own(args: tuple[str, ...]) -> None:
    """`say hi` and Ctrl-D twice at the terminal: the answer came straight after the text typed (`say hiHello
    there!`); it starts on the next line, as after Enter and Ctrl-D."""
    child = spawn_localgen("run", "-n", "3", *GREEDY, *args, env=dict(os.environ), encoding="utf-8", timeout=60,
                           dimensions=(30, 200))
    if "-q" not in args:
        child.expect_exact("Ctrl-D at the start of a line ends it")
    child.send("say hi")
    child.expect_exact("say hi")
    child.sendeof()
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    answer = child.before.split("\r\n")
    assert answer[0] == "" and answer[1].strip(), repr(child.before)  # the line typed ended, then the answer


@pytest.mark.parametrize("command", [("run", "-"), ("run", "-q", "-"), ("chat", "--system-file", "/dev/tty")])
def test_ctrl_c_while_the_terminal_is_read_ends_the_line_of_its_echo(command: tuple[str, ...]) -> None:
    """README: a Ctrl-C leaves the terminal on a fresh line for the shell's prompt, -q too; Typer turned a Ctrl-C
    while the prompt was typed into a silent exit 130, after `abc^C` with no line ended."""
    child = spawn_localgen(*command, env=dict(os.environ), encoding="utf-8", timeout=60, dimensions=(30, 200))
    if "-q" not in command:
        child.expect_exact("Ctrl-D at the start of a line ends it")
    time.sleep(0.3)  # the terminal is being read: the note comes just before
    child.send("abc")
    child.expect_exact("abc")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 and child.before.endswith("^C\r\n"), repr(child.before)


# --- pipes given to the options that take a file ---------------------------------------------------------------------

PIPED = {"--grammar": 'root ::= "yes"', "--json-schema": '{"type": "string"}',
         "--chat-template": "{% for m in messages %}{{ m.content }}{% endfor %}", "--system-file": "Be terse.",
         "-f": "A document."}


@pytest.mark.parametrize("option", list(PIPED))
def test_a_pipe_given_to_an_option_gets_a_note_while_its_writer_keeps_it_waiting(tmp_path: Path, option: str) -> None:
    written = tmp_path / "write-now"  # the writer keeps quiet until the note is seen, however long startup takes
    slow = (f"<(until [ -e {shlex.quote(str(written))} ]; do sleep 0.05; done; "
            f"printf %s {shlex.quote(PIPED[option])})")
    command = f"{quick_note_localgen()} run --print-prompt {option} {slow} hi"
    child = pexpect.spawn("bash", ["-c", command], cwd=str(REPO_ROOT), timeout=90, encoding="utf-8",
                          dimensions=(30, 250))
    try:
        child.expect_exact("localgen: waiting for")  # the pipe has kept quiet for QUICK_NOTE_S: its note is said
        shown_so_far = child.before + child.after
        written.touch()
        child.expect(pexpect.EOF)
    finally:
        written.touch()  # a writer still waiting ends
        child.close(force=True)
    output = shown_so_far + child.before
    assert child.exitstatus == 0, output
    shown = "-f/--file" if option == "-f" else option
    assert re.search(rf"localgen: waiting for /dev/fd/\d+ \(a pipe given with {shown}: it is read once a writer "
                     r"has opened it and closed it\)", output), output
    assert output.count("waiting for") == 1


@pytest.mark.parametrize(("piped", "bad", "says"), [
    (("--grammar",), ("-f", "{missing}"), "no such file: {missing}"),
    (("--json-schema",), ("--chat-template", "{missing}"), "no such file: {missing}"),
    (("--chat-template",), ("--system-file", "{missing}"), "no such file: {missing}"),
    (("--system-file",), ("--grammar", "{missing}"), "no such file: {missing}"),
    (("-f",), ("--json-schema", "{missing}"), "no such file: {missing}"),
    (("--grammar",), ("--system-file", "{dir}"), "{dir} is a directory"),
    (("--system-file",), ("-m", "no-such-model"), "unknown model 'no-such-model'"),
    (("--chat-template",), ("--threads", "0"), "--threads 0 is out of range"),
    (("--system-file",), ("--json-schema", '{{"bad'), "the JSON schema is not valid JSON"),  # {{: format's brace
])
def test_every_file_an_option_names_and_every_option_is_checked_before_a_pipe_is_waited_for(
        tmp_path: Path, piped: tuple[str], bad: tuple[str, str], says: str) -> None:
    """A pipe whose writer never comes does not hide a mistake elsewhere on the command line."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    names = {"missing": tmp_path / "missing", "dir": tmp_path}
    try:
        result = run_localgen("run", *piped, str(fifo), *(arg.format(**names) for arg in bad), "hi", timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{piped[0]} FIFO was waited for before {bad[0]} was checked") from None
    assert result.returncode in (1, 2) and says.format(**names) in result.err, result.err


@pytest.mark.parametrize(("piped", "bad", "says"), [
    (("-f",), ("--resume", "nosuch"), "no saved conversation named 'nosuch'"),
    (("--system-file",), ("--resume",), "there is no saved conversation to continue"),
    (("--chat-template",), ("-m", "no-such-model"), "unknown model 'no-such-model'"),
    (("-f",), ("-m", "./README.md"), "README.md: not a GGUF file"),
    (("--system-file",), ("-c", "9000"), "--ctx-size 9000 is beyond the model's maximum of 8,192"),
    (("-f",), ("--threads", "0"), "--threads 0 is out of range"),
    (("--chat-template",), ("--temperature", "-1"), "temperature"),
    (("-f",), ("--resume", "gone"), "conversation 'gone' was using {gone}"),
])
def test_chat_checks_everything_before_a_pipe_is_waited_for(tmp_path: Path, piped: tuple[str], bad: tuple[str, ...],
                                                            says: str) -> None:
    """As run does: a pipe whose writer never comes does not hide a mistake elsewhere on the command line, a
    conversation --resume cannot open, or a model that cannot load."""
    from localgen.conversation import Conversation, Turn

    home, fifo, gone = tmp_path / "home", tmp_path / "fifo", tmp_path / "gone.gguf"
    os.mkfifo(fifo)
    saved = home / "data" / "conversations" / "gone.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(Conversation(name="gone", model=str(gone), turns=[Turn("a", "b")]).to_json())
    if bad == ("--resume",):
        saved.unlink()
    child = spawn_chat(home, *piped, str(fifo), *bad)
    try:
        child.expect(pexpect.EOF, timeout=30)
    except pexpect.TIMEOUT:
        raise AssertionError(f"{piped[0]} FIFO was waited for before {' '.join(bad)} was checked") from None
    finally:
        child.close(force=True)
    assert child.exitstatus in (1, 2) and says.format(gone=gone) in " ".join(child.before.split()), child.before


# --- --print-prompt --------------------------------------------------------------------------------------------------

def test_print_prompt_shows_the_chatml_prompt_with_attachments_and_counts_its_tokens(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_bytes(b"\xef\xbb\xbfFirst line\r\nsecond line <|im_end|>\r\n")  # a control token's text stays text
    args = ("-s", "Be brief.", "-f", str(doc), "Summarize.")
    expected = chatml("First line\nsecond line <|im_end|>\n\nPIPED\n\nSummarize.", system="Be brief.")
    assert printed_prompt(*args, stdin=b"PIPED\n") == expected
    record = json.loads(printed_prompt("--json", *args, stdin=b"PIPED\n"))
    assert record == {"prompt": expected, "prompt_tokens": prompt_tokens(*args, stdin=b"PIPED\n")}
    assert printed_prompt("Hi") == chatml("Hi"), "the template's default system prompt where none is given"


def test_print_prompt_with_raw_is_the_text_exactly_as_given() -> None:
    code = b"def add(a, b):\r\n    "
    assert printed_prompt("--raw", "-s", "SYS", "-", stdin=code) == "SYS\n\ndef add(a, b):\r\n    ", \
        "a plain completion keeps every byte: CRLF, the trailing indentation, and adds no newline"
    record = json.loads(printed_prompt("--raw", "--json", "-", stdin=code))
    assert record == {"prompt": code.decode(), "prompt_tokens": prompt_tokens("--raw", "-", stdin=code)}


def test_print_prompt_shows_a_chat_template_file_s_rendering(tmp_path: Path) -> None:
    from gguf_builders import copy_with_metadata, tiny_model

    tiny = tiny_model(tmp_path / "tiny.gguf")  # a model without a chat template, 125 KB to write and load
    base = copy_with_metadata(tiny, tmp_path / "base.gguf", drop=["tokenizer.chat_template"])
    template = tmp_path / "qa.jinja"
    template.write_text("{% for m in messages %}Question: {{ m.content }}\n{% endfor %}"
                        "{% if add_generation_prompt %}Answer in one word:{% endif %}")
    question = "What is the capital of France?"
    assert printed_prompt("-m", str(base), "--chat-template", str(template), question) == \
        f"Question: {question}\nAnswer in one word:"
    plain = run_localgen("run", "--print-prompt", "-m", str(base), question)
    assert plain.returncode == 0 and plain.out == question
    assert "has no chat template; sending the text as a plain completion" in plain.err
    over = run_localgen("run", "--print-prompt", "-m", str(base), "-c", "64", question * 5)  # past the estimate
    assert over.returncode == 1 and over.out == "", "refused as the run would be, not printed as if it fit"
    said = re.search(r"^localgen: error: the prompt is (\d+) tokens but the context holds 64 \(hint: raise --ctx-size "
                     r"past (\d+) \(the model was trained for", over.err.splitlines()[-1])
    assert said is not None and said[1] == said[2], over.err


def test_print_prompt_shows_the_bos_token_the_tokenizer_adds(tmp_path: Path, bundled_model: Path) -> None:
    from gguf_builders import copy_with_metadata

    adds_bos = copy_with_metadata(bundled_model, tmp_path / "bos.gguf",
                                  set_values={"tokenizer.ggml.add_bos_token": True})
    args = ("-m", str(adds_bos), "--raw", "Hello")
    record = json.loads(printed_prompt("--json", *args))
    assert record == {"prompt": "<|im_start|>Hello", "prompt_tokens": prompt_tokens(*args)}  # SmolLM2's BOS
    assert printed_prompt("--raw", "Hello") == "Hello", "the bundled model adds none"


@pytest.mark.first_use
def test_print_prompt_is_refused_for_a_conversation(tmp_path: Path) -> None:
    result = run_localgen("run", "--print-prompt", "--conversation", "notes", "hi",
                          env={"LOCALGEN_HOME": str(tmp_path / "home")})
    assert result.returncode == 2 and result.out == ""
    assert "--print-prompt shows the prompt of a run outside any conversation" in result.err
    assert not list((tmp_path / "home").rglob("*.json")), "nothing was started or saved"


def test_the_note_about_waiting_for_a_pipe_names_it_as_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import inputs

    monkeypatch.setattr(inputs, "STDIN_QUIET_S", 0.2)
    os.mkfifo(tmp_path / "system.fifo")
    monkeypatch.chdir(tmp_path)
    noted = threading.Event()  # the writer opens the pipe once the note is said, not a fixed while after
    writer = threading.Thread(target=lambda: (noted.wait(30), (tmp_path / "system.fifo").write_bytes(b"Be terse.")),
                              daemon=True)
    writer.start()
    told: list[tuple[str | None, str]] = []

    def waiting(*said: str | None) -> None:
        told.append(said)
        noted.set()

    text = inputs.InputFile.checked("./system.fifo", "--system-file").read(None, [], waiting=waiting)
    writer.join(timeout=30)
    assert text == "Be terse." and told == [("./system.fifo", "--system-file")]


def test_a_file_over_the_size_bound_is_refused_before_a_pipe_is_waited_for(tmp_path: Path) -> None:
    """It was read, and refused 256 MiB in, once the pipe before it had ended: here, never."""
    fifo = tmp_path / "slow"  # <(slow_cmd), no writer yet
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.write(b"text " * (BINARY_SNIFF_BYTES // 5 + 1))  # text as far as it is looked at, then NULs
        handle.truncate(257 * 2**20)  # sparse: no disk used
    result = run_localgen("run", "-f", str(fifo), "-f", str(big), "hi", timeout=20)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: {big} is larger than 256 MiB (hint: send a smaller file)\n", result.err


@pytest.mark.parametrize(("option", "hint"), [
    ("-f", "send text; convert documents to plain text first"),
    ("--chat-template", "pass a Jinja chat template file, like the chat_template in a model's tokenizer_config"),
    ("--grammar", "give a GBNF grammar, as text or a file, with a root rule, e.g. "
                  "--grammar 'root ::= \"yes\" | \"no\"'"),
])
def test_an_oversized_binary_file_is_refused_as_binary_data(tmp_path: Path, option: str, hint: str) -> None:
    """A model or a video over the size bound was refused by its size, as if a smaller one would do."""
    big = tmp_path / "model.gguf"
    with big.open("wb") as handle:
        handle.write(b"GGUF\x03\x00\x00\x00" + b"text " * 100)
        handle.truncate(300 * 2**20)  # sparse: no disk used
    result = run_localgen("run", option, str(big), "hi", timeout=20)
    assert result.returncode == 2 and result.out == ""
    assert result.err == (f"localgen: error: {big} looks like binary data (it contains NUL bytes) (hint: {hint})\n"), \
        result.err


def test_an_oversized_text_file_that_starts_as_utf16_is_refused_by_its_size(tmp_path: Path) -> None:
    """Its NUL bytes are a UTF-16 text's, not binary data's."""
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.write("\ufeffhello".encode("utf-16-le"))
        handle.truncate(300 * 2**20)
    result = run_localgen("run", "-f", str(big), "hi", timeout=20)
    assert result.returncode == 2
    assert result.err == f"localgen: error: {big} is larger than 256 MiB (hint: send a smaller file)\n", result.err


def test_a_file_the_shell_emptied_for_stdout_is_refused_not_sent_empty(tmp_path: Path) -> None:
    """`run -f notes.md "..." > notes.md`: the shell empties notes.md before the run; it answered without the file."""
    notes = tmp_path / "notes.md"
    run = f"{shlex.quote(sys.executable)} -m localgen run"
    for redirect, named, elsewhere in (("-f notes.md 'Fix it.' > notes.md", "notes.md", " (> notes.md.new)"),
                                       ("'Fix it.' < notes.md > notes.md", "the file stdin reads", ""),
                                       ("-f /dev/stdout 'Fix it.' > notes.md", "/dev/stdout", "")):
        notes.write_text("The meeting is on Friday.\n")
        proc = subprocess.run(["bash", "-c", f"{run} {redirect}"], capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)
        assert proc.returncode == 2 and notes.read_text() == "", proc.stderr
        assert proc.stderr == (f"localgen: error: {named} is also where stdout goes, so the shell emptied it for the "
                               "answer (>) before localgen could read it (hint: send the answer to another file"
                               f"{elsewhere}, then restore the text that was in it from a copy)\n"), proc.stderr
    notes.write_text("The meeting is on Friday.\n")
    kept = subprocess.run(["bash", "-c", f"{run} --print-prompt -f notes.md 'Fix it.' >> notes.md"], text=True,
                          capture_output=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          timeout=120)
    assert kept.returncode == 0 and "user\nThe meeting is on Friday." in notes.read_text(), "a >> keeps the file"


@pytest.mark.parametrize("name", ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2", "/dev/./stdout"])
def test_a_descriptor_named_as_the_file_the_shell_emptied_gets_no_new_file_hinted_beside_it(
        tmp_path: Path, name: str) -> None:
    """`-f /dev/stderr hi > n.txt 2>&1`: there is no /dev/stderr.new to send the answer to."""
    notes = tmp_path / "n.txt"
    notes.write_text("x\n")
    command = f"{shlex.quote(sys.executable)} -m localgen run -n 1 -f {name} hi > n.txt 2>&1"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, notes.read_text()
    assert notes.read_text() == (f"localgen: error: {name} is also where stdout goes, so the shell emptied it for the "
                                 "answer (>) before localgen could read it (hint: send the answer to another file, "
                                 "then restore the text that was in it from a copy)\n")


@pytest.mark.parametrize(("options", "name", "elsewhere"), [
    ("-n 1", "/dev/stderr", ""),
    ("-n 1", "n.txt", " (2> n.txt.new)"),
    ("--print-prompt -s -", "n.txt", " (2> n.txt.new)"),  # refused before -s -'s warning is written into n.txt
])
def test_a_file_the_shell_emptied_for_stderr_is_refused_not_read_empty(
        tmp_path: Path, options: str, name: str, elsewhere: str) -> None:
    """`-f /dev/stderr hi 2> n.txt`: the shell empties n.txt before the run, which answered as if it were empty."""
    notes = tmp_path / "n.txt"
    notes.write_text("The meeting is on Friday.\n")
    command = f"{shlex.quote(sys.executable)} -m localgen run {options} -f {name} hi 2> n.txt"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == "", notes.read_text()
    assert notes.read_text() == (f"localgen: error: {name} is also where stderr goes, so the shell emptied it for the "
                                 "messages (2>) before localgen could read it (hint: send the messages to another "
                                 f"file{elsewhere}, then restore the text that was in it from a copy)\n")


def test_a_system_file_the_shell_emptied_for_stderr_is_refused_by_the_chat_too(tmp_path: Path) -> None:
    """`chat --system-file s.txt 2> s.txt` in a terminal: the chat warned that s.txt was empty and started."""
    from tests.test_repl import PROMPT, _env

    system = tmp_path / "s.txt"
    system.write_text("Be brief.\n")
    command = f"exec {shlex.quote(sys.executable)} -m localgen chat --system-file s.txt 2> s.txt"
    chat = pexpect.spawn("bash", ["-c", command], env={**_env(tmp_path / "home"), "PYTHONPATH": str(REPO_ROOT)},
                         cwd=str(tmp_path), encoding="utf-8", timeout=90)
    started = chat.expect([pexpect.EOF, PROMPT]) == 1
    if started:
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
    chat.close()
    assert not started and chat.exitstatus == 2, system.read_text()
    assert system.read_text() == ("localgen: error: s.txt is also where stderr goes, so the shell emptied it for the "
                                  "messages (2>) before localgen could read it (hint: send the messages to another "
                                  "file (2> s.txt.new), then restore the text that was in it from a copy)\n")


@pytest.mark.parametrize(("option", "target", "shown"), [
    ("-f/--file", "/gone/notes.txt", "/gone/notes.txt"),
    ("--system-file", "old-notes.txt", "old-notes.txt"),  # relative, as the link holds it
    ("--grammar", "chain.txt", "{tmp}/old-notes.txt"),  # a link to a dangling link: the target missing at last
    ("-f/--file", f"/gone/{'d' * 750}/x.txt", f"/gone/{'d' * 54}...{'d' * 54}/x.txt"),  # cut in its middle
])
def test_a_dangling_link_given_to_a_file_option_names_its_missing_target(
        tmp_path: Path, option: str, target: str, shown: str) -> None:
    (tmp_path / "chain.txt").symlink_to("old-notes.txt")
    (tmp_path / "notes.txt").symlink_to(target)
    short = option.split("/")[0]
    result = subprocess.run([sys.executable, "-m", "localgen", "run", short, "notes.txt", "hi"],
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == (f"localgen: error: notes.txt is a link to {shown.format(tmp=tmp_path.resolve())}, which "
                             f"is not there (hint: point the link at a file, or pass the file's own path to "
                             f"{option})\n")


@pytest.mark.parametrize(("option", "target", "said"), [
    ("-f/--file", "notes.txt", "a link to notes.txt, which leads into a loop of links"),  # itself
    ("--system-file", "f.txt/x", "a link to f.txt/x, which cannot be there: f.txt is a file"),
])
def test_a_link_into_a_loop_or_through_a_file_given_to_a_file_option_is_named_as_such(
        tmp_path: Path, option: str, target: str, said: str) -> None:
    """Where the system's words were `cannot read notes.txt: Not a directory` (or Too many levels of symbolic links)."""
    (tmp_path / "f.txt").write_text("a file\n")
    (tmp_path / "notes.txt").symlink_to(target)
    result = subprocess.run([sys.executable, "-m", "localgen", "run", option.split("/")[0], "notes.txt", "hi"],
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == (f"localgen: error: notes.txt is {said} (hint: point the link at a "
                             f"file, or pass the file's own path to {option})\n")


def test_a_link_whose_target_goes_between_its_check_and_its_read_is_named_as_a_link_to_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file deleted after the run checked the link to it, before it read it: the read says so as the check would."""
    from localgen.errors import UsageError
    from localgen.inputs import InputFile

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("The meeting is on Friday.\n")
    Path("dl.txt").symlink_to("notes.txt")
    checked = InputFile.checked("dl.txt", "-f/--file")
    (tmp_path / "notes.txt").unlink()
    with pytest.raises(UsageError) as refused:
        checked.read(None, [])
    assert (refused.value.message, refused.value.hint) == (
        "dl.txt is a link to notes.txt, which is not there",
        "point the link at a file, or pass the file's own path to -f/--file")


CTRL_C_AS_IT_LOADS = """
import signal, sys
import localgen.cli_chat_flow, localgen.cli_model
from localgen.cli import main

def interrupted(*args, **kwargs):
    signal.raise_signal(signal.SIGINT)

localgen.cli_model.load_for = localgen.cli_chat_flow.load_for = interrupted
main(sys.argv[1:])
"""

DOWNLOAD_CTRL_C = """
import signal, sys
from localgen import line_ends
from localgen.download_progress import open_display
from localgen.hub_types import HubFile, HubModel

file = HubFile("acme/m-GGUF", "m.Q4_0.gguf", 1000, None, "Q4_0", None, None)
try:
    with open_display(HubModel("acme/m-GGUF", "Q4_0", (file,), "main"), show=True) as display:
        display.begin_file(file, cached=False)
        signal.raise_signal(signal.SIGINT)
except KeyboardInterrupt:
    line_ends.end_interrupted_line()
    sys.exit(130)
"""


@pytest.mark.parametrize(("script", "args", "shown"), [
    pytest.param(CTRL_C_AS_IT_LOADS, ["chat"], "", id="chat"),  # its terminal echoes no ^C from the load on
    pytest.param(CTRL_C_AS_IT_LOADS, ["run", "hi", "2>/dev/null"], "\r\n", id="run-stderr-a-file"),
    pytest.param(DOWNLOAD_CTRL_C, [], "-:--:--\r\n", id="download"),  # the bars' own line end, and no other
])
def test_a_ctrl_c_ends_the_terminal_s_line_once_and_only_where_it_is_open(script: str, args: list[str],
                                                                          shown: str) -> None:
    """A Ctrl-C that ends localgen leaves the terminal on a fresh line, adding no empty one: none where the chat's
    terminal echoed no ^C, none after a download's progress bars, which end their line as they stop; with stderr a
    file, on stdout (the terminal)."""
    command = " ".join([shlex.quote(sys.executable), "-c", shlex.quote(script), *args])
    child = pexpect.spawn("bash", ["-c", command], cwd=str(REPO_ROOT), timeout=60, encoding="utf-8",
                          dimensions=(30, 200))
    child.expect(pexpect.EOF)
    child.close()
    printed = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)  # the bars' and the chat's escapes
    assert child.exitstatus == 130 and printed.endswith(shown), repr(child.before)
    assert printed == shown if len(shown) <= 2 else not printed.endswith("\r\n\r\n"), repr(child.before)


def test_a_prompt_too_long_for_the_context_names_what_it_is_made_of(tmp_path: Path) -> None:
    """A run refused for a prompt no context of its size holds says what the prompt is made of (its -f files, stdin,
    the prompt and the system prompt), as a chat names its -f files; stdin from /dev/null, an empty file and a file
    given twice are not among them."""
    long, short = tmp_path / "long.txt", tmp_path / "short.txt"
    long.write_text("x " * 30_000)  # 60,000 bytes: at least 370 tokens, however they tokenize
    short.write_text("A short note.\n")
    empty = tmp_path / "empty.txt"  # named not, as a file given twice is named once: what the prompt holds, as read
    empty.write_text("")
    piped = b"x " * 30_000
    for args, stdin, named in (
            (("-f", str(long), "-f", str(short), "-s", "Be brief.", "q"), None,
             f"with -f {long}, -f {short}, the prompt and the system prompt"),
            (("q",), piped, "with stdin and the prompt"),
            (("-",), piped, "with stdin"),
            (("-f", str(short), "-f", "-", "q"), piped, f"with -f {short}, -f - and the prompt"),
            (("--system-file", "-", "q"), piped, "with the prompt and the system prompt"),
            (("--system-file", str(short), "q"), piped, "with stdin, the prompt and the system prompt"),
            (("-f", str(long), "-f", str(long), "-f", str(empty), "q"), None, f"with -f {long} and the prompt"),
            # refused while a file is read, before the pipe is: stdin, and the files not read yet, are not named
            (("-f", str(long), "q"), b"A piped note.\n", f"with -f {long} and the prompt"),
            (("-f", str(long), "q"), b"", f"with -f {long} and the prompt"),
            (("-f", str(short), "-f", str(long), "-f", str(empty), "-s", "Be brief.", "q"), b"A piped note.\n",
             f"with -f {short}, -f {long}, the prompt and the system prompt"),
            (("--system-file", str(long), "-f", str(short), "q"), b"A piped note.\n",
             "with the prompt and the system prompt")):
        result = run_localgen("run", "-c", "256", "-n", "1", *args, stdin=stdin)
        assert result.returncode == 1 and re.fullmatch(r"(?:localgen: warning: [^\n]*\n)*"  # the empty file's...
                                                       r"localgen: error: the prompt is too long for --ctx-size 256: "
                                                       rf"it takes at least [\d,]+ tokens {re.escape(named)} \(hint: "
                                                       r"[^\n]*\)\n", result.err), (args, result.err)


def test_an_option_s_value_in_a_refusal_is_written_as_typed(tmp_path: Path) -> None:
    """`too long for --ctx-size 1,024` and `--ctx-size 10,000 is beyond ...` wrote the value as no option takes it
    (`-c 4,096` is refused): an option's value is written bare, as it is typed; counts in prose are grouped."""
    huge = tmp_path / "huge.txt"
    huge.write_text("abcdefghij" * 20_000)
    long = run_localgen("run", "-c", "1024", "-n", "1", "-f", str(huge), "q")
    assert long.returncode == 1 and re.match(r"localgen: error: the prompt is too long for --ctx-size 1024: it takes "
                                             r"at least \d,\d{3} tokens", long.err), long.err
    beyond = run_localgen("run", "-c", "10000", "q")
    assert beyond.err == ("localgen: error: --ctx-size 10000 is beyond the model's maximum of 8,192 (hint: use "
                          "--ctx-size 8192 or less)\n"), beyond.err


def test_a_file_option_expands_a_tilde_the_shell_left(tmp_path: Path) -> None:
    """`--file=~/notes.txt` and `-f~/notes.txt` reach localgen with the ~ as typed (the shell expands it only at a
    word's start): it is the home folder, as -m ~/model.gguf's is."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("The pass phrase is heliotrope.\n")
    (home / "system.txt").write_text("Answer in French.\n")
    env = {"HOME": str(home)}
    result = run_localgen("run", "--print-prompt", "--file=~/notes.txt", "--system-file=~/system.txt", "q", env=env)
    assert result.returncode == 0 and "The pass phrase is heliotrope." in result.out \
        and "Answer in French." in result.out, result.err
    missing = run_localgen("run", "-f~/missing.txt", "q", env=env)
    assert missing.returncode == 2 and "no such file: ~/missing.txt" in missing.err, missing.err


def test_a_prompt_whose_tokens_the_context_cannot_hold_names_what_it_is_made_of(tmp_path: Path) -> None:
    """A prompt refused once the model has counted its tokens names what it is made of too, as one refused by its
    size does (the prompt alone is not named: the message says it already)."""
    doc = tmp_path / "doc.txt"
    doc.write_text("The quick brown fox jumps over the lazy dog.\n" * 300)  # some 3,000 tokens
    for args, stdin, named in ((("-f", str(doc), "q"), None, f" with -f {doc} and the prompt,"),
                               (("--print-prompt", "-f", str(doc), "q"), None, f" with -f {doc} and the prompt,"),
                               (("-s", "Be brief.", "q"), doc.read_bytes(),
                                " with stdin, the prompt and the system prompt,"),
                               ((doc.read_text(),), None, "")):
        result = run_localgen("run", "-c", "1024", "-n", "1", *args, stdin=stdin)
        refused = rf"localgen: error: the prompt is [\d,]+ tokens{re.escape(named)} but the context holds 1,024 \(hint:"
        assert result.returncode == 1 and re.fullmatch(refused + r" [^\n]*\)\n", result.err), (args[:2], result.err)


@pytest.mark.parametrize("option", ["-f", "--system-file", "--grammar"])
def test_a_file_named_with_a_slash_after_it_is_not_a_directory_as_cat_says(tmp_path: Path, option: str) -> None:
    """`cat notes.txt/` says "Not a directory", where Path drops the slash and would read notes.txt."""
    (tmp_path / "notes.txt").write_text("The pass phrase is heliotrope.\n")
    for typed, shown in (("notes.txt/", "notes.txt"), ("./notes.txt//.", "./notes.txt"), ("notes.txt/x", None)):
        result = run_localgen("run", "--print-prompt", option, f"{tmp_path}/{typed}", "q")
        hint = f"{tmp_path}/{shown} is a file, not a folder: drop the / after it" if shown else \
            f"check the path given to {'-f/--file' if option == '-f' else option}"
        assert result.returncode == 2 and result.out == "", result.err
        assert result.err == f"localgen: error: cannot read {tmp_path}/{typed}: Not a directory (hint: {hint})\n"


def test_stdin_a_file_a_loop_read_part_of_is_attached_with_a_warning(tmp_path: Path) -> None:
    """`while read q; do localgen run "$q"; done < questions.txt`: the first run attaches the questions left, which
    the loop then never reads, and says so, where it took them silently; a file read from its start, one read to its
    end, and stdin asked for with -f - get no warning."""
    questions = tmp_path / "questions.txt"
    questions.write_text("Why is the sky blue?\nWhat is a monad?\n")
    run = f"{shlex.quote(sys.executable)} -m localgen run --print-prompt"

    def loop(command: str) -> str:
        script = f'while read q; do {command} >/dev/null || exit; done < {shlex.quote(str(questions))}'
        proc = subprocess.run(["bash", "-c", script], capture_output=True, cwd=REPO_ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stderr.decode()

    assert loop(f'{run} "$q"') == ("localgen: warning: stdin is a file already read up to byte 21 (by `read`, a "
                                   "`while read` loop, or a script run as `bash < FILE`), so this run attaches the "
                                   "rest of it, and whatever reads stdin after this run gets none of it (</dev/null "
                                   "runs without stdin; -f - attaches it unwarned)\n")
    assert loop(f'{run} -f - "$q"') == ""
    assert loop(f'{run} "$q" </dev/null') == ""
    assert loop(f'read rest; {run} "$q"') == "", "read to its end: nothing taken from the loop"
    with questions.open("rb") as whole:
        proc = run_localgen_process([sys.executable, "-m", "localgen", "run", "--print-prompt", "q"], stdin=whole,
                                    capture_output=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stderr == b"" and b"What is a monad?" in proc.stdout, proc.stderr.decode()
