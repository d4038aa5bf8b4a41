"""README walked as a new user walks it: each test checks a claim the code or README once did not keep."""

from __future__ import annotations

import pytest
from conftest import REPO_ROOT, run_localgen

README = REPO_ROOT / "README.md"

BASH_HINT = ('turn completion on with `eval "$(_LOCALGEN_COMPLETE=bash_source localgen)"` in ~/.bashrc (zsh_source for '
             "zsh, fish_source for fish)")
ZSH_HINT = 'turn completion on with `eval "$(_LOCALGEN_COMPLETE=zsh_source localgen)"` in ~/.zshrc, after compinit'
FISH_HINT = ("turn completion on with `_LOCALGEN_COMPLETE=fish_source localgen | source` in "
             "~/.config/fish/completions/localgen.fish")


@pytest.mark.parametrize(("args", "hint"), [
    (["completion"], BASH_HINT), (["completions", "bash"], BASH_HINT), (["completion", "zsh"], ZSH_HINT),
    (["completion", "--shell", "fish"], FISH_HINT), (["completion", "zsh", "--help"], ZSH_HINT),
    (["models", "completion"], BASH_HINT)])
def test_the_completion_command_of_other_tools_is_told_the_line_that_turns_completion_on(
        args: list[str], hint: str) -> None:
    """gh's, pip's and rustup's `completion` command was hinted with `localgen conversations list` (`--shell fish`:
    `localgen conversations --shell fish`, no command either), or with the help, which says nothing of completion."""
    refused = run_localgen(*args)
    assert refused.returncode == 2
    assert refused.err == f"localgen: error: no such command '{args[-1] if args[0] == 'models' else args[0]}' " \
                          f"(hint: {hint})\n", refused.err


@pytest.mark.parametrize(("args", "hint"), [(["--install-completion", "zsh"], ZSH_HINT),
                                            (["--show-completion", "fish"], FISH_HINT)])
def test_typer_s_completion_options_naming_a_shell_are_told_that_shell_s_line(args: list[str], hint: str) -> None:
    """A zsh or fish user's `--install-completion zsh` was told bash's line, for ~/.bashrc."""
    refused = run_localgen(*args)
    assert refused.returncode == 2
    assert refused.err == f"localgen: error: no such option: {args[0]} (hint: {hint})\n", refused.err


@pytest.mark.parametrize("command", ["run", "chat"])
def test_the_threads_help_of_run_and_chat_says_what_readme_says_of_the_default(command: str) -> None:
    """README: the default is the physical cores, fewer while other processes keep them busy (run and chat decode with
    fewer then, and --stats says so); the help said the physical cores alone. bench keeps them: its help says so."""
    readme = " ".join(README.read_text().split())
    assert "CPU threads (default: the physical cores, fewer while other processes keep them busy;" in readme
    shown = " ".join(run_localgen(command, "--help").out.split())
    assert "CPU threads (default: the physical cores, fewer while other processes keep them busy)." in shown
    bench = " ".join(run_localgen("bench", "--help").out.split())
    assert "CPU threads (default: the physical cores)." in bench
