"""The `models show`, `pull` and `models rm` answers a second reading found wrong: a split model of one's own with a
shard missing, --json's `problem` for an entry a pull cannot fetch, --template's hint, and a pull of several stopped
part way."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import pexpect
import pytest
from hub_server import HubEnv, make_gguf_bytes, run_cli

from tests.conftest import spawn_localgen, user_registry

SPLIT = "split-Q4_0-00001-of-00002.gguf"


def _fields(text: str) -> dict[str, str]:
    """`models show`'s `name: value` lines as a dict."""
    return {name: value.strip() for name, value in (line.split(":", 1) for line in text.splitlines())}


def test_models_show_of_a_split_model_of_ones_own_with_a_shard_missing_names_the_shard(hubenv: HubEnv) -> None:
    """`models show` of a split model outside the Hugging Face cache whose second shard is missing (by its path, by an
    entry's path, or in a folder that happens to be named snapshots) names the missing shard as a run's error does,
    --json giving it in `problem` and `downloaded` false as `models list --all --json` does, where it said
    `downloaded: no` with a `localgen pull` of the file, which fails."""
    own = hubenv.tmp_path / "own"
    for folder in (own, own / "snapshots" / "main"):
        folder.mkdir(parents=True)
        (folder / SPLIT).write_bytes(make_gguf_bytes("own", shard=(1, 2)))
    user_registry(hubenv.localgen_home, f'[models.own]\npath = "{own / SPLIT}"\n')
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    lacking = "split-Q4_0-00002-of-00002.gguf: missing shard 2 of 2"
    for typed in (str(own / SPLIT), "own", str(own / "snapshots" / "main" / SPLIT)):
        fields = _fields(run_cli(offline, "models", "show", typed).stdout)
        assert "downloaded" not in fields and fields["problem"] == f"{lacking} (a run refuses the model)", fields
        record = json.loads(run_cli(offline, "models", "show", typed, "--json").stdout)
        assert (record["downloaded"], record["source"], record["problem"], record["partial"]) == (
            False, "local", lacking, None), record
    listed = json.loads(run_cli(offline, "models", "list", "--all", "--json").stdout)
    assert [row["downloaded"] for row in listed if row["name"] == "own"] == [False]
    run = run_cli(offline, "run", "-m", "own", "hi")
    assert run.returncode != 0 and lacking in run.stderr, run.stderr


def _pull_stopped_in_b(hubenv: HubEnv, *options: str, signum: int = signal.SIGINT) -> list[str]:
    """Ctrl-C (or signum) in `localgen pull A B C` (and options) on a terminal once B's download received some bytes:
    the screen's lines at the end."""
    import pyte

    hubenv.server.bytes_per_s = 2 * 2**20  # B takes 4 s
    child = spawn_localgen("pull", "test/A-GGUF", "test/B-GGUF", "test/C-GGUF", *options, env=hubenv.env,
                           encoding="utf-8", timeout=30, dimensions=(24, 200))
    child.logfile_read = seen = io.StringIO()
    child.expect_exact("downloading test/B-GGUF/b-Q4_0.gguf")
    child.expect(r"[1-9][0-9.]* [KM]iB/8\.0 MiB")  # its bar, past its first bytes
    if signum == signal.SIGINT:
        child.sendintr()
    else:
        child.kill(signum)
    child.expect(pexpect.EOF)
    child.close()
    hubenv.server.bytes_per_s = None
    assert child.exitstatus == 128 + signum, seen.getvalue()
    screen = pyte.Screen(200, 24)
    pyte.Stream(screen).feed(seen.getvalue())
    return [line.rstrip() for line in screen.display if line.strip()]


def _serve_abc(hubenv: HubEnv) -> None:
    """Serve test/A-GGUF, test/B-GGUF (of 8 MiB) and test/C-GGUF, one Q4_0 each."""
    hubenv.server.add_repo("test/A-GGUF", {"a-Q4_0.gguf": make_gguf_bytes("a")})
    hubenv.server.add_repo("test/B-GGUF", {"b-Q4_0.gguf": make_gguf_bytes("b", 8 * 2**20)})
    hubenv.server.add_repo("test/C-GGUF", {"c-Q4_0.gguf": make_gguf_bytes("c")})


def test_a_forced_pull_of_several_stopped_in_a_model_not_here_hints_the_pull_that_resumes_it(hubenv: HubEnv) -> None:
    """Ctrl-C in `localgen pull A B C --force` as B, which had no copy here, downloads ends with the pull without
    --force that resumes B's part (which does: the Hub sends only the rest) and the --force pull of C, where the one
    pull it gave, `localgen pull B C --force`, downloaded B again from its first byte."""
    _serve_abc(hubenv)
    lines = _pull_stopped_in_b(hubenv, "--force")
    assert lines[-1] == ("localgen: interrupted: pulled 1 of 3 models; not test/B-GGUF and test/C-GGUF (`localgen "
                         "pull test/B-GGUF:Q4_0` resumes test/B-GGUF; `localgen pull test/C-GGUF --force` pulls "
                         "test/C-GGUF)"), lines
    assert any("are on disk, which `localgen pull test/B-GGUF:Q4_0` resumes" in line for line in lines), lines
    sent = hubenv.server.bytes_sent[("test/B-GGUF", "b-Q4_0.gguf")]
    assert 0 < sent < 8 * 2**20, sent
    assert run_cli(hubenv.env, "pull", "test/B-GGUF").returncode == 0
    assert hubenv.server.bytes_sent[("test/B-GGUF", "b-Q4_0.gguf")] - sent < 8 * 2**20, "the rest alone"


def test_a_forced_pull_of_several_stopped_in_a_model_here_says_the_copy_is_kept(hubenv: HubEnv) -> None:
    """Ctrl-C in `localgen pull A B C --force` as B, which was downloaded before, downloads again says the copy that
    was there is kept and still gives `localgen pull B C --force`, which downloads it again: a pull without --force
    would find the copy and download nothing."""
    _serve_abc(hubenv)
    assert run_cli(hubenv.env, "pull", "test/B-GGUF").returncode == 0
    lines = _pull_stopped_in_b(hubenv, "--force")
    assert lines[-1] == ("localgen: interrupted: pulled 1 of 3 models; not test/B-GGUF and test/C-GGUF (`localgen "
                         "pull test/B-GGUF test/C-GGUF --force` pulls them)"), lines
    assert lines[-2].endswith("localgen: the download of test/B-GGUF/b-Q4_0.gguf stopped; the copy that was there is "
                              "kept"), lines


SMOL_REPO = "test/Smol-GGUF"


def _mine(hubenv: HubEnv, extra: str = "", repo: str = SMOL_REPO, quant: str = "Q8_0") -> None:
    """The user's entry mine, of repo's quant (extra: more keys), the repo served with the bundled model as Q4_1."""
    from tests.conftest import bundled_model_file

    hubenv.server.add_repo(SMOL_REPO, {"smol-Q4_1.gguf": bundled_model_file()})
    user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{repo}"\nquant = "{quant}"\n{extra}')


def test_models_show_json_of_an_entry_a_pull_cannot_fetch_gives_why_in_problem(hubenv: HubEnv) -> None:
    """`models show --json` of an entry whose pinned sha256 the Hub's file breaks, whose repo lacks its quant, or whose
    repo is gone gives in `problem` what the text's `downloaded` field says (the pull refused, or what is lacking),
    where `problem` was null."""
    for extra, repo, quant in ((f'sha256 = "{"0" * 64}"\n', SMOL_REPO, "Q4_1"), ("", SMOL_REPO, "Q8_0"),
                               ("", "test/Gone-GGUF", "Q4_0")):
        _mine(hubenv, extra, repo, quant)
        fields = _fields(run_cli(hubenv.env, "models", "show", "mine").stdout)
        record = json.loads(run_cli(hubenv.env, "models", "show", "mine", "--json").stdout)
        assert fields["downloaded"].startswith("no (") and "downloads it" not in fields["downloaded"], fields
        assert record["problem"] == fields["downloaded"].removeprefix("no (").removesuffix(")"), (fields, record)


def test_models_show_template_of_an_entry_its_repo_lacks_hints_the_entrys_fix_not_a_pull(hubenv: HubEnv) -> None:
    """`models show mine --template` of an entry whose repo lacks its quant names the quants the repo has and the
    entry to fix, and of one whose repo is gone the entry's repo to check, online and (the repo listed before)
    offline, where its hint was `localgen pull mine`, a pull the error said cannot work."""
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    for repo, fix in ((SMOL_REPO, "fix that entry's quant"), ("test/Gone-GGUF", "fix that entry's repo")):
        _mine(hubenv, "", repo, "Q8_0")
        for env in (hubenv.env, offline) if repo == SMOL_REPO else (hubenv.env,):
            shown = run_cli(env, "models", "show", "mine", "--template")
            assert shown.returncode != 0 and shown.stdout == "", shown
            assert "localgen pull" not in shown.stderr and fix in shown.stderr, shown.stderr
            assert shown.stderr.startswith("localgen: error: model 'mine' is not downloaded, and "), shown.stderr
            if repo == SMOL_REPO:
                assert "Q4_1" in shown.stderr, "the quant it has"


def test_a_pull_of_several_ended_by_sigterm_names_those_not_pulled(hubenv: HubEnv) -> None:
    """SIGTERM in `localgen pull A B C` as B downloads ends (exit 143) with the line a Ctrl-C's ends with, naming B and
    C and the pull that pulls them, as other commands say on SIGTERM what a Ctrl-C leaves, where it ended with none."""
    _serve_abc(hubenv)
    lines = _pull_stopped_in_b(hubenv, signum=signal.SIGTERM)
    assert lines[-1] == ("localgen: interrupted: pulled 1 of 3 models; not test/B-GGUF and test/C-GGUF (`localgen "
                         "pull test/B-GGUF test/C-GGUF` pulls them)"), lines


def test_a_pull_of_several_stopped_by_a_ctrl_c_python_wraps_names_those_not_pulled(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C that Python 3.11 wraps in a RuntimeError (it lands as a class is made, in an import) while B is pulled
    ends with the line naming B and C, as a plain Ctrl-C does, where it slipped past it."""
    from localgen import cli_pull

    _serve_abc(hubenv)
    pulled = cli_pull.pull_model

    def pull_model(reference: str, **kwargs: object) -> Path:
        if reference == "test/B-GGUF":
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as exc:
                raise RuntimeError("Error calling __set_name__") from exc
        return pulled(reference, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_pull, "pull_model", pull_model)
    with pytest.raises(RuntimeError):
        cli_pull.pull_models(["test/A-GGUF", "test/B-GGUF", "test/C-GGUF"], force=False, options=[])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "localgen: interrupted: pulled 1 of 3 models; not test/B-GGUF and test/C-GGUF (`localgen pull test/B-GGUF "
        "test/C-GGUF` pulls them)")


def test_models_rm_of_models_of_one_file_says_why_the_first_free_nothing(hubenv: HubEnv) -> None:
    """`models rm mine:Q4_1 mine mine:Q5_0`, three names of one file (one blob), asks naming for each of the first two
    that it is the same file as those removed after it, counted once, where it asked `mine:Q4_1 (0 B), mine (0 B),
    mine:Q5_0 (93.8 MiB)` with no reason for the 0 B."""
    from tests.conftest import bundled_model_file

    hubenv.server.add_repo(SMOL_REPO, dict.fromkeys(("smol-Q4_1.gguf", "smol-Q5_0.gguf", "smol-Q8_0.gguf"),
                                                    bundled_model_file()))
    user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{SMOL_REPO}"\nquant = "Q8_0"\n')
    for typed in ("mine:Q4_1", "mine", "mine:Q5_0"):
        assert run_cli(hubenv.env, "pull", typed).returncode == 0
    asked = run_cli(hubenv.env, "models", "rm", "mine:Q4_1", "mine", "mine:Q5_0")
    assert asked.returncode == 2, asked.stderr
    once = "which this command removes too: counted once"
    mine, q5 = f"mine from {SMOL_REPO}", f"mine:Q5_0 from {SMOL_REPO}"
    assert asked.stderr.startswith(
        f"localgen: error: removing mine:Q4_1 from {SMOL_REPO} (0 B; the same file as {mine} and {q5}, {once}), {mine} "
        f"(0 B; the same file as {q5}, {once}), {q5} (93.8 MiB) needs confirmation"), asked.stderr
    assert len(hubenv.snapshot_files(SMOL_REPO)) == 3, "nothing removed"


def test_models_show_of_an_entry_a_pull_refuses_says_what_a_stopped_pull_kept_too(hubenv: HubEnv) -> None:
    """`models show` of an entry whose pinned sha256 the Hub's file breaks, of which a stopped pull kept a part, says
    both that a pull refuses the file and how much is kept, where the refusal alone was said."""
    from localgen import hub
    from localgen.errors import HubError

    hubenv.server.add_repo("test/Cut-GGUF", {"cut-Q8_0.gguf": make_gguf_bytes("cut", 4 * 2**20)})
    hubenv.server.abort_after[("test/Cut-GGUF", "cut-Q8_0.gguf")] = 2_500_000  # past a piece of 1 MiB
    hubenv.server.down_after_abort = True  # huggingface_hub's own retry fails too: the part is kept
    with pytest.raises(HubError):
        hub.download_model("test/Cut-GGUF", quant="Q8_0", filename=None, quiet=True)
    hubenv.server.down = False
    pin = f'sha256 = "{"0" * 64}"\n'
    user_registry(hubenv.localgen_home, f'[models.cut]\nrepo = "test/Cut-GGUF"\nquant = "Q8_0"\n{pin}')
    fields = _fields(run_cli(hubenv.env, "models", "show", "cut").stdout)
    assert fields["downloaded"].startswith("no (test/Cut-GGUF/cut-Q8_0.gguf does not match the sha256 of "), fields
    assert fields["downloaded"].endswith(": `localgen pull` refuses it; partly downloaded: 2.0 MiB of 4.0 MiB)"), \
        fields


def test_the_stopped_part_s_name_goes_with_the_interrupt_that_stopped_it() -> None:
    """The name that resumes a stopped download's part is carried on the interrupt that stopped it (through an
    import's wrapper too), so another interrupted download (a chat's /model pull, a run's own) leaves none behind."""
    from localgen.partial_downloads import carry_stopped_part, stopped_part_name

    stop = KeyboardInterrupt()
    carry_stopped_part(stop, "test/B-GGUF:Q4_0")
    wrapped = RuntimeError("an import took the Ctrl-C")
    wrapped.__cause__ = stop
    assert stopped_part_name(wrapped) == "test/B-GGUF:Q4_0"
    assert stopped_part_name(KeyboardInterrupt()) is None
