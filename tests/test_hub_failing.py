"""The Hub failing (503 to every request, or nothing listening): `localgen pull` of a downloaded model says what it
can from what is here, as offline; a download whose file's metadata request meets an outage's 503 is retried after
huggingface_hub's growing waits before it fails, where huggingface_hub downloads the file itself (a file localgen
downloads is linked into its snapshot with no request, which an outage cannot fail)."""

from __future__ import annotations

import pytest
from hub_server import HubEnv, HubServer, make_gguf_bytes, pulled_too_big, run_cli, time_without_sleep

from localgen.errors import HubError

REPO = "org/m-GGUF"
UNREACHABLE = "http://127.0.0.1:9"  # nothing listens there


def _failing(server: HubServer, env: dict[str, str], how: str) -> dict[str, str]:
    """The environment of a pull from now on, the Hub failing as asked: down (503) or out of reach."""
    if how == "down":
        server.down = True
        return env
    return {**env, "HF_ENDPOINT": UNREACHABLE}


@pytest.mark.parametrize("how", ["down", "unreachable"])
def test_a_re_pull_of_a_quant_a_run_will_refuse_warns_so_while_the_hub_fails(
        hub: tuple[HubServer, dict[str, str]], how: str) -> None:
    """Pulled again while the Hub fails, a downloaded quant no run can load here was said only to be downloaded and
    not checked against the Hub (offline, it was warned of): the warning its first pull gave is given, but for the
    quant that fits instead, which takes the Hub, whose failure the line after says."""
    server, env = hub
    small, warned, _ = pulled_too_big(server, env, REPO)
    failing = _failing(server, small, how)
    for reference in (f"{REPO}:Q8_0", REPO):  # the quant named, and the one ORG/REPO takes
        again = run_cli(failing, "pull", reference)
        assert again.returncode == 0, again.stderr
        lines = again.stderr.splitlines()
        assert lines[0] == f"{warned}; which smaller quant of {REPO} fits here takes the Hub to tell, and asking it " \
                           "failed", (reference, again.stderr)
        assert lines[1].startswith(f"localgen: {REPO}:Q8_0 is already downloaded (128.0 KiB); not checked against "
                                   "the Hub: "), (reference, again.stderr)
        assert len(lines) == 2, again.stderr


@pytest.mark.parametrize("how", ["down", "unreachable"])
def test_a_re_pull_of_a_repo_whose_quant_fits_only_at_a_smaller_context_says_so_while_the_hub_fails(
        hub: tuple[HubServer, dict[str, str]], how: str) -> None:
    """pull ORG/REPO while the Hub fails, its downloaded quant fitting only at a smaller context, said nothing of it,
    where offline it said the --ctx-size to run it with: it says so too."""
    server, env = hub
    server.add_repo(REPO, {"m-Q8_0.gguf": make_gguf_bytes("q8", 2**17), "m-Q4_K_M.gguf": make_gguf_bytes("q4")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    again = run_cli(_failing(server, {**env, "LOCALGEN_MEMORY_LIMIT": "13MiB"}, how), "pull", REPO)
    assert again.returncode == 0 and again.stderr.splitlines()[0] == (
        f"localgen: {REPO}:Q8_0 fits here only at a context of 256 tokens or less (it needs 15.5 MiB at 2,048): run it "
        "with --ctx-size 256"), again.stderr


@pytest.mark.parametrize("retry_after", [None, 0])
def test_a_503_to_a_file_s_metadata_is_retried_after_growing_waits_or_those_retry_after_asks(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, retry_after: int | None) -> None:
    """A file that huggingface_hub downloads itself (over the Hub's plain HTTP limit, as a 50 GB file is) downloaded at
    one commit is asked for at the Hub's next, which has it unchanged: an outage's 503 (no Retry-After) to the request
    for its metadata there is retried after waits that grow, a rate limit's (Retry-After: 0) after even ones, before
    the pull fails saying the Hub may be down (the waits are noted, not slept)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    from localgen import hub

    server = hubenv.server
    data = make_gguf_bytes("q8")
    server.add_repo(REPO, {"m-Q8_0.gguf": data})
    hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    server.add_repo(REPO, {"m-Q8_0.gguf": data})  # a new commit, the same file
    model = hub.find_model(REPO, quant="Q8_0", filename=None)  # listed before the Hub goes down
    monkeypatch.setattr(constants, "MAX_HTTP_DOWNLOAD_SIZE", len(data) - 1)
    waits: list[float] = []
    monkeypatch.setattr(_http, "time", time_without_sleep(waits))
    server.down, server.retry_after = True, retry_after
    with pytest.raises(HubError, match=r"server error \(HTTP 503\)") as info:
        hub.fetch_model(model, quiet=True)
    assert "the Hub may be down" in (info.value.hint or "")
    assert len(waits) > 1 and server.count("HEAD", "/resolve/") > len(waits), "each wait is followed by a retry"
    if retry_after is None:
        assert waits == sorted(waits) and waits[0] < waits[-1], waits
    else:
        assert set(waits) == {retry_after + 1}, waits


def test_a_file_downloaded_at_one_commit_is_linked_at_the_next_while_the_hub_is_down(hubenv: HubEnv) -> None:
    """A file downloaded at one commit is asked for at the Hub's next, which has it unchanged: it is linked there with
    no request, while the Hub answers 503 to every one."""
    from localgen import hub

    server = hubenv.server
    data = make_gguf_bytes("q8")
    server.add_repo(REPO, {"m-Q8_0.gguf": data})
    (first,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    repo = server.add_repo(REPO, {"m-Q8_0.gguf": data})  # a new commit, the same file
    model = hub.find_model(REPO, quant="Q8_0", filename=None)  # listed before the Hub goes down
    server.down = True
    asked = server.count()
    assert hub.fetch_model(model, quiet=True) == [first.parent.parent / repo.commit / "m-Q8_0.gguf"]
    assert server.count() == asked
