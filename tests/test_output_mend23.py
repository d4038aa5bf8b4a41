"""run's ^C line after a stdin writer that ended before the Ctrl-C, the shell named to completion's hint, a model's one
printed name, the refusal of a prompt that leaves no room for the answer, and the refusal of a full file system's
file. Real processes, the real bundled model, an interactive bash in a real pseudo-terminal."""

from __future__ import annotations

import contextlib
import os
import select
import time
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.test_pipes22 import _shown_after_ctrl_c
from tests.test_run_audit21 import _reads_a_pipe

SERIAL = pytest.mark.serial  # Ctrl-Cs timed against a run's progress and a pipeline's neighbours (conftest: serial)


class _WriterEndedFirst:
    """The readiness of `(echo hi; read -r _ < GATE) | localgen run -f <(sleep 100) x` for its Ctrl-C: once the run
    waits on its -f pipe, the gate is opened, so that stdin's writer exits of itself, and the Ctrl-C comes once the
    run's stdin has hung up, and a second more has passed (a hang-up just before a Ctrl-C counts as a death of it)."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate
        self.opened = False
        self.hung_up_at: float | None = None

    def __call__(self, _shown: bytearray, run: int) -> bool:
        """Whether stdin's writer, let go once the run waited on a pipe, hung up a second ago."""
        if not self.opened:
            if _reads_a_pipe(run):
                with open(self.gate, "w") as gate:
                    gate.write("go\n")
                self.opened = True
            return False
        if self.hung_up_at is None and self._hung_up(run):
            self.hung_up_at = time.monotonic()
        return self.hung_up_at is not None and time.monotonic() > self.hung_up_at + 1

    @staticmethod
    def _hung_up(run: int) -> bool:
        """Whether every writer of the run's stdin, a pipe, has closed it."""
        with contextlib.suppress(OSError):
            stdin = os.open(f"/proc/{run}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
            try:
                hung_up = select.poll()
                hung_up.register(stdin, 0)
                return bool(hung_up.poll(0))
            finally:
                os.close(stdin)
        return False


@SERIAL
def test_ctrl_c_after_stdin_s_writer_ended_of_itself_has_its_line_ended(tmp_path: Path) -> None:
    """`(echo hi; ...) | localgen run -f <(sleep 100) x`, its stdin's writer exiting of itself while the run waits on
    the -f pipe, and Ctrl-C: nothing in bash's job died of it, so bash ends no line and the run ends the ^C's line,
    where the run took the writer's earlier hang-up for a death at the Ctrl-C and left the prompt on the ^C's line."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    after = _shown_after_ctrl_c(f"(echo hi; read -r _ < {gate}) | $L run -q -f <(sleep 100) Summarize.", tmp_path,
                                _WriterEndedFirst(gate))
    assert after == b"\r\n", after


BASH_HINT = ('turn completion on with `eval "$(_LOCALGEN_COMPLETE=bash_source localgen)"` in ~/.bashrc (zsh_source for '
             "zsh, fish_source for fish)")
ZSH_HINT = 'turn completion on with `eval "$(_LOCALGEN_COMPLETE=zsh_source localgen)"` in ~/.zshrc, after compinit'
FISH_HINT = ("turn completion on with `_LOCALGEN_COMPLETE=fish_source localgen | source` in "
             "~/.config/fish/completions/localgen.fish")


@pytest.mark.parametrize(("args", "shell", "hint"), [
    (["completion", "--shell=zsh"], "/bin/bash", ZSH_HINT), (["completion", "ZSH"], "/bin/bash", ZSH_HINT),
    (["completion", "-s", "Fish", "--help"], "/bin/bash", FISH_HINT),
    (["--install-completion=fish"], "/bin/bash", FISH_HINT), (["--show-completion=zsh"], "/bin/bash", ZSH_HINT),
    (["--install-completion"], "/usr/bin/zsh", ZSH_HINT), (["completion"], "/usr/local/bin/fish", FISH_HINT),
    (["completion", "pwsh"], "/bin/bash", f"localgen completes in bash, zsh and fish, not pwsh: {BASH_HINT}")])
def test_completion_s_hint_names_the_shell_as_click_reads_it_or_shell_s(args: list[str], shell: str,
                                                                         hint: str) -> None:
    """The shell named as click takes it (`--shell=zsh`, any case, `--install-completion=fish`), else $SHELL's, is
    given its own line, where only a word exactly `zsh` or `fish` was, bash's line going to every other; a shell
    localgen does not complete in is told which it does."""
    refused = run_localgen(*args, env={"SHELL": shell})
    assert refused.returncode == 2
    assert refused.err.endswith(f" (hint: {hint})\n"), refused.err
