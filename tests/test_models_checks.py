"""Model management through real localgen processes and the loopback Hub: what `models show` says of a download in
the Hugging Face cache damaged since its pull, and what `models list` says of a default model its repo lacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli

REPO = "acme/Tiny-GGUF"


@pytest.mark.parametrize("damage", [b"<!DOCTYPE html><html>Bad gateway</html>\n", b"GGUF" + bytes(8)])
def test_models_show_of_a_damaged_download_names_the_pull_that_checks_it(
        hub: tuple[HubServer, dict[str, str]], damage: bytes) -> None:
    """A download cut short or overwritten since its pull was refused with the hint of a file given by path (`the
    download saved a web page, not the model: localgen downloads ORG/REPO/FILE.gguf itself`, or `the file is damaged,
    incomplete or not a GGUF model`): no next step, where a run names the pull that checks it against the Hub."""
    server, env = hub
    server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    Path(pulled.stdout.strip()).resolve().write_bytes(damage)
    shown = run_cli(env, "models", "show", f"{REPO}:Q8_0")
    assert shown.returncode == 1, shown.stderr
    assert shown.stderr.startswith("localgen: error: tiny-Q8_0.gguf: "), shown.stderr
    assert shown.stderr.endswith(f"(hint: run `localgen pull {REPO}:Q8_0` to check it against the Hub)\n")
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", f"{REPO}:Q8_0", "--json")
    assert offline.returncode == 1 and offline.stdout == "", offline.stderr
    assert offline.stderr.endswith(f"unset it, then run `localgen pull {REPO}:Q8_0` to check it against the Hub)\n")
    ran = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", f"{REPO}:Q8_0", "hi")
    assert ran.returncode == 1 and ran.stderr.split("(hint: ")[1] == offline.stderr.split("(hint: ")[1], ran.stderr
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0, "the pull the hint names mends it"
    assert run_cli(env, "models", "show", f"{REPO}:Q8_0").returncode == 0
