"""run's output where it cannot go (a file on a full file system, or at the size limit on files: `ulimit -f`), and the
^C's line on a terminal a Ctrl-C leaves."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_localgen
from tests.mount_namespace import run_mounted
from tests.test_pipes22 import _answering, _shown_after_ctrl_c, _waiting_for_stdin

LONG = ["run", "--json", "-n", "300", "--temperature", "0", "Write a long story about a cat."]


def _env(home: Path) -> dict[str, str]:
    """A run's environment: its data in home, offline, keeping no last run (which a size limit would refuse too)."""
    return {"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT),
            "LOCALGEN_NO_LAST_RUN": "1"}


def _full_tmpfs(folder: Path, *, kept: str = "") -> str:
    """The setup that mounts a small tmpfs on folder and fills it (after writing the file kept, of 100 bytes)."""
    keep = f" && head -c 100 /dev/zero > {folder}/{kept}" if kept else ""
    fill = f"(head -c 1M /dev/zero > {folder}/filler 2>/dev/null || true)"
    return f"mount -t tmpfs -o size=64k none {folder}{keep} && {fill}"


def test_a_run_into_a_file_on_a_full_file_system_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    """A --json answer, written whole, failed only once generated (300 tokens: 4.9 s, where the refusal takes 0.7)."""
    full = tmp_path / "full"
    full.mkdir()
    result = run_mounted(_full_tmpfs(full), LONG, _env(tmp_path / "home"), stdout_to=full / "out.json")
    assert result.returncode == 1
    assert result.stderr == (f"localgen: error: cannot write to stdout: No space left on device: the file system of "
                             f"{full}/out.json has no free space (hint: free some space or send the output "
                             "elsewhere)\n"), result.stderr


@pytest.mark.parametrize("command", [["models"], ["run", "--help"], ["--version"]], ids=["models", "help", "version"])
def test_every_command_says_why_dev_full_takes_no_output_as_run_does(tmp_path: Path, command: list[str]) -> None:
    """`models > /dev/full` told the user to free some space, where run said it is /dev/full."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-m", "localgen", *command], stdout=full, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, **_env(tmp_path / "home")}, cwd=REPO_ROOT, timeout=60,
                                stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stderr) == (1, "localgen: error: cannot write to stdout: No space left on "
                                                     "device: it is /dev/full, where every write fails (hint: send "
                                                     "the output elsewhere)\n"), result.stderr


def test_output_left_to_the_last_flush_says_it_is_dev_full(tmp_path: Path) -> None:
    """Output that fails only as it is flushed at the exit said "free some space" for /dev/full: its error was told
    once stdout was pointed at /dev/null."""
    script = ("import sys\nfrom localgen.cli_exit import flush_stdout\nsys.stdout = open(1, 'w', closefd=False)\n"
              "sys.stdout.write('left in the buffer')\nsys.exit(flush_stdout(0))")  # buffered, whatever -u says
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-c", script], stdout=full, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **_env(tmp_path / "home")}, cwd=REPO_ROOT, timeout=60,
                                stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stderr) == (1, "localgen: error: cannot write to stdout: No space left on "
                                                     "device: it is /dev/full, where every write fails (hint: send "
                                                     "the output elsewhere)\n"), result.stderr


def test_output_that_fills_a_file_system_names_it_as_run_s_refusal_does(tmp_path: Path) -> None:
    """`models` into a file on a full file system said only "No space left on device", where run names the file."""
    full = tmp_path / "full"
    full.mkdir()
    result = run_mounted(_full_tmpfs(full), ["models"], _env(tmp_path / "home"), stdout_to=full / "out.txt")
    assert (result.returncode, result.stderr) == (1, f"localgen: error: cannot write to stdout: No space left on "
                                                     f"device: the file system of {full}/out.txt has no free space "
                                                     "(hint: free some space or send the output elsewhere)\n"), \
        result.stderr


def test_a_file_whose_last_block_has_room_on_a_full_file_system_is_written(tmp_path: Path) -> None:
    """The room a file's last block leaves takes a short answer: a full file system alone is no refusal."""
    full = tmp_path / "full"
    full.mkdir()
    command = ["run", "--json", "-n", "3", "--temperature", "0", "Hi"]
    result = run_mounted(_full_tmpfs(full, kept="log"), command, _env(tmp_path / "home"), stdout_to=full / "log",
                         append=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def _run_limited(home: Path, out: Path, limit: int, command: list[str],
                 last_run: bool = False) -> subprocess.CompletedProcess[str]:
    """Run localgen appending to out, with `ulimit -f` set to limit bytes (last_run: keeping the last run)."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = {**os.environ, **_env(home)}
    if last_run:
        del env["LOCALGEN_NO_LAST_RUN"]
    with out.open("ab") as stdout:
        return subprocess.run([sys.executable, "-m", "localgen", *command], stdout=stdout, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, env=env, text=True, timeout=120, cwd=REPO_ROOT,
                              preexec_fn=limited)


def test_a_run_into_a_file_at_the_size_limit_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"x" * 1024)
    result = _run_limited(tmp_path / "home", out, 1024, LONG)
    assert result.returncode == 1
    assert result.stderr == (f"localgen: error: cannot write to stdout: File too large: {out} has reached the size "
                             "limit on files this process writes (1,024 bytes) (hint: raise it with `ulimit -f`, or "
                             "send the output elsewhere)\n"), result.stderr
    assert out.read_bytes() == b"x" * 1024


def test_a_json_answer_that_outgrows_the_room_of_its_file_stops_as_it_does(tmp_path: Path) -> None:
    """--json's record is written whole once the answer ends: a file that could not take it (a disk filling, `ulimit
    -f`) was found so only once all of the answer had been generated; the answer stops as its text outgrows the
    room (the token that passes it, however fast tokens come), and the file is left as it was."""
    out = tmp_path / "out.json"
    result = _run_limited(tmp_path / "home", out, 512, LONG)
    said = re.fullmatch(r"localgen: error: cannot write to stdout: File too large: \S+ has no room for the answer "
                        r"\(([\d,]+) bytes so far\) under the size limit on files this process writes \(512 bytes\) "
                        r"\(hint: raise it with `ulimit -f`, or send the output elsewhere\)\n", result.stderr)
    assert result.returncode == 1 and said, result.stderr
    so_far = int(said[1].replace(",", ""))
    assert 512 < so_far <= 512 + 32 and out.read_bytes() == b"", so_far  # as soon as the text passes the room


def test_a_file_below_the_size_limit_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    result = _run_limited(tmp_path / "home", out, 1 << 20, ["run", "-n", "3", "--temperature", "0", "Hi"])
    assert result.returncode == 0, result.stderr
    assert out.read_text().endswith("\n")



def test_a_file_of_localgen_s_own_past_the_size_limit_is_said_to_be_so(tmp_path: Path) -> None:
    """The last run, too large for `ulimit -f`, was said to need free disk space and permissions."""
    home = tmp_path / "home"
    result = _run_limited(home, tmp_path / "out.txt", 1024, ["run", "-n", "3", "--temperature", "0", "word " * 400],
                          last_run=True)
    assert result.returncode == 0, result.stderr
    assert (f"localgen: warning: this run is not kept for `localgen run --continue`: could not write "
            f"{home}/data/last-run.json: File too large (the file would pass a size limit (`ulimit -f`, or the file "
            "system's: 4 GiB on FAT32): raise it; LOCALGEN_NO_LAST_RUN=1 keeps none, and warns no more)\n"
            ) in result.stderr



def test_a_conversation_run_beyond_the_model_is_refused_as_a_plain_run_is(tmp_path: Path) -> None:
    """run --conversation with a file no context of the model holds: run's refusal and hint, where it was told that
    the message needed N tokens but only M were free, and to drop its files with the chat's /file none."""
    big = tmp_path / "big.txt"
    big.write_text("word " * 12000)
    result = run_localgen("run", "--conversation", "notes", "-f", str(big), "x",
                          env={"LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1
    assert result.err == (f"localgen: error: the prompt is too long for the model's maximum of 8,192 tokens: it takes "
                          f"12,033 tokens with -f {big} (hint: shorten the input, or split it and ask about each "
                          "part)\n"), result.err


SERIAL = pytest.mark.serial  # Ctrl-Cs timed against a run's progress and a pipeline's neighbours (conftest: serial)
STREAMING = '$L run -q --temperature 0 -n 2000 -f <(echo notes; exec >&-; sleep 100) "$Q"'  # a child alive


@SERIAL
@pytest.mark.parametrize(("pipeline", "ready"), [
    ("$L run -q -f <(sleep 100) Summarize. | cat", _waiting_for_stdin),
    ("$L run -f <(sleep 100) Summarize. | cat", _waiting_for_stdin),
    ("sleep 100 | $L run -q -f <(sleep 100) Summarize.", _waiting_for_stdin),
    (f"{STREAMING} | cat", _answering),
])
def test_ctrl_c_with_a_process_substitution_alive_and_a_neighbour_dying_of_it_ends_the_line_once(
        pipeline: str, ready: Callable[[bytearray, int], bool], tmp_path: Path) -> None:
    """A neighbour in bash's pipeline (cat, sleep) dies of the Ctrl-C, so bash ends the ^C's line; the process
    substitution's child of the run, alive or dead of it too, is no reason for the run to end it again, where a blank
    line came before the prompt."""
    assert _shown_after_ctrl_c(pipeline, tmp_path, ready) == b"\r\n"


@SERIAL
def test_ctrl_c_writing_to_a_process_substitution_beside_another_has_its_line_ended(tmp_path: Path) -> None:
    """`> >(cat)`: cat, dead of the Ctrl-C, is the run's child, no part of bash's job, so the run ends the line."""
    assert _shown_after_ctrl_c(f"{STREAMING} > >(cat)", tmp_path, _answering) == b"\r\n"


def test_a_file_seeked_far_past_its_end_is_written(tmp_path: Path) -> None:
    """stdout placed a terabyte past the end of a short file (a hole the file system allocates no blocks for) was
    said to have no free space: only the room from where it writes on counts, never less than none."""
    out = tmp_path / "sparse.txt"
    out.write_bytes(b"x" * 100)
    with out.open("r+b") as stdout:
        stdout.seek(1 << 40)
        result = subprocess.run([sys.executable, "-m", "localgen", "run", "-n", "3", "--temperature", "0", "Hi"],
                                stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                env={**os.environ, **_env(tmp_path / "home")}, timeout=120, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    with out.open("rb") as written:
        assert written.read(100) == b"x" * 100 and written.seek(1 << 40) and written.read().endswith(b"\n")
