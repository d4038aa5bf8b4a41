"""`localgen run` in a shell's pipelines under Ctrl-C: the ^C's line ended once, by the shell where a neighbour in
the pipeline died of it, by the run where none did; a Ctrl-C its reader died of first still exits 130. Real
processes, the real bundled model, an interactive bash in a real pseudo-terminal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_run_audit21 import (
    _ctrl_c_at_bash,
    _reads_a_pipe,
    ctrl_c_into_cat,
)

SERIAL = pytest.mark.serial  # Ctrl-Cs timed against a run's progress and a pipeline's neighbours (conftest: serial)
LONG = '$L run -q --temperature 0 -n 2000 "$Q"'  # a run streaming a long answer


def _shown_after_ctrl_c(pipeline: str, home: Path, ready: Callable[[bytearray, int], bool]) -> bytes:
    """Run pipeline ($L: localgen, $Q: a long answer's prompt) at an interactive bash in a pseudo-terminal, in home,
    and Ctrl-C once ready(what the terminal showed, the run's pid); what the terminal showed from the ^C to the next
    prompt, bracketed paste's switches aside."""
    return re.sub(rb"\x1b\[\?2004[hl]", b"", _ctrl_c_at_bash(pipeline, home, ready, cwd=home))


def _waiting_for_stdin(_shown: bytearray, run: int) -> bool:
    """Whether the run waits for its stdin, a pipe."""
    return _reads_a_pipe(run)


def _answering(shown: bytearray, _run: int) -> bool:
    """Whether 150 bytes of the answer came after the command line's echo (its line end, the first the terminal
    showed)."""
    echoed = shown.find(b"\n")
    return echoed >= 0 and len(shown) - echoed > 150


@SERIAL
@pytest.mark.parametrize("quiet", ["-q ", ""])
def test_ctrl_c_at_a_run_waiting_for_sleep_ends_the_line_once(quiet: str, tmp_path: Path) -> None:
    """`sleep 100 | localgen run x` at an interactive bash and Ctrl-C while the run waits for stdin: sleep dies of
    it, so bash ends the ^C's line, and the run adds no line end, as for `sleep 100` alone, where a blank line came
    before the prompt."""
    after = _shown_after_ctrl_c(f"sleep 100 | $L run {quiet}Summarize.", tmp_path, _waiting_for_stdin)
    assert after == b"\r\n", after


@SERIAL
def test_ctrl_c_at_a_run_waiting_for_a_process_substitution_has_its_line_ended(tmp_path: Path) -> None:
    """`localgen run x < <(sleep 100)` and Ctrl-C while the run waits for stdin: sleep dies of it too, but it is no
    part of bash's job, so bash ends no line and the run ends the ^C's line itself."""
    after = _shown_after_ctrl_c("$L run -q Summarize. < <(sleep 100)", tmp_path, _waiting_for_stdin)
    assert after == b"\r\n", after


@SERIAL
def test_ctrl_c_at_a_run_writing_to_a_process_substitution_has_its_line_ended(tmp_path: Path) -> None:
    """`localgen run x > >(cat)` and Ctrl-C as the answer streams: cat dies of it too, but it is no part of bash's
    job, so bash ends no line and the run ends the ^C's line itself, where it left it to bash, the prompt coming
    right after the ^C."""
    after = _shown_after_ctrl_c(f"{LONG} > >(cat)", tmp_path, _answering)
    assert after == b"\r\n", after


@SERIAL
def test_ctrl_c_at_a_run_whose_stdin_has_ended_still_has_its_line_ended(tmp_path: Path) -> None:
    """`printf ... | localgen run x` and Ctrl-C as the answer streams: printf exited long before, so bash ends no
    line and the run ends the ^C's line itself."""
    after = _shown_after_ctrl_c(f"printf 'Rome.' | {LONG}", tmp_path, _answering)
    assert after == b"\r\n", after


@SERIAL
def test_ctrl_c_at_a_run_whose_reader_survives_it_ends_the_line_once(tmp_path: Path) -> None:
    """`localgen run x | (trap '' INT; cat)` and Ctrl-C as the answer streams: the answer's newline, which cat shows,
    ends the ^C's line, and the run adds none, where a blank line came before the prompt (cat may show a word or
    two after the ^C)."""
    after = _shown_after_ctrl_c(f"{LONG} | (trap '' INT; cat)", tmp_path, _answering)
    assert after.endswith(b"\r\n") and after.count(b"\n") == 1, after


@SERIAL
def test_ctrl_c_at_a_run_whose_surviving_reader_writes_a_file_has_its_line_ended(tmp_path: Path) -> None:
    """`localgen run x | (trap '' INT; cat > answer.txt)`: what cat reads goes to the file, so the run ends the
    ^C's line on the terminal itself."""
    answer = tmp_path / "answer.txt"
    after = _shown_after_ctrl_c(f"{LONG} | (trap '' INT; cat > answer.txt)", tmp_path,
                                lambda _shown, _run: answer.exists() and answer.stat().st_size > 150)
    assert after == b"\r\n", after


@SERIAL
def test_a_ctrl_c_reaching_the_run_after_its_reader_died_of_it_exits_130(tmp_path: Path) -> None:
    """`localgen run ... | cat` with cat sent SIGINT 30 ms before the run (kill -INT by hand, one after the other):
    the run, seeing its reader gone, waits a moment for the Ctrl-C and exits 130, where it mostly exited 141 once
    its answer had stopped before the Ctrl-C came."""
    ended = [ctrl_c_into_cat(tmp_path, gap=0.03) for _ in range(4)]
    assert ended == [(130, "")] * 4, ended


@SERIAL
def test_ctrl_c_at_a_script_s_pipeline_waiting_for_sleep_has_its_line_ended_by_the_run(tmp_path: Path) -> None:
    """`bash -c 'sleep 100 | localgen run x'` (a script) and Ctrl-C while the run waits for stdin: sleep dies of it,
    but a script's bash ends no line, and exits as the run does (130, of no signal), so the interactive bash above
    ends none either: the run ends the ^C's line, where the prompt came right after the ^C."""
    after = _shown_after_ctrl_c("bash -c 'sleep 100 | $L run -q Summarize.'", tmp_path, _waiting_for_stdin)
    assert after == b"\r\n", after


@SERIAL
def test_ctrl_c_at_a_run_with_a_finished_process_substitution_and_a_reader_ends_the_line_once(tmp_path: Path) -> None:
    """`localgen run -f <(echo notes) x | cat` and Ctrl-C mid-answer: cat dies of it, so bash ends the line; the
    `echo` the substitution ran, a child of the run long exited, is no neighbour that died of the Ctrl-C, where the run
    took it for one and ended the line too (a blank line before the prompt)."""
    after = _shown_after_ctrl_c(f"{LONG.replace(' run ', ' run -f <(echo notes) ')} | cat", tmp_path, _answering)
    assert after == b"\r\n", after
