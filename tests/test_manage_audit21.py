"""The management commands as a user coming from Ollama, llama.cpp and llm meets them: fit's name for a registry
model and its quant hints, bench given its model as an argument, the prompt cache's listing on an 80-column terminal,
cache's help, models and the default model (not downloaded, a bundled file its entry pins otherwise, a Hub model typed
in another case)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pexpect
import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli

from tests.conftest import bundled_model_file, run_localgen, spawn_localgen, user_registry


def test_fit_names_a_registry_model_as_models_list_does(home: Path) -> None:
    """fit names a registry model by its entry's name, the quant as the Hub spells it, in its header and --json, as
    models list, run and bench name it, however it was typed (another case, a family, :latest)."""
    for typed, named in (("SmolLM2-135M:q4_1", "smollm2-135m:Q4_1"), ("smollm2:latest", "smollm2-135m"),
                         ("SMOLLM2", "smollm2-135m")):
        report = run_localgen("fit", typed, "--json", "--offline")
        assert report.returncode == 0, report.err
        assert json.loads(report.out)["model"] == named, report.out
    table = run_localgen("fit", "-m", "SmolLM2", "--offline")
    assert table.returncode == 0, table.err
    assert table.err.startswith("smollm2-135m: RAM "), table.err


def test_a_quant_hint_after_an_ollama_tag_names_the_entry_it_means(hub: tuple[HubServer, dict[str, str]]) -> None:
    """A run of an Ollama tag (mix:1b, the entry mix-1b) whose quant does not fit here names the quant that fits as
    mix-1b:Q4_K_M, a reference -m takes, where it gave mix:Q4_K_M, which names no model; fit names it mix-1b."""
    server, env = hub
    server.add_repo("acme/Mix-GGUF", {"mix-Q8_0.gguf": bundled_model_file(),
                                      "mix-Q4_K_M.gguf": make_gguf_bytes("mix", 2**19)})
    registry = Path(env["LOCALGEN_HOME"]) / "config" / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text('[models.mix-1b]\nrepo = "acme/Mix-GGUF"\nquant = "Q8_0"\n')
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "150MiB"}
    refused = run_cli(small, "run", "-m", "mix:1b", "hi")
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.rstrip().endswith("; mix-1b:Q4_K_M fits here)"), refused.stderr
    report = run_cli(small, "fit", "mix:1b", "--json")
    assert report.returncode == 0 and json.loads(report.stdout)["model"] == "mix-1b", report.stderr


def test_bench_given_its_model_as_an_argument_names_the_option_that_takes_it(home: Path) -> None:
    """`bench MODEL`, as fit, pull and models show take a model, is refused with the command that gives it to -m,
    the options kept; a second word, -m given too, or a word naming no model (`bench 512`, a count where -p was
    meant) gets the help's hint, where the word was given to -m all the same."""
    alone = run_localgen("bench", "smollm2-135m")
    assert alone.returncode == 2
    assert "(hint: the model goes after -m: `localgen bench -m smollm2-135m`)" in alone.err, alone.err
    with_options = run_localgen("bench", "-p", "64", "./my model.gguf", "--json")
    assert with_options.returncode == 2
    assert "`localgen bench -m './my model.gguf' -p 64 --json`" in with_options.err, with_options.err
    for args in (("smollm2", "extra"), ("-m", "smollm2", "other"), ("512",), ("-n", "64", "hello")):
        other = run_localgen("bench", *args)
        assert other.returncode == 2 and "(hint: see `localgen bench --help`)" in other.err, other.err


def test_cache_listing_on_a_narrow_terminal_heads_each_entry_by_its_file(home: Path, tmp_path: Path) -> None:
    """`localgen cache` on an 80-column terminal, too narrow for its table, shows each entry as a block headed by its
    file (what tells one entry from another), its tokens a field, not a bare token count over the rest."""
    document = tmp_path / "doc.txt"
    document.write_text(" ".join(["The quick brown fox jumps over the lazy dog."] * 30))  # past 256 new tokens
    saved = run_localgen("run", "-f", str(document), "-n", "1", "--temperature", "0", "Summarize.")
    assert saved.returncode == 0, saved.err
    (entry,) = (home / "cache" / "prompts").glob("*.lgpc")
    child = spawn_localgen("cache", env={**os.environ}, encoding="utf-8", timeout=60, dimensions=(24, 80))
    child.expect(pexpect.EOF)
    child.close()
    shown = re.sub(r"\x1b\[[0-9;]*m", "", child.before).replace("\r\n", "\n")
    assert child.exitstatus == 0, shown
    block = shown[shown.index(entry.name):].splitlines()
    assert block[0] == entry.name and re.fullmatch(r"  tokens: +\d[\d,]*", block[1]), shown
    assert not any(line.lstrip().startswith("file:") for line in block), shown


def test_cache_help_lists_clear_in_words_not_cut_short(home: Path) -> None:
    """`localgen cache --help` says what clear does in a sentence of its own, not one cut off with '...'."""
    shown = run_localgen("cache", "--help")
    assert shown.returncode == 0
    (line,) = [line for line in shown.out.splitlines() if line.strip().startswith("clear ")]
    assert not line.endswith("..."), shown.out
    assert "partial writes" in line, shown.out


@pytest.mark.parametrize(("group", "option"), [("models", "--json"), ("models", "--all"), ("cache", "--json"),
                                             ("conversations", "--json"), ("conversations", "-n")])
def test_a_group_s_help_lists_no_option_it_refuses_before_a_subcommand(home: Path, group: str, option: str) -> None:
    """`localgen models --help` listed --json and --all as the group's options, which `models --json list` refuses
    (they would be ignored): the group's help lists none, and says that alone it takes list's, which list's shows."""
    shown = run_localgen(group, "--help")
    assert shown.returncode == 0, shown.err
    options = shown.out[shown.out.index("Options:"):shown.out.index("Commands:")]
    assert options.split() == ["Options:", "-h,", "--help", "Show", "this", "message", "and", "exit."], shown.out
    assert f"localgen {group} list --help" in " ".join(shown.out.split()), shown.out
    value = ["1"] if option == "-n" else []
    alone, listed = run_localgen(group, option, *value), run_localgen(group, "list", option, *value)
    assert (alone.returncode, alone.out) == (0, listed.out), alone.err  # hidden, the group alone still takes it
    before = run_localgen(group, option, *value, "list")
    assert before.returncode == 2 and "would be ignored" in before.err, before.err


def test_models_says_when_the_default_model_is_not_downloaded(home: Path) -> None:
    """`localgen models`, where the default model is not downloaded and so no row is starred, says so with the pull
    that downloads it, in the words `models default` said it in when it was set; once a row is the default's, it
    says nothing."""
    note = ("localgen: the default model, qwen2.5-1.5b, is not downloaded yet: offline mode comes from "
            "LOCALGEN_OFFLINE in the environment: unset it, then run `localgen pull qwen2.5-1.5b`, which downloads it "
            "now\n")
    set_default = run_localgen("models", "default", "qwen2.5-1.5b", env={"LOCALGEN_OFFLINE": "1"})
    assert set_default.returncode == 0 and set_default.err.endswith(f")\n{note}"), set_default.err
    listed = run_localgen("models", env={"LOCALGEN_OFFLINE": "1"})
    assert listed.returncode == 0, listed.err
    assert all(line.endswith("\tno") for line in listed.out.splitlines()[1:]), listed.out
    assert listed.err == note, listed.err
    assert run_localgen("models", "default", "smollm2-135m").returncode == 0
    starred = run_localgen("models", env={"LOCALGEN_OFFLINE": "1"})
    assert starred.returncode == 0 and starred.err == "", starred.err
    assert starred.out.splitlines()[1].endswith("\tyes"), starred.out


def test_a_bundled_model_its_own_entry_pins_otherwise_is_not_listed_as_there(home: Path) -> None:
    """The bundled smollm2-135m, where your models.toml's [models.smollm2-135m] pins another sha256 (so a run passes
    it over, and downloads the pinned file), is not listed as a bundled copy starred as the default, nor as
    downloaded by --all, where models listed it as the file run and chat use."""
    user_registry(home, f'[models.smollm2-135m]\nsha256 = "{"0" * 64}"\n')
    listed = run_localgen("models", "--json", env={"LOCALGEN_OFFLINE": "1"})
    assert listed.returncode == 0, listed.err
    assert json.loads(listed.out) == [], listed.out
    (entry,) = [row for row in json.loads(run_localgen("models", "list", "--all", "--json").out)
                if row["name"] == "smollm2-135m"]
    assert entry["downloaded"] is False and entry["source"] is None, entry
    ran = run_localgen("run", "-n", "1", "hi", env={"LOCALGEN_OFFLINE": "1"})
    assert ran.returncode == 1 and "not using it" in ran.err and "is not downloaded" in ran.err, ran.err


def test_models_default_keeps_a_hub_model_as_models_list_names_it(hub: tuple[HubServer, dict[str, str]]) -> None:
    """`models default` of a downloaded Hub model typed in another case, or as its address, keeps and names it as the
    Hub spells it, the row models list stars (acme/Tiny-GGUF:Q8_0), where it kept the text as typed."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    assert run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0").returncode == 0
    for typed, kept in (("acme/tiny-gguf:q8_0", "acme/Tiny-GGUF:Q8_0"),
                        ("https://huggingface.co/ACME/tiny-gguf", "acme/Tiny-GGUF")):
        made = run_cli(env, "models", "default", typed)
        assert made.returncode == 0, made.stderr
        assert made.stderr.startswith(f"localgen: the default model is now {kept} ([defaults] model in "), made.stderr
        assert run_cli(env, "models", "default").stdout == f"{kept}\n"
        listed = run_cli(env, "models").stdout.splitlines()
        assert [row.split("\t")[0] for row in listed if row.endswith("\tyes")] == ["acme/Tiny-GGUF:Q8_0"], listed


def _hand_set_default(env: dict[str, str], setting: str) -> Path:
    """A models.toml whose [defaults] model is setting, written by hand; the file."""
    registry = Path(env["LOCALGEN_HOME"]) / "config" / "models.toml"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(f'[defaults]\nmodel = "{setting}"\n')
    return registry


def _starred(env: dict[str, str]) -> tuple[list[str], str]:
    """The names of the rows `localgen models` stars on a pipe, and what it says on stderr."""
    listed = run_cli(env, "models")
    assert listed.returncode == 0, listed.stderr
    return [row.split("\t")[0] for row in listed.stdout.splitlines() if row.endswith("\tyes")], listed.stderr


def test_models_says_an_entry_s_default_quant_is_not_downloaded_beside_another_quant(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """`localgen models`, where the default is an entry (tiny, its quant Q4_0) of which only another quant is
    downloaded (tiny:Q8_0), stars no row and says the default is not downloaded, as models default said, where the
    row tiny:Q8_0 was taken for the default's and nothing was said; a part of it a stopped pull kept is said alone,
    with the pull that resumes it."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q4_0.gguf": make_gguf_bytes("q4", 8 * 2**20),
                                       "tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    registry = Path(env["LOCALGEN_HOME"]) / "config" / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text('[models.tiny]\nrepo = "acme/Tiny-GGUF"\nquant = "Q4_0"\n')
    assert run_cli(env, "pull", "tiny:Q8_0").returncode == 0
    made = run_cli(env, "models", "default", "tiny")
    note = ("localgen: the default model, tiny, is not downloaded yet: `localgen pull tiny` downloads it now, else "
            "the first run or chat does\n")
    assert made.returncode == 0 and made.stderr.endswith(note), made.stderr
    assert _starred(env) == ([], note)
    server.abort_after[("acme/Tiny-GGUF", "tiny-Q4_0.gguf")] = 6 * 2**20  # past the header read
    server.down_after_abort = True  # the pull stops, its part kept
    stopped = run_cli(env, "pull", "tiny")
    assert stopped.returncode == 1, stopped.stderr
    starred, said = _starred(env)
    assert not starred and said.count("\n") == 1, said
    assert said.startswith("localgen: tiny is partly downloaded ("), said
    server.abort_after.clear()
    server.down_after_abort = server.down = False
    assert run_cli(env, "pull", "tiny").returncode == 0
    assert _starred(env) == (["tiny"], "")


def test_a_default_set_before_its_pull_is_named_as_the_hub_spells_it_after(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A Hub model made the default before it is downloaded (acme/other-gguf:q8_0) is named, once pulled, as the Hub
    spells it (acme/Other-GGUF:Q8_0), the row models stars, where models default printed it as typed."""
    server, env = hub
    server.add_repo("acme/Other-GGUF", {"other-Q8_0.gguf": make_gguf_bytes("q8")})
    made = run_cli(env, "models", "default", "acme/other-gguf:q8_0")
    assert made.returncode == 0 and "acme/other-gguf:Q8_0 ([defaults] model in " in made.stderr, made.stderr
    assert run_cli(env, "pull", "acme/other-gguf:q8_0").returncode == 0
    assert run_cli(env, "models", "default").stdout == "acme/Other-GGUF:Q8_0\n"
    assert _starred(env) == (["acme/Other-GGUF:Q8_0"], "")


def test_a_hand_written_default_is_named_as_every_command_names_it(hub: tuple[HubServer, dict[str, str]]) -> None:
    """A [defaults] model written by hand in another case, or as an address, is printed and hinted as every command
    names the model (acme/Tiny-GGUF:Q8_0), where it was printed as written and its pull hinted by its address."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q4_0.gguf": make_gguf_bytes("q4"),
                                       "tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    assert run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0").returncode == 0
    _hand_set_default(env, "acme/tiny-gguf:q8_0")
    assert run_cli(env, "models", "default").stdout == "acme/Tiny-GGUF:Q8_0\n"
    assert _starred(env) == (["acme/Tiny-GGUF:Q8_0"], "")
    _hand_set_default(env, "https://huggingface.co/ACME/tiny-gguf:q4_0")
    assert run_cli(env, "models", "default").stdout == "acme/Tiny-GGUF:Q4_0\n"
    assert _starred(env) == ([], "localgen: the default model, acme/Tiny-GGUF:Q4_0, is not downloaded yet: `localgen "
                                 "pull acme/Tiny-GGUF:Q4_0` downloads it now, else the first run or chat does\n")


def test_a_mirror_s_address_is_kept_as_huggingface_co_s_is(hub: tuple[HubServer, dict[str, str]]) -> None:
    """`models default` of an address of the HF_ENDPOINT mirror keeps the model as that of huggingface.co is kept
    (a repo as acme/Tiny-GGUF, a file as hf.co/acme/Tiny-GGUF/FILE), where a repo of the mirror's was kept as
    hf.co/acme/Tiny-GGUF and huggingface.co's as acme/Tiny-GGUF."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    assert run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0").returncode == 0
    for host in (server.url, "https://huggingface.co"):
        for typed, kept in (("acme/tiny-gguf", "acme/Tiny-GGUF"),
                            ("acme/tiny-gguf/blob/main/tiny-Q8_0.gguf", "hf.co/acme/Tiny-GGUF/tiny-Q8_0.gguf")):
            made = run_cli(env, "models", "default", f"{host}/{typed}")
            assert made.returncode == 0, made.stderr
            assert made.stderr.startswith(f"localgen: the default model is now {kept} ("), made.stderr
            assert run_cli(env, "models", "default").stdout == f"{kept}\n"
            assert _starred(env) == (["acme/Tiny-GGUF:Q8_0"], "")


def test_a_hub_file_named_as_a_file_beside_models_toml_is_kept_as_an_address(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """`models default ORG/REPO/FILE.gguf` of a Hub file, where the models.toml's folder (from which its setting is
    read) has a file of that name, keeps it as hf.co/ORG/REPO/FILE.gguf, the Hub's file, where it was kept as typed
    and so named the file beside models.toml, which the current folder lacks."""
    server, env = hub
    server.add_repo("acme/Tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    assert run_cli(env, "pull", "acme/Tiny-GGUF:Q8_0").returncode == 0
    beside = Path(env["LOCALGEN_HOME"]) / "config" / "acme" / "Tiny-GGUF" / "tiny-Q8_0.gguf"
    beside.parent.mkdir(parents=True)
    beside.write_bytes(make_gguf_bytes("beside"))
    made = run_cli(env, "models", "default", "acme/tiny-gguf/tiny-Q8_0.gguf")
    assert made.returncode == 0, made.stderr
    assert run_cli(env, "models", "default").stdout == "hf.co/acme/Tiny-GGUF/tiny-Q8_0.gguf\n"
    assert _starred(env) == (["acme/Tiny-GGUF:Q8_0"], "")
