"""`localgen pull` of a quant already downloaded that a run will refuse here: warned of whatever the Hub answers, and
the repo listed once, whether the Hub answers or fails."""

from __future__ import annotations

from hub_server import HubServer, pulled_too_big, run_cli

REPO = "org/m-GGUF"


def test_a_re_pull_of_a_repo_none_of_whose_quants_fits_warns_that_a_run_will_refuse_the_downloaded_one(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """pull ORG/REPO, the Hub answering that none of its quants fits here, said only that the downloaded quant was
    up to date, where a re-pull of it named, offline or with the Hub failing warned that a run will refuse it: it
    warns so too, ending with the Hub's answer."""
    server, env = hub
    small, warned, instead = pulled_too_big(server, env, REPO)
    assert instead == f"no smaller quant of {REPO} fits here either"
    again = run_cli(small, "pull", REPO)
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert lines[0] == f"{warned}; the Hub has no quant of {REPO} that fits here either", again.stderr
    assert lines[1] == f"localgen: {REPO}:Q8_0 is already downloaded (128.0 KiB) and up to date with the Hub", \
        again.stderr
    assert len(lines) == 2, again.stderr


def test_a_re_pull_of_a_named_quant_lists_its_repo_once_while_the_hub_is_down(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """pull ORG/REPO:QUANT of a downloaded quant a run will refuse, the Hub down, asked it for the repo's listing
    twice (for the quant that fits instead, then to check the copy is up to date): a listing that failed is not asked
    for again, its error kept for the rest of the command."""
    server, env = hub
    small, warned, instead = pulled_too_big(server, env, REPO)
    assert instead == f"no smaller quant of {REPO} fits here either"
    server.down = True
    listed = server.count("GET", f"/api/models/{REPO}")
    again = run_cli(small, "pull", f"{REPO}:Q8_0")
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert lines[0] == f"{warned}; which smaller quant of {REPO} fits here takes the Hub to tell, and asking it " \
                       "failed", again.stderr
    assert lines[1].startswith(f"localgen: {REPO}:Q8_0 is already downloaded (128.0 KiB); not checked against the "
                               "Hub: "), again.stderr
    assert server.count("GET", f"/api/models/{REPO}") == listed + 1
