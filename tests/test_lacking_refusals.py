"""A model that is not downloaded and that its repo lacks is refused in one set of words (hub_lack.lacking_refusal),
naming the user's models.toml entry it comes of, by `models show` as by `run`; against the loopback Hub."""

from __future__ import annotations

from hub_server import HubEnv, run_cli

from tests.conftest import user_registry


def test_models_show_of_a_quant_typed_after_an_entry_whose_repo_is_missing_names_that_entry(hubenv: HubEnv) -> None:
    """models show mine:q8_0 said that mine's repo was not found, with a hint to fix 'that entry's repo', and named
    no entry; run -m mine:q8_0 named it."""
    user = user_registry(hubenv.localgen_home, '[models.mine]\nrepo = "org/Missing-GGUF"\nquant = "Q4_K_M"\n')
    shown = run_cli(hubenv.env, "models", "show", "mine:q8_0")
    assert shown.returncode == 1 and shown.stderr == (
        "localgen: error: model 'mine:q8_0' is not downloaded, and repository org/Missing-GGUF not found on the "
        f"Hugging Face Hub (the repo of [models.mine] in {user}) (hint: fix that entry's repo, checking its "
        "ORG/REPO spelling; for a private repo, log in with `hf auth login` or set HF_TOKEN)\n"
    ), shown.stderr
    ran = run_cli(hubenv.env, "run", "-m", "mine:q8_0", "hi")
    assert ran.returncode == 1 and f"(the repo of [models.mine] in {user})" in ran.stderr, ran.stderr
