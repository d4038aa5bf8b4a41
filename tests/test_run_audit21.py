"""`localgen run` as a demanding user drives it from a shell: Ctrl-C on a pipeline, option slips, stdin from
/dev/null; with real processes, real pipes and the real bundled model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, popen_localgen, run_localgen

LONG_ANSWER = ("--temperature", "0", "-n", "2000", "Write a long essay about the history of Rome.")


def test_ctrl_c_on_a_pipeline_exits_130_where_the_reader_died_of_it_too(tmp_path: Path) -> None:
    """`localgen run ... | cat` and Ctrl-C, which the terminal sends to both: cat dies of it, so the run's last
    writes find no reader, yet the run was interrupted (exit 130, as without the pipe), where it exited 141 as if
    the reader had left on its own."""
    read_end, write_end = os.pipe()
    reader = subprocess.Popen(["cat"], stdin=read_end, stdout=subprocess.PIPE)
    os.close(read_end)
    try:
        proc = popen_localgen([sys.executable, "-m", "localgen", "run", *LONG_ANSWER], stdin=subprocess.DEVNULL,
                              stdout=write_end, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                              env={**os.environ, "LOCALGEN_HOME": str(tmp_path)})
    finally:
        os.close(write_end)
    assert reader.stdout is not None and proc.stderr is not None
    try:
        assert reader.stdout.read(40), "no answer came"
        reader.send_signal(signal.SIGINT)  # the terminal's Ctrl-C reaches the whole pipeline at once
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        reader.kill()
        reader.wait()
    err = proc.stderr.read().decode()
    assert (code, err) == (130, ""), err


def test_threads_spelt_out_with_a_word_is_hinted_a_number_not_llm_s_template_option(tmp_path: Path) -> None:
    """`localgen run --threads x hi` (or --threads=x): the hint says --threads takes a whole number, with the command
    that gives one, where it said -t is --threads and spoke of llm's templates, which the -t typed alone may mean."""
    env = {"LOCALGEN_HOME": str(tmp_path)}
    for typed in (["--threads", "x"], ["--threads=x"]):
        result = run_localgen("run", *typed, "hi", env=env)
        assert result.returncode == 2, result.err
        assert "templates" not in result.err and "--threads takes a whole number: `localgen run --threads " \
            in result.err, result.err
    result = run_localgen("run", "-t", "x", "hi", env=env)  # llm's -t NAME still told what -t is here
    assert "-t is --threads N; llm's templates" in result.err, result.err
