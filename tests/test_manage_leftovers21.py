"""The management commands' smaller answers: a Hub repo shown before it is downloaded, an empty prompt cache on a
terminal, a conversation named by the start of its name, and bench's --json laid out as the other reports."""

from __future__ import annotations

import json
import os

import pexpect
import pytest
from hub_server import HubEnv, make_gguf_bytes, run_cli

from localgen.conversation import Conversation
from localgen.conversation_store import let_go, save_conversation
from tests.conftest import bundled_model_file, run_localgen, spawn_localgen

SMOL_REPO = "test/Smol-GGUF"


def test_models_show_of_a_hub_repo_not_downloaded_shows_what_the_hub_has(hubenv: HubEnv) -> None:
    """Online, ORG/REPO none of whose quants is downloaded is shown as the Hub has it (its quants and their sizes,
    its header's fields as fit reads them) with `downloaded: no`, where it failed with `not downloaded; has ...`;
    nothing is downloaded, and offline it still fails."""
    model = bundled_model_file()
    hubenv.server.add_repo(SMOL_REPO, {"smol-Q4_1.gguf": model, "smol-Q8_0.gguf": model})
    shown = run_cli(hubenv.env, "models", "show", SMOL_REPO)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    fields = dict(line.split(":", 1) for line in shown.stdout.splitlines())
    fields = {name: value.strip() for name, value in fields.items()}
    assert fields["name"] == SMOL_REPO and fields["quants"] == "Q4_1 (93.8 MiB), Q8_0 (93.8 MiB) (on the Hub)"
    assert (fields["architecture"], fields["parameters"], fields["context length"], fields["layers"],
            fields["embedding size"], fields["chat template"]) == ("llama", "134.5 M", "8,192", "30", "576", "yes")
    assert fields["downloaded"] == (f"no (`localgen pull {SMOL_REPO}` downloads the quant that fits best here; "
                                    f"`localgen fit {SMOL_REPO}` compares them)")
    record = json.loads(run_cli(hubenv.env, "models", "show", SMOL_REPO, "--json").stdout)
    assert (record["downloaded"], record["parameters"], record["context_length"], record["layers"]) == (
        False, 134_515_008, 8192, 30)
    assert record["quants"] == [{"quant": "Q4_1", "size": model.stat().st_size},
                                {"quant": "Q8_0", "size": model.stat().st_size}]
    assert not any(path.is_file() for path in hubenv.blobs(SMOL_REPO)), "only the header was read"
    offline = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "models", "show", SMOL_REPO)
    assert offline.returncode == 1 and offline.stdout == "", offline.stderr
    assert f"localgen: error: model '{SMOL_REPO}' is not downloaded" in offline.stderr, offline.stderr


@pytest.mark.usefixtures("home")
def test_an_empty_prompt_cache_says_how_entries_come_on_a_terminal_only() -> None:
    """`localgen cache` with no entries adds how a run makes one on a terminal, where it said only `0 entries`; on a
    pipe its lines stay as they were."""
    child = spawn_localgen("cache", env={**os.environ}, encoding="utf-8", timeout=60, dimensions=(24, 300))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert ('localgen: a run whose prompt prefills 256 new tokens or more saves an entry, e.g. `localgen run -f '
            'doc.txt "question"`; a later run over the same text restores it') in child.before, child.before
    piped = run_localgen("cache")
    assert piped.returncode == 0 and piped.out == ""
    assert [line.split(":", 1)[1].strip() for line in piped.err.splitlines()][1:] == ["0 entries, 0 B of 2.0 GiB"]


@pytest.mark.usefixtures("home")
def test_a_conversation_named_by_the_start_of_its_name_is_suggested() -> None:
    """`conversations show meet` of meeting-notes-2026 suggests it, where a name too short to be a slip of it got no
    suggestion."""
    for name in ("meeting-notes-2026", "shopping"):
        conversation = Conversation(name=name, system=None, turns=[], model="smollm2-135m")
        save_conversation(conversation)
        let_go(conversation)
    shown = run_localgen("conversations", "show", "meet")
    assert shown.returncode == 1 and shown.err == ("localgen: error: no saved conversation named 'meet' (hint: did you "
                                                   "mean meeting-notes-2026?)\n"), shown.err


def test_bench_json_is_indented_as_the_other_reports() -> None:
    """`bench --json` prints its object indented, as fit, models and cache do, where it printed one line (on one
    thread, which stalls on no busy CPU: test_bench)."""
    bench = run_localgen("bench", "-p", "16", "-n", "2", "-r", "1", "-t", "1", "--json")
    fit = run_localgen("fit", str(bundled_model_file()), "--json")
    assert bench.returncode == 0 and fit.returncode == 0, bench.err + fit.err
    assert bench.out.startswith('{\n  "model": ') and fit.out.startswith('{\n  "model": '), bench.out
    assert json.loads(bench.out)["n_gen"] == 2


def test_models_show_template_of_a_hub_repo_prints_its_header_template(hubenv: HubEnv) -> None:
    """`models show ORG/REPO --template` of a repo not downloaded prints its Hub header's chat template byte for byte,
    where it printed the whole view; a header without one fails as a downloaded model's does."""
    from localgen.gguf_reader import read_gguf

    model = bundled_model_file()
    hubenv.server.add_repo(SMOL_REPO, {"smol-Q4_1.gguf": model})
    hubenv.server.add_repo("test/Plain-GGUF", {"plain-Q4_0.gguf": make_gguf_bytes("plain")})
    shown = run_cli(hubenv.env, "models", "show", SMOL_REPO, "--template")
    template = read_gguf(model).chat_template
    assert template and shown.returncode == 0 and shown.stdout == template.rstrip("\n") + "\n", shown.stderr
    plain = run_cli(hubenv.env, "models", "show", "test/Plain-GGUF", "--template")
    assert plain.returncode == 1 and plain.stdout == "", plain.stdout
    assert plain.stderr == ("localgen: error: test/Plain-GGUF has no chat template (hint: it runs as plain "
                            "completion)\n"), plain.stderr


def test_models_show_json_of_a_hub_repo_gives_why_its_header_is_unreadable(hubenv: HubEnv) -> None:
    """`models show ORG/REPO --json` of a repo whose header cannot be read gives why as its problem, as the text's
    `header: not readable` does, where the problem was null."""
    hubenv.server.add_repo("test/Bad-GGUF", {"bad-Q4_0.gguf": b"notgguf" * 100})
    record = json.loads(run_cli(hubenv.env, "models", "show", "test/Bad-GGUF", "--json").stdout)
    text = run_cli(hubenv.env, "models", "show", "test/Bad-GGUF").stdout
    assert record["problem"] and f"header: not readable: {record['problem']} " in " ".join(text.split()), text


def test_models_show_of_a_failing_hub_asks_it_once(hubenv: HubEnv) -> None:
    """`models show ORG/REPO` where the Hub answers 500 asks it once and fails, where it asked twice."""
    hubenv.server.status["test/Err-GGUF"] = (500, None)
    shown = run_cli(hubenv.env, "models", "show", "test/Err-GGUF")
    assert shown.returncode == 1 and shown.stdout == "" and "Traceback" not in shown.stderr, shown.stderr
    assert hubenv.server.count(contains="Err-GGUF") == 1, [r.path for r in hubenv.server.answered()]


def test_models_show_of_a_hub_split_model_without_tensors_first_has_unknown_parameters(hubenv: HubEnv) -> None:
    """A Hub split model whose first shard holds no tensors shows `parameters: unknown` (null in --json), where it
    showed 0.0 M."""
    hubenv.server.add_repo("test/Split-GGUF", {
        f"split-Q4_0-0000{number}-of-00002.gguf": make_gguf_bytes(f"split{number}", shard=(number, 2))
        for number in (1, 2)})
    shown = run_cli(hubenv.env, "models", "show", "test/Split-GGUF")
    assert shown.returncode == 0 and "parameters: unknown\n" in shown.stdout.replace("  ", ""), shown.stdout
    record = json.loads(run_cli(hubenv.env, "models", "show", "test/Split-GGUF", "--json").stdout)
    assert record["parameters"] is None, record
