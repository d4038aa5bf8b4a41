"""`localgen pull` and the Hub's hints against the loopback Hub server: lookalike models of one quant (a split model
counted once), offline as online, and the bound a refused run's Hub hint waited."""

from __future__ import annotations

import pytest
from hub_server import HubServer, make_gguf_bytes, pulled_too_big, run_cli, run_python

REPO = "org/m-GGUF"


def _split(stem: str, count: int = 2) -> dict[str, bytes]:
    """The shards of a split model named STEM-0000N-of-0000COUNT.gguf."""
    return {f"{stem}-{n:05d}-of-{count:05d}.gguf": make_gguf_bytes(f"{stem}{n}", shard=(n, count))
            for n in range(1, count + 1)}


@pytest.mark.parametrize(("files", "taken", "other"), [
    ({"m-Q4_K_M.gguf": make_gguf_bytes("m"), **_split("x-Q4_K_M")}, "m-Q4_K_M.gguf", "x-Q4_K_M-00001-of-00002.gguf"),
    ({**_split("m-Q4_K_M"), **_split("m-instruct-Q4_K_M", 3)}, "m-Q4_K_M-00001-of-00002.gguf",
     "m-instruct-Q4_K_M-00001-of-00003.gguf"),
])
def test_lookalike_models_of_a_quant_count_a_split_model_once_and_name_it_by_its_first_shard(
        hub: tuple[HubServer, dict[str, str]], files: dict[str, bytes], taken: str, other: str) -> None:
    """A single file and a split model of one quant (3 files) were said to be `2 Q4_K_M files`, and two split models
    (5 files) so too: the note now counts models, and names a split one by its first shard, saying it is one."""
    server, env = hub
    server.add_repo(REPO, files)
    pulled = run_cli(env, "pull", f"{REPO}:Q4_K_M")
    assert pulled.returncode == 0, pulled.stderr
    count = other.rsplit("-of-", 1)[1].removesuffix(".gguf").lstrip("0")
    assert pulled.stderr.splitlines()[0].startswith(f"localgen: downloading {REPO}/{taken} ("), pulled.stderr
    assert pulled.stderr.splitlines()[0].endswith(
        f" ({REPO} has 2 Q4_K_M models; {REPO}/{other} (shard 1 of {count}) names the other)"), pulled.stderr


@pytest.mark.parametrize(("unanswered", "setting"), [(f"/api/models/{REPO}", "HF_HUB_ETAG_TIMEOUT"),  # the listing
                                                     ("/resolve/", "HF_HUB_DOWNLOAD_TIMEOUT")])  # a header's bytes
def test_a_refused_runs_hub_hint_names_the_wait_a_shorter_timeout_set(
        hub: tuple[HubServer, dict[str, str]], unanswered: str, setting: str) -> None:
    """A run refused for memory waits at most 3 s for each Hub answer of its which-quant-fits hint; where the
    timeout of the request that went unanswered was set shorter, it waited that, and said it had waited 3 s."""
    server, env = hub
    server.add_repo(REPO, {"m-Q8_0.gguf": make_gguf_bytes("q8", 2**17), "m-Q4_K_M.gguf": make_gguf_bytes("q4")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    hasty = {**env, "HF_HUB_ETAG_TIMEOUT": "60", "HF_HUB_DOWNLOAD_TIMEOUT": "60", setting: "1",
             "LOCALGEN_MEMORY_LIMIT": "8MiB"}
    server.delay_s, server.delay_only = 30.0, unanswered  # never answered in time
    refused = run_cli(hasty, "run", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", timeout=25)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.strip().endswith(f"; the Hub ({server.url}) did not answer within 1 s to say which smaller "
                                           "quant fits here)"), refused.stderr
    assert server.delayed == 1, "asked once"


def test_an_offline_re_pull_of_a_quant_a_run_will_refuse_warns_so_and_that_the_quant_that_fits_takes_the_hub(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """Pulled again offline, a downloaded quant no run can load here (or only at a smaller context) was said only to
    be downloaded: its header is here, so what its first pull said is said, but for the quant that fits instead,
    which takes the Hub."""
    server, env = hub
    small, warned, _ = pulled_too_big(server, env, REPO)
    server.requests.clear()
    for variable in ("LOCALGEN_OFFLINE", "HF_HUB_OFFLINE"):
        offline = run_cli({**small, variable: "1"}, "pull", f"{REPO}:Q8_0")
        assert offline.returncode == 0, offline.stderr
        assert offline.stderr.splitlines() == [
            f"{warned}; which smaller quant of {REPO} fits here takes the Hub to tell, and localgen is offline",
            f"localgen: {REPO}:Q8_0 is already downloaded (128.0 KiB); offline, so not checked against the Hub"]
    quiet = run_cli({**small, "LOCALGEN_OFFLINE": "1"}, "pull", "--quiet", f"{REPO}:Q8_0")
    assert quiet.returncode == 0 and quiet.stderr.startswith(warned), quiet.stderr
    roomier = run_cli({**env, "LOCALGEN_MEMORY_LIMIT": "13MiB", "LOCALGEN_OFFLINE": "1"}, "pull", f"{REPO}:Q8_0")
    assert roomier.returncode == 0 and roomier.stderr.splitlines()[0] == (
        f"localgen: {REPO}:Q8_0 fits here only at a context of 256 tokens or less (it needs 15.5 MiB at 2,048): run it "
        "with --ctx-size 256"), roomier.stderr
    assert server.requests == [], "offline: the Hub is not asked"


@pytest.mark.parametrize(("other", "noun", "shards"), [("m-instruct-Q4_K_M.gguf", "files", ""),
                                                       ("x-Q4_K_M-00001-of-00002.gguf", "models", "shard 1 of 2, ")])
def test_lookalikes_another_tool_downloaded_are_each_named_offline_as_online(
        hub: tuple[HubServer, dict[str, str]], other: str, noun: str, shards: str) -> None:
    """Two models of the quant asked for, downloaded by another tool (unverified): offline, or with the Hub out of
    reach, the hint named the one a download takes (-m PATH) and not the other; it now names each, as a download's
    note does, with the -m PATH that uses it as it is."""
    server, env = hub
    files = {"m-Q4_K_M.gguf": make_gguf_bytes("m"), **(_split("x-Q4_K_M") if shards else {other: make_gguf_bytes("i")})}
    server.add_repo(REPO, files)
    fetched = run_python("import os; from huggingface_hub import hf_hub_download as get; "
                         f"print(os.path.dirname([get({REPO!r}, name) for name in {sorted(files)!r}][0]))", env)
    assert fetched.returncode == 0, fetched.stderr
    snapshot = fetched.stdout.strip()
    taken = f"-m {snapshot}/m-Q4_K_M.gguf"
    others = (f" ({REPO} has 2 Q4_K_M {noun} in the Hugging Face cache; {REPO}/{other} ({shards}-m {snapshot}/{other}) "
              "names the other)")
    for variable in ("LOCALGEN_OFFLINE", "HF_HUB_OFFLINE"):
        offline = run_cli({**env, variable: "1"}, "pull", f"{REPO}:Q4_K_M")
        said = offline.stderr.strip()
        assert offline.returncode == 1 and said.endswith(f"use the file as it is: {taken}{others})"), said
    unreachable = run_cli({**env, "HF_ENDPOINT": "http://127.0.0.1:9"}, "pull", f"{REPO}:Q4_K_M")  # nothing there
    assert unreachable.returncode == 1 and unreachable.stderr.strip().endswith(f"{taken} uses it as it is{others})"), (
        unreachable.stderr)


def test_an_offline_re_pull_of_a_repo_warns_of_its_downloaded_quant_a_run_will_refuse(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """pull ORG/REPO offline, its only downloaded quant one no run can load here (or only at a smaller context), said
    only that it was downloaded, where online it downloads the quant that fits: it now says what a run will make of
    the downloaded one, as a pull of that quant named does."""
    server, env = hub
    server.add_repo(REPO, {"m-Q8_0.gguf": make_gguf_bytes("q8", 2**17), "m-Q4_K_M.gguf": make_gguf_bytes("q4")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "8MiB", "LOCALGEN_OFFLINE": "1"}
    refused = run_cli(small, "pull", REPO)
    assert refused.returncode == 0, refused.stderr
    warning = refused.stderr.splitlines()[0]
    assert warning.startswith(f"localgen: warning: a run will refuse {REPO}:Q8_0 here: it needs about "), warning
    assert warning.endswith(f"; which smaller quant of {REPO} fits here takes the Hub to tell, and localgen is "
                            "offline"), warning
    roomier = run_cli({**small, "LOCALGEN_MEMORY_LIMIT": "13MiB"}, "pull", REPO)
    assert roomier.returncode == 0 and roomier.stderr.splitlines()[0] == (
        f"localgen: {REPO}:Q8_0 fits here only at a context of 256 tokens or less (it needs 15.5 MiB at 2,048): run it "
        "with --ctx-size 256"), roomier.stderr
    roomy = run_cli({**small, "LOCALGEN_MEMORY_LIMIT": "1GiB"}, "pull", REPO)
    assert roomy.returncode == 0 and roomy.stderr == (
        f"localgen: {REPO}:Q8_0 is already downloaded (128.0 KiB); offline, so not checked against the Hub\n"), (
        roomy.stderr)
