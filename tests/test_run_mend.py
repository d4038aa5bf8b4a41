"""What `run` refuses of the files its options name: a grammar, schema or chat template over its size cap, read no
further than the cap."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_localgen

CAP = 4 * 2**20  # what README says a grammar, schema or chat template may be
CAPPED = {"--grammar": "a grammar", "--json-schema": "a JSON schema", "--chat-template": "a chat template"}


def _run_reading_an_endless_pipe(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run localgen with "{pipe}" in args standing for /dev/fd/N, a pipe this test writes lines to without end, and
    how many bytes the run took from it before it exited."""
    read_end, write_end = os.pipe()
    written = [0]

    def write_forever() -> None:
        """Write lines until the reader has gone."""
        chunk = b"y\n" * 32_768
        try:
            while True:
                written[0] += os.write(write_end, chunk)
        except BrokenPipeError:
            pass

    command = [sys.executable, "-m", "localgen", *(a.replace("{pipe}", f"/dev/fd/{read_end}") for a in args)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    writer = threading.Thread(target=write_forever, daemon=True)
    try:
        child = subprocess.Popen(command, pass_fds=(read_end,), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    finally:
        os.close(read_end)  # the run's copy is the only reader left: its exit ends the writing
    writer.start()
    try:
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
        writer.join(timeout=30)
        os.close(write_end)
    return subprocess.CompletedProcess(command, child.returncode, out, err), written[0]


@pytest.mark.parametrize("option", list(CAPPED))
def test_an_endless_pipe_given_to_a_grammar_schema_or_template_is_refused_at_its_cap(option: str) -> None:
    result, written = _run_reading_an_endless_pipe("run", "-n", "3", option, "{pipe}", "hi")
    assert written < CAP + 2**20, f"{written:,} bytes read: the read went on past the cap"
    assert result.returncode == 2 and result.stdout == "", result.stderr
    pipe = result.args[result.args.index(option) + 1]
    assert result.stderr == (f"localgen: error: {option} {pipe} is larger than 4 MiB, the most {CAPPED[option]} may "
                             f"be (hint: check the file given to {option})\n")


def test_a_grammar_file_over_the_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    grammar = tmp_path / "big.gbnf"
    comments = ("# " + "c" * 98 + "\n") * (CAP // 100 + 1)
    grammar.write_text('root ::= "a"\n' + comments)  # a grammar llama.cpp would take, of comments but for its root
    result = run_localgen("run", "-n", "1", "--grammar", str(grammar), "hi")
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == (f"localgen: error: --grammar {grammar} is larger than 4 MiB, the most a grammar may be "
                          "(hint: check the file given to --grammar)\n")


@pytest.mark.parametrize(("redirect", "name", "fd"), [
    ("3> >(cat)", "/dev/fd/3", 3),  # the pipe to another command, given to the run to write to
    ("4<>{fifo}", "{fifo}", 4),  # a named pipe the run holds open both ways
])
def test_a_pipe_the_run_itself_holds_open_for_writing_is_refused_rather_than_read_forever(
        tmp_path: Path, redirect: str, name: str, fd: int) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    name, redirect = name.format(fifo=fifo), redirect.format(fifo=fifo)
    command = f"exec {shlex.quote(sys.executable)} -m localgen run -n 1 -f {name} hi {redirect}"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == (f"localgen: error: {name} is a pipe this run holds open for writing (as descriptor {fd}), "
                             "so reading it would never end (hint: pass a file, or the pipe the text comes from, to "
                             "-f/--file)\n")


def test_a_named_pipe_given_to_read_and_as_stdout_is_refused_rather_than_read_forever(tmp_path: Path) -> None:
    """`-f FIFO > FIFO`, a reader on the other end: the run itself writes the pipe it would read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    command = (f"cat fifo > read.txt & {shlex.quote(sys.executable)} -m localgen run -n 1 -f fifo hi > fifo; "
               "status=$?; wait; exit $status")
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and (tmp_path / "read.txt").read_text() == "", result.stderr
    assert result.stderr == ("localgen: error: fifo is stdout, the pipe this run writes the answer to, so reading it "
                             "would never end (hint: pass a file, or the pipe the text comes from, to -f/--file)\n")


@pytest.mark.parametrize("name", ["/dev/stderr", "/proc/self/fd/2"])
def test_stderr_given_to_read_where_stdout_is_the_same_pipe_is_named_as_stderr(name: str) -> None:
    """`-f /dev/stderr hi 2>&1 | cat`: descriptors 1 and 2 are one pipe; the name given is stderr's."""
    command = f"{shlex.quote(sys.executable)} -m localgen run -n 1 -f {name} hi 2>&1 | cat"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.stdout == (f"localgen: error: {name} is stderr, the pipe this run writes its messages to, so "
                             "reading it would never end (hint: pass a file, or the pipe the text comes from, to "
                             "-f/--file)\n"), result.stderr


def test_a_pipe_another_command_writes_is_read_beside_one_the_run_writes_to() -> None:
    command = (f"exec {shlex.quote(sys.executable)} -m localgen run --print-prompt -f <(printf 'A document.') hi "
               "3> >(cat >/dev/null)")
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 0 and "A document." in result.stdout, result.stderr


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


@pytest.mark.parametrize(("name", "elsewhere"), [("/dev/stderr", ""), ("n.txt", " (2> n.txt.new)")])
def test_a_file_the_shell_emptied_for_stderr_is_refused_not_read_empty(
        tmp_path: Path, name: str, elsewhere: str) -> None:
    """`-f /dev/stderr hi 2> n.txt`: the shell empties n.txt before the run, which answered as if it were empty."""
    notes = tmp_path / "n.txt"
    notes.write_text("The meeting is on Friday.\n")
    command = f"{shlex.quote(sys.executable)} -m localgen run -n 1 -f {name} hi 2> n.txt"
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == "", notes.read_text()
    assert notes.read_text() == (f"localgen: error: {name} is also where stderr goes, so the shell emptied it for the "
                                 "messages (2>) before localgen could read it (hint: send the messages to another "
                                 f"file{elsewhere}, then restore the text that was in it from a copy)\n")


@pytest.mark.parametrize(("folder", "typed", "meant"), [
    ("", ".", "./m.gguf"), ("", "./", "./m.gguf"), ("below", "..", "../m.gguf"), ("below", "../", "../m.gguf"),
])
def test_the_current_or_parent_folder_as_a_model_gets_one_answer_with_or_without_its_slash(
        tmp_path: Path, bundled_model: Path, folder: str, typed: str, meant: str) -> None:
    (tmp_path / "m.gguf").symlink_to(bundled_model)
    (tmp_path / "below").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "localgen", "run", "-m", typed, "hi"], env=env,
                            cwd=tmp_path / folder, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and result.stdout == "", result.stderr
    assert result.stderr == f"localgen: error: {typed} is not a file (hint: did you mean {meant}?)\n"


@pytest.mark.parametrize(("option", "target", "shown"), [
    ("-f/--file", "/gone/notes.txt", "/gone/notes.txt"),
    ("--system-file", "old-notes.txt", "old-notes.txt"),  # relative, as the link holds it
    ("--grammar", "chain.txt", "{tmp}/old-notes.txt"),  # a link to a dangling link: the target missing at last
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


@pytest.mark.parametrize(("target", "shown"), [
    ("/gone/m.gguf", "/gone/m.gguf"),
    ("chain.gguf", "{tmp}/old.gguf"),  # a link to a dangling link: the target missing at last
])
def test_a_dangling_link_given_as_a_model_is_said_as_one_given_to_a_file_option(
        tmp_path: Path, target: str, shown: str) -> None:
    (tmp_path / "chain.gguf").symlink_to("old.gguf")
    (tmp_path / "m.gguf").symlink_to(target)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "localgen", "run", "-m", "./m.gguf", "hi"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and result.stdout == "", result.stderr
    assert result.stderr == (f"localgen: error: ./m.gguf is a link to {shown.format(tmp=tmp_path.resolve())}, which is "
                             "not there (hint: point the link at the model's .gguf file, or pass the file's own "
                             "path)\n")
