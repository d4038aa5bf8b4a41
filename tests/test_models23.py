"""The management commands' answers a user of `ollama list/show/rm/pull` or `hf cache` would check: `models show` of a
registry entry not downloaded as the Hub has it, a stopped pull's part in `models show --json`, rm of a model whose
file another shares, and what a pull of several stopped by Ctrl-C left unpulled."""

from __future__ import annotations

import io
import json

import pexpect
import pytest
from hub_server import HubEnv, make_gguf_bytes, run_cli, stopped_pull

from localgen import hub
from localgen.errors import HubError
from tests.conftest import bundled_model_file, spawn_localgen, user_registry

SMOL_REPO = "test/Smol-GGUF"
MINE = f'[models.mine]\nrepo = "{SMOL_REPO}"\nquant = "Q8_0"\ndescription = "my pick"\ncontext = 16384\n'


def _fields(text: str) -> dict[str, str]:
    """`models show`'s `name: value` lines as a dict."""
    return {name: value.strip() for name, value in (line.split(":", 1) for line in text.splitlines())}


def _serve_smol(hubenv: HubEnv, repo: str = SMOL_REPO, files: tuple[str, ...] = ("smol-Q4_1.gguf", "smol-Q8_0.gguf")
                ) -> None:
    """Serve the bundled model's file under each of files' names in repo."""
    hubenv.server.add_repo(repo, dict.fromkeys(files, bundled_model_file()))


def test_models_show_of_an_entry_not_downloaded_shows_the_hubs_view_online(hubenv: HubEnv) -> None:
    """Online, `models show NAME` of a models.toml entry (the user's, or a built-in one) whose quant is not downloaded
    shows the entry's keys and that quant as the Hub lists it (size, sha256, header, load plan), as `models show
    ORG/REPO:QUANT` does, --json with a downloaded model's keys and --template its header's chat template, where it
    showed the entry alone and --template failed saying it was not downloaded; nothing is downloaded."""
    _serve_smol(hubenv)
    _serve_smol(hubenv, "Qwen/Qwen2.5-0.5B-Instruct-GGUF", ("qwen2.5-0.5b-instruct-q4_k_m.gguf",))
    user_registry(hubenv.localgen_home, MINE)
    as_hub = _fields(run_cli(hubenv.env, "models", "show", f"{SMOL_REPO}:Q8_0").stdout)
    for typed, name, quant in (("mine", "mine", "Q8_0"), ("mine:q4_1", "mine:Q4_1", "Q4_1"),
                               ("qwen2.5-0.5b", "qwen2.5-0.5b", "Q4_K_M")):
        shown = run_cli(hubenv.env, "models", "show", typed)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        fields = _fields(shown.stdout)
        assert (fields["name"], fields["quant"], fields["architecture"], fields["parameters"],
                fields["chat template"]) == (name, quant, "llama", "134.5 M", "yes (--template prints it)"), fields
        assert fields["file size"] == as_hub["file size"] and fields["sha256"] == as_hub["sha256"], fields
        assert fields["load plan"].startswith("context 8,192, KV f16"), fields
        assert fields["downloaded"] == f"no (`localgen pull {typed}` downloads it)", fields
    fields = _fields(run_cli(hubenv.env, "models", "show", "mine").stdout)
    assert (fields["description"], fields["default quant"]) == ("my pick", "Q8_0"), fields
    assert fields["default context"] == "16,384 (capped at the model's maximum of 8,192)", fields
    assert fields["read from"] == f"the header of {SMOL_REPO}/smol-Q8_0.gguf on the Hub", fields
    record = json.loads(run_cli(hubenv.env, "models", "show", "mine", "--json").stdout)
    hub_record = json.loads(run_cli(hubenv.env, "models", "show", f"{SMOL_REPO}:Q8_0", "--json").stdout)
    assert list(record) == list(hub_record), "the keys of every other record"
    assert {key: record[key] for key in ("name", "quant", "parameters", "size", "sha256", "downloaded", "path")} == {
        "name": "mine", "quant": "Q8_0", "parameters": 134_515_008, "size": bundled_model_file().stat().st_size,
        "sha256": hub_record["sha256"], "downloaded": False, "path": None}
    assert record["plan"] is not None and record["entry"]["description"] == "my pick", record
    template = run_cli(hubenv.env, "models", "show", "mine", "--template")
    assert template.returncode == 0 and template.stdout.startswith("{% for message in messages %}"), template
    assert hubenv.blobs(SMOL_REPO) == [], "only the header was read"


def test_models_show_of_an_entry_without_the_hub_says_why_in_one_line(hubenv: HubEnv) -> None:
    """Offline, or where the Hub fails, `models show NAME` of an entry not downloaded shows the entry as before and one
    line on stderr of why the Hub's view is missing (--json too, stdout its record alone), the Hub's error after a
    colon, not in parentheses inside its own; --template fails saying so; an entry whose pinned sha256 the Hub's file
    breaks says a pull refuses it."""
    _serve_smol(hubenv)
    user_registry(hubenv.localgen_home, MINE)
    offline_env = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    for env, why in ((offline_env, "localgen is offline (LOCALGEN_OFFLINE is set)"),
                     (hubenv.env, "the Hub could not be asked: the Hugging Face Hub returned a server error (HTTP "
                                  f"500) for {SMOL_REPO}")):
        if env is hubenv.env:
            hubenv.server.status[SMOL_REPO] = (500, None)
        for json_output in ((), ("--json",)):
            shown = run_cli(env, "models", "show", "mine", *json_output)
            assert shown.returncode == 0, shown.stderr
            assert shown.stderr == (f"localgen: the Hub's view of {SMOL_REPO}:Q8_0 (its file size, header and load "
                                    f"plan) is not shown: {why}\n"), shown.stderr
        assert json.loads(shown.stdout)["entry"]["description"] == "my pick"
        fields = _fields(run_cli(env, "models", "show", "mine").stdout)
        assert (fields["name"], fields["quant"], "architecture" in fields) == ("mine", "Q8_0", False), fields
        template = run_cli(env, "models", "show", "mine", "--template")
        assert template.returncode == 1 and template.stdout == "", template.stdout
        assert template.stderr.startswith("localgen: error: model 'mine' is not downloaded"), template.stderr
        assert ("offline" if env is offline_env else "the Hub could not be asked") in template.stderr
    hubenv.server.status.clear()
    user_registry(hubenv.localgen_home, MINE + f'sha256 = "{"0" * 64}"\n')
    fields = _fields(run_cli(hubenv.env, "models", "show", "mine").stdout)
    assert fields["downloaded"].startswith(f"no ({SMOL_REPO}/smol-Q8_0.gguf does not match the sha256 of "), fields
    assert fields["downloaded"].endswith(": `localgen pull` refuses it)"), fields


def test_models_show_json_of_a_quant_a_stopped_pull_kept_part_of_gives_the_part(hubenv: HubEnv) -> None:
    """`models show --json` of a quant a stopped pull kept a part of has `partial` (bytes kept, size, the pull that
    resumes it), as `models list --json` has it, where the text said how much was kept and the record had no key for
    it; by ORG/REPO:QUANT or an entry's name, online and offline; a quant with no part has it null, in every record."""
    stopped_pull(hubenv)
    user_registry(hubenv.localgen_home, '[models.cut]\nrepo = "test/Cut-GGUF"\nquant = "Q8_0"\n')
    listed = {row["name"]: row for row in json.loads(run_cli(hubenv.env, "models", "--json").stdout)}
    part = {"kept_bytes": 2 * 2**20, "size": 4 * 2**20, "running": False, "resume": "localgen pull cut",
            "paths": listed["cut"]["partial"]["paths"]}
    assert listed["cut"]["partial"] == part, listed
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    for env, typed in ((hubenv.env, "test/Cut-GGUF:Q8_0"), (hubenv.env, "cut"), (offline, "cut")):
        record = json.loads(run_cli(env, "models", "show", typed, "--json").stdout)
        resume = f"localgen pull {typed}"
        assert (record["downloaded"], record["partial"]) == (False, {**part, "resume": resume}), (typed, record)
    fields = _fields(run_cli(offline, "models", "show", "cut").stdout)
    assert fields["downloaded"] == ("no (partly downloaded: 2.0 MiB of 4.0 MiB; offline mode comes "
                                    "from LOCALGEN_OFFLINE in the environment: unset it, then run `localgen pull cut`, "
                                    "which resumes it)"), fields
    assert run_cli(hubenv.env, "pull", "test/Cut-GGUF:Q4_0").returncode == 0
    for typed in ("test/Cut-GGUF:Q4_0", "test/Cut-GGUF", "smollm2-135m"):
        record = json.loads(run_cli(hubenv.env, "models", "show", typed, "--json").stdout)
        assert "partial" in record and record["partial"] is None, record


def test_models_rm_of_a_model_whose_file_another_shares_says_the_bytes_stay_with_it(hubenv: HubEnv) -> None:
    """`models rm` of a model whose file another model's is (the same bytes, one blob) asks, on a terminal, naming the
    other model and that the bytes shared with it stay, where it asked `remove X (0 B)?` saying nothing of why; a no
    keeps both, and off a terminal the refusal names them too."""
    _serve_smol(hubenv)
    for quant in ("Q4_1", "Q8_0"):
        assert run_cli(hubenv.env, "pull", f"{SMOL_REPO}:{quant}").returncode == 0
    question = (f"remove {SMOL_REPO}:Q4_1 (0 B; its 93.8 MiB are shared with {SMOL_REPO}:Q8_0 and stay)?")
    child = spawn_localgen("models", "rm", f"{SMOL_REPO}:Q4_1", env=hubenv.env, encoding="utf-8", timeout=30,
                           dimensions=(24, 200))
    child.expect_exact(f"{question} [y/N] ")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "localgen: nothing removed" in child.before, child.before
    piped = run_cli(hubenv.env, "models", "rm", f"{SMOL_REPO}:Q4_1")
    assert piped.returncode == 2 and piped.stderr.startswith(f"localgen: error: removing {question[7:-1]} needs "
                                                             "confirmation"), piped.stderr
    assert len(hubenv.snapshot_files(SMOL_REPO)) == 2, "both kept"


def test_a_pull_of_several_stopped_by_ctrl_c_names_those_not_pulled_and_their_pull(hubenv: HubEnv) -> None:
    """Ctrl-C in `localgen pull A B C` on a terminal, as A is pulled and B downloads, ends with a line naming B and C,
    not pulled, and the one pull that pulls them (what B's download received kept for it to resume), exit 130, where
    it ended with nothing said of them."""
    import pyte

    hubenv.server.add_repo("test/A-GGUF", {"a-Q4_0.gguf": make_gguf_bytes("a")})
    hubenv.server.add_repo("test/B-GGUF", {"b-Q4_0.gguf": make_gguf_bytes("b", 8 * 2**20)})
    hubenv.server.add_repo("test/C-GGUF", {"c-Q4_0.gguf": make_gguf_bytes("c")})
    hubenv.server.bytes_per_s = 2 * 2**20  # B takes 4 s
    child = spawn_localgen("pull", "test/A-GGUF", "test/B-GGUF", "test/C-GGUF", env=hubenv.env, encoding="utf-8",
                           timeout=30, dimensions=(24, 200))
    child.logfile_read = seen = io.StringIO()
    child.expect_exact("downloading test/B-GGUF/b-Q4_0.gguf")
    child.expect_exact("b-Q4_0.gguf")  # its bar
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130, seen.getvalue()
    screen = pyte.Screen(200, 24)
    pyte.Stream(screen).feed(seen.getvalue())
    lines = [line.rstrip() for line in screen.display if line.strip()]
    assert lines[-1] == ("localgen: interrupted: pulled 1 of 3 models; not test/B-GGUF and test/C-GGUF (`localgen "
                         "pull test/B-GGUF test/C-GGUF` pulls them)"), lines


def test_models_show_template_of_an_entry_with_its_own_template_prints_the_one_runs_use(hubenv: HubEnv) -> None:
    """`models show --template` of a model whose models.toml entry gives a `template` prints that one, which runs
    use in place of the model's, and its `chat template` field says so (--json: the entry's `template`), where it
    printed the GGUF header's, which no run uses; an entry not downloaded prints it offline too."""
    own = "{% for m in messages %}{{ m.content }}{% endfor %}"
    user_registry(hubenv.localgen_home, f'[models.smollm2-135m]\ntemplate = "{own}"\n'
                                        f'[models.far]\nrepo = "test/Far-GGUF"\nquant = "Q4_0"\ntemplate = "{own}"\n')
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    for typed in ("smollm2-135m", "far"):
        shown = run_cli(offline, "models", "show", typed, "--template")
        assert shown.returncode == 0 and shown.stdout == own + "\n", shown
    prompt = run_cli(offline, "run", "--print-prompt", "hi there")
    assert prompt.returncode == 0 and prompt.stdout == "hi there", "the template a run uses"
    fields = _fields(run_cli(offline, "models", "show", "smollm2-135m").stdout)
    assert fields["chat template"] == "yes, the entry's, in place of the model's (--template prints it)", fields
    record = json.loads(run_cli(offline, "models", "show", "smollm2-135m", "--json").stdout)
    assert (record["chat_template"], record["entry"]["template"]) == (True, own), record


def test_models_show_of_a_split_model_a_stopped_pull_kept_part_of_says_so_and_how_to_resume(hubenv: HubEnv) -> None:
    """`models show` of a split model whose first shard came and whose second a stopped pull kept a part of says it is
    not downloaded, how much is kept and the pull that resumes it, --json with `downloaded` false (as `models list
    --all --json` has it), its `partial` and `parameters` null as the Hub's view gives an unknown count, where it said
    nothing of the part and --json had `downloaded` true and `parameters` 0."""
    hubenv.server.add_repo("test/Split-GGUF", {
        f"split-Q4_0-0000{n}-of-00002.gguf": make_gguf_bytes(f"s{n}", 3 * 2**20, shard=(n, 2)) for n in (1, 2)})
    hubenv.server.abort_after[("test/Split-GGUF", "split-Q4_0-00002-of-00002.gguf")] = 1_500_000
    hubenv.server.down_after_abort = True
    with pytest.raises(HubError):
        hub.download_model("test/Split-GGUF", quant="Q4_0", filename=None, quiet=True)
    hubenv.server.down = False
    fields = _fields(run_cli(hubenv.env, "models", "show", "test/Split-GGUF:Q4_0").stdout)
    assert fields["source"] == "hub (incomplete: 1 shard missing)", fields
    assert fields["downloaded"] == ("no (partly downloaded: 4.0 MiB of 6.0 MiB; `localgen pull "
                                    "test/Split-GGUF:Q4_0` resumes it)"), fields
    record = json.loads(run_cli(hubenv.env, "models", "show", "test/Split-GGUF:Q4_0", "--json").stdout)
    assert (record["downloaded"], record["missing_shards"], record["parameters"]) == (False, 1, None), record
    assert {key: record["partial"][key] for key in ("kept_bytes", "size", "resume")} == {
        "kept_bytes": 4 * 2**20, "size": 6 * 2**20, "resume": "localgen pull test/Split-GGUF:Q4_0"}, record
    listed = json.loads(run_cli(hubenv.env, "models", "list", "--all", "--json").stdout)
    assert [row["downloaded"] for row in listed if row["name"] == "test/Split-GGUF:Q4_0"] == [False]
