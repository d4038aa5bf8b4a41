"""A user's models.toml entry for a Hub model: what its repo, quant and file say goes wrong is blamed on the entry."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hub_server import HubEnv, make_gguf_bytes, run_cli

from localgen.errors import ConfigError, HubError
from localgen.registry import load_registry
from localgen.resolve import resolve_model
from tests.conftest import run_localgen, user_registry

TINY_REPO = "test/Tiny-GGUF"
TINY_FILES = {"tiny-Q4_K_M.gguf": make_gguf_bytes("q4"), "tiny-Q8_0.gguf": make_gguf_bytes("q8")}


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line a failed command printed."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_a_misspelt_repo_names_the_entry_in_every_command(hubenv: HubEnv) -> None:
    registry = user_registry(hubenv.localgen_home, '[models.mine]\nrepo = "test/Tyny-GGUF"\nquant = "Q4_K_M"\n')
    for args in (("pull", "mine"), ("run", "-m", "mine", "hi"), ("fit", "mine")):
        line = _error_line(run_cli(hubenv.env, *args))
        assert line.startswith("localgen: error: repository test/Tyny-GGUF not found on the Hugging Face Hub "
                               f"(the repo of [models.mine] in {registry}) (hint: fix that entry's repo"), (args, line)


def test_a_quant_the_repo_lacks_names_the_entry_and_the_quants_there_are(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(TINY_REPO, TINY_FILES)
    registry = user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{TINY_REPO}"\nquant = "Q5_K_M"\n')
    for args in (("pull", "mine"), ("fit", "mine")):
        line = _error_line(run_cli(hubenv.env, *args))
        assert line == (f"localgen: error: {TINY_REPO} has no Q5_K_M file (the quant of [models.mine] in {registry}) "
                        "(hint: fix that entry's quant; quants in this repo: Q4_K_M, Q8_0)"), (args, line)


def test_a_quant_typed_on_the_command_line_is_not_blamed_on_the_entry(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(TINY_REPO, TINY_FILES)
    user = user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{TINY_REPO}"\nquant = "Q4_K_M"\n')
    with pytest.raises(HubError) as info:
        resolve_model("mine:Q6_K", registry=load_registry(user))
    assert info.value.message == f"{TINY_REPO} has no Q6_K file"


def test_a_file_the_repo_lacks_names_the_entry(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(TINY_REPO, TINY_FILES)
    user = user_registry(hubenv.localgen_home,
                         f'[models.mine]\nrepo = "{TINY_REPO}"\nquant = "Q4_K_M"\nfile = "tiny-q4.gguf"\n')
    with pytest.raises(HubError) as info:
        resolve_model("mine", registry=load_registry(user))
    assert info.value.message == f"{TINY_REPO} has no file 'tiny-q4.gguf' (the file of [models.mine] in {user})"
    assert info.value.hint == "fix that entry's file; GGUF files in this repo: tiny-Q4_K_M.gguf, tiny-Q8_0.gguf"


def test_a_malformed_repo_is_reported_before_a_missing_quant(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_text('[models.mine]\nrepo = "not a repo"\n')
    with pytest.raises(ConfigError, match=r"\[models\.mine\]\.repo 'not a repo' is not a Hugging Face repo id"):
        load_registry(user)
    user.write_text('[models.mine]\nrepo = "me/Mine-GGUF"\n')
    with pytest.raises(ConfigError, match=r"\[models\.mine\] needs 'quant'"):
        load_registry(user)


def test_only_what_a_user_s_entry_gives_is_blamed_on_it_not_a_built_in_entry_s_keys(hubenv: HubEnv) -> None:
    repo = load_registry().get("qwen2.5-0.5b").repo
    user = user_registry(hubenv.localgen_home, '[models."qwen2.5-0.5b"]\ncontext = 2048\n')  # the built-in repo
    with pytest.raises(HubError) as info:
        resolve_model("qwen2.5-0.5b", registry=load_registry(user))
    assert info.value.message == f"repository {repo} not found on the Hugging Face Hub", "not the user's to fix there"
    hubenv.server.add_repo(repo, {"qwen-Q4_K_M.gguf": make_gguf_bytes("q")})
    user = user_registry(hubenv.localgen_home, '[models."qwen2.5-0.5b"]\nquant = "Q5_0"\n')
    with pytest.raises(HubError) as info:
        resolve_model("qwen2.5-0.5b", registry=load_registry(user))
    assert info.value.message == f"{repo} has no Q5_0 file (the quant of [models.qwen2.5-0.5b] in {user})"


@pytest.mark.parametrize(("repo", "hint"), [
    ("https://huggingface.co/org/Model-GGUF", 'write repo = "org/Model-GGUF"'),
    ("org/Model-GGUF:q4_k_m", 'write repo = "org/Model-GGUF" and quant = "Q4_K_M"'),
    ("hf.co/org/Model-GGUF/blob/main/m-Q8_0.gguf", 'write repo = "org/Model-GGUF" and file = "m-Q8_0.gguf"'),
    ("not a repo", 'write repo = "ORG/NAME"')])
def test_a_repo_given_as_an_address_or_reference_is_told_its_repo_id(tmp_path: Path, repo: str, hint: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(f'[models.mine]\nrepo = "{repo}"\nquant = "Q4_0"\n')
    with pytest.raises(ConfigError, match="is not a Hugging Face repo id") as info:
        load_registry(user)
    assert info.value.hint == hint


def test_offline_a_quant_the_repo_lacked_when_last_listed_is_said_so_not_just_not_downloaded(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(TINY_REPO, TINY_FILES)
    registry = user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{TINY_REPO}"\nquant = "Q5_K_M"\n'
                                                   f'[models.never]\nrepo = "test/Never-GGUF"\nquant = "Q4_K_M"\n')
    assert run_cli(hubenv.env, "pull", f"{TINY_REPO}:Q8_0").returncode == 0  # localgen lists the repo
    hubenv.server.requests.clear()
    lacking = (f"localgen: error: model 'mine' is not downloaded, and {TINY_REPO} had no Q5_K_M file when localgen "
               f"last listed it (the quant of [models.mine] in {registry}) (hint: fix that entry's quant; quants in "
               "this repo: Q4_K_M, Q8_0; to check the repo again, ")
    line = _error_line(run_cli(hubenv.env, "run", "--offline", "-m", "mine", "hi"))
    assert line == f"{lacking}drop --offline, then run `localgen pull mine`)", line
    line = _error_line(run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "fit", "mine"))
    assert line.startswith(lacking) and line.endswith("unset it, then run the command again)"), line
    typed = _error_line(run_cli(hubenv.env, "run", "--offline", "-m", f"{TINY_REPO}/tiny-Q6_K.gguf", "hi"))
    assert typed.startswith(f"localgen: error: model '{TINY_REPO}/tiny-Q6_K.gguf' is not downloaded, and {TINY_REPO} "
                            "had no file 'tiny-Q6_K.gguf' when localgen last listed it (hint: GGUF files in this "
                            "repo: tiny-Q4_K_M.gguf, tiny-Q8_0.gguf; to check the repo again, drop --offline"), typed
    shown = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "mine")
    assert shown.returncode == 0 and shown.stdout.splitlines()[-1].split(None, 1) == [
        "downloaded:", f"no ({TINY_REPO} had no Q5_K_M file when localgen last listed it)"], shown.stdout
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}  # online, the Hub's view is asked for (test_models23)
    assert run_cli(offline, "models", "show", "never").stdout.splitlines()[-1].split(None, 1) == [
        "downloaded:", "no (offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "
                       "`localgen pull never`, which downloads it)"]
    never = _error_line(run_cli(hubenv.env, "run", "--offline", "-m", "never", "hi"))  # a repo never listed
    assert never == ("localgen: error: model 'never' is not downloaded and localgen is offline "
                     "(hint: drop --offline, then run `localgen pull never`)"), never
    assert hubenv.server.requests == []


def test_online_a_quant_the_repo_lacked_when_last_listed_is_asked_of_the_hub_before_a_pull_is_suggested(
        hubenv: HubEnv) -> None:
    hubenv.server.add_repo(TINY_REPO, TINY_FILES)
    user_registry(hubenv.localgen_home, f'[models.mine]\nrepo = "{TINY_REPO}"\nquant = "Q6_K"\n')
    assert run_localgen("pull", f"{TINY_REPO}:Q8_0", env=hubenv.env).returncode == 0  # listed: no Q6_K
    hubenv.server.requests.clear()

    def show(reference: str, **env: str) -> tuple[int, str]:
        shown = run_localgen("models", "show", reference, env={**hubenv.env, **env})
        assert "Traceback" not in shown.err, shown.err
        return shown.returncode, shown.out.splitlines()[-1] if shown.returncode == 0 else shown.err.strip()

    assert show(f"{TINY_REPO}:Q6_K") == (1, f"localgen: error: model '{TINY_REPO}:Q6_K' is not downloaded, and "
                                            f"{TINY_REPO} has no Q6_K file (hint: quants in this repo: Q4_K_M, Q8_0; "
                                            f"choose one with {TINY_REPO}:QUANT)")
    assert show("mine") == (0, f"downloaded:    no ({TINY_REPO} has no Q6_K file)")
    assert hubenv.server.count("GET", "/api/models/") == 2, "asked only where the listing lacked the quant"
    assert show(f"{TINY_REPO}:Q4_K_M") == (0, f"downloaded:     no (`localgen pull {TINY_REPO}:Q4_K_M` downloads it)")
    hubenv.server.repos[TINY_REPO].files["tiny-Q6_K.gguf"] = make_gguf_bytes("q6")  # the repo gains it
    assert show(f"{TINY_REPO}:Q6_K") == (0, f"downloaded:     no (`localgen pull {TINY_REPO}:Q6_K` downloads it)")
    assert show("mine", LOCALGEN_OFFLINE="1") == (0, "downloaded:    no (offline mode comes from LOCALGEN_OFFLINE in "
                                                     "the environment: unset it, then run `localgen pull mine`, "
                                                     "which downloads it)"), \
        "the listing the Hub gave is kept"
    other = "test/Other-GGUF"  # a repo localgen never listed: offline, said so; online, the Hub is asked
    hubenv.server.add_repo(other, {"other-Q4_K_M.gguf": make_gguf_bytes("q4"), "other-F16.gguf": make_gguf_bytes("")})
    assert show(other, LOCALGEN_OFFLINE="1") == (1, f"localgen: error: model '{other}' is not downloaded, and localgen "
                                                    f"has never listed {other} (hint: offline mode comes from "
                                                    "LOCALGEN_OFFLINE in the environment: unset it, then `localgen "
                                                    f"models show {other}` lists what the repo has)")
    hubenv.server.requests.clear()
    assert show(other) == (0, f"downloaded:     no (`localgen pull {other}` downloads the quant that fits best "
                              f"here; `localgen fit {other}` compares them)"), "shown as the Hub has it"
    kept = show(f"{other}:Q6_K", LOCALGEN_OFFLINE="1")[1]
    assert f"{other} had no Q6_K file when localgen last listed it (hint: quants in this repo: Q4_K_M, F16" in kept
    assert hubenv.server.count("GET", "/api/models/") == 1, "the listing the Hub gave is kept"
    assert show("test/Gone-GGUF")[1].startswith("localgen: error: model 'test/Gone-GGUF' is not downloaded, and "
                                                 "repository test/Gone-GGUF not found"), "not `localgen pull` to run"


def test_a_listing_whose_quant_is_incomplete_is_not_said_to_lack_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import hub_lack
    from localgen.hub_types import HubFile, HubListing

    shard = HubFile(repo="o/r-GGUF", filename="m-Q4_K_M-00001-of-00002.gguf", size=10, sha256=None, quant="Q4_K_M",
                    shard_index=1, shard_count=2)
    monkeypatch.setattr(hub_lack.hub_cache, "load_listing", lambda repo: HubListing(repo, "main", (shard,)))
    assert hub_lack.listed_lack("o/r-GGUF", "Q4_K_M", None) is None, "the Hub's answer decides, not the old listing"
    assert hub_lack.listed_lack("o/r-GGUF", "Q8_0", None)[1] == "o/r-GGUF had no Q8_0 file when localgen last listed it"


def test_entry_blame_is_what_entry_error_adds_to_the_message(tmp_path: Path) -> None:
    from localgen.hub_errors import entry_blame, entry_error
    from localgen.hub_types import NotInRepoError

    user = tmp_path / "models.toml"
    user.write_text(f'[models.mine]\nrepo = "{TINY_REPO}"\nquant = "Q5_K_M"\n')
    registry = load_registry(user)
    lacks = NotInRepoError(f"{TINY_REPO} has no Q5_K_M file", key="quant", choices="quants in this repo: Q8_0")
    ref = registry.reference("mine")
    blame = entry_blame(lacks, registry.spec_for(ref), ref)
    assert blame == f" (the quant of [models.mine] in {user})"
    assert entry_error(lacks, registry.spec_for(ref), ref).message == lacks.message + blame
    typed = registry.reference("mine:Q6_K")  # a quant typed on the command line is not the entry's
    assert entry_blame(lacks, registry.spec_for(typed), typed) == ""
    assert entry_error(lacks, registry.spec_for(typed), typed).message == lacks.message
    assert entry_error(lacks, registry.spec_for(typed), typed).hint == (
        "quants in this repo: Q8_0; choose one with mine:QUANT"), "the name typed, not the entry's repo"
