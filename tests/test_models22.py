"""`models show` of one quant or file of a Hub repo that is not downloaded, and the management commands' answers a
user of `ollama list/show/rm/pull` or `hf cache` would check."""

from __future__ import annotations

import json

import pexpect
from hub_server import HubEnv, make_gguf_bytes, run_cli, stopped_pull

from localgen.gguf_reader import read_gguf
from tests.conftest import bundled_model_file, spawn_localgen

SMOL_REPO = "test/Smol-GGUF"


def _fields(text: str) -> dict[str, str]:
    """`models show`'s `name: value` lines as a dict."""
    return {name: value.strip() for name, value in (line.split(":", 1) for line in text.splitlines())}


def test_models_show_of_a_hub_quant_not_downloaded_shows_what_the_hub_has(hubenv: HubEnv) -> None:
    """Online, ORG/REPO:QUANT and ORG/REPO/FILE.gguf of a model not downloaded (another quant of the repo downloaded)
    show the Hub's file as a downloaded model's fields (its size, sha256, header and load plan) with `downloaded: no`
    and the pull that fetches it, --json with a downloaded model's keys and --template its header's template, where
    each failed saying it was not downloaded; nothing is downloaded, and offline it still fails so."""
    model = bundled_model_file()
    hubenv.server.add_repo(SMOL_REPO, {"smol-Q4_1.gguf": model, "smol-Q8_0.gguf": model})
    assert run_cli(hubenv.env, "pull", f"{SMOL_REPO}:Q4_1").returncode == 0
    blobs = hubenv.blobs(SMOL_REPO)
    for typed, name in (("test/smol-gguf:q8_0", f"{SMOL_REPO}:Q8_0"),
                        (f"{SMOL_REPO}/smol-Q8_0.gguf", f"{SMOL_REPO}/smol-Q8_0.gguf")):
        shown = run_cli(hubenv.env, "models", "show", typed)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        fields = _fields(shown.stdout)
        assert (fields["name"], fields["architecture"], fields["parameters"], fields["quant"],
                fields["context length"], fields["layers"], fields["chat template"]) == (
            name, "llama", "134.5 M", "Q8_0", "8,192", "30", "yes (--template prints it)")
        assert fields["file size"] == "93.8 MiB (98,362,432 bytes) on the Hub"
        assert fields["read from"] == f"the header of {SMOL_REPO}/smol-Q8_0.gguf on the Hub"
        assert fields["load plan"].startswith("context 8,192, KV f16"), fields
        assert fields["downloaded"] == f"no (`localgen pull {name}` downloads it)"
    record = json.loads(run_cli(hubenv.env, "models", "show", f"{SMOL_REPO}:Q8_0", "--json").stdout)
    downloaded = json.loads(run_cli(hubenv.env, "models", "show", f"{SMOL_REPO}:Q4_1", "--json").stdout)
    assert list(record) == list(downloaded), "the keys of a downloaded model's record"
    assert {key: record[key] for key in ("name", "quant", "parameters", "size", "sha256", "downloaded", "path")} == {
        "name": f"{SMOL_REPO}:Q8_0", "quant": "Q8_0", "parameters": 134_515_008, "size": model.stat().st_size,
        "sha256": downloaded["sha256"], "downloaded": False, "path": None}
    assert record["plan"] is not None and record["fits"] == downloaded["fits"]
    template = run_cli(hubenv.env, "models", "show", f"{SMOL_REPO}:Q8_0", "--template")
    assert template.returncode == 0 and template.stdout == read_gguf(model).chat_template.rstrip("\n") + "\n"
    assert hubenv.blobs(SMOL_REPO) == blobs, "only the header was read"
    offline = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "models", "show", f"{SMOL_REPO}:Q8_0")
    assert offline.returncode == 1 and offline.stdout == "", offline.stderr
    assert offline.stderr.startswith(f"localgen: error: model '{SMOL_REPO}:Q8_0' is not downloaded and localgen is "
                                     "offline"), offline.stderr


def test_models_show_of_a_hub_quant_the_repo_lacks_names_its_quants_asking_once(hubenv: HubEnv) -> None:
    """A quant the repo does not have is refused in one line naming the quants it has, the Hub listed once; one whose
    header cannot be read shows why, with no pull offered; one of a failing Hub fails as before, asked once."""
    hubenv.server.add_repo("test/Two-GGUF", {"two-Q4_0.gguf": make_gguf_bytes("a"), "two-Q8_0.gguf": b"notgguf" * 99})
    lacking = run_cli(hubenv.env, "models", "show", "test/Two-GGUF:Q6_K")
    assert lacking.returncode == 1 and lacking.stdout == "", lacking.stdout
    assert lacking.stderr == ("localgen: error: model 'test/Two-GGUF:Q6_K' is not downloaded, and test/Two-GGUF has no "
                              "Q6_K file (hint: quants in this repo: Q4_0, Q8_0; choose one with "
                              "test/Two-GGUF:QUANT)\n"), lacking.stderr
    assert hubenv.server.count(contains="/api/models/") == 1
    unreadable = _fields(run_cli(hubenv.env, "models", "show", "test/Two-GGUF:Q8_0").stdout)
    assert unreadable["header"].startswith("not readable: test/Two-GGUF/two-Q8_0.gguf: not a GGUF file")
    assert unreadable["downloaded"] == "no" and "load plan" not in unreadable, unreadable
    template = run_cli(hubenv.env, "models", "show", "test/Two-GGUF:Q8_0", "--template")
    assert template.returncode == 1 and template.stdout == "", template.stdout
    assert template.stderr.startswith("localgen: error: test/Two-GGUF:Q8_0's header on the Hub is not readable: ")
    hubenv.server.status["test/Err-GGUF"] = (500, None)
    failing = run_cli(hubenv.env, "models", "show", "test/Err-GGUF:Q4_0")
    assert failing.returncode == 1 and failing.stdout == "" and "Traceback" not in failing.stderr, failing.stderr
    assert failing.stderr.startswith("localgen: error: model 'test/Err-GGUF:Q4_0' is not downloaded, and "), failing
    assert hubenv.server.count(contains="Err-GGUF") == 1


def test_models_show_of_a_hub_split_quant_gives_its_shards(hubenv: HubEnv) -> None:
    """A split model not downloaded shows the size of all its shards and the first one's sha256."""
    hubenv.server.add_repo("test/Split-GGUF", {
        f"split-Q4_0-0000{number}-of-00002.gguf": make_gguf_bytes(f"split{number}", shard=(number, 2))
        for number in (1, 2)})
    fields = _fields(run_cli(hubenv.env, "models", "show", "test/Split-GGUF:Q4_0").stdout)
    assert fields["file size"] == "128.0 KiB (131,072 bytes, 2 shards) on the Hub", fields
    assert len(fields["sha256 (first shard)"]) == 64
    record = json.loads(run_cli(hubenv.env, "models", "show", "test/Split-GGUF:Q4_0", "--json").stdout)
    assert (record["shards"], record["size"], record["parameters"]) == (2, 131_072, None), record


def test_models_rm_of_a_repo_with_only_a_part_kept_names_that_part(hubenv: HubEnv) -> None:
    """`models rm ORG/REPO` (or another quant of it) where the cache holds only what a stopped pull kept of one quant
    names that part, which `models` lists, with its rm, where the hint said only to see `localgen models list`."""
    stopped_pull(hubenv)
    assert "test/Cut-GGUF:Q8_0\tQ8_0\t" in run_cli(hubenv.env, "models").stdout
    for typed in ("test/Cut-GGUF", "test/Cut-GGUF:Q4_0"):
        removed = run_cli(hubenv.env, "models", "rm", typed, "-y")
        assert removed.returncode == 1 and removed.stderr == (
            f"localgen: error: {typed} is not in the cache (hint: of that repo, test/Cut-GGUF:Q8_0 is partly "
            "downloaded)\n"), removed.stderr
    removed = run_cli(hubenv.env, "models", "rm", "test/Cut-GGUF:Q8_0", "-y")
    assert removed.returncode == 0 and "removed test/Cut-GGUF:Q8_0 (partly downloaded): freed " in \
        removed.stderr, removed.stderr
    assert hubenv.incomplete_files() == []


def test_models_default_refuses_a_quant_or_file_its_repo_lacks(hubenv: HubEnv) -> None:
    """`models default ORG/REPO:QUANT` (or /FILE) of a quant that the repo lacked when localgen listed it is refused,
    naming the quants it has, and the default stays as it was, where it was set and said `localgen pull` would
    download it; offline, as last listed; a repo never listed is set with no request, before its pull."""
    hubenv.server.add_repo("test/Two-GGUF", {"two-Q4_0.gguf": make_gguf_bytes("a"),
                                             "two-Q8_0.gguf": make_gguf_bytes("b")})
    assert run_cli(hubenv.env, "pull", "test/Two-GGUF:Q4_0").returncode == 0
    for env, said in ((hubenv.env, "has no Q6_K file"),
                      ({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "had no Q6_K file when localgen last listed it")):
        refused = run_cli(env, "models", "default", "test/Two-GGUF:Q6_K")
        assert refused.returncode == 1 and refused.stderr == (
            f"localgen: error: test/Two-GGUF:Q6_K cannot be the default model: test/Two-GGUF {said} (hint: quants in "
            "this repo: Q4_0, Q8_0; choose one with test/Two-GGUF:QUANT)\n"), refused.stderr
    refused = run_cli(hubenv.env, "models", "default", "test/Two-GGUF/two-Q6_K.gguf")
    assert refused.returncode == 1 and "cannot be the default model: test/Two-GGUF has no file 'two-Q6_K.gguf'" in \
        refused.stderr, refused.stderr
    assert run_cli(hubenv.env, "models", "default").stdout == "smollm2-135m\n", "left as it was"
    assert run_cli(hubenv.env, "models", "default", "test/Two-GGUF:Q8_0").returncode == 0  # not downloaded: set
    requests = len(hubenv.server.answered())
    assert run_cli(hubenv.env, "models", "default", "test/Never-GGUF:Q8_0").returncode == 0
    assert len(hubenv.server.answered()) == requests, "a repo never listed is not asked"


def test_models_show_of_a_hub_quant_a_pull_stopped_says_how_much_is_kept(hubenv: HubEnv) -> None:
    """`models show ORG/REPO:QUANT` of a model a stopped pull kept a part of says so with the pull that resumes it, as
    `models` does, where it said the pull would download it."""
    stopped_pull(hubenv)
    fields = _fields(run_cli(hubenv.env, "models", "show", "test/Cut-GGUF:Q8_0").stdout)
    assert fields["downloaded"] == ("no (partly downloaded: 2.0 MiB of 4.0 MiB; `localgen pull "
                                    "test/Cut-GGUF:Q8_0` resumes it)"), fields
    other = _fields(run_cli(hubenv.env, "models", "show", "test/Cut-GGUF:Q4_0").stdout)
    assert other["downloaded"] == "no (`localgen pull test/Cut-GGUF:Q4_0` downloads it)", other


def test_a_resumed_pull_on_a_terminal_says_so_above_its_bar(hubenv: HubEnv) -> None:
    """A pull on a terminal resuming what a stopped one kept says so on a line of its own above the bar, where the line
    was written over the bar's first drawing (`big-Q8_0.gguf ━━ 0 B/4.0 MiB ? -:--:--localgen: resuming ...`)."""
    import pyte

    stopped_pull(hubenv)
    hubenv.server.bytes_per_s = 8 * 2**20  # the bar is drawn before the rest comes
    child = spawn_localgen("pull", "test/Cut-GGUF:Q8_0", env=hubenv.env, encoding="utf-8", timeout=60,
                           dimensions=(24, 150))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    screen = pyte.Screen(150, 24)
    pyte.Stream(screen).feed(child.before)
    lines = [line.rstrip() for line in screen.display if line.strip()]
    resuming = "localgen: resuming test/Cut-GGUF/cut-Q8_0.gguf at 2.0 MiB of 4.0 MiB"
    assert resuming in lines, lines  # the line above it, the download's, is broken where the Hub's port makes it long
    after = lines[lines.index(resuming) + 1]
    assert after.startswith("cut-Q8_0.gguf ✓ ") and after.count("localgen") == 0, lines


def test_models_rm_of_a_repo_says_what_stopped_pulls_kept_of_its_other_quants(hubenv: HubEnv) -> None:
    """`models rm ORG/REPO` removing the one quant downloaded says that the part a stopped pull kept of another quant
    stays, with the rm that removes it, where it said nothing and `models` still listed that part; rm of the quant
    alone says nothing of it."""
    stopped_pull(hubenv)
    for typed in ("test/Cut-GGUF", "test/Cut-GGUF:Q4_0"):
        assert run_cli(hubenv.env, "pull", "test/Cut-GGUF:Q4_0").returncode == 0
        removed = run_cli(hubenv.env, "models", "rm", typed, "-y")
        assert removed.returncode == 0 and removed.stderr.startswith("localgen: removed test/Cut-GGUF:Q4_0: freed ")
        note = ("localgen: left test/Cut-GGUF:Q8_0 (2.0 MiB, partly downloaded): `localgen models rm "
                "test/Cut-GGUF:Q8_0` removes it\n")
        assert removed.stderr.endswith(note) == (typed == "test/Cut-GGUF"), removed.stderr
    assert len(hubenv.incomplete_files()) == 1, "the part stays"
