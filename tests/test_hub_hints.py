"""What the Hub adds to a message against the loopback Hub server: the quant that fits, named in a run's refusal, a
hint that a Hub slow to answer does not hold up."""

from __future__ import annotations

import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli

from localgen.quant_instead import HINT_WAIT_S

REPO = "org/tiny-GGUF"


@pytest.mark.parametrize("unanswered", [f"/api/models/{REPO}", "/resolve/"])  # the listing, a header's bytes
def test_a_refused_run_does_not_wait_a_whole_timeout_for_a_hub_that_never_answers(
        hub: tuple[HubServer, dict[str, str]], unanswered: str) -> None:
    """A run refusing a downloaded quant asks the Hub which smaller quant fits: a Hub that took the connection and
    never answered held the refusal in silence for a whole HF_HUB_ETAG_TIMEOUT (its listing) or HF_HUB_DOWNLOAD_TIMEOUT
    (a header's bytes), 10 s by default; that hint now waits HINT_WAIT_S for each answer, and says it had none."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 2**17), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    patient = {**env, "HF_HUB_ETAG_TIMEOUT": "60", "HF_HUB_DOWNLOAD_TIMEOUT": "60", "LOCALGEN_MEMORY_LIMIT": "8MiB"}
    server.delay_s, server.delay_only = 40.0, unanswered  # never answered in time
    refused = run_cli(patient, "run", "-m", f"{REPO}:Q8_0", "hi", "-n", "1", timeout=25)  # well short of 40 s
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.strip().endswith(f"; the Hub ({server.url}) did not answer within {HINT_WAIT_S:g} s to say "
                                           "which smaller quant fits here)"), refused.stderr
    assert server.delayed == 1, "asked once"
