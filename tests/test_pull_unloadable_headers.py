"""`pull` of a repo named without a quant whose quants' headers on the Hub cannot be loaded: refused, or passed over,
before anything is downloaded."""

from __future__ import annotations

from hub_server import HubEnv, make_gguf_bytes, run_cli

REPO = "org/Bad-GGUF"
DAMAGED = b"GGUF\x03\x00\x00\x00" + b"\xff" * 200  # a tensor count past any model's
NOT_GGUF = b"hello, this is text and no model " * 10


def test_a_repo_whose_only_quant_has_a_damaged_header_is_refused_before_its_download(hubenv: HubEnv) -> None:
    """It was downloaded, then refused: the refusal is the one its quant named gets, and nothing is downloaded."""
    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED})
    pulled = run_cli(hubenv.env, "pull", REPO)
    assert pulled.returncode == 1 and pulled.stderr.startswith(
        f"localgen: error: {REPO}/bad-Q4_K_M.gguf: tensor count"), pulled.stderr
    assert "localgen: downloading" not in pulled.stderr and hubenv.blobs(REPO) == [], pulled.stderr


def test_a_repo_none_of_whose_quants_header_can_be_loaded_is_refused_naming_why(hubenv: HubEnv) -> None:
    """A damaged header, text and an empty file: none is downloaded, and the error says why, with fit as the hint."""
    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED, "bad-Q8_0.gguf": NOT_GGUF, "bad-Q4_0.gguf": b""})
    pulled = run_cli(hubenv.env, "pull", REPO)
    assert pulled.returncode == 1 and pulled.stderr == (
        f"localgen: error: no quant of {REPO} can be loaded: the header the Hub sent of each of its 3 quants is "
        f"damaged or not a model this llama.cpp can load; {REPO}/bad-Q4_0.gguf is an empty file (0 bytes) on the Hub, "
        f"not a model (hint: nothing was downloaded; `localgen fit {REPO}` says what is wrong with each: choose "
        "another repository)\n"), pulled.stderr
    assert hubenv.blobs(REPO) == []


def test_a_repo_whose_preferred_quant_has_a_damaged_header_downloads_another(hubenv: HubEnv) -> None:
    """Where no header could be read (Q8_0's read cut short), the quant a pull prefers, Q4_K_M, was downloaded and
    refused for its damaged header: the pull passes it over, saying so, and downloads Q8_0."""
    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED, "bad-Q8_0.gguf": make_gguf_bytes("good")})
    hubenv.server.abort_after[(REPO, "bad-Q8_0.gguf")] = 100  # its header read fails; its download does not
    pulled = run_cli(hubenv.env, "pull", REPO)
    assert pulled.returncode == 0, pulled.stderr
    assert (f"localgen: chose {REPO}:Q8_0, whose header could not be read, over Q4_K_M, as the header the Hub sent of "
            f"it is damaged or not a model this llama.cpp can load (`localgen fit {REPO}` says why)\n") \
        in pulled.stderr, pulled.stderr
    assert pulled.stdout.strip().endswith("bad-Q8_0.gguf"), pulled.stdout
