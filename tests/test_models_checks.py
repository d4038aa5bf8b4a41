"""Model management through real localgen processes and the loopback Hub: what `models show` says of a download in
the Hugging Face cache damaged since its pull, what a run offline says of a model a stopped pull kept a part of,
what `models list` says of a default model its repo lacks, and the
names a misspelt `[defaults] model` is offered, in the words every command offers names in, and the paths of a
listing on a terminal, whole whatever spaces they hold, and a long name refused, cut in its middle."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pexpect
import pytest
from hub_server import HubEnv, HubServer, make_gguf_bytes, run_cli, stopped_pull

from tests.conftest import run_localgen, spawn_localgen, user_registry

REPO = "acme/Tiny-GGUF"


@pytest.mark.parametrize("damage", [b"<!DOCTYPE html><html>Bad gateway</html>\n", b"GGUF" + bytes(8)])
def test_models_show_of_a_damaged_download_names_the_pull_that_checks_it(
        hub: tuple[HubServer, dict[str, str]], damage: bytes) -> None:
    """A download cut short or overwritten since its pull was refused with the hint of a file given by path (`the
    download saved a web page, not the model: localgen downloads ORG/REPO/FILE.gguf itself`, or `the file is damaged,
    incomplete or not a GGUF model`): no next step, where a run names the pull that checks it against the Hub."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    Path(pulled.stdout.strip()).resolve().write_bytes(damage)
    shown = run_cli(env, "models", "show", f"{REPO}:Q8_0")
    assert shown.returncode == 1, shown.stderr
    assert shown.stderr.startswith("localgen: error: tiny-Q8_0.gguf: "), shown.stderr
    assert shown.stderr.endswith(f"(hint: run `localgen pull {REPO}:Q8_0` to check it against the Hub)\n")
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", f"{REPO}:Q8_0", "--json")
    assert offline.returncode == 1 and offline.stdout == "", offline.stderr
    assert offline.stderr.endswith(f"unset it, then run `localgen pull {REPO}:Q8_0` to check it against the Hub)\n")
    ran = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", f"{REPO}:Q8_0", "hi")
    assert ran.returncode == 1 and ran.stderr.split("(hint: ")[1] == offline.stderr.split("(hint: ")[1], ran.stderr
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0, "the pull the hint names mends it"
    assert run_cli(env, "models", "show", f"{REPO}:Q8_0").returncode == 0


def test_models_list_warns_of_a_default_whose_quant_the_repo_lacks(hub: tuple[HubServer, dict[str, str]]) -> None:
    """A `[defaults] model` written by hand with a quant the repo did not have when localgen last listed it was said
    to be `not downloaded yet`, `localgen pull ...` downloading it, where that pull fails, as run and chat do; online,
    the pull that asks the Hub again is hinted, which downloads it once the repo has it."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    models_toml = user_registry(Path(env["LOCALGEN_HOME"]), f'[defaults]\nmodel = "{REPO}:Q5_K_M"\n')
    listed = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == (
        f"localgen: warning: the default model, {REPO}:Q5_K_M ([defaults] model in {models_toml}), is not downloaded, "
        f"and {REPO} had no Q5_K_M file when localgen last listed it, so run and chat without -m fail (hint: quants "
        f"in this repo: Q8_0; choose one with {REPO}:QUANT; `localgen models default REF` sets another)\n")
    assert run_cli(env, "pull", f"{REPO}:Q5_K_M").returncode == 1, "no pull downloads it"
    ran = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "hi")
    assert ran.returncode == 1 and f"{REPO} had no Q5_K_M file when localgen last listed it" in ran.stderr
    online = run_cli(env, "models")
    assert online.returncode == 0 and online.stderr == (
        f"localgen: warning: the default model, {REPO}:Q5_K_M ([defaults] model in {models_toml}), is not downloaded, "
        f"and {REPO} had no Q5_K_M file when localgen last listed it, so run and chat without -m fail unless the repo "
        f"has it now (hint: quants in this repo: Q8_0; choose one with {REPO}:QUANT; to check the repo again, run "
        f"`localgen pull {REPO}:Q5_K_M`; `localgen models default REF` sets another)\n"), online.stderr
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8"), "tiny-Q5_K_M.gguf": make_gguf_bytes("q5")})
    assert run_cli(env, "pull", f"{REPO}:Q5_K_M").returncode == 0, "online, the pull hinted asks the Hub again"
    user_registry(Path(env["LOCALGEN_HOME"]), '[defaults]\nmodel = "acme/Other-GGUF:Q5_K_M"\n')  # never listed
    unknown = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models")
    assert "is not downloaded yet: offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then " \
        "run `localgen pull acme/Other-GGUF:Q5_K_M`, which downloads it now" in unknown.stderr


@pytest.mark.parametrize(("written", "said"), [
    ("smolm2-135m", "'smolm2-135m' is not in the registry (hint: did you mean smollm2-135m? name a model from "
                    "`localgen models list --all`"),
    ("llama3.2-2b", "'llama3.2-2b' is not in the registry (hint: did you mean llama3.2-1b or llama3.2-3b? "),
    ("qwen2.5", "'qwen2.5' comes in 4 sizes: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b (hint: name one "
                "of them (the smallest: qwen2.5-0.5b): `localgen models default qwen2.5-0.5b` sets it, or remove the "
                "line)"),
])
def test_a_misspelt_default_is_offered_the_names_meant(home: Path, written: str, said: str) -> None:
    """A `[defaults] model` naming no entry was refused with `localgen models list --all` alone, where `-m` offers
    the close names (a family's name, its sizes)."""
    models_toml = user_registry(home, f'[defaults]\nmodel = "{written}"\n')
    for args in (("models", "default"), ("run", "hi")):
        result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
        assert result.returncode == 1, result.err
        assert result.err.startswith(f"localgen: error: {models_toml}: [defaults] model {said}"), result.err


def test_every_command_offers_the_names_meant_in_the_same_words(home: Path) -> None:
    """An unknown model offered `qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b?`, where an option and a conversation were
    offered `--stop or --top-p or --top-k?`: one list, three ways."""
    from localgen.conversation import Conversation, Turn
    from localgen.conversation_store import saved_path

    for age, name in enumerate(("talk3", "talk2", "talk1")):  # talk3 the latest
        path = saved_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Conversation(name=name, turns=[Turn("hi", "Hello!")]).to_json())
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    for args, offered in [(("models", "show", "qwen2.5-05b"), "qwen2.5-0.5b, qwen2.5-1.5b or qwen2.5-3b"),
                          (("run", "--top", "1", "hi"), "--stop, --top-p or --top-k"),
                          (("conversations", "show", "talk"), "talk3, talk2 or talk1")]:
        result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
        assert result.returncode in (1, 2) and f"(hint: did you mean {offered}?" in result.err, result.err


def test_a_quant_the_repo_lacks_is_offered_the_quants_meant_in_the_same_words(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A quant of the Hub that a repo lacks was offered `acme/R:Q4_K_M or acme/R:Q4_K_S or acme/R:Q4_K_L?`, where
    every other name is offered as `a, b or c`."""
    server, env = hub
    server.add_repo("acme/R", {f"r-{quant}.gguf": make_gguf_bytes(quant) for quant in ("Q4_K_L", "Q4_K_M", "Q4_K_S")})
    pulled = run_cli(env, "pull", "acme/R:Q4_K")
    assert pulled.returncode == 1, pulled.stderr
    assert "(hint: did you mean acme/R:Q4_K_M, acme/R:Q4_K_S or acme/R:Q4_K_L? " in pulled.stderr, pulled.stderr


def test_a_model_a_stopped_pull_kept_a_part_of_is_said_so_offline(hubenv: HubEnv) -> None:
    """Offline, a run (or `models show`, or bench) of a model a stopped pull kept a part of said only that it is not
    downloaded, where `models` lists the part and how much is kept."""
    stopped_pull(hubenv)
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    kept = "partly downloaded (2.0 MiB of 4.0 MiB)"
    for args in (("run", "-m", "test/Cut-GGUF:Q8_0", "hi"), ("models", "show", "test/Cut-GGUF:Q8_0"),
                 ("bench", "-m", "test/Cut-GGUF:Q8_0")):
        refused = run_cli(offline, *args)
        assert refused.returncode == 1 and refused.stderr.startswith(
            f"localgen: error: model 'test/Cut-GGUF:Q8_0' is not downloaded and localgen is offline; it is {kept} "
            "(hint: offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run `localgen pull "
            "test/Cut-GGUF:Q8_0`)"), refused.stderr
    refused = run_cli(offline, "run", "-m", "test/Cut-GGUF:Q4_0", "hi")
    assert refused.returncode == 1 and "stopped" not in refused.stderr, refused.stderr
    refused = run_cli(offline, "run", "-m", "test/Cut-GGUF", "hi")  # Q8_0: a quant the fixed preference puts after Q4_0
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"localgen: error: model 'test/Cut-GGUF' is not downloaded and localgen is offline; test/Cut-GGUF:Q8_0 is "
        f"{kept} (hint: "), refused.stderr


def test_a_repo_of_one_quant_a_stopped_pull_kept_a_part_of_is_said_so_offline(hubenv: HubEnv) -> None:
    """`run -m ORG/REPO` offline, of a repo whose one quant a stopped pull kept a part of, said only `not downloaded`,
    where ORG/REPO:QUANT says how much is kept."""
    stopped_pull(hubenv, "test/One-GGUF", other_quant=False)
    refused = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "test/One-GGUF", "hi")
    assert refused.returncode == 1 and refused.stderr.startswith(
        "localgen: error: model 'test/One-GGUF' is not downloaded and localgen is offline; test/One-GGUF:Q8_0 is "
        "partly downloaded (2.0 MiB of 4.0 MiB) (hint: "), refused.stderr


@pytest.mark.parametrize("width", [150, 90])  # a table wider than 150 columns, folded before: blocks
def test_a_path_with_spaces_is_listed_whole_on_a_terminal(home: Path, width: int) -> None:
    """One model file whose path held a space folded the PATH column of `models` at 12 columns, breaking every path
    mid-word (`.../tiny-Q` above `4_K_M.gguf`), and a block's `path:` was wrapped with an indent: no path copied
    whole, where the README says a path is never broken."""
    spaced, plain = home / "my models" / "mine Q4_K_M.gguf", home / "models" / ("plain-" + "x" * 40 + "-Q8_0.gguf")
    for path in (spaced, plain):
        path.parent.mkdir()
        path.write_bytes(make_gguf_bytes(path.name))
    user_registry(home, f'[models.mine]\npath = "{spaced}"\n[models.plain]\npath = "{plain}"\n')
    child = spawn_localgen("models", env={**os.environ, "LOCALGEN_OFFLINE": "1"}, timeout=30,
                           dimensions=(50, width))
    child.expect(pexpect.EOF)
    child.close()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before.decode())
    assert child.exitstatus == 0, shown
    lines = shown.splitlines()
    for path in (spaced, plain):
        assert [line for line in lines if str(path) in line], f"{path} on one line of:\n{shown}"


@pytest.mark.parametrize(("args", "default", "said"), [
    (("models", "show", "a" * 5000), None, "unknown model 'aaaaaaaaaaaaaaaaaaa…aaaaaaaaaaaaaaaaaaaa'"),
    (("pull", "a" * 5000 + ":Q4_0"), None, "unknown model 'aaaaaaaaaaaaaaaaaaa…aaaaaaaaaaaaaaaaaaaa'"),
    (("run", "-m", "my " + "b" * 5000, "hi"), None, "'my bbbbbbbbbbbbbbbb…bbbbbbbbbbbbbbbbbbbb' is not a model name"),
    (("run", "-m", "a" * 5000 + ":", "hi"), None,
     "model reference 'aaaaaaaaaaaaaaaaaaa…aaaaaaaaaaaaaaaaaaa:' has an empty quant after ':'"),
    (("run", "-m", "hf.co/" + "a" * 5000, "hi"), None,
     "'hf.co/aaaaaaaaaaaaa…aaaaaaaaaaaaaaaaaaaa' is not a valid Hugging Face repo reference (hint: write ORG/REPO,"),
    (("run", "-m", "org/" + "n" * 5000, "hi"), None, "'org/nnnnnnnnnnnnnnn…nnnnnnnnnnnnnnnnnnnn' is not a valid "
     "Hugging Face repo reference (hint: the Hub's owner and repo names are at most 96 characters each)"),
    (("run", "-m", "org/name:" + "q" * 5000, "hi"), None,
     "model reference 'org/name:qqqqqqqqqq…qqqqqqqqqqqqqqqqqqqq' has a quant of 5,000 characters after ':'"),
    (("run", "hi"), "a" * 5000, "{models_toml}: [defaults] model 'aaaaaaaaaaaaaaaaaaa…aaaaaaaaaaaaaaaaaaaa' is not in "
     "the registry"),
])
def test_a_long_name_refused_is_cut_in_its_middle(home: Path, args: tuple[str, ...], default: str | None,
                                                  said: str) -> None:
    """A name of 5,000 characters was said whole in its one-line error, 5,000 columns of it, where a conversation's
    name is cut in its middle to 40: a model's name, a reference with an empty or a long quant, a Hub repo (hf.co/
    too, an owner's or repo's name longer than the Hub takes, which a run offline said was not downloaded, twice),
    a `[defaults] model`."""
    models_toml = user_registry(home, f'[defaults]\nmodel = "{default}"\n') if default else None
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode in (1, 2), result.err
    assert result.err.startswith(f"localgen: error: {said.format(models_toml=models_toml)}"), result.err
    assert len(result.err) < 400, result.err
